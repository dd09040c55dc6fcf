//! The FP8 block-scaled GEMM (`kernels-cuda/gemm_fp8.cuh`) compiled **for the host**: the
//! 1 × 128 e4m3 activation quantizer and both tile bodies the GPU runs (the sm_89 e4m3
//! `mma.m16n8k32` one and the sm_80 f16 one, with `warp.cuh`'s host fragment models), behind
//! safe wrappers. The tests compare them with the CPU's `--act-quant fp8-1x128` mat-mul;
//! nothing here needs a GPU.

use qforge_core::{DType, QuantError, QuantTensor};

/// `(xq, xs, w, grid, y, m, n, k, splits, out, inst)` of a host-compiled FP8 GEMM wrapper
/// (`out`: the index of `DType::ALL`; `inst`: the instance of `qforge_tiling::FP8_GEMM_TILES`;
/// with `splits` > 1, split z's f32 partial sums at `y + z·m·n`).
pub type Fp8Fn = unsafe extern "C" fn(
    *const u8,
    *const f32,
    *const u8,
    *const u8,
    *mut core::ffi::c_void,
    i64,
    i64,
    i64,
    i32,
    i32,
    i32,
) -> ();
/// `(x, q, scales, m, k)` of the host-compiled 1 × 128 e4m3 activation quantizer.
pub type QuantizeFp8Fn = unsafe extern "C" fn(*const f32, *mut u8, *mut f32, i64, i64);

/// One format's host-compiled FP8 GEMM bodies.
#[derive(Clone, Copy, Debug)]
pub struct Fp8Fns {
    /// The registered format's name.
    pub format: &'static str,
    /// The sm_89 body: e4m3 codes in shared memory, `mma.m16n8k32` e4m3 × the weights' type.
    pub mma: Fp8Fn,
    /// The sm_80 body: codes decoded to f16 in shared memory, `mma.m16n8k16`.
    pub f16: Fp8Fn,
}

include!(concat!(env!("OUT_DIR"), "/hostfp8_fns.rs"));

/// 1 × 128 e4m3 activations as the device quantizer writes them: `m` rows of `lda` codes (`k`
/// rounded up to 128, zero codes past `k`) and `groups = lda / 128` f32 scales per row.
#[derive(Clone, Debug, PartialEq)]
pub struct Fp8Acts {
    /// m × lda e4m3 codes.
    pub q: Vec<u8>,
    /// m × groups scales.
    pub scales: Vec<f32>,
    /// Row stride of `q` (a multiple of 128).
    pub lda: usize,
}

/// The activation row stride of the FP8 GEMM: `k` rounded up to whole 128-column groups.
pub const fn fp8_lda(k: usize) -> usize {
    k.div_ceil(128) * 128
}

fn dim(v: usize) -> Result<i64, QuantError> {
    i64::try_from(v).map_err(|_| QuantError::Overflow { what: "fp8 gemm dimension" })
}

/// Quantize `m` rows of `k` f32 activations with the host-compiled device quantizer.
pub fn quantize_fp8_1x128(x: &[f32], m: usize, k: usize) -> Result<Fp8Acts, QuantError> {
    if Some(x.len()) != m.checked_mul(k) || k == 0 {
        return Err(QuantError::ShapeMismatch {
            what: "activations (m × k, k ≥ 1)", expected: m * k, actual: x.len()
        });
    }
    let lda = fp8_lda(k);
    let mut a = Fp8Acts { q: vec![0; m * lda], scales: vec![0.0; m * (lda / 128)], lda };
    // SAFETY: x holds m × k f32 (checked above); q has m × lda codes and scales m × lda / 128
    // entries, exactly what the quantizer writes.
    unsafe { QUANTIZE_FP8_1X128(x.as_ptr(), a.q.as_mut_ptr(), a.scales.as_mut_ptr(), dim(m)?, dim(k)?) };
    Ok(a)
}

/// The values of the 256 codes as the device code decodes them (`kind` 0: e4m3, 1: e5m2).
pub fn fp8_code_values(e5m2: bool) -> [f32; 256] {
    let mut v = [0f32; 256];
    // SAFETY: the wrapper writes exactly 256 floats.
    unsafe { FP8_CODES(i32::from(e5m2), v.as_mut_ptr()) };
    v
}

/// The device code's f32 → e4m3 conversion (saturating, round to nearest even).
pub fn e4m3_from_f32(x: f32) -> u8 {
    // SAFETY: a pure function of its argument.
    unsafe { E4M3_FROM_F32(x) }
}

/// The shared memory instance `inst` of `qforge_tiling::FP8_GEMM_TILES` takes as gemm_fp8.cuh
/// lays it out (`qf_fp8_cfg::SMEM_BYTES`), `None` past the instances: what the runtime's launch
/// size (`qforge_tiling::fp8_smem_bytes`) must equal.
pub fn fp8_kernel_smem(inst: usize) -> Option<u64> {
    let i = i32::try_from(inst).ok()?;
    // SAFETY: a pure function of its argument (a switch over the instances).
    u64::try_from(unsafe { FP8_SMEM(i) }).ok()
}

/// The host FP8 GEMM of the registered format `format`, if it has one.
pub fn get(format: &str) -> Option<&'static Fp8Fns> {
    HOST_FP8.iter().find(|h| h.format == format)
}

impl Fp8Fns {
    /// `y = x · Wᵀ` with `x` (m × K f32) quantized by [`quantize_fp8_1x128`], through the
    /// body `mma` (sm_89) or not (f16, sm_80), on the instance and K splits the device would
    /// choose on an H100 (132 multiprocessors); m × N values of `out` as little-endian bytes.
    pub fn gemm(&self, w: &QuantTensor<'_>, x: &[f32], m: usize, mma: bool, out: DType) -> Result<Vec<u8>, QuantError> {
        let tile = qforge_tiling::fp8_tile(m as u64);
        let t = &qforge_tiling::FP8_GEMM_TILES[tile];
        let splits = qforge_tiling::fp8_splits(t, m as u64, w.rows() as u64, w.cols() as u64, 132);
        self.gemm_on(w, x, m, mma, out, tile, splits as usize)
    }

    /// [`Fp8Fns::gemm`] on instance `tile` with K cut into `splits` ranges of whole 128-column
    /// blocks: each range's f32 partial sums, then [`crate::host::reduce_splits`] (the host
    /// mirror of the device's `qforge_reduce_splits_<out>`).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_on(
        &self,
        w: &QuantTensor<'_>,
        x: &[f32],
        m: usize,
        mma: bool,
        out: DType,
        tile: usize,
        splits: usize,
    ) -> Result<Vec<u8>, QuantError> {
        let (n, k) = (w.rows(), w.cols());
        let a = quantize_fp8_1x128(x, m, k)?;
        let grid = w.aux();
        if w.rows_data().len() != n * k || grid.len() != 4 * n.div_ceil(128) * k.div_ceil(128) {
            return Err(QuantError::ShapeMismatch {
                what: "fp8 weights (N × K values, grid)",
                expected: n * k,
                actual: w.rows_data().len(),
            });
        }
        let mut y = crate::host::SplitOut::new(m, n, out, tile, qforge_tiling::FP8_GEMM_TILES.len(), splits)?;
        let f = if mma { self.mma } else { self.f16 };
        // SAFETY: q holds m × lda codes and scales m × lda/128 entries (from the quantizer);
        // w holds n × k value bytes and grid the ceil(n/128) × ceil(k/128) f32 (checked above);
        // y has room for every element the wrapper writes (splits × m × n of the type it is
        // told), 4-byte aligned; `tile` is an instance (checked by SplitOut::new).
        unsafe {
            f(
                a.q.as_ptr(),
                a.scales.as_ptr(),
                w.rows_data().as_ptr(),
                grid.as_ptr(),
                y.ptr(),
                dim(m)?,
                dim(n)?,
                dim(k)?,
                y.splits_arg,
                y.out_arg,
                tile as i32,
            )
        };
        Ok(y.finish())
    }
}
