//! qforge-fp8: FP8 weights with one f32 scale per 128×128 block — DeepSeek-V3's layout —
//! in the two OCP encodings, `fp8_e4m3` (e4m3fn: max 448, no Inf) and `fp8_e5m2` (max 57344).
//!
//! A tensor of N rows × K columns is N·K value bytes (row-major, one byte per element, no
//! padding) followed by its `scale_inv` grid: `ceil(N/128) × ceil(K/128)` little-endian f32,
//! row-major ([`grid`]). That is the raw file layout the CLI reads and writes; the values are
//! safetensors' `weight`, the grid its `weight_scale_inv`.
//!
//! * Quantize ([`Format::quantize_aux`] then [`Format::quantize_row_at`]): per block
//!   `s = amax / MAX` in f32 over the block's real elements (1 for an all-zero block), then
//!   `q = fp8_rne_saturating(x / s)`.
//! * Dequantize ([`Format::dequant_row_at`]): `x = fp8_to_f32(q) · s` in f32; f16 / bf16 are
//!   the round-to-nearest-even of that f32.
//! * The layout ([`Format::layout`], `Layout::Grid`, tile size [`grid::BLOCK`] defined once)
//!   says all of this to the layers above, which never name these formats.
//! * A row standing alone ([`Format::dequant_row`] / [`Format::quantize_row`]) is a 1-row
//!   tensor: its values, then its grid row (`ceil(K/128)` f32).
//! * Native dot ([`Format::dot_row`], `ActKind::Fp8x128`): e4m3 activations with one scale per
//!   128 elements, f32 partial sums per 128-column block promoted with both scales
//!   (DeepGEMM-style). Layouts and semantics: `docs/formats/fp8.md`.
#![deny(unsafe_code)]

pub mod codec;
pub mod grid;
mod rows;
#[cfg(target_arch = "x86_64")]
mod simd;
#[cfg(target_arch = "x86_64")]
mod simd_dot;

/// What [`codec`] rounds with (its build-script copy, which renders only the tables, takes
/// std's): `qforge_core::round::round_ties_even`, the same bits as `f32::round_ties_even`
/// without the libm call a plain x86-64 build makes of it.
mod rounding {
    pub(crate) use qforge_core::round::round_ties_even;
}

pub use codec::{E4m3, E5m2, Fp8Kind, from_f32, to_f32};

use grid::BLOCK;
use qforge_core::{
    ActKind, ActRow, CudaDeviceCode, Elem, ElemType, Format, FormatDesc, Layout, OutRow, QuantError, Role, bf16,
    check_row_input, f16,
};
use std::marker::PhantomData;

/// The family's CUDA device code: the code tables rendered from [`codec`] by build.rs, then
/// `cuda/fp8.cuh` (a grid format, `kernels-cuda/README.md`).
const CUDA_HEADER: &str =
    concat!(include_str!(concat!(env!("OUT_DIR"), "/fp8_tables.cuh")), include_str!("../cuda/fp8.cuh"));

/// The device code's traits struct for `K` (`qf_<name>`; qforge-cuda's tests check the name).
const fn cuda_traits<K: Fp8Kind>() -> &'static str {
    if K::IEEE_SPECIALS { "qf_fp8_e5m2" } else { "qf_fp8_e4m3" }
}

/// The grid values' encoding for `K`.
const fn elem<K: Fp8Kind>() -> ElemType {
    if K::IEEE_SPECIALS { ElemType::F8E5M2 } else { ElemType::F8E4M3 }
}

/// An FP8 format with one f32 scale per `ROWS × 128` tile: the weight formats have
/// 128 × 128 tiles ([`FP8_E4M3`], [`FP8_E5M2`]); [`FP8_E4M3_ACT`] (1 × 128) quantizes
/// activations for the native dot.
pub struct Fp8Format<K: Fp8Kind, const ROWS: usize = BLOCK>(PhantomData<fn() -> K>);

impl<K: Fp8Kind, const ROWS: usize> Fp8Format<K, ROWS> {
    /// The format as a value, for a `FORMATS` list or a `static` such as [`FP8_E4M3`].
    pub const NEW: Self = Fp8Format(PhantomData);

    /// The descriptor: one byte per value ("blocks" of one element); the tiles and the
    /// grid are in [`Fp8Format::LAYOUT`]. Only the registered weight formats carry device
    /// code.
    pub const DESC: FormatDesc = FormatDesc {
        name: if ROWS == BLOCK { K::NAME } else { "fp8_e4m3_1x128" },
        family: "fp8",
        ggml_type: None,
        block_size: 1,
        block_bytes: 1,
        role: if ROWS == BLOCK { Role::Weight } else { Role::Activation },
        dot_type: None,
        summary: K::SUMMARY,
        cuda: if ROWS == BLOCK {
            Some(CudaDeviceCode { header: CUDA_HEADER, header_file: "fp8.cuh", traits: cuda_traits::<K>() })
        } else {
            None
        },
    };

    /// The tensor layout: values, then the f32 grid of `ROWS × 128` tiles.
    pub const LAYOUT: Layout = grid::layout(elem::<K>(), ROWS);

    fn check_len(what: &'static str, expected: usize, actual: usize) -> Result<(), QuantError> {
        if expected == actual { Ok(()) } else { Err(QuantError::ShapeMismatch { what, expected, actual }) }
    }

    /// Each activation row `(codes, scales)` fits a weight row of `len` values.
    fn check_acts(len: usize, rows: &[(&[u8], &[f32])]) -> Result<(), QuantError> {
        for (q, scales) in rows {
            Self::check_len("fp8 activation elements for the weight row", len, q.len())?;
            Self::check_len("fp8 activation scales (one per 128 elements)", len.div_ceil(BLOCK), scales.len())?;
        }
        Ok(())
    }

    #[inline(always)]
    fn decode_into<O: Elem>(bytes: &[u8], scales: impl Iterator<Item = f32>, out: &mut [O]) {
        for ((q, o), s) in bytes.chunks(BLOCK).zip(out.chunks_mut(BLOCK)).zip(scales) {
            for (&c, o) in q.iter().zip(o) {
                *o = O::from_f32(to_f32::<K>(c) * s);
            }
        }
    }

    /// A row standing alone (a `1 × n` tensor): `(values, grid row)`.
    fn split_alone(&self, bytes_len: usize, n: usize) -> Result<usize, QuantError> {
        Self::check_len("fp8 bytes of a 1-row tensor (values + scale grid row)", self.tensor_bytes(1, n)?, bytes_len)?;
        Ok(n)
    }
}

impl<K: Fp8Kind, const ROWS: usize> Format for Fp8Format<K, ROWS> {
    fn desc(&self) -> &'static FormatDesc {
        &Self::DESC
    }

    fn layout(&self) -> Layout {
        Self::LAYOUT
    }

    /// f16 / bf16 rows are rounded in registers (`simd.rs`), with no f32 pass.
    fn direct_16bit(&self) -> bool {
        true
    }

    /// The row as a 1-row tensor: its `n` values, then its `ceil(n/128)` f32 scales.
    fn dequant_row(&self, row: &[u8], out: OutRow<'_>) -> Result<(), QuantError> {
        let n = self.split_alone(row.len(), out.len())?;
        let (values, grid) = row.split_at(n);
        self.dequant_row_at(values, 0, grid, out)
    }

    /// The row as a 1-row tensor: its grid row ([`Format::quantize_aux`] of a `1 × n`
    /// tensor) after the values.
    fn quantize_row(&self, x: &[f32], weights: Option<&[f32]>, out: &mut [u8]) -> Result<(), QuantError> {
        let n = self.split_alone(out.len(), x.len())?;
        let (values, grid) = out.split_at_mut(n);
        self.quantize_aux(x, 1, n, grid)?;
        self.quantize_row_at(x, weights, 0, grid, values)
    }

    /// The grid: per tile (partial at the edges: real elements only) `s = amax / MAX` in
    /// f32, 1 for an all-zero tile.
    fn quantize_aux(&self, x: &[f32], rows: usize, cols: usize, aux: &mut [u8]) -> Result<(), QuantError> {
        let n = rows.checked_mul(cols).ok_or(QuantError::Overflow { what: "element count" })?;
        Self::check_len("fp8 input elements (rows x cols)", n, x.len())?;
        Self::check_len("fp8 scale grid bytes", self.aux_bytes(rows, cols)?, aux.len())?;
        // Checked here, before any scale is computed: an Inf would otherwise make a grid
        // entry infinite, and a finite row of the same band would report that instead.
        check_row_input(x, None)?;
        if n == 0 {
            return Ok(());
        }
        let gc = cols.div_ceil(BLOCK);
        for (xs, out) in x.chunks(ROWS * cols.max(1)).zip(aux.chunks_mut(gc * 4)) {
            let mut amax = vec![0f32; gc];
            for row in xs.chunks(cols.max(1)) {
                for (m, blk) in amax.iter_mut().zip(row.chunks(BLOCK)) {
                    *m = blk.iter().fold(*m, |m, v| m.max(v.abs()));
                }
            }
            for (o, m) in out.chunks_exact_mut(4).zip(amax) {
                o.copy_from_slice(&grid::scale_for(m, K::MAX).to_le_bytes());
            }
        }
        Ok(())
    }

    /// `q = fp8_rne_saturating(x / s)` with the row's block scales. Importance weights are
    /// validated but cannot change anything: every value is rounded to its nearest code on
    /// its own, and the scales (DeepSeek's amax rule) are fixed by `quantize_aux`.
    fn quantize_row_at(
        &self,
        x: &[f32],
        weights: Option<&[f32]>,
        row: usize,
        aux: &[u8],
        out: &mut [u8],
    ) -> Result<(), QuantError> {
        Self::check_len("fp8 row bytes", x.len(), out.len())?;
        check_row_input(x, weights)?;
        if x.is_empty() {
            return Ok(());
        }
        for (kb, ((xs, qs), s)) in
            x.chunks(BLOCK).zip(out.chunks_mut(BLOCK)).zip(grid::row_scales(aux, row, x.len(), ROWS)?).enumerate()
        {
            if !(s.is_finite() && s > 0.0) {
                return Err(QuantError::Unsupported {
                    format: Self::DESC.name,
                    reason: format!("scale grid entry ({}, {kb}) = {s} is not a finite positive number", row / ROWS),
                });
            }
            // Compiled for the CPU's SIMD level: `from_f32` is branch-free.
            qforge_core::cpu::dispatch(
                #[inline(always)]
                || {
                    for (&v, q) in xs.iter().zip(qs.iter_mut()) {
                        *q = from_f32::<K>(v / s);
                    }
                },
            );
        }
        Ok(())
    }

    /// `x = fp8_to_f32(q) · s` in f32, then `O::from_f32` (RNE for f16 / bf16).
    fn dequant_row_at(&self, bytes: &[u8], row: usize, aux: &[u8], out: OutRow<'_>) -> Result<(), QuantError> {
        Self::check_len("fp8 row bytes", out.len(), bytes.len())?;
        if bytes.is_empty() {
            return Ok(());
        }
        let scales = grid::row_scales(aux, row, bytes.len(), ROWS)?;
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = qforge_simd::Avx2::detect() {
            match out {
                OutRow::F32(o) => simd::decode_row::<K, f32>(avx2, bytes, scales, o),
                OutRow::F16(o) => simd::decode_row::<K, f16>(avx2, bytes, scales, o),
                OutRow::Bf16(o) => simd::decode_row::<K, bf16>(avx2, bytes, scales, o),
            }
            return Ok(());
        }
        // Compiled for the CPU's SIMD level (plain Rust, vectorized there).
        match out {
            OutRow::F32(o) => qforge_core::cpu::dispatch(
                #[inline(always)]
                || Self::decode_into::<f32>(bytes, scales, o),
            ),
            OutRow::F16(o) => qforge_core::cpu::dispatch(
                #[inline(always)]
                || Self::decode_into::<f16>(bytes, scales, o),
            ),
            OutRow::Bf16(o) => qforge_core::cpu::dispatch(
                #[inline(always)]
                || Self::decode_into::<bf16>(bytes, scales, o),
            ),
        }
        Ok(())
    }

    fn native_act(&self) -> ActKind {
        ActKind::Fp8x128
    }

    /// [`FP8_E4M3_ACT`] for [`ActKind::Fp8x128`] (both encodings take e4m3 activations).
    fn act_format(&self, kind: ActKind) -> Option<&'static dyn Format> {
        (kind == ActKind::Fp8x128).then_some(&FP8_E4M3_ACT as &dyn Format)
    }

    /// For each 128-column block `kb`: `partial = Σ fp8(w)·e4m3(a)` in f32 (products exact,
    /// summed in 16 lanes, lane `k % 16`, then the lanes in order), then
    /// `acc += partial · s_w[row/128][kb] · s_a[kb]` in f32 (DeepGEMM's promotion every 128).
    fn dot_row(&self, bytes: &[u8], row: usize, aux: &[u8], act: ActRow<'_>) -> Option<Result<f32, QuantError>> {
        let ActRow::Fp8 { q, scales } = act else { return None };
        Some((|| {
            Self::check_len("fp8 activation elements for the weight row", bytes.len(), q.len())?;
            Self::check_len("fp8 activation scales (one per 128 elements)", bytes.len().div_ceil(BLOCK), scales.len())?;
            if bytes.is_empty() {
                return Ok(0.0);
            }
            let w_scales = grid::row_scales(aux, row, bytes.len(), ROWS)?;
            Ok(row_dot::<K>(bytes, q, w_scales, scales))
        })())
    }

    /// [`Format::dot_row`] with each activation row: the weight row decoded once, the
    /// activation rows dotted with it four at a time (`rows.rs`).
    fn dot_rows(
        &self,
        bytes: &[u8],
        row: usize,
        aux: &[u8],
        acts: &[ActRow<'_>],
        out: &mut [f32],
    ) -> Option<Result<(), QuantError>> {
        let rows = fp8_rows(acts)?;
        Some((|| {
            Self::check_len("dot outputs for the activation rows", acts.len(), out.len())?;
            Self::check_acts(bytes.len(), &rows)?;
            rows::act_rows::<K>(bytes, row, aux, ROWS, &rows, out)
        })())
    }

    /// [`Format::dot_row`] of each weight row against each activation row (mat-mul): every
    /// row of either side decoded to f32 once per call, then four weight rows against four
    /// activation rows per pass (`rows::tile`).
    fn dot_tile(
        &self,
        bytes: &[u8],
        row_bytes: usize,
        row0: usize,
        aux: &[u8],
        acts: &[ActRow<'_>],
        out: &mut [f32],
        stride: usize,
    ) -> Option<Result<(), QuantError>> {
        let rows = fp8_rows(acts)?;
        Some((|| {
            if let Some(e) = qforge_core::tile_mismatch(bytes.len(), row_bytes, acts.len(), out.len(), stride) {
                return Err(e);
            }
            Self::check_acts(row_bytes, &rows)?;
            #[cfg(target_arch = "x86_64")]
            if rows::tile::<K>(bytes, row_bytes, row0, aux, ROWS, &rows, out, stride)? {
                return Ok(());
            }
            for (i, w) in bytes.chunks_exact(row_bytes.max(1)).enumerate() {
                rows::act_rows::<K>(w, row0 + i, aux, ROWS, &rows, &mut out[i * stride..][..rows.len()])?;
            }
            Ok(())
        })())
    }

    /// [`Format::dot_row`] of each weight row: the activation row decoded once, the weight
    /// rows dotted with it four at a time (`rows.rs`).
    fn dot_weight_rows(
        &self,
        bytes: &[u8],
        row_bytes: usize,
        row0: usize,
        aux: &[u8],
        act: ActRow<'_>,
        out: &mut [f32],
    ) -> Option<Result<(), QuantError>> {
        let ActRow::Fp8 { q, scales } = act else { return None };
        Some((|| {
            let want =
                out.len().checked_mul(row_bytes).ok_or(QuantError::Overflow { what: "fp8 weight rows bytes" })?;
            Self::check_len("fp8 weight rows bytes (rows x row bytes)", want, bytes.len())?;
            Self::check_len("fp8 activation elements for the weight row", row_bytes, q.len())?;
            Self::check_len("fp8 activation scales (one per 128 elements)", row_bytes.div_ceil(BLOCK), scales.len())?;
            rows::weight_rows::<K>(bytes, row_bytes, row0, aux, ROWS, (q, scales), out)
        })())
    }
}

/// The fp8 activation rows of `acts` as `(codes, scales)`: `None` if one is of another kind.
fn fp8_rows<'a>(acts: &[ActRow<'a>]) -> Option<Vec<(&'a [u8], &'a [f32])>> {
    acts.iter().map(|a| if let ActRow::Fp8 { q, scales } = *a { Some((q, scales)) } else { None }).collect()
}

/// The whole row: [`row_dot_portable`], compiled for the CPU's SIMD level
/// ([`qforge_core::cpu::dispatch`]: 8 lanes per instruction with AVX2, 16 with AVX-512; the
/// same operations in the same order, so the same bits).
fn row_dot<K: Fp8Kind>(w: &[u8], a: &[u8], w_scales: impl Iterator<Item = f32>, a_scales: &[f32]) -> f32 {
    qforge_core::cpu::dispatch(
        #[inline(always)]
        || row_dot_portable::<K>(w, a, w_scales, a_scales),
    )
}

/// `acc += block_dot(w, a) · s_w · s_a` per 128-element block, in block order.
#[inline(always)]
fn row_dot_portable<K: Fp8Kind>(w: &[u8], a: &[u8], w_scales: impl Iterator<Item = f32>, a_scales: &[f32]) -> f32 {
    let mut acc = 0f32;
    for (((w, a), sw), &sa) in w.chunks(BLOCK).zip(a.chunks(BLOCK)).zip(w_scales).zip(a_scales) {
        acc += block_dot::<K>(w, a) * sw * sa;
    }
    acc
}

#[cfg(test)]
mod level_tests {
    use super::*;
    use qforge_core::rand::Rng;

    /// Rows of every length 0..=300 (partial last blocks) with every code, NaN and infinity
    /// codes included: every SIMD level the machine has gives the portable bits (or both NaN).
    fn same_bits<K: Fp8Kind>(seed: u64) {
        let mut rng = Rng::new(seed);
        for len in 0..=300usize {
            let nb = len.div_ceil(crate::BLOCK);
            let w: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8 & if len % 3 == 0 { 0xFF } else { 0xF7 }).collect();
            let a: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8 & 0xF7).collect();
            let ws: Vec<f32> = (0..nb).map(|i| 0.25 + i as f32).collect();
            let as_: Vec<f32> = (0..nb).map(|i| 1.5 - i as f32 / 7.0).collect();
            let want = row_dot_portable::<K>(&w, &a, ws.iter().copied(), &as_);
            for level in qforge_core::cpu::testable_levels() {
                let got = qforge_core::cpu::with_level(level, || row_dot::<K>(&w, &a, ws.iter().copied(), &as_));
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "len {len} at {}: {got:e} vs {want:e}",
                    level.name()
                );
            }
        }
    }

    #[test]
    fn every_level_equals_portable() {
        same_bits::<E4m3>(1);
        same_bits::<E5m2>(2);
    }
}

/// Lanes of a block's partial sum in [`block_dot`].
const LANES: usize = 16;

/// `Σ fp8(w[k])·e4m3(a[k])` over one block (≤ 128 values) in f32: element `k` goes to lane
/// `k % 16`, then the lanes are added in order. Vectorizes: codes are decoded arithmetically
/// ([`decode`]), not through a 256-entry table (an indexed load per element becomes a slow
/// gather, or no vectorization at all).
#[inline(always)]
fn block_dot<K: Fp8Kind>(w: &[u8], a: &[u8]) -> f32 {
    #[inline(always)]
    fn step<K: Fp8Kind>(lanes: &mut [f32; LANES], w: &[u8; LANES], a: &[u8; LANES]) {
        for l in 0..LANES {
            lanes[l] += decode::<K>(w[l]) * decode::<E4m3>(a[l]);
        }
    }
    let mut lanes = [0f32; LANES];
    let (wc, wt) = w.as_chunks::<LANES>();
    let (ac, at) = a.as_chunks::<LANES>();
    for (w, a) in wc.iter().zip(ac) {
        step::<K>(&mut lanes, w, a);
    }
    if !wt.is_empty() {
        // The tail as a whole step with zero codes after it: their products are +0, and
        // adding +0 leaves every lane as it was (a lane is never -0: it starts at +0 and
        // x + y is -0 only for x = y = -0). One code path keeps the lanes in registers (a
        // lane indexed by the tail's position kept them in memory: a store and reload per
        // step, half the speed with AVX-512).
        let (mut wp, mut ap) = ([0u8; LANES], [0u8; LANES]);
        wp[..wt.len()].copy_from_slice(wt);
        ap[..at.len().min(wt.len())].copy_from_slice(&at[..at.len().min(wt.len())]);
        step::<K>(&mut lanes, &wp, &ap);
    }
    let mut s = 0f32;
    for v in lanes {
        s += v;
    }
    s
}

/// [`to_f32`] without the table, branch-free: the magnitude bits placed in an f32's exponent
/// and mantissa fields and scaled by `2^(127 − BIAS)` (exact; fp8 subnormals land on f32
/// subnormals and come out right), the specials (e4m3's NaN, e5m2's Inf / NaN) selected, the
/// sign OR-ed in. Equal to the table for all 256 codes (tested).
#[inline(always)]
fn decode<K: Fp8Kind>(c: u8) -> f32 {
    let mag = u32::from(c & 0x7F);
    let sign = u32::from(c & 0x80) << 24;
    let scale = f32::from_bits(((127 - K::BIAS + 127) as u32) << 23);
    let v = f32::from_bits(mag << (23 - K::MBITS)) * scale;
    let all_ones = 0x7F >> K::MBITS;
    let v = if K::IEEE_SPECIALS {
        if mag >> K::MBITS == all_ones {
            if mag & ((1 << K::MBITS) - 1) == 0 { f32::INFINITY } else { f32::NAN }
        } else {
            v
        }
    } else if mag == 0x7F {
        f32::NAN
    } else {
        v
    };
    f32::from_bits(v.to_bits() | sign)
}

/// `fp8_e4m3`.
pub static FP8_E4M3: Fp8Format<E4m3> = Fp8Format::NEW;
/// `fp8_e5m2`.
pub static FP8_E5M2: Fp8Format<E5m2> = Fp8Format::NEW;
/// e4m3 activations with one f32 scale per 1 × 128 tile (DeepSeek-V3 / DeepGEMM): what
/// [`ActKind::Fp8x128`] quantizes with (`Format::act_format`). Not registered: it is reached
/// through the weight formats.
pub static FP8_E4M3_ACT: Fp8Format<E4m3, 1> = Fp8Format::NEW;

/// This family's formats for the registry.
pub static FORMATS: &[&dyn Format] = &[&FP8_E4M3, &FP8_E5M2];

#[cfg(test)]
mod decode_tests {
    use super::*;

    #[test]
    fn decode_equals_the_table() {
        for c in 0..=255u8 {
            for (got, want) in [(decode::<E4m3>(c), to_f32::<E4m3>(c)), (decode::<E5m2>(c), to_f32::<E5m2>(c))] {
                assert_eq!(got.to_bits(), want.to_bits(), "{c:#x}: {got} {want}");
            }
        }
    }
}
