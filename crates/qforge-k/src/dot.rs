//! Integer dot products against q8_k activations (ggml's `ggml_vec_dot_q*_K_q8_K`), shared
//! by every super-block format dotted with q8_k: the K-quants here, q8_k itself (qforge's own
//! self-dot) and the ternary formats of `qforge-tq`.
//!
//! A format only says how to unpack one block ([`Q8KDot::unpack`]): its 256 signed integer
//! codes in element order and the integer scale (and min) of each 16-element group. The
//! kernel then computes per block, exactly in integers,
//!
//! ```text
//! isum  = Σ_g scale[g] · Σ_{i in g} code[i] · a.qs[i]
//! summs = Σ_g min[g] · a.bsums[g]                        (formats with mins)
//! sumf += (d·a.d)·isum − (dmin·a.d)·summs                (f32, once per block, as ggml)
//! ```
//!
//! Formats with 32-element sub-blocks (q4_k, q5_k) repeat each scale / min over its two
//! groups, which gives ggml's `m[j]·(bsums[2j] + bsums[2j+1])`. Scaling the codes before the
//! products (`|code·scale| ≤ 4096`, an `i16`) keeps the inner loop vertical: i16×i8 products
//! summed in 16 `i32` lanes over fixed-size arrays, no bounds checks, no per-group
//! horizontal sums.

use crate::QK_K;
use crate::q8k::BlockQ8K;
use qforge_core::le::F16Le;
use qforge_core::{BlockFormat, MAX_DOT_ROWS};

/// Groups of 16 elements per super-block (one q8_k `bsums` entry each).
pub const GROUPS: usize = QK_K / 16;

/// The integer scale and min of each 16-element group of a block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupScales {
    /// Integer scale of each 16-element group (multiplies the group's `Σ code·a.qs`).
    pub scales: [i16; GROUPS],
    /// Ignored unless [`Q8KDot::HAS_MINS`].
    pub mins: [i16; GROUPS],
}

impl GroupScales {
    /// Every scale 1, no mins (q8_k, the ternary formats).
    pub const ONES: GroupScales = GroupScales { scales: [1; GROUPS], mins: [0; GROUPS] };

    /// One scale (and min) per 32-element sub-block, each repeated over its two groups.
    #[inline(always)]
    pub fn per_32(scales: [u8; 8], mins: [u8; 8]) -> GroupScales {
        GroupScales {
            scales: std::array::from_fn(|g| i16::from(scales[g / 2])),
            mins: std::array::from_fn(|g| i16::from(mins[g / 2])),
        }
    }
}

/// A 256-element super-block format with ggml's integer dot against q8_k.
///
/// Codes and scales must be small enough that `|code · scale| < 2^15` (true of every ggml
/// format: at most 32 · 128).
pub trait Q8KDot: BlockFormat {
    /// Whether the format subtracts `dmin · Σ min[g]·bsums[g]`.
    const HAS_MINS: bool;

    /// The block's super-block scale `d` and min scale `dmin` (0 without mins), in f32.
    fn d_dmin(b: &Self::Block) -> (f32, f32);

    /// Writes the block's 256 signed integer codes, in element order, to `q` and returns the
    /// integer scale (and min) of each 16-element group: element `i` decodes (up to f32
    /// rounding) to `d·scale[i/16]·q[i] − dmin·min[i/16]`.
    fn unpack(b: &Self::Block, q: &mut [i8; QK_K]) -> GroupScales;
}

/// `Σ_g scale[g] · Σ_{i in g} q[i]·a[i]`, exact (`|result| ≤ 256 · 2^15 · 128 < 2^31`).
///
/// The portable kernel; [`crate::simd`] has an AVX2 one with the same (exact) result.
#[inline(always)]
pub(crate) fn scaled_isum(q: &[i8; QK_K], a: &[i8; QK_K], scales: &[i16; GROUPS]) -> i32 {
    let mut acc = [0i32; 16];
    for ((q, a), &s) in q.chunks_exact(16).zip(a.chunks_exact(16)).zip(scales) {
        for ((acc, &q), &a) in acc.iter_mut().zip(q).zip(a) {
            *acc += i32::from(i16::from(q) * s) * i32::from(a);
        }
    }
    acc.iter().sum()
}

/// ggml's `vec_dot` of a row of `F` blocks with a row of q8_k blocks (`w.len() == a.len()`,
/// checked by the caller).
///
/// Runs the AVX2 kernel where the CPU has it (checked once, in the crate's private `simd` module), the portable
/// one elsewhere. Both compute the same integer `isum` per block and the same f32 operations
/// in the same order, so the result is bit-identical either way.
#[inline]
pub fn q8k_vec_dot<F: Q8KDot>(w: &[F::Block], a: &[BlockQ8K]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if let Some(sumf) = crate::simd::q8k_vec_dot::<F>(w, a) {
        return sumf;
    }
    q8k_vec_dot_with::<F>(w, a, scaled_isum)
}

/// The body of [`q8k_vec_dot`], with the block's integer sum computed by `isum` (one of the
/// [`scaled_isum`] kernels).
#[inline(always)]
pub(crate) fn q8k_vec_dot_with<F: Q8KDot>(
    w: &[F::Block],
    a: &[BlockQ8K],
    isum: impl Fn(&[i8; QK_K], &[i8; QK_K], &[i16; GROUPS]) -> i32,
) -> f32 {
    let mut sumf = 0.0f32;
    let mut q = [0i8; QK_K];
    for (w, a) in w.iter().zip(a) {
        let g = F::unpack(w, &mut q);
        let isum = isum(&q, &a.qs, &g.scales) as f32;
        let (d, dmin) = F::d_dmin(w);
        let ad = a.d.get();
        sumf += if F::HAS_MINS {
            let summs: i32 = g.mins.iter().zip(&a.bsums).map(|(&m, s)| i32::from(m) * i32::from(s.get())).sum();
            (d * ad) * isum - (dmin * ad) * summs as f32
        } else {
            (d * ad) * isum
        };
    }
    sumf
}

/// A 256-element super-block format whose codes are small unsigned integers (`0..64`): every
/// K-quant (q2_k … q6_k) and the ternary formats of `qforge-tq`. Their dot with q8_k runs
/// ggml's scheme (`vpmaddubsw` of the unsigned codes with the signed activations on AVX2,
/// integer lanes per block), the zero code and the mins going through the
/// activations' `bsums`.
///
/// Element `i` of group `g = i / 16` decodes (up to f32 rounding) to
/// `d·scale[g]·(u[i] − ZERO) − dmin·min[g]`. Per block, in wrapping `i32` arithmetic (exact
/// for every q8_k block a quantizer writes: `|bsums| ≤ 2048`), the kernels compute integer
/// lanes (lane `j < 8` holds the elements `32c + 4j .. 32c + 4j + 4` of every chunk `c`,
/// group `2c + j / 4`, and the mins of groups `2j, 2j + 1`: AVX2's `vpmaddwd` layout), and
/// the block goes into the row's two f32 accumulators as the exact totals of those lanes:
///
/// ```text
/// isum[j]  = Σ_c scale[2c + j/4] · Σ_{i<4} u[32c+4j+i]·a.qs[32c+4j+i]  −  ZERO·Σ_{g in 2j, 2j+1} scale[g]·a.bsums[g]
/// summs[j] = Σ_{g in 2j, 2j+1} min[g]·a.bsums[g]                                        (HAS_MINS)
/// T = Σ_j isum[j],  M = Σ_j summs[j]                                                    (wrapping)
/// acc = fma(T, d·a.d, acc);  accm = fma(M, dmin·a.d, accm)                              (block by block)
/// result = acc − accm  (without mins: acc)
/// ```
///
/// This is the f32 order of the packed layout's kernels ([`crate::packed`]), so a packed
/// matrix, the plain row kernels and the mat-mul tile kernel give every row the same bits,
/// and a mat-mul row those of its mat-vec. With `UNIT_SCALES` the pair sums are taken in
/// the kernel's `i16` lanes, `P_k = Σ_c (u·a.qs)[32c+2k, 32c+2k+1]` (exact: see
/// `UNIT_SCALES`), and `T = Σ_k P_k − ZERO·Σ_k a.bsums[k]`, each term widened to `i32` and
/// summed wrapping in `i32` (ggml's AVX2 kernel subtracts the `bsums` in `i16` with `vpsubw`:
/// the same integer for every quantizer-written q8_k block, where `|bsums| ≤ 16·128`).
///
/// Each block enters as one exact integer times its scale, so the f32 error stays relative
/// to `Σ|w·a|` per block. Like ggml's own SIMD kernels, this trusts a q8_k block's `bsums`
/// to be the sums of its `qs` (as `quantize_row_q8_K` writes them); both kernels (portable
/// and AVX2) compute the same formula, so they agree bit for bit on any bytes.
pub trait Q8KCodes: BlockFormat {
    /// Whether the format subtracts `dmin · Σ min[g]·bsums[g]`.
    const HAS_MINS: bool;
    /// The code of the value 0 (at most 32).
    const ZERO: u8;
    /// Every scale is 1 and every code below 16 (the ternary formats): the AVX2 kernel then
    /// sums a block's `vpmaddubsw` pairs in `i16` (exact: `8·2·15·128 < 2^15`) and widens
    /// them once, instead of once per chunk; the VEX build takes one `vpdpbusd` per chunk.
    /// The zero code's `bsums` term is taken in `i32` either way.
    const UNIT_SCALES: bool = false;
    /// A code-generation choice of the AVX2 kernel, the same result either way: broadcast
    /// each chunk's scales with one `vpshufb` whose control is read from a table, instead of
    /// constant controls (which LLVM rewrites as two shuffles, or, for some formats, as
    /// cheaper 128-bit ones). Set where it measured faster (q2_k, q4_k: +11 % mat-vec on
    /// Zen 1; q5_k −8 %, q6_k −4 %, q3_k even).
    const SCALE_PICK_TABLE: bool = false;
    /// [`Self::SCALE_PICK_TABLE`] for the AVX-512 VNNI build's one-row (mat-vec) kernel (the
    /// same result either way). Set where it measured faster there (Zen 4: q3_k +5 %, q6_k
    /// +2 %; q5_k −6 %); with several rows (mat-mul) the table was slower (q6_k −8 %).
    const SCALE_PICK_TABLE_VNNI: bool = Self::SCALE_PICK_TABLE;
    /// A code-generation choice of the AVX2 kernel, the same result either way: the codes of
    /// chunk `c` as bit fields of the block's bytes (`FIELDS[c]`, OR-ed, see [`Field`]),
    /// which the AVX2 kernel extracts with one explicit 16-bit shift and one mask each; then
    /// [`Self::chunk`] must be [`fields_chunk`] of them (so the kernel tests compare the two
    /// kernels on the same definition). `None`: the AVX2 kernel inlines [`Self::chunk`],
    /// which LLVM vectorizes as it sees fit. Set where it measured faster (q3_k, whose eight
    /// chunks LLVM merged into 16-bit unpack / pack sequences: +4–13 % mat-vec on Zen 1;
    /// q2_k, q4_k, q5_k 3–10 % slower with it, q6_k and tq2_0 even).
    const FIELDS: Option<[[Field; 2]; 8]> = None;
    /// A code-generation choice of the AVX2 / VNNI kernels, the same result either way: the
    /// byte offset in the block of ggml's twelve bytes of eight 6-bit scales and mins
    /// (q4_k, q5_k; followed by at least four more bytes of the block), which the kernels
    /// then unpack with byte shuffles in vector registers; [`Self::scales`] must give the
    /// same values (scale and min `j` of sub-block `j`, repeated over its two groups), which
    /// the kernel tests check. `None`: the kernels take [`Self::scales`] (q4_k / q5_k's
    /// scalar unpacking took a third of their mat-vec time through its latency).
    const K4_SCALES: Option<usize> = None;
    /// Bits of the largest code (`u < 2^CODE_BITS`, at most 6): how the packed layout
    /// ([`crate::packed`]) stores the codes.
    const CODE_BITS: u32 = 6;
    /// Elements per scale group in the packed layout: 16, or 32 where the scales (and mins) of
    /// groups `2k` and `2k + 1` are always equal (one per 32-element sub-block).
    const SCALE_GROUP: usize = 16;

    /// The block's super-block scale `d` and min scale `dmin` (0 without mins), as stored.
    fn d_dmin(b: &Self::Block) -> [F16Le; 2];

    /// The codes `u < 64` of elements `32c .. 32c + 32` (`c < 8`, a constant once inlined
    /// in the kernels' unrolled loops): plain per-byte loops over fixed arrays, which the
    /// compiler turns into a few vector instructions.
    fn chunk(b: &Self::Block, c: usize) -> [u8; 32];

    /// The integer scale and min (0 without mins) of each 16-element group.
    fn scales(b: &Self::Block) -> ([i8; GROUPS], [u8; GROUPS]);
}

/// Bits `from .. from + width` of each of the 32 bytes at byte `offset` of a block, moved to
/// bits `to .. to + width` (`from + width ≤ 8`, `to + width ≤ 8`): one term of a chunk's codes
/// ([`Q8KCodes::FIELDS`]). `width == 0` ([`Field::NONE`]) is no term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Byte offset of the 32 source bytes in the block.
    pub offset: usize,
    /// Lowest source bit.
    pub from: u32,
    /// Bits in the field (0: none).
    pub width: u32,
    /// Lowest bit of the field in the code.
    pub to: u32,
}

impl Field {
    /// No term (a chunk with a single field).
    pub const NONE: Field = Field { offset: 0, from: 0, width: 0, to: 0 };
}

/// The fields of a plane of `width`-bit codes (2 or 4) at byte `offset`, moved to bit `to`: chunk `c` is field `c % (8 / width)`
/// of the 32 bytes at `offset + 32·(c / (8 / width))` (`width = 1`: a high-bit mask, bit `c`
/// of the same 32 bytes for every chunk).
pub const fn plane(offset: usize, width: u32, to: u32) -> [Field; 8] {
    let per_byte = 8 / width as usize;
    let mut f = [Field::NONE; 8];
    let mut c = 0;
    while c < 8 {
        let row = if width == 1 { 0 } else { c / per_byte };
        f[c] = Field { offset: offset + 32 * row, from: width * (c % per_byte) as u32, width, to };
        c += 1;
    }
    f
}

/// Each chunk's two fields, `low[c]` and `high[c]` ([`Field::NONE`] for none).
pub const fn chunk_fields(low: [Field; 8], high: [Field; 8]) -> [[Field; 2]; 8] {
    let mut f = [[Field::NONE; 2]; 8];
    let mut c = 0;
    while c < 8 {
        f[c] = [low[c], high[c]];
        c += 1;
    }
    f
}

/// A chunk's codes from its [`Field`]s: the portable definition the AVX2 kernel matches.
///
/// # Panics
/// If a field's 32 bytes do not lie inside the block (a wrong `FIELDS` table, which the
/// format's tests catch).
#[inline(always)]
pub fn fields_chunk<F: BlockFormat>(b: &F::Block, fields: [Field; 2]) -> [u8; 32] {
    let bytes = bytemuck::bytes_of(b);
    let mut out = [0u8; 32];
    for f in fields {
        if f.width == 0 {
            continue;
        }
        let src = bytes[f.offset..].first_chunk::<32>().expect("a code field inside the block");
        out = or(out, field(src, f.from, f.width, f.to));
    }
    out
}

/// The codes of a block of [`Q8KCodes`] in element order, chunk by chunk.
#[inline(always)]
pub fn codes<F: Q8KCodes>(b: &F::Block) -> [[u8; 32]; 8] {
    std::array::from_fn(|c| F::chunk(b, c))
}

/// Integer lanes per block of the [`Q8KCodes`] kernels.
pub const LANES: usize = 8;

/// The integer lanes `(isum, summs)` of one block as [`Q8KCodes`] defines them: the
/// portable kernel.
#[inline(always)]
pub(crate) fn codes_lanes<F: Q8KCodes>(
    u: &[[u8; 32]; 8],
    (sc, mins): &([i8; GROUPS], [u8; GROUPS]),
    a: &BlockQ8K,
) -> ([i32; LANES], [i32; LANES]) {
    let (mut isum, mut summs) = ([0i32; LANES], [0i32; LANES]);
    if F::UNIT_SCALES {
        // The `i16` pair sums of the AVX2 kernel (exact, see `UNIT_SCALES`), widened.
        let mut s16 = [0i16; 2 * LANES];
        for (u, a) in u.iter().zip(a.qs.chunks_exact(32)) {
            for (k, (u, a)) in u.chunks_exact(2).zip(a.chunks_exact(2)).enumerate() {
                let pair = i32::from(u[0]) * i32::from(a[0]) + i32::from(u[1]) * i32::from(a[1]);
                s16[k] = s16[k].wrapping_add(pair as i16);
            }
        }
        for (j, v) in isum.iter_mut().enumerate() {
            *v = i32::from(s16[2 * j]) + i32::from(s16[2 * j + 1]);
        }
    } else {
        for (c, (u, a)) in u.iter().zip(a.qs.chunks_exact(32)).enumerate() {
            for (j, (u, a)) in u.chunks_exact(4).zip(a.chunks_exact(4)).enumerate() {
                let dot: i32 = u.iter().zip(a).map(|(&u, &a)| i32::from(u) * i32::from(a)).sum();
                isum[j] = isum[j].wrapping_add(i32::from(sc[2 * c + j / 4]).wrapping_mul(dot));
            }
        }
    }
    // The zero code's `bsums` term in `i32`, unit scales included (`|bsum · ZERO · scale| <
    // 2^15 · 32 · 128`).
    for (g, bsum) in a.bsums.iter().enumerate() {
        let bsum = i32::from(bsum.get());
        isum[g / 2] = isum[g / 2].wrapping_add(bsum * (-i32::from(F::ZERO) * i32::from(sc[g])));
    }
    for (g, bsum) in a.bsums.iter().enumerate() {
        summs[g / 2] = summs[g / 2].wrapping_add(i32::from(bsum.get()) * i32::from(mins[g]));
    }
    (isum, summs)
}

/// The exact (wrapping) total of a block's integer lanes (see [`Q8KCodes`]).
#[inline(always)]
pub(crate) fn block_total(lanes: [i32; LANES]) -> i32 {
    lanes.iter().fold(0i32, |t, &v| t.wrapping_add(v))
}

/// The f32 step of a block: `acc = fma(T, d·a.d, acc)` and, with mins, `accm = fma(M,
/// dmin·a.d, accm)`, as the packed layout's kernels do.
#[inline(always)]
pub(crate) fn accumulate(mins: bool, acc: &mut [f32; 2], [d, dmin]: [f32; 2], ad: f32, [t, m]: [i32; 2]) {
    acc[0] = (t as f32).mul_add(d * ad, acc[0]);
    if mins {
        acc[1] = (m as f32).mul_add(dmin * ad, acc[1]);
    }
}

/// The row's result from its accumulators: `acc − accm` (without mins: `acc`).
#[inline(always)]
pub(crate) fn finish(mins: bool, acc: &[f32; 2]) -> f32 {
    if mins { acc[0] - acc[1] } else { acc[0] }
}

/// [`q8k_codes_vec_dot_rows`] with the portable kernel (the reference the AVX2 kernel is
/// tested against, bit for bit; `a.len() == out.len() <= MAX_DOT_ROWS`).
pub fn q8k_codes_dot_rows_portable<F: Q8KCodes>(w: &[F::Block], a: &[&[BlockQ8K]], out: &mut [f32]) {
    let mut accs = [[0f32; 2]; MAX_DOT_ROWS];
    const { assert!(F::ZERO == 0 || !F::HAS_MINS, "a zero code and mins: not a ggml format") };
    for (i, b) in w.iter().enumerate() {
        let u = codes::<F>(b);
        let scales = F::scales(b);
        let dm = F::d_dmin(b).map(F16Le::get);
        for (acc, a) in accs.iter_mut().zip(a) {
            let a = &a[i];
            let (isum, summs) = codes_lanes::<F>(&u, &scales, a);
            accumulate(F::HAS_MINS, acc, dm, a.d.get(), [block_total(isum), block_total(summs)]);
        }
    }
    for (o, acc) in out.iter_mut().zip(&accs) {
        *o = finish(F::HAS_MINS, acc);
    }
}

/// ggml's `vec_dot` of a row of `F` blocks with a row of q8_k blocks (`w.len() == a.len()`,
/// checked by the caller): AVX2 where the CPU has it, the portable kernel elsewhere, the
/// same bits either way (the same integer lanes per block, the same f32 operations).
#[inline]
pub fn q8k_codes_vec_dot<F: Q8KCodes>(w: &[F::Block], a: &[BlockQ8K]) -> f32 {
    let mut out = [0f32];
    q8k_codes_vec_dot_rows::<F>(w, &[a], &mut out);
    out[0]
}

/// `out[r] = q8k_codes_vec_dot(w, a[r])` for up to [`MAX_DOT_ROWS`] rows, each weight block
/// unpacked once for all of them (the mat-mul kernel). Every `a[r]` holds `w.len()` blocks.
///
/// # Panics
/// If `a.len() != out.len()`, `a.len() > MAX_DOT_ROWS` or an `a[r]` is shorter than `w`.
#[inline]
pub fn q8k_codes_vec_dot_rows<F: Q8KCodes>(w: &[F::Block], a: &[&[BlockQ8K]], out: &mut [f32]) {
    assert!(a.len() == out.len() && a.len() <= MAX_DOT_ROWS, "one output per activation row, at most MAX_DOT_ROWS");
    assert!(a.iter().all(|a| a.len() >= w.len()), "activation rows as long as the weight row");
    #[cfg(target_arch = "x86_64")]
    if crate::simd::codes_dot_rows::<F>(w, a, out) {
        return;
    }
    q8k_codes_dot_rows_portable::<F>(w, a, out);
}

/// `out[i] = q8k_codes_vec_dot(w_i, a)` for `out.len()` consecutive weight rows `w_i` of
/// `w.len() / out.len()` blocks each (the mat-vec kernel, [`qforge_core::NativeDot::
/// vec_dot_weight_rows`]): the CPU checked once and the rows run in one loop compiled for
/// AVX2, instead of a call, its checks and the CPU check per row. The same bits as
/// [`q8k_codes_vec_dot`] on each row.
///
/// # Panics
/// If `w.len()` is not a multiple of `out.len()` or `a` is shorter than one weight row.
#[inline]
pub fn q8k_codes_vec_dot_weight_rows<F: Q8KCodes>(w: &[F::Block], a: &[BlockQ8K], out: &mut [f32]) {
    if out.is_empty() {
        return;
    }
    assert!(w.len().is_multiple_of(out.len()), "whole weight rows");
    let n = w.len() / out.len();
    assert!(a.len() >= n, "an activation row as long as a weight row");
    if n == 0 {
        // Empty rows: `q8k_codes_vec_dot`'s +0.
        out.fill(0.0);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::simd::codes_dot_weight_rows::<F>(w, n, &a[..n], out) {
        return;
    }
    for (o, w) in out.iter_mut().zip(w.chunks_exact(n)) {
        q8k_codes_dot_rows_portable::<F>(w, &[a], std::slice::from_mut(o));
    }
}

/// `[f(0), f(1), …, f(31)]` as a plain loop (which vectorizes and always inlines, where
/// `std::array::from_fn` sometimes stays a call).
#[inline(always)]
pub fn bytes32(f: impl Fn(usize) -> u8) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (l, o) in out.iter_mut().enumerate() {
        *o = f(l);
    }
    out
}

/// Bits `from .. from + width` of each byte of `src`, moved to bits `to .. to + width`: one
/// shift and one mask (the form that vectorizes into two instructions; `>> from & mask << to`
/// would be three, and LLVM widens some of those to 16 bits).
#[inline(always)]
pub fn field(src: &[u8; 32], from: u32, width: u32, to: u32) -> [u8; 32] {
    let mask = ((1u32 << width) - 1) << to;
    if from >= to {
        bytes32(|l| ((u32::from(src[l]) >> (from - to)) & mask) as u8)
    } else {
        bytes32(|l| ((u32::from(src[l]) << (to - from)) & mask) as u8)
    }
}

/// The codes of a 4-bit plane (q4_k, q5_k's low bits): chunk `2p + s` is nibble `s` of
/// `qs[32p .. 32p + 32]`.
#[inline(always)]
pub fn nibbles(qs: &[u8; QK_K / 2], c: usize) -> [u8; 32] {
    field(&qs.as_chunks::<32>().0[c / 2], 4 * (c as u32 % 2), 4, 0)
}

/// The codes of a 2-bit plane (q2_k, q3_k's low bits, tq2_0, q6_k's high bits): chunk
/// `4h + k` is bits `2k..2k+2` of `qs[32h .. 32h + 32]`.
#[inline(always)]
pub fn crumbs(qs: &[u8; QK_K / 4], c: usize) -> [u8; 32] {
    field(&qs.as_chunks::<32>().0[c / 4], 2 * (c as u32 % 4), 2, 0)
}

/// Bit `c` of each byte of a high-bit mask (q3_k's `hmask`, q5_k's `qh`: element `i` at bit
/// `i / 32` of byte `i % 32`), moved to bit `to`.
#[inline(always)]
pub fn mask_bits(mask: &[u8; 32], c: usize, to: u32) -> [u8; 32] {
    field(mask, c as u32, 1, to)
}

/// `a | b` bytewise.
#[inline(always)]
pub fn or(a: [u8; 32], b: [u8; 32]) -> [u8; 32] {
    bytes32(|l| a[l] | b[l])
}

/// Implements `NativeDot` with q8_k activations through [`q8k_vec_dot`] (`signed: ...`,
/// formats with [`Q8KDot`]) or [`q8k_codes_vec_dot`] (formats with [`Q8KCodes`], which also
/// get the multi-row mat-mul kernel).
#[macro_export]
macro_rules! q8k_native_dot {
    (signed: $($fmt:ty),+ $(,)?) => {$(
        impl qforge_core::NativeDot for $fmt {
            type Act = $crate::Q8K;

            fn vec_dot(w: &[<Self as qforge_core::BlockFormat>::Block], a: &[$crate::BlockQ8K]) -> f32 {
                $crate::dot::q8k_vec_dot::<Self>(w, a)
            }
        }
    )+};
    ($($fmt:ty),+ $(,)?) => {$(
        impl qforge_core::NativeDot for $fmt {
            type Act = $crate::Q8K;

            fn vec_dot(w: &[<Self as qforge_core::BlockFormat>::Block], a: &[$crate::BlockQ8K]) -> f32 {
                $crate::dot::q8k_codes_vec_dot::<Self>(w, a)
            }

            fn vec_dot_rows(
                w: &[<Self as qforge_core::BlockFormat>::Block],
                a: &[&[$crate::BlockQ8K]],
                out: &mut [f32],
            ) {
                $crate::dot::q8k_codes_vec_dot_rows::<Self>(w, a, out)
            }

            fn vec_dot_weight_rows(
                w: &[<Self as qforge_core::BlockFormat>::Block],
                a: &[$crate::BlockQ8K],
                out: &mut [f32],
            ) {
                $crate::dot::q8k_codes_vec_dot_weight_rows::<Self>(w, a, out)
            }

            fn vec_dot_tile(
                w: &[<Self as qforge_core::BlockFormat>::Block],
                n: usize,
                a: &[&[$crate::BlockQ8K]],
                out: &mut [f32],
                stride: usize,
            ) -> bool {
                $crate::packed::plain_tile::<Self>(w, n, a, out, stride)
            }

            const TILE_ROWS: usize = $crate::packed::PLAIN_TILE_ROWS;

            $crate::packed_native_dot_items!();
        }
    )+};
}

/// The packed-layout items of a `NativeDot` impl for a [`PackedCodes`](crate::packed::PackedCodes)
/// format against q8_k (`PACKING`, `pack`, `packed_dot`, `packed_dot_rows`, all through
/// [`crate::packed`]): the K-quants' and tq's (from [`q8k_native_dot`]) and the grid
/// I-quants' (`qforge-iq`).
#[macro_export]
macro_rules! packed_native_dot_items {
    () => {
        const PACKING: Option<qforge_core::Packing> = Some(qforge_core::Packing {
            rows: $crate::packed::ROWS,
            block_bytes: $crate::packed::Layout::of::<Self>().size,
        });

        fn pack(w: &[<Self as qforge_core::BlockFormat>::Block], rows: usize, n: usize) -> Vec<u8> {
            $crate::packed::pack::<Self>(w, rows, n)
        }

        fn packed_dot(p: &[u8], n: usize, a: &[$crate::BlockQ8K], out: &mut [f32]) -> bool {
            $crate::packed::dot_groups::<Self>(p, n, a, out);
            true
        }

        fn packed_dot_rows(p: &[u8], n: usize, a: &[&[$crate::BlockQ8K]], out: &mut [f32]) -> bool {
            $crate::packed::dot_groups_rows::<Self>(p, n, a, out);
            true
        }
    };
}
