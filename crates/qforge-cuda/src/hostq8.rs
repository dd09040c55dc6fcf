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

/// `(x, act, k, units, m)` of a host-compiled native-activation quantizer.
pub type QuantizeAct8Fn = unsafe extern "C" fn(*const f32, *mut ActUnit, i64, i64, i64);
/// `(act, w, y, m, n, k, units, out)` of a host-compiled int8 GEMM (out: 0 f32, 1 f16, 2 bf16).
pub type GemmQ8Fn = unsafe extern "C" fn(*const ActUnit, *const u8, *mut u8, i64, i64, i64, i64, i32);

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

impl Q8Fns {
    /// `m` rows of `k` activations quantized by the device quantizer into `units` units per
    /// row (`codegen::q8_units`).
    pub fn quantize_acts(&self, x: &[f32], m: usize, k: usize, units: usize) -> Result<Vec<ActUnit>, QuantError> {
        if Some(x.len()) != m.checked_mul(k) || units * 32 < k {
            return Err(QuantError::ShapeMismatch { what: "activations (m × k)", expected: m * k, actual: x.len() });
        }
        let mut act = vec![ActUnit::default(); m * units];
        // SAFETY: x holds m × k f32 (checked); act has m × units units, all the quantizer writes
        // (units · 32 is whole activation blocks: q8_units checked it).
        unsafe { (self.quantize)(x.as_ptr(), act.as_mut_ptr(), dim(k)?, dim(units)?, dim(m)?) };
        Ok(act)
    }

    /// `y = x · Wᵀ` with `x` (m × K f32) quantized by [`Q8Fns::quantize_acts`]; m × N values
    /// of `out` as little-endian bytes.
    pub fn gemm(&self, w: &QuantTensor<'_>, x: &[f32], m: usize, out: DType) -> Result<Vec<u8>, QuantError> {
        let units = crate::codegen::q8_units(w.format(), w.cols())?;
        let act = self.quantize_acts(x, m, w.cols(), units)?;
        self.gemm_quantized(w, &act, m, out)
    }

    /// The GEMM on activations already quantized (m × units units).
    pub fn gemm_quantized(
        &self,
        w: &QuantTensor<'_>,
        act: &[ActUnit],
        m: usize,
        out: DType,
    ) -> Result<Vec<u8>, QuantError> {
        let (n, k) = (w.rows(), w.cols());
        let units = crate::codegen::q8_units(w.format(), k)?;
        if act.len() != m * units {
            return Err(QuantError::ShapeMismatch { what: "activation units", expected: m * units, actual: act.len() });
        }
        let size = if out == DType::F32 { 4 } else { 2 };
        let oi = DType::ALL.iter().position(|d| *d == out).unwrap_or(0) as i32;
        // u32 storage: the wrapper stores f32 / u16 elements, which need that alignment.
        let mut y = vec![0u32; (m * n * size).div_ceil(4)];
        // SAFETY: act holds m × units units (checked); w holds n rows of units · 32 / BLOCK
        // blocks (QuantTensor::new checked its rows against the format's layout, and q8_units
        // that it is row blocks); y has room for m × n elements of `out`, all the wrapper writes.
        unsafe {
            (self.gemm)(
                act.as_ptr(),
                w.rows_data().as_ptr(),
                y.as_mut_ptr().cast(),
                dim(m)?,
                dim(n)?,
                dim(k)?,
                dim(units)?,
                oi,
            )
        };
        Ok(y.iter().flat_map(|v| v.to_le_bytes()).take(m * n * size).collect())
    }
}
