//! The block contract: [`FormatDesc`] (a format's static facts) and [`BlockFormat`] (what a
//! format crate implements per block). The dot-product traits build on it, and the
//! object-safe [`Format`](crate::Format) view builds on both, so dependencies point one way:
//! `block` ← `dot` ← `format`.

use crate::clayout::CLayout;
use crate::dtype::Elem;
use crate::error::QuantError;
use bytemuck::Pod;

/// What a format is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A weight format (has a ggml `to_float` where ggml defines it).
    Weight,
    /// An activation format used on the other side of integer dot products (q8_1, q8_k).
    /// ggml has no `to_float` for these; qforge dequantizes them all the same.
    Activation,
}

/// A format's CUDA device code (the `cuda` slot of [`FormatDesc`]; `None` until a format has
/// one).
///
/// The header is `__host__ __device__` C++ holding one traits struct per format (see
/// `kernels-cuda/README.md` for the interface); the kernel templates in `kernels-cuda/`
/// include it, and the same header is compiled for the host and checked against the Rust
/// reference.
#[derive(Clone, Copy, Debug)]
pub struct CudaDeviceCode {
    /// Source of the family header (usually `include_str!("../cuda/<family>.cuh")`).
    pub header: &'static str,
    /// File name the header is included under (`<family>.cuh`); formats sharing a header use
    /// the same name.
    pub header_file: &'static str,
    /// Name of the format's traits struct in that header (`qf_<format>`).
    pub traits: &'static str,
}

/// Static facts about a format.
#[derive(Clone, Copy, Debug)]
pub struct FormatDesc {
    /// Lower-case name: the GGML name for GGUF types (`q4_0`, `q4_k`), else the project's own.
    pub name: &'static str,
    /// The family crate it belongs to (`legacy`, `k`, …).
    pub family: &'static str,
    /// GGML type id (`enum ggml_type`), if ggml defines the format.
    pub ggml_type: Option<u32>,
    /// Logical elements per block.
    pub block_size: usize,
    /// Bytes per block (= `size_of::<Block>()`).
    pub block_bytes: usize,
    /// Whether it is a weight format or an activation format (the other side of a dot product).
    pub role: Role,
    /// Name of the activation format ggml's `vec_dot` pairs with this one (`q8_0`, `q8_1`,
    /// `q8_k`), if any.
    pub dot_type: Option<&'static str>,
    /// One-line description for `qforge formats`.
    pub summary: &'static str,
    /// CUDA device code slot.
    pub cuda: Option<CudaDeviceCode>,
}

impl FormatDesc {
    /// Storage bits per logical weight.
    pub fn bits_per_weight(&self) -> f64 {
        (self.block_bytes * 8) as f64 / self.block_size as f64
    }

    /// Number of blocks needed for a row of `cols` elements (rows are padded to whole blocks).
    pub fn blocks_per_row(&self, cols: usize) -> usize {
        cols.div_ceil(self.block_size)
    }

    /// Row length padded up to whole blocks.
    pub fn padded_cols(&self, cols: usize) -> Result<usize, QuantError> {
        self.blocks_per_row(cols).checked_mul(self.block_size).ok_or(QuantError::Overflow { what: "padded row length" })
    }

    /// Bytes of one row of `cols` logical elements.
    pub fn row_bytes(&self, cols: usize) -> Result<usize, QuantError> {
        self.blocks_per_row(cols)
            .checked_mul(self.block_bytes)
            .ok_or(QuantError::Overflow { what: "row size in bytes" })
    }
}

/// What a format crate implements for each format: layout, descriptor, reference codec.
///
/// # Partial blocks (padding)
/// A row whose length is not a multiple of the block size ends in a partial block. `encode`
/// receives only the real elements (`x.len() < BLOCK_SIZE`); it must compute every scale and
/// minimum from those alone, and encode the padded positions with the code nearest 0 under
/// those scales. `decode` always writes a whole block; callers drop the padded positions.
pub trait BlockFormat: Send + Sync + 'static {
    /// The on-disk block, `#[repr(C)]`, alignment 1, exactly `DESC.block_bytes` bytes, declared
    /// with [`c_block!`](crate::c_block) so that the CUDA struct is generated from it.
    type Block: Pod + CLayout;
    /// The format's descriptor: name, family, GGML type id, block size and bytes, role, dot
    /// type, summary and CUDA slot.
    const DESC: FormatDesc;

    /// For an activation format whose blocks also store the sum of their values in a lower
    /// precision, which dot kernels use instead of summing the values (ggml's q8_1 stores
    /// `s = f16(d·Σq)` for the affine q4_1 / q5_1 kernels): how far, relative to the block's
    /// largest weight times `|Σ values|`, that stored sum may be from the sum of the block's
    /// dequantized values. 0 (the default): the blocks store no such sum.
    const STORED_SUM_REL_ERROR: f64 = 0.0;

    /// Whether ggml's quantizer for this format (`quantize_<type>` in ggml-quants.c) uses
    /// importance weights when it is given some. Formats whose ggml quantizer ignores them
    /// (q8_0, tq1_0 / tq2_0, q1_0 / q2_0, mxfp4 / nvfp4) set `false`, so an emulation of
    /// llama-quantize can drop the imatrix for them and write ggml's bytes; qforge's own
    /// `encode` may still use the weights.
    const GGML_USES_IMPORTANCE: bool = true;

    /// Whether the format's CUDA traits struct provides `codes32` (each 32-element sub-block
    /// as int8 codes with an f32 scale and offset) or `codes32_s16` (the codes with a scale
    /// per 16-element half, no offset), which gives it the int8 tensor-core GEMM
    /// with its native q8 activations (`kernels-cuda/gemm_q8.cuh`). qforge-cuda's build
    /// checks the member exists where this is `true`, and its tests that it is `true` wherever
    /// the member exists.
    const CUDA_CODES32: bool = false;

    /// Whether [`decode_row`](BlockFormat::decode_row) writes f16 / bf16 rows without an f32
    /// pass (the 1- to 5-bit-coded formats look their codes up in a 16-bit table, qforge-simd's
    /// `half_lut`; the others round their values in registers before the store, its `store8`),
    /// so that a tensor-wide dequantize calls it directly instead of decoding to f32 and
    /// converting the row. Either way the values are `O::from_f32` of the f32 decode.
    const DIRECT_16BIT: bool = false;

    /// Reference decode of one block into `out` (`out.len() == DESC.block_size`). Each value
    /// is computed in f32 exactly as ggml's `to_float`, then converted with `O::from_f32`.
    ///
    /// Mark it (and what it calls) `#[inline(always)]`: rows are decoded inside
    /// [`crate::cpu::dispatch`], which compiles for the CPU's SIMD level only the code
    /// inlined into it; an out-of-line `decode` runs the baseline (SSE2) build. Every
    /// level's build must give the same bits, NaN signs included (qforge-cpu's
    /// `row_decode_is_the_same_at_every_simd_level`): a product whose NaN sign the compiler
    /// may choose (Rust leaves it unspecified) can differ between builds; q1_0 / q2_0 stay
    /// out of line for that, and the grid I-quants iq2_xxs, iq2_s and iq3_* because LLVM's
    /// AVX-512 build of their grid lookups was slower.
    fn decode<O: Elem>(block: &Self::Block, out: &mut [O]);

    /// Reference encode of one block from finite `x` (`1 <= x.len() <= DESC.block_size`),
    /// with optional importance weights (`weights.len() == x.len()`, finite, >= 0).
    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut Self::Block);

    /// Decode a row of blocks into `out` (`out.len()` logical elements, at most
    /// `blocks.len() * BLOCK_SIZE`). Override with a fast path; the default loops over blocks.
    #[inline(always)]
    fn decode_row<O: Elem>(blocks: &[Self::Block], out: &mut [O]) {
        decode_blocks_default::<Self, O>(blocks, out)
    }

    /// Encode a row (`blocks.len() == ceil(x.len() / BLOCK_SIZE)`). Override with a fast path.
    fn encode_row(x: &[f32], weights: Option<&[f32]>, blocks: &mut [Self::Block]) {
        encode_blocks::<Self>(x, weights, blocks)
    }
}

/// [`BlockFormat::decode_row`]'s default: block by block with [`BlockFormat::decode`], a
/// partial last block decoded whole into a scratch block. For formats that override
/// `decode_row` for some output types only.
#[inline(always)]
pub fn decode_blocks_default<F: BlockFormat + ?Sized, O: Elem>(blocks: &[F::Block], out: &mut [O]) {
    let bs = F::DESC.block_size;
    let mut chunks = out.chunks_exact_mut(bs);
    let mut used = 0;
    for (block, dst) in blocks.iter().zip(&mut chunks) {
        F::decode(block, dst);
        used += 1;
    }
    let tail = chunks.into_remainder();
    if let (false, Some(block)) = (tail.is_empty(), blocks.get(used)) {
        // A partial last block: decode whole, keep the real elements.
        const STACK: usize = 256;
        if bs <= STACK {
            let mut scratch = [O::default(); STACK];
            F::decode(block, &mut scratch[..bs]);
            tail.copy_from_slice(&scratch[..tail.len()]);
        } else {
            let mut scratch = vec![O::default(); bs];
            F::decode(block, &mut scratch);
            tail.copy_from_slice(&scratch[..tail.len()]);
        }
    }
}

/// The default [`BlockFormat::encode_row`]: [`BlockFormat::encode`] block by block (the last
/// one partial when `x` is not whole blocks). `#[inline(always)]`, so a format can compile it
/// into a `#[target_feature]` row function of its own.
#[inline(always)]
pub fn encode_blocks<F: BlockFormat + ?Sized>(x: &[f32], weights: Option<&[f32]>, blocks: &mut [F::Block]) {
    let bs = F::DESC.block_size;
    for (i, (xs, block)) in x.chunks(bs).zip(blocks.iter_mut()).enumerate() {
        let w = weights.map(|w| &w[i * bs..i * bs + xs.len()]);
        F::encode(xs, w, block);
    }
}
