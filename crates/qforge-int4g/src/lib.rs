//! qforge-int4g: symmetric group-wise int4 with torchao's 8da4w ("A8W4DQ") semantics.
//!
//! Per group of `G` weights (`G` any power of two from 32 to 4096, default 128):
//!
//! ```text
//! scale = clamp(amax / 7.5, min = 2^-23)          in f32 (torchao's choose_qparams_affine)
//! scale → the scale dtype, round-to-nearest-even, saturating (f16 by default; bf16 / f32)
//! q     = clamp(round_half_even(w / scale), -8, 7)   (torchao's quantize_affine)
//! w'    = q · scale                                 in f32, then f16 / bf16 by RNE
//! ```
//!
//! A block is one group: `[scale: 2 or 4 bytes LE][G/2 bytes of nibbles]`, nibbles in ggml's
//! q4_0 order (byte `j` holds element `j` low and element `j + G/2` high), stored as `q + 8`.
//! A partial last group takes its scale from its real elements; padded positions hold `q = 0`.
//! Importance weights, if given, may only lower the weighted error (see [`Int4g`]); without
//! them the bytes are torchao's. The native dot is [`A8W4Dot`] (int8 per-token activations,
//! integer group sums). Layout and semantics: `docs/formats/int4g.md`.
//!
//! One format is registered ([`FORMATS`]: `int4g`, group 128, f16 scales); every other
//! (group size, scale dtype) pair is a `&'static` variant reached through
//! `<dyn Format>::with_params` (the CLI's `--group-size`).
#![deny(unsafe_code)]

mod block;
mod dot;
mod scale;
#[cfg(target_arch = "x86_64")]
mod simd;
#[cfg(all(test, target_arch = "x86_64"))]
mod test_data;
#[cfg(target_arch = "x86_64")]
mod tile;

pub use block::{BlockInt4g, Int4g, QRANGE_HALF, SCALE_EPS, SCALE_MAX};
pub use dot::A8W4Dot;
pub use scale::{Bf16Scale, F16Scale, F32Scale, ScaleKind};

use qforge_core::{ActKind, ActRow, DType, Format, FormatDesc, Layout, OutRow, Params, QuantError, Registered};

/// The default group size.
pub const DEFAULT_GROUP: usize = 128;
/// The group sizes int4g supports: every power of two from 32 to 4096.
pub const GROUP_SIZES: [usize; 8] = [32, 64, 128, 256, 512, 1024, 2048, 4096];

/// An int4g variant as a registrable [`Format`]: [`Registered`] plus the run-time parameter
/// handling (`params`, `variant`) that the generic adapter does not know about.
pub struct Int4gFormat<S: ScaleKind, const H: usize>(Registered<Int4g<S, H>, A8W4Dot>);

impl<S: ScaleKind, const H: usize> Int4gFormat<S, H> {
    /// The variant as a value for a `FORMATS` list (a constant, so [`Registered::NEW`]'s
    /// compile-time checks of the block size and alignment run).
    pub const NEW: Self = Int4gFormat(Registered::NEW);
}

impl<S: ScaleKind, const H: usize> Format for Int4gFormat<S, H> {
    fn desc(&self) -> &'static FormatDesc {
        self.0.desc()
    }
    /// Groups of `2·H` elements: the scale (`S`), then `H` bytes of nibbles.
    fn layout(&self) -> Layout {
        Layout::Groups { group_size: 2 * H, group_bytes: S::BYTES + H, value_bits: 4, scale_dtype: S::DTYPE }
    }
    fn row_bytes(&self, cols: usize) -> Result<usize, QuantError> {
        self.0.row_bytes(cols)
    }
    fn dequant_row(&self, row: &[u8], out: OutRow<'_>) -> Result<(), QuantError> {
        self.0.dequant_row(row, out)
    }
    fn quantize_row(&self, x: &[f32], weights: Option<&[f32]>, out: &mut [u8]) -> Result<(), QuantError> {
        self.0.quantize_row(x, weights, out)
    }
    fn params(&self) -> Params {
        Params { group_size: Some(2 * H), scale_dtype: Some(S::DTYPE) }
    }
    fn variant(&self, p: &Params) -> Result<Option<&'static dyn Format>, QuantError> {
        let group = p.group_size.unwrap_or(2 * H);
        let dtype = p.scale_dtype.unwrap_or(S::DTYPE);
        if (group, dtype) == (2 * H, S::DTYPE) {
            return Ok(None);
        }
        lookup(group, dtype).map(Some)
    }
    fn direct_16bit(&self) -> bool {
        self.0.direct_16bit()
    }
    fn native_act(&self) -> ActKind {
        self.0.native_act()
    }
    fn dot_row(&self, bytes: &[u8], row: usize, aux: &[u8], act: ActRow<'_>) -> Option<Result<f32, QuantError>> {
        self.0.dot_row(bytes, row, aux, act)
    }
    // The multi-row entries forwarded too: without them the trait's defaults loop over
    // `dot_row`, and mat-mul / mat-vec lose the kernel's shared weight unpacking. Not
    // forwarded, on purpose: `c_block` (a group layout has no fixed C struct: the device
    // code reads `layout`). The other queries `Registered` answers from the block format's
    // constants (`ggml_uses_importance`, `cuda_codes32`, `stored_sum_rel_error`) keep the
    // trait's defaults, which int4g's constants equal (`wrapper_answers_as_registered`).
    fn dot_rows(
        &self,
        bytes: &[u8],
        row: usize,
        aux: &[u8],
        acts: &[ActRow<'_>],
        out: &mut [f32],
    ) -> Option<Result<(), QuantError>> {
        self.0.dot_rows(bytes, row, aux, acts, out)
    }
    fn dot_weight_rows(
        &self,
        bytes: &[u8],
        row_bytes: usize,
        row0: usize,
        aux: &[u8],
        act: ActRow<'_>,
        out: &mut [f32],
    ) -> Option<Result<(), QuantError>> {
        self.0.dot_weight_rows(bytes, row_bytes, row0, aux, act, out)
    }
    fn dot_tile(
        &self,
        bytes: &[u8],
        row_bytes: usize,
        row0: usize,
        aux: &[u8],
        acts: &[ActRow<'_>],
        out: &mut [f32],
        stride: usize,
    ) -> Option<Result<(), QuantError>> {
        self.0.dot_tile(bytes, row_bytes, row0, aux, acts, out, stride)
    }
}

/// The variant for `(group, scale dtype)`, or a typed error naming the valid group sizes.
pub fn lookup(group: usize, dtype: DType) -> Result<&'static dyn Format, QuantError> {
    let Some(i) = GROUP_SIZES.iter().position(|&g| g == group) else {
        return Err(QuantError::Unsupported {
            format: "int4g",
            reason: format!(
                "group size {group} is not supported: use a power of two from 32 to 4096 ({})",
                GROUP_SIZES.map(|g| g.to_string()).join(", ")
            ),
        });
    };
    if (group, dtype) == (DEFAULT_GROUP, DType::F16) {
        return Ok(&INT4G);
    }
    let j = DType::ALL.iter().position(|&d| d == dtype).unwrap_or(0);
    Ok(VARIANTS[i][j])
}

macro_rules! variants {
    ($($h:literal),*) => {
        /// Every variant, indexed `[GROUP_SIZES index][DType::ALL index]` (f32, f16, bf16).
        static VARIANTS: [[&dyn Format; 3]; GROUP_SIZES.len()] = [$([
            &Int4gFormat::<F32Scale, $h>::NEW,
            &Int4gFormat::<F16Scale, $h>::NEW,
            &Int4gFormat::<Bf16Scale, $h>::NEW,
        ]),*];
    };
}
variants!(16, 32, 64, 128, 256, 512, 1024, 2048);

/// The registered format: `int4g`, group 128, f16 scales.
pub static INT4G: Int4gFormat<F16Scale, 64> = Int4gFormat::NEW;

/// This family's formats for the registry: only the default variant (the others are reached
/// with `<dyn Format>::with_params`).
pub static FORMATS: &[&dyn Format] = &[&INT4G];

#[cfg(test)]
mod tests {
    use super::*;
    use qforge_core::Role;

    /// The wrapper answers every query `Registered` specializes as `Registered` does (but
    /// `c_block`, see the `Format` impl), so that no format-level behaviour silently falls
    /// back to a trait default because a method was not forwarded.
    #[test]
    fn wrapper_answers_as_registered() {
        let inner: Registered<Int4g<F16Scale, 64>, A8W4Dot> = Registered::NEW;
        let (w, r): (&dyn Format, &dyn Format) = (&INT4G, &inner);
        assert_eq!(w.ggml_uses_importance(), r.ggml_uses_importance());
        assert_eq!(w.cuda_codes32(), r.cuda_codes32());
        assert!(w.direct_16bit() && r.direct_16bit(), "f16 / bf16 rows by table, without an f32 pass");
        assert_eq!(w.stored_sum_rel_error().to_bits(), r.stored_sum_rel_error().to_bits());
        assert_eq!(w.native_act(), r.native_act());
        assert_eq!(w.row_bytes(300).unwrap(), r.row_bytes(300).unwrap());
        assert!(w.c_block().is_empty(), "a group layout has no fixed C struct");
    }

    #[test]
    fn descriptor_and_variants() {
        let d = FORMATS[0].desc();
        assert_eq!((d.name, d.family, d.ggml_type, d.block_size, d.block_bytes), ("int4g", "int4g", None, 128, 66));
        assert_eq!((d.role, d.dot_type), (Role::Weight, None));
        assert_eq!(d.cuda.as_ref().map(|c| c.traits), Some("qf_int4g"));
        assert!(!d.summary.contains('\n'));
        assert_eq!(FORMATS[0].params(), Params { group_size: Some(128), scale_dtype: Some(DType::F16) });
        assert_eq!(FORMATS[0].native_act(), ActKind::Int8Dyn);
        for (i, &g) in GROUP_SIZES.iter().enumerate() {
            for (j, &dt) in DType::ALL.iter().enumerate() {
                let f = VARIANTS[i][j];
                let p = Params { group_size: Some(g), scale_dtype: Some(dt) };
                assert_eq!(f.params(), p);
                assert_eq!((f.desc().block_size, f.desc().block_bytes), (g, dt.size() + g / 2));
                let want =
                    Layout::Groups { group_size: g, group_bytes: dt.size() + g / 2, value_bits: 4, scale_dtype: dt };
                assert_eq!((f.layout(), f.layout().row_unit()), (want, (g, dt.size() + g / 2)));
                // Only the registered variant has device code (kernels are found by name).
                assert_eq!(f.desc().cuda.is_some(), (g, dt) == (DEFAULT_GROUP, DType::F16));
                let v = <dyn Format>::with_params(FORMATS[0], &p).unwrap();
                assert_eq!(v.params(), p);
                // (The instances are zero-sized: compare what they are, not where.)
                assert_eq!(lookup(g, dt).unwrap().params(), p);
                // The variant reproduces itself and reaches every other one.
                assert_eq!(v.with_params(&v.params()).unwrap().params(), p);
                assert_eq!(v.with_params(&Params::default()).unwrap().params(), p);
                assert_eq!(v.with_params(&Params::group_size(64)).unwrap().params().scale_dtype, Some(dt));
            }
        }
    }

    #[test]
    fn invalid_group_sizes_are_typed_errors() {
        for g in [0, 1, 16, 48, 100, 129, 8192, usize::MAX] {
            match <dyn Format>::with_params(FORMATS[0], &Params::group_size(g)) {
                Err(QuantError::Unsupported { format: "int4g", reason }) => {
                    assert!(reason.contains(&g.to_string()) && reason.contains("32, 64, 128"), "{reason}")
                }
                other => panic!("group {g}: {other:?}"),
            }
        }
    }
}
