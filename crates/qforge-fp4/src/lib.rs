//! qforge-fp4: ggml's 4-bit floating-point block formats — mxfp4 (OCP microscaling FP4) and
//! nvfp4 (NVIDIA FP4) — as qforge [`BlockFormat`](qforge_core::BlockFormat)s, bit-exact with
//! ggml.
//!
//! Both store E2M1 codes (one sign bit, two exponent bits, one mantissa bit: ±{0, 0.5, 1, 1.5,
//! 2, 3, 4, 6}) as nibbles and differ in their scales:
//!
//! * **mxfp4** (GGML type 39): 32 values and one E8M0 byte — a bare power of two — per block
//!   (17 bytes, 4.25 bits per weight).
//! * **nvfp4** (GGML type 40): 64 values in four sub-blocks of 16, each with a UE4M3 scale
//!   (unsigned float, 4 exponent and 3 mantissa bits): 36 bytes, 4.5 bits per weight.
//!
//! Decoding reproduces ggml's `dequantize_row_mxfp4` / `dequantize_row_nvfp4` for every byte
//! pattern (Inf where ggml overflows) and converts each f32 value once to f16 / bf16. Encoding
//! follows `quantize_row_mxfp4_ref` / `quantize_row_nvfp4_ref`, so rows match ggml's bytes;
//! optional importance weights (which ggml ignores) only ever lower the weighted error. A
//! partial block takes its scales from its real elements; padded positions get code 0.
//!
//! The E2M1 table lives once, in [`e2m1::E2M1_X2`]; [`e2m1::c_header`] renders it for the CUDA
//! device code. Layouts and algorithms: `docs/formats/fp4.md`. Register with [`FORMATS`].
#![forbid(unsafe_code)]

mod cuda;
mod dot;
pub mod e2m1;
mod mxfp4;
mod nvfp4;
pub mod scale;
mod weighted;

pub use mxfp4::{BlockMxfp4, Mxfp4, QK_MXFP4};
pub use nvfp4::{BlockNvfp4, Nvfp4, QK_NVFP4, QK_NVFP4_SUB};

use qforge_core::{Format, GgmlDot, Registered};

/// Every format of this family, in GGML type order, for the registry.
pub static FORMATS: &[&dyn Format] = &[&Registered::<Mxfp4, GgmlDot>::NEW, &Registered::<Nvfp4, GgmlDot>::NEW];

#[cfg(test)]
mod tests {
    use super::*;
    use qforge_core::Role;

    #[test]
    fn descriptors_match_ggml() {
        let want = [("mxfp4", 39, 32, 17), ("nvfp4", 40, 64, 36)];
        assert_eq!(FORMATS.len(), want.len());
        let mut reg = qforge_core::Registry::new();
        reg.register_all(FORMATS).unwrap();
        for (f, (name, id, bs, bytes)) in FORMATS.iter().zip(want) {
            let d = f.desc();
            assert_eq!((d.name, d.ggml_type, d.block_size, d.block_bytes), (name, Some(id), bs, bytes));
            assert_eq!((d.family, d.role, d.dot_type), ("fp4", Role::Weight, Some("q8_0")));
            assert!(d.cuda.is_some() && !d.summary.is_empty() && !d.summary.contains('\n'));
        }
    }
}
