//! The packed layout of the grid I-quants and iq4_xs: each weight re-coded once, when a tensor
//! is packed, as a small code into the format's table of values, then `qforge-k`'s
//! row-interleaved kernel
//! ([`qforge_k::packed`]: 8 weight rows in the lanes of a register, the activation broadcast,
//! no horizontal sums).
//!
//! Every grid format's values come from a handful: iq2's grids hold only 8, 25 and 43 (signed:
//! six values), iq3_xxs's eight magnitudes and iq3_s's eight odd ones (sixteen signed), iq1's
//! `8g ± 1` for ternary `g` (six: `±1, ±7, ±9`); iq4_xs's are `kvalues_iq4nl` (sixteen, from
//! -127 to 113: more than `vpmaddubsw`'s unsigned 127 apart, so `qforge-k`'s AVX2 kernels dot
//! them signed, with the sign trick or, in the mat-mul tile, as `i16` pairs). So a value is a
//! 3- or 4-bit code `c` with value `TABLE[c] − ZERO`, and the block keeps its integer scale per
//! 16 or 32 values and its f16 `d` (times the format's `D_MUL`, a power of two). The packed dot
//! is then the same exact integers as the plain kernel's (`Σ scale·Σ value·q8`), summed in the
//! same f32 order (one exact total per block): the same bits. The plain mat-mul takes the
//! packed layout's tile kernel on the plain blocks ([`TileCodes`]: each block's values from the
//! row kernel's unpacking, plus `ZERO`).
//!
//! The codes take more room than the grid indices (iq2_xxs: 3 bits a weight and the scales
//! against 2.06), a trade for the CPU's mat-vec, which the grid lookups bound by instruction
//! throughput, not memory. iq4_xs keeps its size (4 bits and 8-bit scales against 4.25 bits).

use crate::common::QK_K;
use crate::tables::KVALUES_IQ4NL;
use crate::unpack::{KDot, SubBlocks};
use crate::{Iq1M, Iq1S, Iq2S, Iq2Xs, Iq2Xxs, Iq3S, Iq3Xxs, Iq4Xs};
use qforge_core::le::F16Le;
use qforge_k::dot::GROUPS;
use qforge_k::packed::{PackedCodes, TileCodes};

/// A grid format's (or iq4_xs's) values, ascending (at most 16).
pub(crate) trait GridValues: SubBlocks + PackedCodes {
    /// Every value the format's blocks can hold.
    const VALUES: &'static [i8];
}

/// `ZERO` of a value set: the unsigned form is `value − min`.
const fn zero_of(v: &[i8]) -> u8 {
    (-(v[0] as i16)) as u8
}

/// The unsigned form of each code's value (`TABLE[c] = VALUES[c] + ZERO`; unused codes 0).
const fn table_of(v: &[i8]) -> [u8; 16] {
    let mut t = [0u8; 16];
    let mut i = 0;
    while i < v.len() {
        t[i] = (v[i] as i16 - v[0] as i16) as u8;
        i += 1;
    }
    t
}

/// Bits a code needs for `n` values.
const fn bits_of(n: usize) -> u32 {
    if n <= 8 { 3 } else { 4 }
}

/// The code of every `i8` value (indexed by its byte) in `values`: the nearest value's, where
/// it is not one of them, which the tests show never happens (every value a block decodes to
/// is in its format's set). A table, so that packing costs a load per weight, not a search.
const fn code_table(values: &[i8]) -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut x = 0;
    while x < 256 {
        let value = x as u8 as i8 as i16;
        let (mut best, mut c) = (0, 1);
        while c < values.len() {
            if (values[c] as i16 - value).abs() < (values[best] as i16 - value).abs() {
                best = c;
            }
            c += 1;
        }
        t[x] = best as u8;
        x += 1;
    }
    t
}

/// `F`'s `d` and no `dmin`.
fn d_dmin<F: SubBlocks>(b: &F::Block) -> [F16Le; 2] {
    [F16Le(F::d_bits(b).to_le_bytes()), F16Le([0, 0])]
}

/// `F`'s integer scales (`2s + 1 ≤ 31`, iq4_xs's `-32..=31`: an `i8`), no mins.
fn scales<F: SubBlocks>(b: &F::Block) -> ([i8; GROUPS], [u8; GROUPS]) {
    (F::scales(b).map(|s| s.clamp(i8::MIN.into(), i8::MAX.into()) as i8), [0; GROUPS])
}

/// The codes of `F`'s values, unit by unit.
fn codes<F: GridValues>(b: &F::Block) -> [[u8; 32]; 8] {
    let mut v = [[0i8; 8]; QK_K / 8];
    let _ = <F as KDot>::ints(b, &mut v);
    let v: [[i8; 32]; 8] = bytemuck::cast(v);
    let table = const { &code_table(F::VALUES) };
    v.map(|unit| unit.map(|x| table[usize::from(x as u8)]))
}

/// `u` of every element of `b` (its value plus `ZERO`), for `qforge-k`'s tile kernel on plain
/// blocks: the row kernel's unpacking where `avx2` proves AVX2.
#[inline(always)]
fn tile_codes<F: SubBlocks + PackedCodes>(b: &F::Block, u: &mut [u8; QK_K], avx2: qforge_simd::Avx2) {
    #[cfg(target_arch = "x86_64")]
    crate::simd::tile_codes::<F>(b, u, <F as PackedCodes>::ZERO, avx2);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = avx2;
        let mut v = [[0i8; 8]; QK_K / 8];
        let _ = <F as KDot>::ints(b, &mut v);
        let v: [i8; QK_K] = bytemuck::cast(v);
        *u = v.map(|x| (x as u8).wrapping_add(<F as PackedCodes>::ZERO));
    }
}

/// iq2's grid bytes (8, 25, 43), signed.
const IQ2_VALUES: &[i8] = &[-43, -25, -8, 8, 25, 43];
/// iq1's `8g ± 1`.
const IQ1_VALUES: &[i8] = &[-9, -7, -1, 1, 7, 9];

macro_rules! grid_values {
    ($($fmt:ty: $values:expr, $group:literal;)*) => {$(
        impl GridValues for $fmt {
            const VALUES: &'static [i8] = $values;
        }

        impl PackedCodes for $fmt {
            const HAS_MINS: bool = false;
            const ZERO: u8 = zero_of($values);
            const UNIT_SCALES: bool = false;
            const CODE_BITS: u32 = bits_of($values.len());
            const SCALE_GROUP: usize = $group;
            const TABLE: Option<[u8; 16]> = Some(table_of($values));
            const D_MUL: f32 = <$fmt as SubBlocks>::D_MUL;

            fn d_dmin(b: &Self::Block) -> [F16Le; 2] {
                d_dmin::<Self>(b)
            }

            fn scales(b: &Self::Block) -> ([i8; GROUPS], [u8; GROUPS]) {
                scales::<Self>(b)
            }

            fn codes(b: &Self::Block) -> [[u8; 32]; 8] {
                codes::<Self>(b)
            }
        }

        impl TileCodes for $fmt {
            #[inline(always)]
            fn tile_codes(b: &Self::Block, u: &mut [u8; QK_K], avx2: qforge_simd::Avx2) {
                tile_codes::<Self>(b, u, avx2)
            }
        }
    )*};
}

grid_values! {
    Iq2Xxs: IQ2_VALUES, 32;
    Iq2Xs: IQ2_VALUES, 16;
    Iq2S: IQ2_VALUES, 16;
    Iq3Xxs: &[-62, -52, -44, -36, -28, -20, -12, -4, 4, 12, 20, 28, 36, 44, 52, 62], 32;
    Iq3S: &[-15, -13, -11, -9, -7, -5, -3, -1, 1, 3, 5, 7, 9, 11, 13, 15], 32;
    Iq1S: IQ1_VALUES, 32;
    Iq1M: IQ1_VALUES, 16;
    Iq4Xs: &KVALUES_IQ4NL, 32;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID};
    use qforge_core::NativeDot;
    use qforge_core::rand::Rng;
    use qforge_k::BlockQ8K;
    use qforge_k::packed::{Layout, dot_group_portable, dot_groups, dot_groups_rows, pack, unpack_codes};

    /// Every grid byte is one of its format's magnitudes.
    #[test]
    fn grids_hold_only_the_tables_values() {
        let mags = |v: &[i8]| v.iter().filter(|&&x| x > 0).map(|&x| x as u8).collect::<Vec<_>>();
        let check = |bytes: &mut dyn Iterator<Item = u8>, v: &[i8]| {
            let m = mags(v);
            for b in bytes {
                assert!(m.contains(&b), "grid byte {b} not in {m:?}");
            }
        };
        let b64 = |g: &'static [u64]| g.iter().flat_map(|w| w.to_le_bytes());
        check(&mut b64(&IQ2XXS_GRID), IQ2_VALUES);
        check(&mut b64(&IQ2XS_GRID), IQ2_VALUES);
        check(&mut b64(&IQ2S_GRID), IQ2_VALUES);
        check(&mut IQ3XXS_GRID.iter().flat_map(|w| w.to_le_bytes()), Iq3Xxs::VALUES);
        check(&mut IQ3S_GRID.iter().flat_map(|w| w.to_le_bytes()), Iq3S::VALUES);
    }

    /// Packed, every block's values and scales come back exactly (random raw blocks: every
    /// index, sign, shift and scale), in every row of the group.
    fn round_trip<F: GridValues>() {
        let mut rng = Rng::new(0x9e37_79b9 ^ F::VALUES.len() as u64);
        let l = Layout::of::<F>();
        let table = F::TABLE.expect("a table");
        for _ in 0..300 {
            let blocks: Vec<F::Block> =
                (0..8).map(|_| bytemuck::pod_read_unaligned(&rng.bytes(size_of::<F::Block>()))).collect();
            let p = pack::<F>(&blocks, 8, 1);
            for (r, b) in blocks.iter().enumerate() {
                let mut v = [[0i8; 8]; QK_K / 8];
                let scales = <F as KDot>::ints(b, &mut v);
                let v: [i8; QK_K] = bytemuck::cast(v);
                let u = unpack_codes::<F>(&p, r);
                for (e, (&c, &want)) in u.iter().zip(&v).enumerate() {
                    let got = i16::from(table[usize::from(c)]) - i16::from(F::ZERO);
                    assert_eq!(got, i16::from(want), "{} row {r} element {e}", F::DESC.name);
                }
                for k in 0..QK_K / l.group {
                    let got = p[l.sc + k * 8 + r] as i8;
                    assert_eq!(i16::from(got), scales[k * l.group / 16], "{} scale {k}", F::DESC.name);
                }
                assert_eq!(&p[l.d + 2 * r..][..2], &F::d_bits(b).to_le_bytes());
            }
        }
    }

    #[test]
    fn every_value_and_scale_survives_packing() {
        round_trip::<Iq2Xxs>();
        round_trip::<Iq2Xs>();
        round_trip::<Iq2S>();
        round_trip::<Iq3Xxs>();
        round_trip::<Iq3S>();
        round_trip::<Iq1S>();
        round_trip::<Iq1M>();
        round_trip::<Iq4Xs>();
    }

    /// `seed`'s random blocks of `F`: raw bytes (every index, sign, shift and scale), `d`
    /// finite unless `raw` (then NaN / Inf too).
    fn blocks<F: GridValues>(rng: &mut Rng, count: usize, raw: bool) -> Vec<F::Block> {
        (0..count)
            .map(|_| {
                loop {
                    let b: F::Block = bytemuck::pod_read_unaligned(&rng.bytes(size_of::<F::Block>()));
                    let d = <F as KDot>::d(&b);
                    if raw || (d.is_finite() && d.abs() < 1e3) {
                        break b;
                    }
                }
            })
            .collect()
    }

    /// A q8_k row of `n` blocks: edge quants (-128, 127) in some, `bsums` consistent with the
    /// quants unless `raw` (the kernel reads them as given).
    fn acts(rng: &mut Rng, n: usize, raw: bool) -> Vec<BlockQ8K> {
        (0..n)
            .map(|_| {
                let mut b: BlockQ8K = bytemuck::pod_read_unaligned(&rng.bytes(size_of::<BlockQ8K>()));
                if rng.next_u64().is_multiple_of(3) {
                    b.qs = std::array::from_fn(|_| [-128, 127, -1, 0, -127][(rng.next_u64() % 5) as usize]);
                }
                if !raw {
                    b.d = qforge_core::le::F32Le::new((rng.next_u64() % 1000) as f32 * 1e-5);
                    for (g, s) in b.bsums.iter_mut().enumerate() {
                        let sum: i32 = b.qs[16 * g..16 * g + 16].iter().map(|&q| i32::from(q)).sum();
                        *s = qforge_core::le::I16Le::new(sum as i16);
                    }
                }
                b
            })
            .collect()
    }

    /// The plain dot's exact value in f64 (`Σ_b d·D_MUL·a.d·Σ scale·Σ value·q8`) and the sum
    /// of its terms' magnitudes.
    fn exact<F: GridValues>(w: &[F::Block], a: &[BlockQ8K]) -> (f64, f64) {
        let (mut sum, mut mag) = (0f64, 0f64);
        for (b, a) in w.iter().zip(a) {
            let mut v = [[0i8; 8]; QK_K / 8];
            let scales = <F as KDot>::ints(b, &mut v);
            let v: [i8; QK_K] = bytemuck::cast(v);
            let d = f64::from(<F as KDot>::d(b)) * f64::from(a.d.get());
            for (g, s) in scales.iter().enumerate() {
                let dot: i64 = (16 * g..16 * g + 16).map(|i| i64::from(v[i]) * i64::from(a.qs[i])).sum();
                let t = d * (i64::from(*s) * dot) as f64;
                sum += t;
                mag += t.abs();
            }
        }
        (sum, mag)
    }

    /// Groups of rows against 1–23 activation rows: the dispatched kernel (several rows at a
    /// time, and one) equals the portable one bit for bit at every SIMD level the machine has
    /// and with none (raw scales, edge quants, inconsistent `bsums` included); with finite
    /// scales and consistent activations each row is the plain dot's exact value to f32
    /// rounding, and the plain kernel's result to twice that.
    fn kernels_agree<F: GridValues + NativeDot<Act = qforge_k::Q8K>>(seed: u64) {
        let check = || {
            let mut rng = Rng::new(seed);
            let l = Layout::of::<F>();
            for case in 0..120 {
                // Below and from the 8 activation rows at which AVX-512 VNNI takes the tile
                // kernel (`qforge_k`'s `simd::tile`), with rests 0, 1, 5 and 7 of its passes of
                // eight.
                let m = [1, 2, 3, 4, 5, 6, 8, 9, 13, 23][case % 10];
                let (nr, n) = (1 + case % 19, case % 5);
                let raw = case % 11 == 7;
                let w = blocks::<F>(&mut rng, nr * n, raw);
                let a: Vec<Vec<BlockQ8K>> = (0..m).map(|_| acts(&mut rng, n, raw)).collect();
                let p = pack::<F>(&w, nr, n);
                let len = nr.div_ceil(8) * 8;
                let mut all = vec![f32::NAN; m * len];
                let refs: Vec<&[BlockQ8K]> = a.iter().map(Vec::as_slice).collect();
                dot_groups_rows::<F>(&p, n, &refs, &mut all);
                for (mi, (a, got)) in a.iter().zip(all.chunks_exact(len)).enumerate() {
                    let mut one = vec![f32::NAN; len];
                    dot_groups::<F>(&p, n, a, &mut one);
                    for (g, got) in got.chunks_exact(8).enumerate() {
                        let want = dot_group_portable::<F>(&p[g * n * l.size..][..n * l.size], a);
                        for (r, (x, y)) in got.iter().zip(&want).enumerate() {
                            let name = F::DESC.name;
                            assert!(
                                same(*x, *y),
                                "{name} case {case} act {mi} row {}: {x:e} vs portable {y:e}",
                                g * 8 + r
                            );
                            assert!(same(*x, one[g * 8 + r]), "{name} case {case} act {mi}: vs one row");
                        }
                    }
                    if raw {
                        continue;
                    }
                    for (row, got) in got.iter().take(nr).enumerate() {
                        let wr = &w[row * n..][..n];
                        let (want, mag) = exact::<F>(wr, a);
                        let err = (f64::from(*got) - want).abs();
                        assert!(err <= 6e-6 * mag + 1e-30, "{} case {case}: {got:e} vs exact {want:e}", F::DESC.name);
                        let plain = F::vec_dot(wr, a);
                        let err = (f64::from(*got) - f64::from(plain)).abs();
                        assert!(
                            err <= 1.2e-5 * mag + 1e-30,
                            "{} case {case}: {got:e} vs plain {plain:e}",
                            F::DESC.name
                        );
                    }
                }
            }
        };
        for level in qforge_golden::needs::simd_levels() {
            qforge_core::cpu::with_level(level, check);
        }
        qforge_core::cpu::with_level(qforge_core::cpu::Level::Scalar, check);
    }

    fn same(x: f32, y: f32) -> bool {
        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
    }

    #[test]
    fn packed_kernels_equal_portable_and_exact() {
        kernels_agree::<Iq2Xxs>(1);
        kernels_agree::<Iq2Xs>(2);
        kernels_agree::<Iq2S>(3);
        kernels_agree::<Iq3Xxs>(4);
        kernels_agree::<Iq3S>(5);
        kernels_agree::<Iq1S>(6);
        kernels_agree::<Iq1M>(7);
        kernels_agree::<Iq4Xs>(8);
    }

    #[test]
    fn tables_fit_the_kernel() {
        fn check<F: GridValues>() {
            assert!(F::VALUES.windows(2).all(|w| w[0] < w[1]), "{}: ascending", F::DESC.name);
            assert!(F::VALUES.len() <= 1 << F::CODE_BITS);
            // `vpmaddubsw` takes unsigned `u ≤ 127`, or (the sign trick) signed values that are
            // never -128.
            let signed_ok = F::VALUES.iter().all(|&v| v != i8::MIN);
            assert!(qforge_k::packed::umax::<F>() <= 127 || signed_ok, "{}: no AVX2 dot for the table", F::DESC.name);
            assert_eq!(qforge_k::packed::umax::<F>() > 127, F::DESC.name == "iq4_xs");
        }
        check::<Iq2Xxs>();
        check::<Iq2Xs>();
        check::<Iq2S>();
        check::<Iq3Xxs>();
        check::<Iq3S>();
        check::<Iq1S>();
        check::<Iq1M>();
        check::<Iq4Xs>();
    }
}
