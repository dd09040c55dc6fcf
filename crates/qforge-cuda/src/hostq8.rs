//! The int8 GEMM of the GGUF formats with an integer dot (`kernels-cuda/gemm_q8.cuh`)
//! compiled **for the host**: the native-activation quantizer and the tile loop the GPU runs,
//! with `warp.cuh`'s host m16n8k32 mma, behind safe wrappers. The tests compare them with the
//! CPU's `--act-quant native` mat-mul; nothing here needs a GPU.

use qforge_core::{DType, QuantError, QuantTensor};

/// One 32-element unit of quantized activations as the int8 GEMM reads them (the device's
/// `qf_block_q8_1`): `d` the activation format's stored scale widened to f32, `s` its stored
/// sum (q8_1) or `d·Σqs`, and the codes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ActUnit {
    /// The unit's scale.
    pub d: f32,
    /// The unit's sum.
    pub s: f32,
    /// The 32 codes.
    pub qs: [i8; 32],
}

/// `(x, codes, ds, k, units, lda, m)` of a host-compiled native-activation quantizer: m rows
/// of `lda` codes and `lda / 32` (d, s) pairs.
pub type QuantizeAct8Fn = unsafe extern "C" fn(*const f32, *mut i8, *mut f32, i64, i64, i64, i64);
/// `(codes, ds, w, y, m, n, k, lda, units, splits, out, inst)` of a host-compiled int8 GEMM
/// (`out`: 0 f32, 1 f16, 2 bf16; `inst`: the instance of `qforge_tiling::I8_GEMM_TILES`; with
/// `splits` > 1, split z's f32 partial sums at `y + z·m·n`).
pub type GemmQ8Fn = unsafe extern "C" fn(
    *const i8,
    *const f32,
    *const u8,
    *mut core::ffi::c_void,
    i64,
    i64,
    i64,
    i64,
    i64,
    i32,
    i32,
    i32,
);

/// One format's host-compiled int8 GEMM and its activation quantizer.
#[derive(Clone, Copy, Debug)]
pub struct Q8Fns {
    /// The registered format's name.
    pub format: &'static str,
    /// Its native activations' quantizer.
    pub quantize: QuantizeAct8Fn,
    /// The GEMM.
    pub gemm: GemmQ8Fn,
}

include!(concat!(env!("OUT_DIR"), "/hostq8_fns.rs"));

/// The host int8 GEMM of a registered format, if it has one.
pub fn get(format: &str) -> Option<&'static Q8Fns> {
    HOST_Q8.iter().find(|h| h.format == format)
}

/// Whether the format's device header provides `codes32` (C++ detection, compiled for the
/// host); `None` for a format without device code.
pub fn has_codes32(format: &str) -> Option<bool> {
    // SAFETY: the probe takes no arguments and returns a constant.
    HOST_CODES32.iter().find(|(f, _)| *f == format).map(|(_, probe)| unsafe { probe() } != 0)
}

fn dim(v: usize) -> Result<i64, QuantError> {
    i64::try_from(v).map_err(|_| QuantError::Overflow { what: "gemm dimension" })
}

/// The activation row stride of the int8 GEMM: the weight row's padded length (`units` × 32)
/// rounded up to whole 128-column k-steps (the tile loop copies whole k-steps of codes).
pub const fn q8_lda(units: usize) -> usize {
    (units * 32).div_ceil(128) * 128
}

impl Q8Fns {
    /// `m` rows of `k` activations quantized by the device quantizer into `units` units per
    /// row (`codegen::q8_units`), as the GEMM reads them: m × [`q8_lda`] codes and m ×
    /// lda / 32 (d, s) pairs (zeros past `units`).
    pub fn quantize_raw(&self, x: &[f32], m: usize, k: usize, units: usize) -> Result<(Vec<i8>, Vec<f32>), QuantError> {
        if Some(x.len()) != m.checked_mul(k) || units * 32 < k {
            return Err(QuantError::ShapeMismatch {
                what: "activations (m × k)",
                expected: m.saturating_mul(k),
                actual: x.len(),
            });
        }
        let lda = q8_lda(units);
        let len = m.checked_mul(lda).ok_or(QuantError::Overflow { what: "q8 activations" })?;
        // NaN / 0x7f fill: what the quantizer fails to write fails the checks.
        let (mut codes, mut ds) = (vec![0x7f_i8; len], vec![f32::NAN; len / 16]);
        // SAFETY: x holds m × k f32 (checked); codes has m × lda bytes and ds m × lda / 32 pairs,
        // all the quantizer writes (units · 32 is whole activation blocks: q8_units checked it).
        unsafe {
            (self.quantize)(x.as_ptr(), codes.as_mut_ptr(), ds.as_mut_ptr(), dim(k)?, dim(units)?, dim(lda)?, dim(m)?)
        };
        Ok((codes, ds))
    }

    /// [`Q8Fns::quantize_raw`] as `units` [`ActUnit`]s per row (the padding past them dropped).
    pub fn quantize_acts(&self, x: &[f32], m: usize, k: usize, units: usize) -> Result<Vec<ActUnit>, QuantError> {
        let (codes, ds) = self.quantize_raw(x, m, k, units)?;
        let lda = q8_lda(units);
        Ok((0..m * units)
            .map(|i| {
                let (r, u) = (i / units, i % units);
                let c = &codes[r * lda + 32 * u..r * lda + 32 * u + 32];
                let p = 2 * (r * lda / 32 + u);
                ActUnit { d: ds[p], s: ds[p + 1], qs: std::array::from_fn(|j| c[j]) }
            })
            .collect())
    }

    /// `y = x · Wᵀ` with `x` (m × K f32) quantized by the device quantizer, on the instance and
    /// K splits the device would choose on an H100 (132 multiprocessors); m × N values of
    /// `out` as little-endian bytes.
    pub fn gemm(&self, w: &QuantTensor<'_>, x: &[f32], m: usize, out: DType) -> Result<Vec<u8>, QuantError> {
        let tile = qforge_tiling::i8_tile(m as u64);
        let t = &qforge_tiling::I8_GEMM_TILES[tile];
        let splits = qforge_tiling::i8_splits(t, m as u64, w.rows() as u64, w.cols() as u64, 132);
        self.gemm_on(w, x, m, out, tile, splits as usize)
    }

    /// [`Q8Fns::gemm`] on instance `tile` with K cut into `splits` ranges of whole 128-column
    /// k-steps: each range's f32 partial sums, then [`crate::host::reduce_splits`] (the host
    /// mirror of the device's `qforge_reduce_splits_<out>`).
    pub fn gemm_on(
        &self,
        w: &QuantTensor<'_>,
        x: &[f32],
        m: usize,
        out: DType,
        tile: usize,
        splits: usize,
    ) -> Result<Vec<u8>, QuantError> {
        let (n, k) = (w.rows(), w.cols());
        let units = crate::codegen::q8_units(w.format(), k)?;
        let (codes, ds) = self.quantize_raw(x, m, k, units)?;
        let mut y = crate::host::SplitOut::new(m, n, out, tile, qforge_tiling::I8_GEMM_TILES.len(), splits)?;
        // SAFETY: codes / ds hold m × lda codes and m × lda / 32 pairs (from the quantizer); w
        // holds n rows of units · 32 / BLOCK blocks (QuantTensor::new checked its rows against
        // the format's layout, and q8_units that it is row blocks); y has room for every element
        // the wrapper writes (splits × m × n of the type it is told), 4-byte aligned; `tile` is
        // an instance (checked by SplitOut::new).
        unsafe {
            (self.gemm)(
                codes.as_ptr(),
                ds.as_ptr(),
                w.rows_data().as_ptr(),
                y.ptr(),
                dim(m)?,
                dim(n)?,
                dim(k)?,
                dim(q8_lda(units))?,
                dim(units)?,
                y.splits_arg,
                y.out_arg,
                tile as i32,
            )
        };
        Ok(y.finish())
    }
}
