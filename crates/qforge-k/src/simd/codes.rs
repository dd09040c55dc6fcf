//! AVX2 kernel of [`Q8KCodes`] formats against q8_k (ggml's scheme), one weight block
//! unpacked once for up to four activation rows.
//!
//! Per block: the format's eight 32-code chunks become eight vectors of unsigned bytes
//! (`u < 64`), its sixteen `i8` group scales eight vectors of `i16` (group `2c` in the low
//! lane, `2c + 1` in the high lane of chunk `c`'s). Per row, per chunk: `vpmaddubsw` (unsigned
//! codes × signed activations: pair sums `≤ 2·63·128`, exact for every `i8`, `-128` included),
//! `vpmaddwd` with the scales into eight `i32` lanes, `bsums` against `min[g]` (the mins)
//! and against `−ZERO·scale[g]` (the zero code; with unit scales the pair sums added in
//! `i16`, one `vpmaddwd` per block widens them and another takes the `bsums`), and the blocks go into the row's accumulators as exact totals, two blocks at a time:
//! three `vphaddd` and one add reduce both blocks' `isum` and `summs` lanes to `[T0, M0, T1,
//! M1]`, then two dependent `vfmadd` (block 0's, then block 1's) update `[acc, accm]` in
//! the lanes of one vector, the order [`Q8KCodes`] defines. All integer steps are exact or
//! wrap like the portable kernel's and the f32 steps are the same (fused) operations, so every
//! row gets the portable result's bits.
//!
//! Where the CPU has 256-bit VNNI ([`VnniYmm`]), the same body is compiled again (`rows_vnni`,
//! `weight_rows_vnni` in AVX-512 VL's EVEX form; `rows_avxvnni`, `weight_rows_avxvnni` in
//! AVX-VNNI's VEX form: one macro, three instances) whose [`block_lanes`] fuses
//! each `vpmaddwd` + `vpaddd` into one `vpdpwssd` ([`dpwssd`]): the chunks'
//! scaled pair sums and the zero code's `bsums` term. `vpdpwssd` adds both `i16` products
//! of a lane to the accumulator modulo `2^32`, exactly what `vpmaddwd` then `vpaddd` give
//! (the one case `vpmaddwd` wraps, `2·(−2^15)^2`, wraps the same), so the lanes and the bits
//! are the same at both levels. Formats with unit scales (tq1_0, tq2_0) take one `vpdpbusd`
//! per chunk instead (four exact `u·a` per `i32` lane: the `i16` pair sums' totals, which
//! never wrap), in the VEX build only ([`vnni_form`]).

use std::arch::x86_64::*;

use crate::dot::{Field, GROUPS, Q8KCodes, finish};
use crate::q8k::BlockQ8K;
use qforge_simd::barrier::fence_ymm;
use qforge_simd::rows::{RowKernel, by_rows};
use qforge_simd::vnni::{EVEX, Form, NONE, VEX, VnniYmm, dpbusd, dpwssd};
use qforge_simd::{Avx2, totals};

/// [`crate::dot::q8k_codes_vec_dot_rows`] with AVX2 (rows taken up to four at a time; the
/// VNNI build where the CPU has it); `false` (nothing written) without AVX2. `a.len() ==
/// out.len()` and every `a[r]` holds at least `w.len()` blocks (checked by the caller).
pub(crate) fn codes_dot_rows<F: Q8KCodes>(w: &[F::Block], a: &[&[BlockQ8K]], out: &mut [f32]) -> bool {
    let Some(avx2) = Avx2::detect() else {
        return false;
    };
    by_rows(&Kernel::<F> { w, avx2, vnni: vnni_form::<F>() }, a, out);
    true
}

/// [`crate::dot::q8k_codes_vec_dot_weight_rows`] with AVX2 (the VNNI build where the CPU has
/// it): `out.len()` weight rows of `n` blocks each in `w`, every one against `a` (exactly `n`
/// blocks); `false` (nothing written) without AVX2.
pub(crate) fn codes_dot_weight_rows<F: Q8KCodes>(w: &[F::Block], n: usize, a: &[BlockQ8K], out: &mut [f32]) -> bool {
    let Some(avx2) = Avx2::detect() else {
        return false;
    };
    // SAFETY: `Avx2::detect` has just checked that this CPU has AVX2, FMA and F16C, all
    // `weight_rows_avx2` needs, and `vnni_form` (where `Some`) the features of that VNNI form,
    // which `weight_rows_vnni` / `weight_rows_avxvnni` need besides.
    unsafe {
        match vnni_form::<F>() {
            Some(EVEX) => weight_rows_vnni::<F>(w, n, a, out, avx2),
            Some(_) => weight_rows_avxvnni::<F>(w, n, a, out, avx2),
            None => weight_rows_avx2::<F>(w, n, a, out, avx2),
        }
    }
    true
}

/// The VNNI form whose build runs `F` (`VnniYmm::detect`'s), or `None`: the AVX2 build. The
/// formats whose scales are all 1 (tq) run the VEX build where `detect_vex_on_intel` picks it
/// (Intel's CPUs with AVX-VNNI), else the AVX2 one: where LLVM vectorized their unpacking
/// with AVX-512 (the EVEX build) tq1_0 read 30–50 % slower, and their `vpdpbusd` form is
/// measured on Intel only (tq2_0 +10 % there, tq1_0 even).
#[inline]
fn vnni_form<F: Q8KCodes>() -> Option<Form> {
    if F::UNIT_SCALES {
        return VnniYmm::detect_vex_on_intel().map(VnniYmm::form).filter(|&f| f == VEX);
    }
    VnniYmm::detect().map(VnniYmm::form)
}

/// The weight row, the proof of AVX2 and the VNNI form whose build may run (`vnni_form`).
struct Kernel<'w, F: Q8KCodes> {
    w: &'w [F::Block],
    avx2: Avx2,
    vnni: Option<Form>,
}

impl<'a, F: Q8KCodes> RowKernel<&'a [BlockQ8K]> for Kernel<'_, F> {
    #[inline]
    fn rows<const R: usize>(&self, a: [&&'a [BlockQ8K]; R]) -> [f32; R] {
        let a = a.map(|a| &a[..self.w.len()]);
        // SAFETY: `self` holds an `Avx2` token, which exists only where the CPU has AVX2, FMA
        // and F16C, all `rows_avx2` needs, and the VNNI form `VnniYmm::detect` found, whose
        // features `rows_vnni` / `rows_avxvnni` need besides.
        unsafe {
            match self.vnni {
                Some(EVEX) => rows_vnni::<F, R>(self.w, a, self.avx2),
                Some(_) => rows_avxvnni::<F, R>(self.w, a, self.avx2),
                None => rows_avx2::<F, R>(self.w, a, self.avx2),
            }
        }
    }
}

/// Defines the weight-rows loop `$weight_rows` and the row kernel `$rows` (the body below),
/// compiled with `$features`, the block's integer lanes from [`block_lanes`] in VNNI form
/// `$form` ([`NONE`]: the AVX2 build): one body for the AVX2 and the VNNI kernels.
macro_rules! rows_kernels {
    ($weight_rows:ident, $rows:ident, $features:literal, $form:expr) => {
/// The weight rows' loop (`out.len()` rows of `n` blocks in `w`, each against `a`), with
/// the one-row kernel inlined.
#[target_feature(enable = $features)]
fn $weight_rows<F: Q8KCodes>(w: &[F::Block], n: usize, a: &[BlockQ8K], out: &mut [f32], avx2: Avx2) {
    for (o, w) in out.iter_mut().zip(w.chunks_exact(n.max(1))) {
        [*o] = $rows::<F, 1>(w, [a], avx2);
    }
}

/// The rows `a` (each exactly `w.len()` blocks): the row loop, with the format's unpacking
/// inlined.
#[target_feature(enable = $features)]
fn $rows<F: Q8KCodes, const R: usize>(w: &[F::Block], a: [&[BlockQ8K]; R], avx2: Avx2) -> [f32; R] {
    // How `unpack` broadcasts the chunks' scales (see `Q8KCodes::SCALE_PICK_TABLE`): the
    // VNNI build's choice for mat-vec only (with several rows the table measured slower).
    let table = if $form != NONE && R == 1 { F::SCALE_PICK_TABLE_VNNI } else { F::SCALE_PICK_TABLE };
    // Per row, `acc` and `accm` in f32 lanes 0 and 1 (lanes 2, 3: scratch, never read).
    let mut acc = [_mm_setzero_ps(); R];
    // One block `$i` (`$k` = its place in the pair, a constant) against every row: its
    // integer lanes and f32 factors kept in `$lanes` / `$x` for the pair. (A macro: a closure
    // would not inherit the target features, and the vectors must stay in registers.)
    macro_rules! block {
        ($i:expr, $k:expr, $lanes:ident, $x:ident) => {{
            let i: usize = $i;
            // SAFETY: this function has AVX2, FMA and F16C enabled.
            let u = unsafe { unpack::<F>(&w[i], table) };
            for r in 0..R {
                let a = &a[r][i];
                // SAFETY: as above.
                let (isum, summs) = unsafe { block_lanes::<F, { $form }>(&u, a) };
                let ad = a.d.get();
                // With mins `[isum0, summs0, isum1, summs1]` and `[x0, z0, x1, z1]`, else
                // `[isum0, isum1]` and `[x0, x1]`.
                if F::HAS_MINS {
                    $lanes[r][2 * $k] = isum;
                    $lanes[r][2 * $k + 1] = summs;
                    $x[r][2 * $k] = u.dm[0] * ad;
                    $x[r][2 * $k + 1] = u.dm[1] * ad;
                } else {
                    $lanes[r][$k] = isum;
                    $x[r][$k] = u.dm[0] * ad;
                }
            }
        }};
    }
    // Blocks in pairs: both blocks' lanes reduced together to their exact totals, then each
    // block's `fma` into the accumulators in order.
    for p in 0..w.len().div_ceil(2) {
        let two = 2 * p + 1 < w.len();
        let mut lanes = [[_mm256_setzero_si256(); 4]; R];
        let mut x = [[0f32; 4]; R];
        block!(2 * p, 0, lanes, x);
        // The AVX2 build (16 vector registers): block 0's lanes finished before block 1's
        // loads. Left to itself, LLVM deferred block 0's `vpmaddwd`s past block 1's products
        // and spilled both blocks' products and scales to the stack (about 14 stores and 14
        // reloads per pair): with the fence q2_k 37.9 -> 43.9, q4_k 34.7 -> 39.2, q5_k 28.3
        // -> 31.0, q6_k 29.8 -> 31.7 Gel/s (mat-vec 4096², Zen 4 at `QFORGE_CPU=avx2`). The
        // EVEX build keeps everything in its 32 registers and is no faster with it; the VEX
        // one has the AVX2 build's 16 and keeps the fence.
        if $form != EVEX {
            for l in lanes.iter_mut() {
                l[0] = fence_ymm(l[0]);
                l[1] = fence_ymm(l[1]);
            }
        }
        if two {
            block!(2 * p + 1, 1, lanes, x);
        }
        for r in 0..R {
            // SAFETY: as above; the load reads exactly the 4 f32 of `x[r]`.
            unsafe {
                // With mins `[T0, M0, T1, M1]`, else `[T0, T1, T0, T1]`.
                let t = if F::HAS_MINS { totals::quad(lanes[r], avx2) } else { totals::pair(lanes[r][0], lanes[r][1], avx2) };
                let x = _mm_loadu_ps(x[r].as_ptr());
                acc[r] = _mm_fmadd_ps(t, x, acc[r]);
                if two {
                    // Block 1's terms down to where block 0's were (no closure: it would not
                    // inherit the target features).
                    let (t, x) = if F::HAS_MINS {
                        (_mm_movehl_ps(t, t), _mm_movehl_ps(x, x))
                    } else {
                        (_mm_movehdup_ps(t), _mm_movehdup_ps(x))
                    };
                    acc[r] = _mm_fmadd_ps(t, x, acc[r]);
                }
            }
        }
    }
    let mut out = [0f32; R];
    for r in 0..R {
        let v = [_mm_cvtss_f32(acc[r]), _mm_cvtss_f32(_mm_movehdup_ps(acc[r]))];
        out[r] = finish(F::HAS_MINS, &v);
    }
    out
}
    };
}

rows_kernels!(weight_rows_avx2, rows_avx2, "avx2,fma,f16c", NONE);
rows_kernels!(weight_rows_vnni, rows_vnni, "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni", EVEX);
rows_kernels!(weight_rows_avxvnni, rows_avxvnni, "avx2,fma,f16c,avxvnni", VEX);

/// One weight block, ready for the rows.
struct Unpacked {
    /// The codes of chunk `c` (elements `32c .. 32c + 32`), unsigned bytes.
    q: [__m256i; 8],
    /// Chunk `c`'s scales: `scale[2c]` in every `i16` of the low lane, `scale[2c + 1]` of
    /// the high lane.
    sc: [__m256i; 8],
    /// `−ZERO·scale[g]` per group (`|·| ≤ 32·128`, an `i16`).
    off: __m256i,
    /// `min[g]` per group.
    mins: __m256i,
    /// `d`, `dmin` widened to f32.
    dm: [f32; 2],
}

/// The block's codes, scales and mins as vectors.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C: only the `#[target_feature]` row loop calls this
/// (and inlines it: `#[inline(always)]` is not allowed on a `#[target_feature]` function,
/// and without it the vectors would go through memory).
#[inline(always)]
unsafe fn unpack<F: Q8KCodes>(b: &F::Block, table: bool) -> Unpacked {
    // SAFETY: the caller guarantees AVX2.
    let q = unsafe { block_codes::<F>(b) };
    let dm = F::d_dmin(b).map(|h| h.bits());
    if let Some(at) = F::K4_SCALES {
        let s = bytemuck::bytes_of(b)[at..].first_chunk::<16>().expect("the 6-bit scales inside the block");
        // SAFETY: the caller guarantees AVX2, FMA and F16C.
        let (sc, mins) = unsafe { k4_scales(s) };
        // SAFETY: as above.
        return unsafe { unpacked(q, sc, _mm256_setzero_si256(), mins, dm, table) };
    }
    let (sc, mins) = F::scales(b);
    let sc = bytemuck::cast::<[i8; GROUPS], [u8; 16]>(sc);
    // SAFETY: the caller guarantees AVX2, FMA and F16C; the loads read exactly their arrays.
    // (No closures around intrinsics here: a closure does not inherit the caller's target
    // features, so it would stay an out-of-line call.)
    unsafe {
        let sc = _mm_loadu_si128(sc.as_ptr().cast());
        let off = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(sc), _mm256_set1_epi16(-i16::from(F::ZERO)));
        // Even groups' scales widened into the low lane, odd groups' into the high lane.
        let split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        let eo = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, split));
        let mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(mins.as_ptr().cast()));
        unpacked(q, eo, off, mins, dm, table)
    }
}

/// The codes of the block's eight chunks (elements `32c .. 32c + 32`), unsigned bytes.
///
/// # Safety
/// As [`unpack`]: AVX2, FMA and F16C.
#[inline(always)]
unsafe fn block_codes<F: Q8KCodes>(b: &F::Block) -> [__m256i; 8] {
    match F::FIELDS {
        // SAFETY: the caller guarantees AVX2.
        Some(fields) => unsafe { fields_avx2::<F>(b, &fields) },
        None => {
            // Constant chunk indices, so that every shift in the format's `chunk` is a constant.
            let c = |c| F::chunk(b, c);
            bytemuck::cast::<[[u8; 32]; 8], [__m256i; 8]>([c(0), c(1), c(2), c(3), c(4), c(5), c(6), c(7)])
        }
    }
}

/// [`block_codes`] stored to `u` (element order); `_avx2` proves AVX2, FMA and F16C.
#[inline(always)]
pub(crate) fn store_codes<F: Q8KCodes>(b: &F::Block, u: &mut [u8; crate::QK_K], _avx2: Avx2) {
    // SAFETY: `Avx2` exists only where the CPU has AVX2, FMA and F16C, all `block_codes`
    // needs; each store writes 32 bytes inside `u`.
    unsafe {
        for (c, q) in block_codes::<F>(b).iter().enumerate() {
            _mm256_storeu_si256(u[32 * c..].as_mut_ptr().cast(), *q);
        }
    }
}

/// [`unpack`]'s result from the codes `q`, the scales `eo` (even groups' in the low lane,
/// odd groups' in the high lane, `i16`), `off`, the mins (`i16` per group) and `d, dmin`.
///
/// # Safety
/// As [`unpack`]: AVX2, FMA and F16C.
#[inline(always)]
unsafe fn unpacked(q: [__m256i; 8], eo: __m256i, off: __m256i, mins: __m256i, dm: [u16; 2], table: bool) -> Unpacked {
    // SAFETY: the caller guarantees AVX2, FMA and F16C; the loads read exactly their arrays.
    unsafe {
        // Chunk c: `i16` c of each lane, broadcast over that lane.
        let mut sc = [eo; 8];
        // One `vpshufb` each, its control read from memory where `table` (`pick_i16`: with
        // constant controls LLVM turns each into `vpshuflw` / `vpshufhw` + `vpshufd`).
        let picks = table.then(qforge_simd::lut::pick_i16);
        for (c, v) in sc.iter_mut().enumerate() {
            *v = _mm256_shuffle_epi8(eo, qforge_simd::lut::pick_i16_control(picks, c));
        }
        let dm = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(dm[0]) | i32::from(dm[1]) << 16));
        Unpacked { q, sc, off, mins, dm: [_mm_cvtss_f32(dm), _mm_cvtss_f32(_mm_movehdup_ps(dm))] }
    }
}

/// ggml's twelve bytes of eight 6-bit scales and mins (q4_k, q5_k: [`Q8KCodes::K4_SCALES`])
/// unpacked in vector registers, `s` the twelve bytes and four more: the scales as `i16`
/// `[sc0 … sc7 | sc0 … sc7]` (group `g`'s scale is `sc[g / 2]`, so this is [`unpack`]'s
/// even / odd layout) and the mins `[m0, m0, m1, m1, …, m7, m7]` (one per group), the values
/// of the format's [`Q8KCodes::scales`]:
///
/// ```text
/// j < 4:  sc[j] = s[j] & 63                       m[j] = s[j + 4] & 63
/// j ≥ 4:  sc[j] = s[j + 4] & 15 | s[j − 4] >> 6 << 4   m[j] = s[j + 4] >> 4 | s[j] >> 6 << 4
/// ```
///
/// Byte shuffles, shifts and masks only: no detour through general registers, whose
/// latency (and the AVX-512 code LLVM makes of the scalar unpacking in the VNNI build) held
/// up every block's products.
///
/// # Safety
/// As [`unpack`]: AVX2, FMA and F16C.
#[inline(always)]
pub(super) unsafe fn k4_scales(s: &[u8; 16]) -> (__m256i, __m256i) {
    // SAFETY: the caller guarantees AVX2; the load reads exactly the 16-byte array `s`.
    unsafe {
        let v = _mm_loadu_si128(s.as_ptr().cast());
        // [sc0..3 ← s0..3, sc4..7 ← s8..11, m0..3 ← s4..7, m4..7 ← s8..11]: the low bits.
        let a = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
        let lo = _mm_and_si128(a, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
        let hi4 =
            _mm_and_si128(_mm_srli_epi16::<4>(a), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15));
        // sc4..7 ← s0..3 >> 6 << 4, m4..7 ← s4..7 >> 6 << 4 (a 16-bit shift: the bits it
        // moves across bytes are masked off).
        let c = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
        let top = _mm_and_si128(_mm_srli_epi16::<2>(c), _mm_set1_epi8(0x30));
        let t = _mm_or_si128(_mm_or_si128(lo, hi4), top);
        let sc = _mm256_cvtepu8_epi16(_mm_unpacklo_epi64(t, t));
        let m = _mm_shuffle_epi8(t, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15));
        (sc, _mm256_cvtepu8_epi16(m))
    }
}

/// The eight chunks' codes of a block from the format's [`Field`]s ([`crate::dot::fields_chunk`]'s
/// result): per field one 32-byte load, one 16-bit shift (a constant once inlined; the bits
/// a 16-bit shift moves across bytes are outside the field's mask) and one `vpand`, the
/// fields of a chunk OR-ed. Explicit instructions, so that LLVM keeps them byte-wise.
///
/// # Safety
/// As [`unpack`]: AVX2, FMA and F16C.
#[inline(always)]
unsafe fn fields_avx2<F: Q8KCodes>(b: &F::Block, fields: &[[Field; 2]; 8]) -> [__m256i; 8] {
    let bytes = bytemuck::bytes_of(b);
    // SAFETY: the caller guarantees AVX2.
    let mut q = [unsafe { _mm256_setzero_si256() }; 8];
    for (v, fields) in q.iter_mut().zip(fields) {
        for f in fields {
            if f.width == 0 {
                continue;
            }
            let src = bytes[f.offset..].first_chunk::<32>().expect("a code field inside the block");
            let mask = (((1u32 << f.width) - 1) << f.to) as u8;
            // SAFETY: the caller guarantees AVX2; the load reads exactly the 32-byte array `src`.
            unsafe {
                let x = _mm256_loadu_si256(src.as_ptr().cast());
                let x = if f.from > f.to {
                    _mm256_srl_epi16(x, _mm_cvtsi32_si128((f.from - f.to) as i32))
                } else if f.from < f.to {
                    _mm256_sll_epi16(x, _mm_cvtsi32_si128((f.to - f.from) as i32))
                } else {
                    x
                };
                *v = _mm256_or_si256(*v, _mm256_and_si256(x, _mm256_set1_epi8(mask as i8)));
            }
        }
    }
    q
}

/// The integer lanes `(isum, summs)` of the block against one activation block, as
/// [`Q8KCodes`] defines them. `FORM` other than [`NONE`]: the scaled sums with `vpdpwssd` in
/// that form (the VNNI kernels).
///
/// # Safety
/// As [`unpack`]: AVX2, FMA and F16C; the features of `FORM` besides.
#[inline(always)]
unsafe fn block_lanes<F: Q8KCodes, const FORM: Form>(u: &Unpacked, a: &BlockQ8K) -> (__m256i, __m256i) {
    let (qs, _) = a.qs.as_chunks::<32>();
    // SAFETY: the caller guarantees AVX2, FMA and F16C (and the features of `FORM`);
    // each 32-byte load reads exactly a 32-byte array (`qs` chunks, `bsums`).
    unsafe {
        let mut acc = _mm256_setzero_si256();
        let bsums = _mm256_loadu_si256(a.bsums.as_ptr().cast());
        if F::UNIT_SCALES && FORM != NONE {
            // `vpdpbusd`: four `u·a` per `i32` lane, exact, so lane `j` is `P_2j + P_2j+1` of
            // the `i16` form below (which never wraps), in one instruction per chunk.
            for (q, a) in u.q.iter().zip(qs) {
                acc = dpbusd::<FORM>(acc, *q, _mm256_loadu_si256(a.as_ptr().cast()));
            }
            if F::ZERO != 0 {
                acc = dpwssd::<FORM>(acc, bsums, u.off);
            }
        } else if F::UNIT_SCALES {
            // u ≤ 15: eight chunks of pair sums stay within `i16` (see the trait), widened
            // once; the zero code's `bsums` term in `i32`, as the portable kernel takes it.
            let mut acc16 = _mm256_setzero_si256();
            for (q, a) in u.q.iter().zip(qs) {
                acc16 = _mm256_add_epi16(acc16, _mm256_maddubs_epi16(*q, _mm256_loadu_si256(a.as_ptr().cast())));
            }
            acc = _mm256_madd_epi16(acc16, _mm256_set1_epi16(1));
            if F::ZERO != 0 {
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(bsums, u.off));
            }
        } else if FORM != NONE {
            // `vpdpwssd` = `vpmaddwd` + `vpaddd` (modulo 2^32 both): two chains, even and odd
            // chunks, the zero code's `bsums` term starting the second.
            let mut acc4 = [_mm256_setzero_si256(); 4];
            for (c, ((q, sc), a)) in u.q.iter().zip(&u.sc).zip(qs).enumerate() {
                let p = _mm256_maddubs_epi16(*q, _mm256_loadu_si256(a.as_ptr().cast()));
                acc4[c % 4] = if c < 4 { _mm256_madd_epi16(p, *sc) } else { dpwssd::<FORM>(acc4[c % 4], p, *sc) };
            }
            if F::ZERO != 0 {
                acc4[0] = dpwssd::<FORM>(acc4[0], bsums, u.off);
            }
            acc = _mm256_add_epi32(_mm256_add_epi32(acc4[0], acc4[1]), _mm256_add_epi32(acc4[2], acc4[3]));
        } else {
            for ((q, sc), a) in u.q.iter().zip(&u.sc).zip(qs) {
                acc = _mm256_add_epi32(
                    acc,
                    _mm256_madd_epi16(_mm256_maddubs_epi16(*q, _mm256_loadu_si256(a.as_ptr().cast())), *sc),
                );
            }
            if F::ZERO != 0 {
                // The zero code through `bsums` (the block is totalled with its pair's other).
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(bsums, u.off));
            }
        }
        let m = if F::HAS_MINS { _mm256_madd_epi16(bsums, u.mins) } else { _mm256_setzero_si256() };
        (acc, m)
    }
}
