//! The formats' device code compiled **for the host** (by nvcc, in the build script) behind
//! `extern "C"` wrappers: the very dequant / mat-vec / activation-quantize work items the GPU
//! kernels run, looped on the CPU. The tests compare them with the Rust reference; nothing
//! here needs a GPU.

use qforge_core::{DType, QuantError, QuantTensor};

/// The activation block of the mat-vec (`qf_block_q8_1` in `kernels-cuda/common.cuh`):
/// q8_1's meaning (`x ≈ d·qs[i]`, `s = d·Σqs`) with f32 `d` and `s`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QfBlockQ8_1 {
    /// Scale: the block's values are `d · qs[i]`.
    pub d: f32,
    /// `d · Σ qs[i]`, for the formats whose dot needs the block sum (an offset or minimum).
    pub s: f32,
    /// The 32 quantized values.
    pub qs: [i8; 32],
}

/// `(src, grid, dst, rows, cols)` of a host-compiled dequant wrapper (`grid`: the tensor's
/// side section, read by grid formats only).
pub type DequantFn<T> = unsafe extern "C" fn(*const u8, *const u8, *mut T, i64, i64);
/// `(blocks, n)` of a host-compiled `decode_h2` check (see [`HostFns::h2_mismatches`]).
pub type H2CheckFn = unsafe extern "C" fn(*const u8, i64) -> i64;
/// `(w, grid, act, y, n, k, m)` of a host-compiled mat-vec wrapper.
pub type MatvecFn = unsafe extern "C" fn(*const u8, *const u8, *const QfBlockQ8_1, *mut f32, i64, i64, i32);
/// `(x, out, k, nblocks, m)` of the host-compiled activation quantizer.
pub type QuantizeFn = unsafe extern "C" fn(*const f32, *mut QfBlockQ8_1, i64, i64, i64);

/// `(x, w, grid, y, m, n, k, splits, out)` of a host-compiled fused GEMM wrapper: `y` (M × N
/// elements of output type `out`, the index of `DType::ALL`) = `x` (M × K f32) times the N × K
/// weights `w` (and a grid format's scale grid); with `splits` > 1, split z of K writes its
/// partial sums to `y + z·M·N`.
pub type GemmFn =
    unsafe extern "C" fn(*const f32, *const u8, *const u8, *mut std::ffi::c_void, i64, i64, i64, i32, i32);

/// One fused GEMM instance's host wrappers, per tensor-core input type.
#[derive(Clone, Copy, Debug)]
pub struct HostTileFns {
    /// The instance.
    pub tile: &'static crate::codegen::FusedTile,
    /// f16 tensor-core inputs.
    pub f16: GemmFn,
    /// bf16 tensor-core inputs.
    pub bf16: GemmFn,
}

/// One format's host-compiled wrappers.
#[derive(Clone, Copy, Debug)]
pub struct HostFns {
    /// The format's registry name.
    pub format: &'static str,
    /// Dequantization to f32 (`qf_host_dequant_<format>_f32`).
    pub dequant_f32: DequantFn<f32>,
    /// Dequantization to f16 bit patterns.
    pub dequant_f16: DequantFn<u16>,
    /// Dequantization to bf16 bit patterns.
    pub dequant_bf16: DequantFn<u16>,
    /// The f16 pairs of the format's optional `decode_h2` against `decode`'s values packed
    /// for the f16 mma, over every chunk of `n` blocks: the count that differ (-1: the format
    /// has no `decode_h2`). Safe: [`HostFns::h2_mismatches`].
    pub(crate) h2_mismatches: H2CheckFn,
    /// The mat-vec against q8_1 activation blocks.
    pub matvec: MatvecFn,
    /// The fused GEMM, every instance (`codegen::FUSED_GEMM_TILES`, in order).
    pub gemm: &'static [HostTileFns],
}

include!(concat!(env!("OUT_DIR"), "/host_fns.rs"));

unsafe extern "C" {
    fn qf_host_frag_coords(lane: i32, rc: *mut i32);
    fn qf_host_ldsm_frags(a16x16: *const u16, b8x16: *const u16, a: *mut u32, b: *mut u32);
    fn qf_host_fused_smem(i: i32) -> i64;
}

/// The shared memory instance `i` of `qforge_tiling::FUSED_GEMM_TILES` takes as its kernel
/// lays it out (`SMEM_BYTES` of its C++ config), `None` past the instances: what the runtime's
/// launch size (`FusedTile::smem_bytes`) must equal.
pub fn fused_kernel_smem(i: usize) -> Option<u64> {
    let i = i32::try_from(i).ok()?;
    // SAFETY: a pure function of its argument (a switch over the instances).
    u64::try_from(unsafe { qf_host_fused_smem(i) }).ok()
}

/// The GEMM's ldmatrix fragment loads (warp.cuh's `qf_ldsm_frag_a` / `qf_ldsm_frag_b`, with
/// the host model of `ldmatrix`) of a 16 × 16 A tile and of a B tile stored n-major (8 rows
/// of 16 k), both row-major with a row stride of 16: every lane's four A and two B registers.
pub fn ldsm_frags(a: &[u16; 256], b: &[u16; 128]) -> ([[u32; 4]; 32], [[u32; 2]; 32]) {
    // 16-byte aligned copies (ldmatrix's row addresses must be; the host model checks).
    #[repr(C, align(16))]
    struct Tiles([u16; 256], [u16; 128]);
    let t = Tiles(*a, *b);
    let (mut ra, mut rb) = ([0u32; 128], [0u32; 64]);
    // SAFETY: the wrapper reads 16 rows of 16 u16 from the first pointer and 8 rows of 16
    // from the second (both in `t`, 16-byte aligned), and writes 32 × 4 and 32 × 2 u32.
    unsafe { qf_host_ldsm_frags(t.0.as_ptr(), t.1.as_ptr(), ra.as_mut_ptr(), rb.as_mut_ptr()) };
    (
        std::array::from_fn(|l| std::array::from_fn(|i| ra[4 * l + i])),
        std::array::from_fn(|l| std::array::from_fn(|i| rb[2 * l + i])),
    )
}

/// The output of a host-compiled GEMM wrapper run on instance `tile` (of `instances`) with K
/// cut into `splits` ranges: a buffer of `splits` × m × n elements (f32 partial sums where
/// `splits` > 1, else `out`), filled with 0xff bytes (NaN in every output type, so an element
/// the wrapper fails to write fails the checks) in u32 storage (f32 elements aligned).
pub(crate) struct SplitOut {
    y: Vec<u32>,
    bytes: usize,
    splits: usize,
    out: DType,
    /// The wrapper's `splits` argument.
    pub splits_arg: i32,
    /// The wrapper's `out` argument: the index in `DType::ALL` of what it writes.
    pub out_arg: i32,
}

impl SplitOut {
    /// Checks `tile` and `splits` (`InvalidShape`) and sizes the buffer (`Overflow`).
    pub(crate) fn new(
        m: usize,
        n: usize,
        out: DType,
        tile: usize,
        instances: usize,
        splits: usize,
    ) -> Result<SplitOut, QuantError> {
        if tile >= instances {
            return Err(QuantError::InvalidShape { reason: format!("gemm instance {tile}: no such instance") });
        }
        let splits_arg = i32::try_from(splits)
            .ok()
            .filter(|s| *s >= 1)
            .ok_or(QuantError::InvalidShape { reason: format!("split count {splits}: 1 to 2^31 - 1") })?;
        // Split partial sums are f32 whatever `out` is (the runtime's workspace).
        let part = if splits > 1 { DType::F32 } else { out };
        let bytes = splits
            .checked_mul(m)
            .and_then(|v| v.checked_mul(n))
            .and_then(|v| v.checked_mul(part.size()))
            .ok_or(QuantError::Overflow { what: "gemm output" })?;
        let out_arg = DType::ALL.iter().position(|d| *d == part).unwrap_or(0) as i32;
        Ok(SplitOut { y: vec![u32::MAX; bytes.div_ceil(4)], bytes, splits, out, splits_arg, out_arg })
    }

    /// Where the wrapper writes: room for every element of the buffer, 4-byte aligned.
    pub(crate) fn ptr(&mut self) -> *mut core::ffi::c_void {
        self.y.as_mut_ptr().cast()
    }

    /// The m × n values of `out` as little-endian bytes (the split partial sums added up by
    /// [`reduce_splits`]).
    pub(crate) fn finish(self) -> Vec<u8> {
        let mut b: Vec<u8> = self.y.iter().flat_map(|v| v.to_le_bytes()).collect();
        b.truncate(self.bytes);
        if self.splits == 1 {
            return b;
        }
        let parts: Vec<f32> = b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        reduce_splits(&parts, self.splits, self.out)
    }
}

/// The host mirror of the util module's `qforge_reduce_splits_<out>`: element i of the
/// result is `out(Σ_z partials[z·len + i])`, summed in f32 from z = 0 up, rounded to nearest
/// even; little-endian bytes of `out`. `partials.len()` must be a multiple of `splits`.
pub fn reduce_splits(partials: &[f32], splits: usize, out: DType) -> Vec<u8> {
    let len = partials.len() / splits.max(1);
    (0..len)
        .flat_map(|i| {
            let v = (0..splits).fold(0f32, |acc, z| acc + partials[z * len + i]);
            match out {
                DType::F32 => v.to_le_bytes().to_vec(),
                DType::F16 => half::f16::from_f32(v).to_le_bytes().to_vec(),
                DType::Bf16 => half::bf16::from_f32(v).to_le_bytes().to_vec(),
            }
        })
        .collect()
}

/// Where one lane's mma.m16n8k16 fragment elements sit in their matrices, as `warp.cuh`
/// lays them out (the GEMM's loads and the host mma both follow it): `(row, col)` of A's
/// eight elements (16 × 16), B's four (16 × 8, row = k), C / D's four (16 × 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragCoords {
    /// A (16 × 16, row-major M × K): the lane's eight elements.
    pub a: [(i32, i32); 8],
    /// B (16 × 8, K × N): the lane's four elements.
    pub b: [(i32, i32); 4],
    /// C and D (16 × 8, M × N): the lane's four accumulators.
    pub c: [(i32, i32); 4],
}

/// [`FragCoords`] of `lane` (0..32).
pub fn frag_coords(lane: u32) -> FragCoords {
    assert!(lane < 32, "a warp has 32 lanes");
    let mut rc = [0i32; 32];
    // SAFETY: the wrapper writes 32 ints (8 + 4 + 4 (row, col) pairs) into `rc`, which has 32.
    unsafe { qf_host_frag_coords(lane as i32, rc.as_mut_ptr()) };
    let pair = |i: usize| (rc[2 * i], rc[2 * i + 1]);
    FragCoords {
        a: std::array::from_fn(pair),
        b: std::array::from_fn(|i| pair(8 + i)),
        c: std::array::from_fn(|i| pair(12 + i)),
    }
}

/// The host wrappers of `format`, if it has device code.
pub fn get(format: &str) -> Option<&'static HostFns> {
    HOST.iter().find(|h| h.format == format)
}

fn dims(t: &QuantTensor<'_>) -> Result<(i64, i64), QuantError> {
    let cols = t.cols();
    let rows = t.rows();
    let conv = |v: usize| i64::try_from(v).map_err(|_| QuantError::Overflow { what: "tensor dimension" });
    Ok((conv(rows)?, conv(cols)?))
}

impl HostFns {
    /// How many f16 values of the format's optional `decode_h2` (kernels-cuda/README.md) over
    /// every chunk of the whole blocks in `blocks` differ from `decode`'s values packed for
    /// the f16 mma (a NaN matching any NaN); `None` for a format without one.
    pub fn h2_mismatches(&self, blocks: &[u8], block_bytes: usize) -> Option<u64> {
        let n = i64::try_from(blocks.len() / block_bytes.max(1)).ok()?;
        // SAFETY: `n` whole blocks of `block_bytes` lie in `blocks`; the wrapper reads only
        // them, and only when the format has decode_h2 (whose block size the host compile
        // checks against the registry's, which the caller passes).
        let bad = unsafe { (self.h2_mismatches)(blocks.as_ptr(), n) };
        u64::try_from(bad).ok()
    }

    /// Dequantize a tensor with the host-compiled device code; little-endian bytes of `dtype`.
    pub fn dequant(&self, t: &QuantTensor<'_>, dtype: DType) -> Result<Vec<u8>, QuantError> {
        let (rows, cols) = dims(t)?;
        let n = t.shape().numel();
        let (src, grid) = (t.rows_data().as_ptr(), t.aux().as_ptr());
        Ok(match dtype {
            DType::F32 => {
                let mut out = vec![0f32; n];
                // SAFETY: `t` holds rows × row_bytes(cols) value bytes and its side section
                // (a grid format's scale grid; empty and unread otherwise), checked by
                // QuantTensor::new, exactly what the wrapper reads; `out` has rows × cols
                // elements, what it writes.
                unsafe { (self.dequant_f32)(src, grid, out.as_mut_ptr(), rows, cols) };
                out.iter().flat_map(|v| v.to_le_bytes()).collect()
            }
            DType::F16 | DType::Bf16 => {
                let f = if dtype == DType::F16 { self.dequant_f16 } else { self.dequant_bf16 };
                let mut out = vec![0u16; n];
                // SAFETY: as above, with 16-bit output elements.
                unsafe { f(src, grid, out.as_mut_ptr(), rows, cols) };
                out.iter().flat_map(|v| v.to_le_bytes()).collect()
            }
        })
    }

    /// The fused GEMM `y = x · Wᵀ` (`x`: `m` rows of `w.cols()` f32 activations) with `mma`
    /// (f16 or bf16; `F32` is refused) as the tensor-core input type, on instance 0; `y`
    /// (m × n) as little-endian bytes of `out`.
    pub fn gemm(
        &self,
        w: &QuantTensor<'_>,
        x: &[f32],
        m: usize,
        mma: DType,
        out: DType,
    ) -> Result<Vec<u8>, QuantError> {
        self.gemm_on(0, w, x, m, mma, out, 1)
    }

    /// The fused GEMM on instance `tile` of `codegen::FUSED_GEMM_TILES`, K cut into `splits`
    /// ranges of whole k-steps: `splits` × m × n values of `out` (split-major, little-endian
    /// bytes), split z's partial sums at z·m·n, as the device kernel writes them (for split-k
    /// the runtime asks for f32 and [`reduce_splits`] finishes them as the device does).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_on(
        &self,
        tile: usize,
        w: &QuantTensor<'_>,
        x: &[f32],
        m: usize,
        mma: DType,
        out: DType,
        splits: usize,
    ) -> Result<Vec<u8>, QuantError> {
        let (n, k) = dims(w)?;
        if x.len() != m.checked_mul(w.cols()).ok_or(QuantError::Overflow { what: "activation length" })? {
            return Err(QuantError::ShapeMismatch { what: "activations", expected: m * w.cols(), actual: x.len() });
        }
        let t = self.gemm.get(tile).ok_or(QuantError::InvalidShape {
            reason: format!("fused GEMM instance {tile}: there are {}", self.gemm.len()),
        })?;
        let f = match mma {
            DType::F16 => t.f16,
            DType::Bf16 => t.bf16,
            DType::F32 => {
                return Err(QuantError::Unsupported {
                    format: self.format,
                    reason: "the fused GEMM's tensor-core input type is f16 or bf16".into(),
                });
            }
        };
        let s = i32::try_from(splits)
            .ok()
            .filter(|s| *s >= 1)
            .ok_or(QuantError::InvalidShape { reason: format!("split count {splits}: 1 to 2^31 - 1") })?;
        let mi = i64::try_from(m).map_err(|_| QuantError::Overflow { what: "activation rows" })?;
        let bytes = splits
            .checked_mul(m)
            .and_then(|v| v.checked_mul(w.rows()))
            .and_then(|v| v.checked_mul(out.size()))
            .ok_or(QuantError::Overflow { what: "gemm output" })?;
        let oi = DType::ALL.iter().position(|d| *d == out).unwrap_or(0) as i32;
        // 0xff bytes: NaN in every output type, so an element the GEMM fails to write fails
        // the checks. u32 storage keeps f32 outputs aligned.
        let mut y = vec![u32::MAX; bytes.div_ceil(4)];
        // SAFETY: x holds m × k f32 (checked above); w holds n rows of k elements and a grid
        // format's scale grid in aux (QuantTensor::new checked both); y has room for splits ×
        // m × n elements of `out` (its size, index `oi`), all the wrapper writes (split z at
        // z·m·n), 4-byte aligned.
        unsafe { f(x.as_ptr(), w.rows_data().as_ptr(), w.aux().as_ptr(), y.as_mut_ptr().cast(), mi, n, k, s, oi) };
        let mut b: Vec<u8> = y.iter().flat_map(|v| v.to_le_bytes()).collect();
        b.truncate(bytes);
        Ok(b)
    }

    /// Split-k on instance `tile`: the f32 partial sums (`splits` × m × n, split-major), as
    /// the device kernel writes them into the runtime's workspace; [`reduce_splits`] finishes
    /// them as the device does.
    pub fn gemm_tile_partials(
        &self,
        tile: usize,
        w: &QuantTensor<'_>,
        x: &[f32],
        m: usize,
        mma: DType,
        splits: usize,
    ) -> Result<Vec<f32>, QuantError> {
        let b = self.gemm_on(tile, w, x, m, mma, DType::F32, splits)?;
        Ok(b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    /// [`HostFns::gemm_tile_partials`] on instance 0.
    pub fn gemm_split_partials(
        &self,
        w: &QuantTensor<'_>,
        x: &[f32],
        m: usize,
        mma: DType,
        splits: usize,
    ) -> Result<Vec<f32>, QuantError> {
        self.gemm_tile_partials(0, w, x, m, mma, splits)
    }

    /// `y[r][i] = Σ_j W[i][j]·x[r][j]` with `act` = [`quantize_q8_1`] of `x` (`m` rows).
    pub fn matvec(&self, w: &QuantTensor<'_>, act: &[QfBlockQ8_1], m: usize) -> Result<Vec<f32>, QuantError> {
        let (n, k) = dims(w)?;
        let nblocks = q8_1_blocks(w.format().desc(), w.cols());
        if !(1..=8).contains(&m) || act.len() != m * nblocks {
            return Err(QuantError::ShapeMismatch {
                what: "q8_1 activation blocks",
                expected: m * nblocks,
                actual: act.len(),
            });
        }
        let mut y = vec![0f32; m * w.rows()];
        let (wp, grid) = (w.rows_data().as_ptr(), w.aux().as_ptr());
        // SAFETY: w holds n rows of k elements (and a grid format's scale grid in aux); act
        // holds m × nblocks blocks, the padded row length the wrapper reads; y has m × n
        // elements. m is in 1..=8.
        unsafe { (self.matvec)(wp, grid, act.as_ptr(), y.as_mut_ptr(), n, k, m as i32) };
        Ok(y)
    }
}

/// q8_1 activation blocks per row for weights of format `d` with `k` columns: the padded row
/// length of the weights in 32-element blocks (whole blocks; for a grid format, whose rows
/// are not padded, `k` rounded up to 32).
pub fn q8_1_blocks(d: &qforge_core::FormatDesc, k: usize) -> usize {
    (d.blocks_per_row(k) * d.block_size).div_ceil(32)
}

/// Quantize `m` rows of `k` f32 activations to `nblocks` q8_1 blocks per row (host-compiled
/// device code).
pub fn quantize_q8_1(x: &[f32], m: usize, k: usize, nblocks: usize) -> Vec<QfBlockQ8_1> {
    assert!(x.len() == m * k && nblocks * 32 >= k, "x is m × k and nblocks covers k");
    let mut out = vec![QfBlockQ8_1::default(); m * nblocks];
    // SAFETY: x has m × k values; out has m × nblocks blocks; both sizes asserted above.
    unsafe { QUANTIZE_Q8_1(x.as_ptr(), out.as_mut_ptr(), k as i64, nblocks as i64, m as i64) };
    out
}

/// The mat-vec reference: for each output `y[r·n + i]`, the f64 sum of
/// `w[i][j]·act.d·act.qs[j]` over the `k` real columns and the sum of the terms' magnitudes
/// (the scale the tolerance is relative to). `w` is the dequantized n × k weights.
pub fn matvec_reference(w: &[f32], act: &[QfBlockQ8_1], n: usize, k: usize, m: usize) -> Vec<(f64, f64)> {
    let nblocks = act.len() / m.max(1);
    let mut out = Vec::with_capacity(m * n);
    for r in 0..m {
        for i in 0..n {
            let (mut sum, mut abs) = (0f64, 0f64);
            for j in 0..k {
                let a = &act[r * nblocks + j / 32];
                let term = f64::from(w[i * k + j]) * f64::from(a.d) * f64::from(a.qs[j % 32]);
                sum += term;
                abs += term.abs();
            }
            out.push((sum, abs));
        }
    }
    out
}
