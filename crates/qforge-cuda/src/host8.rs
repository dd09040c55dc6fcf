//! The 8-bit tensor-core GEMM (`kernels-cuda/gemm8.cuh`) compiled **for the host**: the
//! activation quantizer and the A8 GEMM tile loop the GPU runs, with `warp.cuh`'s host
//! m16n8k32 mma, behind safe wrappers. The tests compare them with the CPU's
//! `--act-quant int8-dyn` mat-mul; nothing here needs a GPU.

use qforge_core::{DType, QuantError, QuantTensor};

/// `(xq, xs, xz, w, y, m, n, k, lda, group, group_bytes, scale_dtype, out, inst)` of a
/// host-compiled A8 GEMM wrapper (`out`: the index of `DType::ALL`; `inst`: the instance of
/// `qforge_tiling::I8_GEMM_TILES`).
pub type A8Fn = unsafe extern "C" fn(
    *const i8,
    *const f32,
    *const i32,
    *const u8,
    *mut core::ffi::c_void,
    i64,
    i64,
    i64,
    i64,
    i32,
    i32,
    i32,
    i32,
    i32,
);
/// `(x, q, scale, zp, m, k, lda)` of the host-compiled int8-dyn activation quantizer.
pub type QuantizeI8Fn = unsafe extern "C" fn(*const f32, *mut i8, *mut f32, *mut i32, i64, i64, i64);

/// One format's host-compiled A8 GEMM.
#[derive(Clone, Copy, Debug)]
pub struct A8Fns {
    /// The registered format's name (its variants share the wrapper: the group layout is a
    /// run-time argument).
    pub format: &'static str,
    /// The GEMM, every instance and output type.
    pub gemm: A8Fn,
}

include!(concat!(env!("OUT_DIR"), "/host8_fns.rs"));

/// Per-token asymmetric int8 activations as the device quantizer writes them: `m` rows of
/// `lda` codes (`k` rounded up to 128, zeros past `k`), one scale and zero point per row,
/// `x ≈ scale · (q − zp)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Int8Acts {
    /// m × lda codes.
    pub q: Vec<i8>,
    /// Per-row scale.
    pub scale: Vec<f32>,
    /// Per-row zero point.
    pub zp: Vec<i32>,
    /// Row stride of `q`.
    pub lda: usize,
}

/// The activation row stride of the A8 GEMM: `k` rounded up to 128 (one k-step of the tile
/// loop, which copies whole k-steps of codes).
pub const fn a8_lda(k: usize) -> usize {
    k.div_ceil(128) * 128
}

/// Quantize `m` rows of `k` f32 activations with the host-compiled device quantizer.
pub fn quantize_int8_dyn(x: &[f32], m: usize, k: usize) -> Result<Int8Acts, QuantError> {
    if Some(x.len()) != m.checked_mul(k) || k == 0 {
        return Err(QuantError::ShapeMismatch {
            what: "activations (m × k, k ≥ 1)", expected: m * k, actual: x.len()
        });
    }
    let lda = a8_lda(k);
    let mut a = Int8Acts { q: vec![0; m * lda], scale: vec![0.0; m], zp: vec![0; m], lda };
    let conv = |v: usize| i64::try_from(v).map_err(|_| QuantError::Overflow { what: "activation dimension" });
    // SAFETY: x holds m × k f32 (checked above); q has m × lda codes, scale and zp m entries,
    // exactly what the quantizer writes.
    unsafe {
        QUANTIZE_INT8_DYN(
            x.as_ptr(),
            a.q.as_mut_ptr(),
            a.scale.as_mut_ptr(),
            a.zp.as_mut_ptr(),
            conv(m)?,
            conv(k)?,
            conv(lda)?,
        )
    };
    Ok(a)
}

/// The host A8 GEMM of the registered format `w` is a variant of, if it has one.
pub fn get(format: &str) -> Option<&'static A8Fns> {
    HOST_A8.iter().find(|h| h.format == format)
}

impl A8Fns {
    /// `y = x · Wᵀ` with `x` (m × K f32) quantized by [`quantize_int8_dyn`] and `w` any variant
    /// of the format (group size and scale dtype from its layout); m × N values of `out` as
    /// little-endian bytes.
    pub fn gemm(&self, w: &QuantTensor<'_>, x: &[f32], m: usize, out: DType) -> Result<Vec<u8>, QuantError> {
        let a = quantize_int8_dyn(x, m, w.cols())?;
        self.gemm_quantized(w, &a, m, out)
    }

    /// The GEMM on activations already quantized ([`Int8Acts`] of `m` rows), on the instance
    /// the device would choose for `m` (`qforge_tiling::i8_tile`).
    pub fn gemm_quantized(
        &self,
        w: &QuantTensor<'_>,
        a: &Int8Acts,
        m: usize,
        out: DType,
    ) -> Result<Vec<u8>, QuantError> {
        self.gemm_on(w, a, m, out, qforge_tiling::i8_tile(m as u64))
    }

    /// [`A8Fns::gemm_quantized`] on instance `tile` of `qforge_tiling::I8_GEMM_TILES`.
    pub fn gemm_on(
        &self,
        w: &QuantTensor<'_>,
        a: &Int8Acts,
        m: usize,
        out: DType,
        tile: usize,
    ) -> Result<Vec<u8>, QuantError> {
        let (n, k) = (w.rows(), w.cols());
        if a.lda != a8_lda(k) || Some(a.q.len()) != m.checked_mul(a.lda) || a.scale.len() != m || a.zp.len() != m {
            return Err(QuantError::ShapeMismatch {
                what: "int8 activations (m × lda)",
                expected: m.saturating_mul(a8_lda(k)),
                actual: a.q.len(),
            });
        }
        let (group, gbytes, sdt) = crate::codegen::a8_group_args(w.format())?;
        let conv = |v: usize| i64::try_from(v).map_err(|_| QuantError::Overflow { what: "gemm dimension" });
        let (mi, ni, ki, li) = (conv(m)?, conv(n)?, conv(k)?, conv(a.lda)?);
        let mut y = crate::host::SplitOut::new(m, n, out, tile, qforge_tiling::I8_GEMM_TILES.len(), 1)?;
        // SAFETY: q holds m × lda codes, scale / zp m entries (checked above); w holds n rows of
        // ceil(k / group) groups of gbytes bytes (QuantTensor::new checked the rows against this
        // very layout); y has room for the m × n elements of `out` the wrapper writes, 4-byte
        // aligned; `tile` is an instance (checked by SplitOut::new).
        unsafe {
            (self.gemm)(
                a.q.as_ptr(),
                a.scale.as_ptr(),
                a.zp.as_ptr(),
                w.rows_data().as_ptr(),
                y.ptr(),
                mi,
                ni,
                ki,
                li,
                group,
                gbytes,
                sdt,
                y.out_arg,
                tile as i32,
            )
        };
        Ok(y.finish())
    }
}

/// The shared memory instance `inst` of `qforge_tiling::I8_GEMM_TILES` takes as gemm8.cuh lays
/// it out (`qf_i8_cfg::SMEM_BYTES`), `None` past the instances: what the runtime's launch size
/// (`qforge_tiling::i8_smem_bytes`) must equal.
pub fn i8_kernel_smem(inst: usize) -> Option<u64> {
    let i = i32::try_from(inst).ok()?;
    // SAFETY: a pure function of its argument (a switch over the instances).
    u64::try_from(unsafe { I8_SMEM(i) }).ok()
}

/// Where one lane's mma.m16n8k32 8-bit fragment elements sit, as `warp.cuh` lays them out:
/// `(row, col)` of A's sixteen (16 × 32, row-major M × K) and B's eight (32 × 8, row = k).
/// C / D are the m16n8k16 layout ([`crate::host::frag_coords`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frag8Coords {
    /// A: the lane's sixteen elements.
    pub a: [(i32, i32); 16],
    /// B: the lane's eight elements.
    pub b: [(i32, i32); 8],
}

/// [`Frag8Coords`] of `lane` (0..32).
pub fn frag8_coords(lane: u32) -> Frag8Coords {
    assert!(lane < 32, "a warp has 32 lanes");
    let mut rc = [0i32; 48];
    // SAFETY: the wrapper writes 48 ints (16 + 8 (row, col) pairs) into `rc`, which has 48.
    unsafe { FRAG8_COORDS(lane as i32, rc.as_mut_ptr()) };
    let pair = |i: usize| (rc[2 * i], rc[2 * i + 1]);
    Frag8Coords { a: std::array::from_fn(pair), b: std::array::from_fn(|i| pair(16 + i)) }
}
