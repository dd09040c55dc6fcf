//! qforge-tq: ggml's ternary block formats tq1_0 and tq2_0 (BitNet b1.58 / TriLM weights) as
//! qforge [`BlockFormat`] implementations, bit-exact with ggml.
//!
//! Both store 256 values as `x = t·d` with `t ∈ {-1, 0, 1}` and one f16 scale `d` per block;
//! they differ only in packing:
//!
//! * **tq1_0** (GGML type 34, 54 bytes, 1.6875 bits per weight): five codes per byte as a
//!   base-3 number scaled to the byte range (four codes in the last four bytes).
//! * **tq2_0** (GGML type 35, 66 bytes, 2.0625 bits per weight): four 2-bit codes per byte.
//!
//! Decoding reproduces ggml's `dequantize_row_tq1_0` / `tq2_0` for every byte pattern and
//! converts each f32 value once to f16 / bf16. Encoding is ggml's `quantize_row_tq*_ref`
//! (`d = amax`, `t = round(x / d)`), so rows match ggml's bytes; the two formats therefore
//! always decode the same input to the same values. ggml ignores importance weights here;
//! given weights, qforge also tries smaller scales (thresholded least squares) and keeps one
//! only if it lowers the weighted squared error. A partial block takes its scale from its real
//! elements; padded positions get the zero code.
//!
//! Dot products: both formats implement [`NativeDot`](qforge_core::NativeDot) against
//! `qforge-k`'s q8_k activations (ggml's `vec_dot_type`) through `qforge_k`'s shared q8_k
//! kernel: `sumf += (d·d_a)·Σ t·q_a` per block, as ggml's `vec_dot_tq*_0_q8_K`.
//!
//! Layouts and algorithms: `docs/formats/tq.md`. Register with [`FORMATS`].
#![forbid(unsafe_code)]

mod ternary;
mod tq1;
mod tq2;

pub use tq1::{BlockTq1_0, Tq1_0};
pub use tq2::{BlockTq2_0, Tq2_0};

use qforge_core::{BlockFormat, CudaDeviceCode, Elem, Format, GgmlDot, Registered};

/// Elements per ternary block (ggml's `QK_K`).
pub const QK_K: usize = 256;

/// The family's CUDA device code (`cuda/tq.cuh`: one traits struct per format, see
/// `kernels-cuda/README.md`). tq has no tables: the codes are unpacked arithmetically.
const FAMILY_CUH: &str = include_str!("../cuda/tq.cuh");

/// The `cuda` slot of a tq format's descriptor.
const fn device_code(traits: &'static str) -> Option<CudaDeviceCode> {
    Some(CudaDeviceCode { header: FAMILY_CUH, header_file: "tq.cuh", traits })
}

/// Every format of this family, in GGML type order, for the registry.
pub static FORMATS: &[&dyn Format] = &[&Registered::<Tq1_0, GgmlDot>::NEW, &Registered::<Tq2_0, GgmlDot>::NEW];

// ggml's integer dot against q8_k activations: the K-quant family's kernel (q8_k is
// defined there), with every code `t ∈ {-1, 0, 1}` and one scale per block.
qforge_k::q8k_native_dot!(Tq1_0, Tq2_0);

/// Decodes a row without a scratch block: each `decode` writes only as many elements as its
/// output slice holds, so a partial last block decodes straight into the row's tail. The row
/// loop is `qforge-k`'s, compiled for AVX2 where the CPU has it (each format's `decode` is
/// `#[inline(always)]` so that it takes that build).
#[inline]
fn decode_row<F: BlockFormat, O: Elem>(blocks: &[F::Block], out: &mut [O]) {
    qforge_k::decode_blocks::<F, O>(blocks, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use qforge_core::Role;

    #[test]
    fn descriptors_match_ggml() {
        let want = [("tq1_0", 34, 54), ("tq2_0", 35, 66)];
        assert_eq!(FORMATS.len(), want.len());
        let mut reg = qforge_core::Registry::new();
        reg.register_all(FORMATS).unwrap();
        for (f, (name, id, bytes)) in FORMATS.iter().zip(want) {
            let d = f.desc();
            assert_eq!((d.name, d.ggml_type, d.block_size, d.block_bytes), (name, Some(id), QK_K, bytes));
            assert_eq!((d.family, d.role, d.dot_type), ("tq", Role::Weight, Some("q8_k")));
            assert!(d.cuda.is_some() && !d.summary.is_empty() && !d.summary.contains('\n'));
        }
    }
}
