//! qforge-legacy: ggml's six "legacy" 32-element block formats — q4_0, q4_1, q5_0, q5_1,
//! q8_0 and q8_1 — as qforge [`BlockFormat`]s.
//!
//! * Decoding is bit-exact with ggml's `dequantize_row_*` for every possible block (NaN / Inf
//!   scales included), and produces f16 / bf16 directly as the rounding of that f32 value.
//!   q8_1 (an activation format without a ggml `to_float`) decodes as `d·q`.
//! * Encoding follows ggml's quantizers operation for operation: `quantize_row_*_ref` without
//!   importance weights, and the `quantize_row_*_impl` searches (`make_qx_quants`,
//!   `make_qkx3_quants`, shared with the other families in `qforge-ggml-search`) with them, so
//!   whole rows match ggml's bytes. q8_0 and q8_1 ignore
//!   weights, as ggml does.
//! * Partial blocks: the scale (and minimum) come from the real elements only; padded
//!   positions hold the quant nearest 0.
//!
//! See `docs/formats/legacy.md` for layouts and algorithms. Register the family with
//! [`FORMATS`].
#![deny(unsafe_code)]

mod block;
mod codec;
mod dot;
#[cfg(target_arch = "x86_64")]
mod simd;

pub use block::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK};

use qforge_core::{BlockFormat, CudaDeviceCode, Elem, Format, FormatDesc, GgmlDot, Registered, Role};

/// The family's CUDA device code (one traits struct per format; see `kernels-cuda/README.md`).
const CUDA_HEADER: &str = include_str!("../cuda/legacy.cuh");

macro_rules! legacy_format {
    ($(#[$doc:meta])* $fmt:ident, $block:ident, $name:literal, $ggml:literal, $role:ident, $act:ident = $dot:literal, $summary:literal $(, stored_sum_rel_error = $sum:expr)?) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $fmt;

        impl BlockFormat for $fmt {
            type Block = $block;
            const DESC: FormatDesc = FormatDesc {
                name: $name,
                family: "legacy",
                ggml_type: Some($ggml),
                block_size: QK,
                block_bytes: std::mem::size_of::<$block>(),
                role: Role::$role,
                dot_type: Some($dot),
                summary: $summary,
                cuda: Some(CudaDeviceCode { header: CUDA_HEADER, header_file: "legacy.cuh", traits: concat!("qf_", $name) }),
            };
            $(const STORED_SUM_REL_ERROR: f64 = $sum;)?
            const GGML_USES_IMPORTANCE: bool = <$block as block::LegacyBlock>::USES_WEIGHTS;
            const DIRECT_16BIT: bool =
                <$block as block::LegacyBlock>::TABLE_CODES.is_some() || <$block as block::LegacyBlock>::I8_VALUES.is_some();
            // Every legacy weight format has the int8 GEMM's codes32 (legacy.cuh's qf_legacy_w8).
            const CUDA_CODES32: bool = matches!(Role::$role, Role::Weight);

            fn decode<O: Elem>(block: &$block, out: &mut [O]) {
                codec::decode(block, out)
            }

            fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut $block) {
                codec::encode(x, weights, out)
            }

            #[inline(always)]
            fn decode_row<O: Elem>(blocks: &[$block], out: &mut [O]) {
                codec::decode_row(blocks, out)
            }

            fn encode_row(x: &[f32], weights: Option<&[f32]>, blocks: &mut [$block]) {
                codec::encode_row(x, weights, blocks)
            }
        }

        qforge_simd::q8_native_dot!($fmt => $act);
    };
}

legacy_format!(
    /// 4.5 bpw: `x = (q - 8)·d`, one f16 scale per 32 weights (ggml type 2).
    Q4_0, BlockQ4_0, "q4_0", 2, Weight, Q8_0 = "q8_0",
    "4-bit symmetric, f16 scale per 32 weights: x = (q-8)*d"
);
legacy_format!(
    /// 5.0 bpw: `x = q·d + m`, f16 scale and offset per 32 weights (ggml type 3).
    Q4_1, BlockQ4_1, "q4_1", 3, Weight, Q8_1 = "q8_1",
    "4-bit affine, f16 scale and min per 32 weights: x = q*d + m"
);
legacy_format!(
    /// 5.5 bpw: `x = (q - 16)·d`, one f16 scale per 32 weights (ggml type 6).
    Q5_0, BlockQ5_0, "q5_0", 6, Weight, Q8_0 = "q8_0",
    "5-bit symmetric, f16 scale per 32 weights: x = (q-16)*d"
);
legacy_format!(
    /// 6.0 bpw: `x = q·d + m`, f16 scale and offset per 32 weights (ggml type 7).
    Q5_1, BlockQ5_1, "q5_1", 7, Weight, Q8_1 = "q8_1",
    "5-bit affine, f16 scale and min per 32 weights: x = q*d + m"
);
legacy_format!(
    /// 8.5 bpw: `x = q·d` with `q: i8`, one f16 scale per 32 weights (ggml type 8).
    Q8_0, BlockQ8_0, "q8_0", 8, Weight, Q8_0 = "q8_0",
    "8-bit symmetric, f16 scale per 32 weights: x = q*d"
);
legacy_format!(
    /// 9.0 bpw activation format: `x = q·d` plus `s = d·Σq` for integer dot products
    /// (ggml type 9, no ggml `to_float`).
    Q8_1, BlockQ8_1, "q8_1", 9, Activation, Q8_1 = "q8_1",
    "8-bit symmetric activations with f16 scale and f16 d*sum(q) per 32 values",
    // `s` is rounded to f16 from the f32 scale while the values decode with the f16 scale:
    // two roundings of 2^-11 each.
    stored_sum_rel_error = 1.0 / 1024.0
);

/// Every format of this family, for the registry, in ggml type-id order.
pub static FORMATS: &[&dyn Format] = &[
    &Registered::<Q4_0, GgmlDot>::NEW,
    &Registered::<Q4_1, GgmlDot>::NEW,
    &Registered::<Q5_0, GgmlDot>::NEW,
    &Registered::<Q5_1, GgmlDot>::NEW,
    &Registered::<Q8_0, GgmlDot>::NEW,
    &Registered::<Q8_1, GgmlDot>::NEW,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_match_ggml() {
        let want = [
            ("q4_0", 2, 18, Role::Weight, Some("q8_0")),
            ("q4_1", 3, 20, Role::Weight, Some("q8_1")),
            ("q5_0", 6, 22, Role::Weight, Some("q8_0")),
            ("q5_1", 7, 24, Role::Weight, Some("q8_1")),
            ("q8_0", 8, 34, Role::Weight, Some("q8_0")),
            ("q8_1", 9, 36, Role::Activation, Some("q8_1")),
        ];
        assert_eq!(FORMATS.len(), want.len());
        let mut reg = qforge_core::Registry::new();
        reg.register_all(FORMATS).unwrap();
        for (f, (name, id, bytes, role, dot)) in FORMATS.iter().zip(want) {
            let d = f.desc();
            assert_eq!((d.name, d.ggml_type, d.block_size, d.block_bytes), (name, Some(id), 32, bytes));
            assert_eq!((d.role, d.dot_type, d.family), (role, dot, "legacy"));
            assert!(d.cuda.is_some() && !d.summary.is_empty() && !d.summary.contains('\n'));
        }
    }

    /// `DESC.dot_type` names the `NativeDot::Act` format (the registry relies on the name).
    #[test]
    fn dot_type_names_the_activation_format() {
        fn check<F: qforge_core::NativeDot>() {
            assert_eq!(F::DESC.dot_type, Some(F::Act::DESC.name), "{}", F::DESC.name);
        }
        check::<Q4_0>();
        check::<Q4_1>();
        check::<Q5_0>();
        check::<Q5_1>();
        check::<Q8_0>();
        check::<Q8_1>();
    }
}
