//! qforge-lowbit: ggml's low-bit block formats q1_0 and q2_0 as qforge [`BlockFormat`]
//! implementations, bit-exact with ggml.
//!
//! Both store one f16 scale `d` and 16 bytes of codes per block (18 bytes), packed LSB first;
//! they differ in block size, bits per code and how the scale is chosen:
//!
//! * **q1_0** (GGML type 41, 128 values, 1.125 bits per weight): one sign bit per weight,
//!   `x = bit ? +d : −d`, with `d` the block's mean magnitude `Σ|x| / 128`.
//! * **q2_0** (GGML type 42, 64 values, 2.25 bits per weight): a 2-bit code `c` per weight,
//!   `x = (c − 1)·d` (levels −1, 0, 1, 2), with `d` the block's largest magnitude and
//!   `c = clamp(round(x / d) + 1, 0, 3)`.
//!
//! Decoding reproduces ggml's `dequantize_row_q1_0` / `q2_0` for every byte pattern and
//! converts each f32 value once to f16 / bf16. Encoding is ggml's `quantize_row_q*_0_ref`, so
//! rows match ggml's bytes. ggml ignores importance weights for these formats; given weights,
//! qforge also tries other scales (weighted least squares) and keeps one only if it lowers
//! the weighted squared error. A partial block takes its scale from its real elements (q1_0:
//! their mean magnitude); padded positions get the code nearest 0 (q1_0: `+d`, ggml's code
//! for a zero).
//!
//! Dot products: both implement [`NativeDot`](qforge_core::NativeDot) against `qforge-legacy`'s q8_0 (ggml's
//! `vec_dot_type`), as ggml's `ggml_vec_dot_q1_0_q8_0` / `ggml_vec_dot_q2_0_q8_0`, through
//! `qforge-simd`'s shared q8_0 kernel (AVX2 where the CPU has it).
//!
//! The two formats share every line of code but `Spec` (in `spec.rs`) — the packing, decode,
//! encode, refinement, dot product and CUDA device code are generic over it. Layouts and
//! algorithms: `docs/formats/lowbit.md`. Register with [`FORMATS`].
#![forbid(unsafe_code)]

mod codec;
mod dot;
mod spec;

pub use spec::{Q1_0, Q2_0, QS_BYTES};

use bytemuck::{Pod, Zeroable};
use qforge_core::le::F16Le;
use qforge_core::{BlockFormat, CudaDeviceCode, Elem, Format, FormatDesc, GgmlDot, Registered, Role};
use qforge_legacy::Q8_0;
use qforge_simd::q8::{Codes, Q8Weight, Scale, Values};

/// The family's CUDA device code (`cuda/lowbit.cuh`: one traits struct per format, see
/// `kernels-cuda/README.md`). No tables: the codes are unpacked arithmetically.
const FAMILY_CUH: &str = include_str!("../cuda/lowbit.cuh");

/// Every format of this family, in GGML type order, for the registry.
pub static FORMATS: &[&dyn Format] = &[&Registered::<Q1_0, GgmlDot>::NEW, &Registered::<Q2_0, GgmlDot>::NEW];

macro_rules! lowbit_format {
    ($(#[$doc:meta])* $fmt:ident, $block:ident, $name:literal, $ggml:literal, $summary:literal) => {
        qforge_core::c_block! {
            $(#[$doc])*
            #[repr(C)]
            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
            pub struct $block {
                /// The scale, f16.
                pub d: F16Le,
                /// The codes, LSB first: element `j` is bits `BITS·j mod 8 ..` of byte `BITS·j / 8`.
                pub qs: [u8; QS_BYTES],
            }
        }

        impl Q8Weight for $block {
            const UNITS: usize = <$fmt as spec::Spec>::QK / 32;
            const VALUES: Values = Values::Table(dot::levels::<$fmt>());
            const SCALE: Scale = Scale::F16;
            const PACK_BITS: u32 = <$fmt as spec::Spec>::BITS as u32;

            #[inline(always)]
            fn codes(&self, u: usize) -> Codes<'_> {
                dot::codes::<$fmt>(&self.qs, u)
            }

            #[inline(always)]
            fn d_bits(&self) -> u16 {
                self.d.bits()
            }
        }

        impl BlockFormat for $fmt {
            type Block = $block;
            const CUDA_CODES32: bool = true;
            const DESC: FormatDesc = FormatDesc {
                name: $name,
                family: "lowbit",
                ggml_type: Some($ggml),
                block_size: <$fmt as spec::Spec>::QK,
                block_bytes: 2 + QS_BYTES,
                role: Role::Weight,
                dot_type: Some("q8_0"),
                summary: $summary,
                cuda: Some(CudaDeviceCode { header: FAMILY_CUH, header_file: "lowbit.cuh", traits: concat!("qf_", $name) }),
            };
            /// ggml's `quantize_q1_0` / `quantize_q2_0` call the reference with or without weights.
            const GGML_USES_IMPORTANCE: bool = false;
            /// f16 / bf16 rows by table lookup (`qforge_simd::half_lut`), no f32 pass; f32 rows
            /// the same way ([`qforge_simd::half_lut::TableGroups::F32`]).
            const DIRECT_16BIT: bool = true;

            #[inline(always)]
            fn decode<O: Elem>(b: &$block, out: &mut [O]) {
                codec::decode::<Self, O>(b.d, &b.qs, out)
            }

            fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut $block) {
                (out.d, out.qs) = codec::encode::<Self>(x, weights);
            }

            fn decode_row<O: Elem>(blocks: &[$block], out: &mut [O]) {
                if !qforge_simd::half_lut::decode_row::<Self, O>(blocks, out) {
                    qforge_core::decode_blocks_default::<Self, O>(blocks, out);
                }
            }
        }

        impl qforge_simd::half_lut::TableGroups for $fmt {
            type Block = $block;
            const BLOCK: usize = <$fmt as spec::Spec>::QK;
            /// f32 rows by table lookup too: the codes-by-bit decode ran at ~1 Gel/s.
            const F32: bool = true;
            /// An f16 `d` times integer levels.
            const NEVER_SUBNORMAL: bool = true;

            #[inline(always)]
            fn groups(
                b: &$block,
                f: impl qforge_simd::half_lut::GroupSink,
            ) {
                codec::groups::<Self>(b.d, &b.qs, f)
            }
        }

        qforge_simd::q8_native_dot!($fmt => Q8_0);
    };
}

lowbit_format!(
    /// ggml's `block_q1_0` (18 bytes): the f16 scale, then 128 sign bits.
    Q1_0, BlockQ1_0, "q1_0", 41,
    "1.125 bpw signs: x = bit ? +d : -d per 128 values, d = mean |x|"
);
lowbit_format!(
    /// ggml's `block_q2_0` (18 bytes): the f16 scale, then 64 2-bit codes.
    Q2_0, BlockQ2_0, "q2_0", 42,
    "2.25 bpw: x = (c-1)*d, c in 0..3, 64 values per f16 scale d = max |x|"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::QS_BYTES;

    #[test]
    fn descriptors_match_ggml() {
        let want = [("q1_0", 41, 128), ("q2_0", 42, 64)];
        assert_eq!(FORMATS.len(), want.len());
        let mut reg = qforge_core::Registry::new();
        reg.register_all(FORMATS).unwrap();
        for (f, (name, id, bs)) in FORMATS.iter().zip(want) {
            let d = f.desc();
            assert_eq!((d.name, d.ggml_type, d.block_size, d.block_bytes), (name, Some(id), bs, 18));
            assert_eq!((d.family, d.role, d.dot_type), ("lowbit", Role::Weight, Some("q8_0")));
            assert!(d.cuda.is_some() && !d.summary.is_empty() && !d.summary.contains('\n'));
        }
    }

    /// A NaN scale's sign, as ggml 0.25.3's `dequantize_row_q1_0` / `q2_0` give it (measured
    /// through ggml-py's ctypes): q1_0's `bit ? d : -d` negates (the sign flips for a 0 bit),
    /// q2_0's `(2c - 1)·d`-style product keeps the NaN's sign for every code. f32, f16 and bf16
    /// rows at every SIMD level the machine has.
    #[test]
    fn nan_scale_signs_match_ggml() {
        use qforge_core::{OutRow, bf16, f16};
        let mut rng = qforge_core::rand::Rng::new(3);
        for (f, flips) in FORMATS.iter().zip([true, false]) {
            let n = f.desc().block_size * 3 - 5;
            let mut row = Vec::new();
            for _ in 0..3 {
                row.extend([0x12, 0x7e]); // f16 NaN 0x7e12 -> f32 0x7fc24000
                row.extend(rng.bytes(QS_BYTES));
            }
            let first = |j: usize| row[2 + 18 * (j / f.desc().block_size) + j % f.desc().block_size / 8] >> (j % 8) & 1;
            for level in qforge_core::cpu::testable_levels() {
                qforge_core::cpu::with_level(level, || {
                    let (mut a, mut b, mut c) = (vec![0f32; n], vec![f16::ZERO; n], vec![bf16::ZERO; n]);
                    f.dequant_row(&row, OutRow::F32(&mut a)).unwrap();
                    f.dequant_row(&row, OutRow::F16(&mut b)).unwrap();
                    f.dequant_row(&row, OutRow::Bf16(&mut c)).unwrap();
                    for j in 0..n {
                        let negative = flips && first(j) == 0;
                        let want = if negative { 0xffc2_4000u32 } else { 0x7fc2_4000 };
                        let name = f.desc().name;
                        assert_eq!(a[j].to_bits(), want, "{name} element {j} at {}", level.name());
                        let w16 = if negative { 0xfe12u16 } else { 0x7e12 };
                        assert_eq!(b[j].to_bits(), w16, "{name} f16 element {j} at {}", level.name());
                        assert_eq!(c[j].to_bits(), (want >> 16) as u16, "{name} bf16 element {j} at {}", level.name());
                    }
                });
            }
        }
    }
}
