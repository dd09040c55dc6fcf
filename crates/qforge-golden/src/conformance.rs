//! The conformance suite every format family runs: one line in the family's tests,
//!
//! ```ignore
//! qforge_golden::conformance_suite!(qforge_tq::FORMATS);
//! qforge_golden::conformance_suite!(qforge_legacy::FORMATS, ignores_weights: &["q8_0", "q8_1"]);
//! ```
//!
//! expands to one `#[test]` per check below (in a `conformance` module), each run over the
//! family's `&[&dyn Format]` through the object-safe `Format` trait only. Formats ggml does
//! not define (int4g, fp8) run every check marked "—" (no ggml reference) with
//! `qforge_golden::property_suite!(VARIANTS, ...)`: the properties go through the tensor-level
//! entry points (`quantize_aux`, `quantize_row_at`, `dequant_row_at`; a row is a tensor of one
//! row), and "block" below means a format's [`unit()`] (a block, a group, a scale tile).
//!
//! | test | reference | checks |
//! |---|---|---|
//! | `registry_matches_the_manifest` | golden manifest | ggml type id, block size, block bytes; the expected names in order; one family; the registry accepts the family |
//! | `decode_random_blocks_matches_ggml` | ggml's `to_float` of random blocks | f32 bit for bit (NaN where ggml gives NaN); f16 / bf16 = `from_f32` of it, bit for bit; formats without a `to_float` skipped by name |
//! | `quantize_matches_ggml` | ggml's `quant.bin` | bytes identical (first differing row reported); RMSE <= ggml's per dataset |
//! | `quantize_with_imatrix_matches_ggml` | ggml's `quant_imatrix.bin` (else `quant.bin`) | bytes identical where that golden exists; weighted RMSE <= ggml's per dataset; the imatrix lowers the weighted error |
//! | `arbitrary_bytes_never_panic` | — | any bytes, any length, every dtype: no panic, errors exactly on wrong lengths, partial rows are prefixes, f16 / bf16 rounding |
//! | `non_finite_input_is_rejected` | — | `QuantError::NonFinite` with the index and value of the first NaN / Inf |
//! | `rows_of_any_length_round_trip` | — | any row length (partial last block) quantizes and decodes to its logical length; the last block is encoded as on its own |
//! | `full_blocks_do_not_depend_on_what_follows` | — | a whole block's bytes do not change with the rest of the row |
//! | `extreme_finite_input_never_panics` | — | arbitrary finite values and weights (huge, tiny, subnormal) encode and decode |
//! | `native_dot_matches_ggml` | ggml's CPU `vec_dot` (`tests/golden/dot/`) | native activation kind = ggml's vec_dot_type; activation bytes = ggml's from_float; `dot_row` within 2e-6 of Σ\|w·a\| |
//! | `zeros_decode_to_zeros` | — | all-zero rows of any length encode deterministically and decode to exact zeros |
//!
//! Family-specific facts (error bounds, packing orders, documented deviations) stay in the
//! family's own tests.

use crate as golden;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use qforge_core::{Format, OutRow, QuantError, bf16, f16};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// A check of a decode: `(format, input, decoded) -> Err(why)`.
pub type DecodeCheck = fn(&dyn Format, &[f32], &[f32]) -> Result<(), String>;

/// One family's conformance configuration. Build it with
/// [`conformance_suite!`](crate::conformance_suite), naming only the fields that differ from [`Family::DEFAULT`].
#[derive(Clone, Copy)]
pub struct Family {
    /// The family's registered formats (its `pub static FORMATS`).
    pub formats: &'static [&'static dyn Format],
    /// The test file the suite is expanded in (`file!()`, set by the macro): proptest keeps
    /// its regression seeds next to it.
    pub source_file: Option<&'static str>,
    /// The family's format names in registration order (checked when not empty).
    pub names: &'static [&'static str],
    /// Proptest cases per property.
    pub cases: u32,
    /// Formats whose quantizer is *not* claimed byte-identical with ggml's; the RMSE bounds
    /// still apply to them. Empty: every format reproduces ggml byte for byte.
    pub not_byte_identical: &'static [&'static str],
    /// Formats whose quantizer ignores importance weights, as ggml's does (their imatrix
    /// encoding must equal the plain one, byte for byte).
    pub ignores_weights: &'static [&'static str],
    /// `(format, dataset)` pairs on which the imatrix cannot lower the error because the
    /// format's scale underflows to 0 with or without it (asserted: both decode to zeros).
    pub imatrix_underflows: &'static [(&'static str, &'static str)],
    /// `(format, dataset)` pairs on which ggml's own imatrix quantization is no better than its
    /// plain one (asserted on ggml's bytes), so ours, equal to ggml's, is not lower either.
    pub imatrix_no_gain: &'static [(&'static str, &'static str)],
    /// What ggml's decode of the family's random blocks must include somewhere (a check on
    /// the golden data's coverage), e.g. `("NaN", f32::is_nan)`.
    pub random_covers: (&'static str, fn(f32) -> bool),
    /// Whole blocks are independent of the rest of the row also *with* importance weights
    /// (false where, as in ggml, weighted quantization uses row-wide statistics).
    pub weighted_blocks_independent: bool,
    /// An extra check of the decode of arbitrary finite input (`format, x, decoded`).
    pub finite_input_check: Option<DecodeCheck>,
    /// Formats outside the family that its native dots take as activations (e.g. the k
    /// family's q8_k for iq), so the activation quantization can be checked against ggml.
    pub act_formats: &'static [&'static dyn Format],
}

impl Family {
    /// A family with no formats and every option at its default: 256 proptest cases, no
    /// per-format exceptions, random blocks that must decode to a NaN somewhere. Start from
    /// it with struct-update syntax.
    pub const DEFAULT: Family = Family {
        formats: &[],
        source_file: None,
        names: &[],
        cases: 256,
        not_byte_identical: &[],
        ignores_weights: &[],
        imatrix_underflows: &[],
        imatrix_no_gain: &[],
        random_covers: ("NaN", f32::is_nan),
        weighted_blocks_independent: false,
        finite_input_check: None,
        act_formats: &[],
    };

    /// The largest [`unit`] of the family: (columns, row bytes).
    fn max_unit(&self) -> (usize, usize) {
        let units = self.formats.iter().map(|f| unit(*f));
        units.fold((0, 0), |(c, b), (uc, ub)| (c.max(uc), b.max(ub)))
    }

    fn runner(&self) -> TestRunner {
        TestRunner::new(Config {
            cases: self.cases,
            source_file: self.source_file,
            failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel("proptest-regressions"))),
            ..Config::default()
        })
    }

    /// Runs `test` on `strategy`'s values; panics with the (shrunk) failing input.
    fn check<S: Strategy>(&self, name: &str, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
    where
        S::Value: std::fmt::Debug,
    {
        if let Err(e) = self.runner().run(&strategy, test) {
            panic!("{name}: {e}");
        }
    }
}

/// Expands to the whole conformance suite for a family of formats ggml defines, as `#[test]`s
/// in a `conformance` module: every property of [`property_suite!`](crate::property_suite)
/// plus the checks against ggml's golden vectors. `conformance_suite!(FORMATS)` or
/// `conformance_suite!(FORMATS, field: value, ...)` with fields of [`Family`].
#[macro_export]
macro_rules! conformance_suite {
    ($formats:expr $(, $field:ident : $value:expr)* $(,)?) => {
        $crate::__suite!(conformance, $formats, [$($field: $value),*],
            golden: [registry_matches_the_manifest, decode_random_blocks_matches_ggml, quantize_matches_ggml,
                quantize_with_imatrix_matches_ggml],
            dot: [native_dot_matches_ggml]);
    };
}

/// Expands to every property of the conformance suite that needs no ggml vectors, as
/// `#[test]`s in a `properties` module, for formats ggml does not define (int4g, fp8): the
/// same properties the block formats run in [`conformance_suite!`](crate::conformance_suite),
/// through the tensor-level entry points of `Format` (a row is a tensor of one row with its
/// side section). Same arguments as `conformance_suite!`.
#[macro_export]
macro_rules! property_suite {
    ($formats:expr $(, $field:ident : $value:expr)* $(,)?) => {
        $crate::__suite!(properties, $formats, [$($field: $value),*], golden: [], dot: []);
    };
}

/// The expansion behind [`conformance_suite!`](crate::conformance_suite) and
/// [`property_suite!`](crate::property_suite): one `#[test]` per property (the list every
/// format runs, written only here) and per golden check named by the caller.
#[doc(hidden)]
#[macro_export]
macro_rules! __suite {
    ($module:ident, $formats:expr, [$($field:ident : $value:expr),*],
        golden: [$($gold:ident),*], dot: [$($dot:ident),*]) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            use $crate::conformance as c;

            fn family() -> c::Family {
                c::Family { formats: $formats, source_file: Some(file!()), $($field: $value,)* ..c::Family::DEFAULT }
            }

            $crate::__suite!(@tests c, [
                arbitrary_bytes_never_panic,
                non_finite_input_is_rejected,
                rows_of_any_length_round_trip,
                full_blocks_do_not_depend_on_what_follows,
                extreme_finite_input_never_panics,
                zeros_decode_to_zeros
                $(, $gold)*
            ]);
            $(
                #[test]
                fn $dot() {
                    $crate::dot::$dot(&family());
                }
            )*
        }
    };
    (@tests $c:ident, [$($test:ident),*]) => {
        $(
            #[test]
            fn $test() {
                $c::$test(&family());
            }
        )*
    };
}

// ---------------------------------------------------------------------------------------------
// Helpers (public: family tests use them too)

/// The format called `name` in `formats`; panics if it is not registered.
pub fn find(formats: &[&'static dyn Format], name: &str) -> &'static dyn Format {
    *formats.iter().find(|f| f.desc().name == name).unwrap_or_else(|| panic!("{name} not registered"))
}

/// The smallest run of columns a format encodes on its own, and its row bytes: a block, a
/// group, or a scale tile's width (the column multiple of
/// [`Format::split_granularity`]). The properties cut and compare rows in these units.
pub fn unit(f: &dyn Format) -> (usize, usize) {
    let cols = f.split_granularity().1;
    (cols, f.row_bytes(cols).unwrap_or_else(|e| panic!("{}: row_bytes({cols}): {e}", f.desc().name)))
}

/// One row quantized as a tensor of one row: the row's bytes and the tensor's side section
/// (empty for formats whose rows carry their own scales; fp8's row of grid scales).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// The row, `row_bytes(n)` bytes.
    pub row: Vec<u8>,
    /// The side section of the one-row tensor, `aux_bytes(1, n)` bytes.
    pub aux: Vec<u8>,
}

/// Quantizes `x` as a one-row tensor through `Format`'s tensor-level entry points
/// (`quantize_aux`, then `quantize_row_at`), so every format runs the same properties.
pub fn try_encode(f: &dyn Format, x: &[f32], w: Option<&[f32]>) -> Result<Encoded, QuantError> {
    let n = x.len();
    let mut aux = vec![0u8; f.aux_bytes(1, n)?];
    f.quantize_aux(x, 1, n, &mut aux)?;
    let mut row = vec![0u8; f.row_bytes(n)?];
    f.quantize_row_at(x, w, 0, &aux, &mut row)?;
    Ok(Encoded { row, aux })
}

/// [`try_encode`], panicking on an error.
pub fn encode(f: &dyn Format, x: &[f32], w: Option<&[f32]>) -> Encoded {
    try_encode(f, x, w).unwrap_or_else(|e| panic!("{}: quantize: {e}", f.desc().name))
}

/// Decodes `n` logical elements of a row with its side section to `out` through
/// `dequant_row_at` (row 0 of a one-row tensor).
pub fn decode_into(f: &dyn Format, row: &[u8], aux: &[u8], out: OutRow<'_>) -> Result<(), QuantError> {
    f.dequant_row_at(row, 0, aux, out)
}

/// Decodes an [`Encoded`] row of `n` logical elements to f32 (panics on an error).
pub fn decode(f: &dyn Format, e: &Encoded, n: usize) -> Vec<f32> {
    let mut y = vec![0f32; n];
    decode_into(f, &e.row, &e.aux, OutRow::F32(&mut y)).unwrap_or_else(|e| panic!("{}: dequant: {e}", f.desc().name));
    y
}

/// Quantizes one row through `Format` (panics on an error): the bytes of a one-row tensor,
/// the row then its side section (just the row for most formats).
pub fn quantize(f: &dyn Format, x: &[f32], w: Option<&[f32]>) -> Vec<u8> {
    let Encoded { mut row, aux } = encode(f, x, w);
    row.extend_from_slice(&aux);
    row
}

/// Dequantizes one row of `n` logical elements, as [`quantize`] lays it out, to f32
/// through `Format` (panics on an error, and on a side section of the wrong length).
pub fn dequantize(f: &dyn Format, q: &[u8], n: usize) -> Vec<f32> {
    let name = f.desc().name;
    let rb = f.row_bytes(n).unwrap_or_else(|e| panic!("{name}: row_bytes({n}): {e}"));
    let (row, aux) = q.split_at(rb.min(q.len()));
    assert_eq!(aux.len(), f.aux_bytes(1, n).unwrap(), "{name}: side section of a {n}-element row");
    decode(f, &Encoded { row: row.to_vec(), aux: aux.to_vec() }, n)
}

/// The frame of a per-group error bound: quantizes `x` (with weights `w`) through every
/// format, decodes it, and calls `check(name, index, x_group, decoded_group)` on each run of
/// `group(format)` consecutive values (a block, or the elements sharing one scale).
pub fn for_each_group(
    formats: &[&'static dyn Format],
    x: &[f32],
    w: Option<&[f32]>,
    group: impl Fn(&dyn Format) -> usize,
    mut check: impl FnMut(&str, usize, &[f32], &[f32]) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    for f in formats {
        let y = decode(*f, &encode(*f, x, w), x.len());
        let g = group(*f);
        for (i, (xs, ys)) in x.chunks(g).zip(y.chunks(g)).enumerate() {
            check(f.desc().name, i, xs, ys)?;
        }
    }
    Ok(())
}

/// Largest magnitude.
pub fn amax(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |m, v| m.max(v.abs()))
}

/// Ordinary values of one of several shapes (uniform, heavy-tailed `u^5`, positive, sparse
/// outliers, with exact zeros), `1..=max_len` of them, scaled so that the largest magnitude
/// of every 256 consecutive values is `10^e`, `e` in [-1, 3): f16 / E8M0 / UE4M3 scales stay
/// normal and finite.
pub fn values(max_len: usize) -> impl Strategy<Value = Vec<f32>> {
    let shape = prop_oneof![
        prop::collection::vec(-1.0f64..1.0, 1..=max_len),
        prop::collection::vec((-1.0f64..1.0).prop_map(|u| u.powi(5)), 1..=max_len),
        prop::collection::vec(0.5f64..1.5, 1..=max_len),
        prop::collection::vec(prop_oneof![9 => -1.0f64..1.0, 1 => -30.0f64..30.0], 1..=max_len),
        prop::collection::vec(prop_oneof![-1.0f64..1.0, Just(0.0)], 1..=max_len),
    ];
    (shape, -1.0f64..3.0).prop_map(|(u, e)| {
        let scale = 10f64.powf(e);
        let mut x = Vec::with_capacity(u.len());
        for block in u.chunks(256) {
            let m = block.iter().fold(0f64, |m, v| m.max(v.abs()));
            let start = x.len();
            x.extend(block.iter().map(|v| if m == 0.0 { 0.0 } else { (v / m * scale) as f32 }));
            if m == 0.0 {
                x[start] = scale as f32;
            }
        }
        x
    })
}

/// [`values`] with one strictly positive importance weight in [0.1, 10) per value.
///
/// The weights are `0.1 + 9.9·u / 2²⁰` for an integer `u < 2²⁰`, not proptest's `0.1f32..10.0`:
/// its float sampler (proptest 1.12) can overshoot such a range's low end by more than its own
/// step and then fails a `debug_assert!` inside proptest (seen once in a local CI run, on a
/// random seed, in `qforge-int4g`'s `importance_weights_only_lower_the_weighted_error`).
pub fn values_and_weights(max_len: usize) -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    values(max_len).prop_flat_map(|x| {
        let n = x.len();
        let weight = (0u32..1 << 20).prop_map(|u| 0.1 + 9.9 * (u as f32 / (1u32 << 20) as f32));
        (Just(x), prop::collection::vec(weight, n))
    })
}

/// Any finite f32, subnormals and ±f32::MAX included.
pub fn finite_f32() -> impl Strategy<Value = f32> {
    any::<f32>().prop_filter("finite", |v| v.is_finite())
}

/// The same bits, or both NaN. Not NaN's sign and payload: those of a NaN computed from NaN
/// operands (a NaN scale's products) are not ours to keep, since LLVM may commute an `fadd` or
/// `fmul` and x86 keeps the first operand's NaN. Strict bits here failed for q5_1 (0x7f00
/// against 0xfe00, a NaN `d` and `m` of opposite signs), on code no more wrong than ggml's.
fn same_bits<T: Copy>(got: T, want: T, bits: fn(T) -> u32, nan: fn(T) -> bool) -> bool {
    bits(got) == bits(want) || (nan(got) && nan(want))
}

fn same_f16(a: f16, b: f16) -> bool {
    same_bits(a, b, |v| v.to_bits() as u32, |v| v.is_nan())
}

fn same_bf16(a: bf16, b: bf16) -> bool {
    same_bits(a, b, |v| v.to_bits() as u32, |v| v.is_nan())
}

/// Checks that f16 / bf16 dequantization of `q` (n elements) is the nearest-even rounding of
/// the f32 result `y`, bit for bit; returns the first mismatch.
fn check_half(f: &dyn Format, q: &[u8], aux: &[u8], y: &[f32]) -> Result<(), String> {
    let name = f.desc().name;
    let mut h = vec![f16::ZERO; y.len()];
    decode_into(f, q, aux, OutRow::F16(&mut h)).map_err(|e| format!("{name}: f16: {e}"))?;
    let mut b = vec![bf16::ZERO; y.len()];
    decode_into(f, q, aux, OutRow::Bf16(&mut b)).map_err(|e| format!("{name}: bf16: {e}"))?;
    for (i, v) in y.iter().enumerate() {
        if !same_f16(h[i], f16::from_f32(*v)) {
            return Err(format!(
                "{name} f16 element {i}: {:#06x}, from_f32({v:e}) = {:#06x}",
                h[i].to_bits(),
                f16::from_f32(*v).to_bits()
            ));
        }
        if !same_bf16(b[i], bf16::from_f32(*v)) {
            return Err(format!(
                "{name} bf16 element {i}: {:#06x}, from_f32({v:e}) = {:#06x}",
                b[i].to_bits(),
                bf16::from_f32(*v).to_bits()
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Golden tests

/// Every format's descriptor matches what the generator recorded from ggml (type id, block
/// size, block bytes); the family is one family with unique names and ids (the registry
/// accepts it), and its summaries are one line.
pub fn registry_matches_the_manifest(fam: &Family) {
    let m = golden::manifest();
    let family = fam.formats[0].desc().family;
    if !fam.names.is_empty() {
        assert_eq!(fam.formats.iter().map(|f| f.desc().name).collect::<Vec<_>>(), fam.names, "registered formats");
    }
    let mut reg = qforge_core::Registry::new();
    reg.register_all(fam.formats).unwrap_or_else(|e| panic!("the registry refuses family {family}: {e}"));
    for f in fam.formats {
        let d = f.desc();
        assert_eq!(d.family, family, "{}: one family per crate", d.name);
        assert!(!d.summary.is_empty() && !d.summary.contains('\n'), "{}: summary must be one line", d.name);
        if let Some(t) = m.ggml_types.get(d.name) {
            assert_eq!(
                (Some(t.ggml_type), t.block_size, t.block_bytes),
                (d.ggml_type, d.block_size, d.block_bytes),
                "{}: (ggml type, block size, block bytes) differ from ggml's type table",
                d.name
            );
        }
        match (d.ggml_type, m.formats.get(d.name)) {
            (Some(id), Some(e)) => assert_eq!(
                (id, d.block_size, d.block_bytes),
                (e.ggml_type, e.block_size, e.block_bytes),
                "{}: (ggml type, block size, block bytes) differ from ggml's",
                d.name
            ),
            (Some(id), None) => panic!("{}: ggml type {id} but no golden vectors (rerun tests/golden/gen.py)", d.name),
            (None, Some(e)) => {
                panic!("{}: ggml defines it (type {}) but the descriptor has no ggml type", d.name, e.ggml_type)
            }
            (None, None) => println!("{}: not a ggml type, no golden vectors", d.name),
        }
    }
}

/// ggml's random blocks (NaN / Inf scales included) decode bit for bit in f32 (NaN where ggml
/// gives NaN), and f16 / bf16 output is `from_f32` of that value, bit for bit. Formats ggml
/// has no `to_float` for are skipped, by name.
pub fn decode_random_blocks_matches_ggml(fam: &Family) {
    let (what, covers) = fam.random_covers;
    let mut covered = false;
    let mut checked = 0;
    for f in fam.formats {
        let d = f.desc();
        let Some(e) = golden::manifest().formats.get(d.name).cloned() else { continue };
        let Some(want) = golden::random_f32(d.name) else {
            assert!(!e.has_to_float);
            println!("{}: skipped, ggml has no to_float", d.name);
            continue;
        };
        let raw = golden::random_blocks(d.name);
        assert_eq!((raw.len(), want.len()), (e.random_blocks * d.block_bytes, e.random_blocks * d.block_size));
        let got = dequantize(*f, &raw, want.len());
        if let Some((i, g, w)) = golden::first_mismatch(&got, &want) {
            panic!(
                "{}: element {i} (block {}) decodes to {g:e} ({:#x}), ggml gives {w:e}",
                d.name,
                i / d.block_size,
                g.to_bits()
            );
        }
        check_half(*f, &raw, &[], &want).unwrap_or_else(|e| panic!("{e}"));
        covered |= want.iter().any(|v| covers(*v));
        checked += 1;
    }
    assert!(checked > 0, "no format of the family has a ggml to_float");
    assert!(covered, "the random blocks should decode to {what} somewhere");
}

/// Our quantization of every golden input row (with the golden imatrix or without), computed
/// once per test binary.
fn ours(f: &'static dyn Format, with_imatrix: bool) -> Arc<Vec<u8>> {
    type Cache = Mutex<HashMap<(&'static str, bool), Arc<OnceLock<Arc<Vec<u8>>>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cell =
        CACHE.get_or_init(Default::default).lock().unwrap().entry((f.desc().name, with_imatrix)).or_default().clone();
    cell.get_or_init(|| {
        let cols = golden::manifest().cols;
        let im = with_imatrix.then(golden::imatrix);
        let rb = f.row_bytes(cols).unwrap();
        let inputs = golden::inputs();
        let mut q = vec![0u8; inputs.len() / cols * rb];
        for (x, r) in inputs.chunks_exact(cols).zip(q.chunks_exact_mut(rb)) {
            f.quantize_row(x, im.as_deref(), r).unwrap();
        }
        Arc::new(q)
    })
    .clone()
}

/// One dataset's slice of the golden inputs and of a quantized buffer of them.
struct Span<'a> {
    name: &'a str,
    x: &'a [f32],
    rows: std::ops::Range<usize>,
}

fn datasets<'a>(m: &'a golden::Manifest, inputs: &'a [f32]) -> Vec<Span<'a>> {
    let mut r0 = 0;
    m.datasets
        .iter()
        .map(|ds| {
            let s = Span { name: &ds.name, x: &inputs[r0 * m.cols..(r0 + ds.rows) * m.cols], rows: r0..r0 + ds.rows };
            r0 += ds.rows;
            s
        })
        .collect()
}

fn decode_rows(f: &dyn Format, q: &[u8], rows: &std::ops::Range<usize>, cols: usize) -> Vec<f32> {
    let rb = f.row_bytes(cols).unwrap();
    q[rows.start * rb..rows.end * rb].chunks_exact(rb).flat_map(|r| dequantize(f, r, cols)).collect()
}

/// The first row of `rows` where `ours` and `ggml` differ.
fn first_differing_row(
    f: &dyn Format,
    ours: &[u8],
    ggml: &[u8],
    rows: &std::ops::Range<usize>,
    cols: usize,
) -> Option<String> {
    let rb = f.row_bytes(cols).unwrap();
    let bb = f.desc().block_bytes;
    rows.clone().find(|r| ours[r * rb..(r + 1) * rb] != ggml[r * rb..(r + 1) * rb]).map(|r| {
        let at = (0..rb).find(|&i| ours[r * rb + i] != ggml[r * rb + i]).unwrap();
        format!("row {r} differs from ggml first at byte {at} (block {})", at / bb)
    })
}

/// Without importance weights: per dataset, the bytes are ggml's (where the family claims it)
/// and the RMSE is no worse than that of ggml's bytes.
pub fn quantize_matches_ggml(fam: &Family) {
    let m = golden::manifest();
    let inputs = golden::inputs();
    let mut failures = Vec::new();
    for f in fam.formats {
        let name = f.desc().name;
        let Some(want) = m.formats.contains_key(name).then(|| golden::quant(name, false)).flatten() else {
            println!("{name}: skipped, no ggml quantization");
            continue;
        };
        let got = ours(*f, false);
        assert_eq!(got.len(), want.len(), "{name}: quant.bin size");
        let claim = !fam.not_byte_identical.contains(&name);
        for ds in datasets(&m, &inputs) {
            let diff = first_differing_row(*f, &got, &want, &ds.rows, m.cols);
            let ours = golden::rmse(ds.x, &decode_rows(*f, &got, &ds.rows, m.cols));
            let ggml = golden::rmse(ds.x, &decode_rows(*f, &want, &ds.rows, m.cols));
            println!(
                "{name:7} {:13} ours {ours:.6e} ggml {ggml:.6e} bytes {}",
                ds.name,
                diff.as_deref().unwrap_or("identical")
            );
            if ours.is_nan() || ours > ggml * (1.0 + 1e-6) {
                failures.push(format!("{name} {}: rmse {ours} > ggml {ggml}", ds.name));
            }
            if let (true, Some(d)) = (claim, diff) {
                failures.push(format!("{name} {}: {d}", ds.name));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// With the golden importance matrix, per dataset: the bytes are ggml's `quant_imatrix.bin`
/// where it exists (and the family claims identity); the importance-weighted RMSE is no worse
/// than that of ggml's bytes (its `quant.bin` where ggml ignores weights); and where ggml
/// honours weights (a `quant_imatrix.bin` exists) the weighted error is lower than that of our
/// own quantization without the imatrix. Formats that ignore weights must encode as without
/// them; any other format without a `quant_imatrix.bin` must beat ggml's bytes somewhere.
pub fn quantize_with_imatrix_matches_ggml(fam: &Family) {
    let m = golden::manifest();
    let inputs = golden::inputs();
    let im = golden::imatrix();
    assert_eq!(im.len(), m.cols);
    let mut failures = Vec::new();
    for f in fam.formats {
        let name = f.desc().name;
        if !m.formats.contains_key(name) {
            println!("{name}: skipped, no golden vectors");
            continue;
        }
        let ggml_im = golden::quant(name, true);
        let Some(want) = ggml_im.clone().or_else(|| golden::quant(name, false)) else {
            println!("{name}: skipped, no ggml quantization");
            continue;
        };
        let (got, plain) = (ours(*f, true), ours(*f, false));
        let ignores = fam.ignores_weights.contains(&name);
        if ignores && got != plain {
            failures.push(format!("{name}: ignores importance weights, yet encodes differently with them"));
        }
        let claim = ggml_im.is_some() && !fam.not_byte_identical.contains(&name);
        let mut improved = false;
        for ds in datasets(&m, &inputs) {
            let y_im = decode_rows(*f, &got, &ds.rows, m.cols);
            let ours = golden::weighted_rmse(ds.x, &y_im, &im);
            let ggml = golden::weighted_rmse(ds.x, &decode_rows(*f, &want, &ds.rows, m.cols), &im);
            let diff = ggml_im.as_ref().and_then(|w| first_differing_row(*f, &got, w, &ds.rows, m.cols));
            println!(
                "{name:7} {:13} imatrix: ours {ours:.6e} ggml {ggml:.6e} bytes {}",
                ds.name,
                diff.as_deref().unwrap_or("-")
            );
            if ours.is_nan() || ours > ggml * (1.0 + 1e-6) {
                failures.push(format!("{name} {}: weighted rmse {ours} > ggml {ggml}", ds.name));
            }
            if let (true, Some(d)) = (claim, diff) {
                failures.push(format!("{name} {} (imatrix): {d}", ds.name));
            }
            improved |= ours < ggml * (1.0 - 1e-4);
            if ggml_im.is_none() {
                continue;
            }
            // ggml honours the imatrix for this format: so must we, against our own plain encoding.
            let y_plain = decode_rows(*f, &plain, &ds.rows, m.cols);
            let without = golden::weighted_rmse(ds.x, &y_plain, &im);
            println!("{name:7} {:13} weighted rmse without {without:.6e} with imatrix {ours:.6e}", ds.name);
            if ds.x.iter().all(|v| *v == 0.0) {
                if (ours, without) != (0.0, 0.0) {
                    failures.push(format!("{name} {}: all-zero input has error {ours} / {without}", ds.name));
                }
            } else if fam.imatrix_underflows.contains(&(name, ds.name)) {
                if !y_plain.iter().chain(&y_im).all(|v| *v == 0.0) {
                    failures.push(format!("{name} {}: the scale should underflow to 0", ds.name));
                }
            } else if fam.imatrix_no_gain.contains(&(name, ds.name)) {
                let plain_ggml = golden::quant(name, false).expect("quant.bin");
                let ggml_plain = golden::weighted_rmse(ds.x, &decode_rows(*f, &plain_ggml, &ds.rows, m.cols), &im);
                if ggml < ggml_plain {
                    failures.push(format!("{name} {}: ggml's imatrix error {ggml} < its plain {ggml_plain}", ds.name));
                }
            } else if ours.is_nan() || ours >= without {
                failures.push(format!("{name} {}: weighted rmse with imatrix {ours} >= without {without}", ds.name));
            }
        }
        if ggml_im.is_none() && !ignores && !improved {
            failures.push(format!("{name}: importance weights should beat ggml's (unweighted) bytes somewhere"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

// ---------------------------------------------------------------------------------------------
// Properties

/// Any bytes (row and side section) decode without panicking, to every dtype: a row decodes
/// exactly when its byte length is `row_bytes(cols)` (otherwise a typed error); a partial row
/// (any logical length) is the prefix of the whole-unit decode; f16 / bf16 are the rounded
/// f32 values.
pub fn arbitrary_bytes_never_panic(fam: &Family) {
    let (uc_max, ub_max) = fam.max_unit();
    let aux_max = fam.formats.iter().map(|f| f.aux_bytes(1, 2 * uc_max + 1).unwrap()).max().unwrap_or(0);
    let strategy = (
        prop::collection::vec(any::<u8>(), 2 * ub_max + 1),
        prop::collection::vec(any::<u8>(), aux_max),
        0..uc_max,
        0..=2 * ub_max + 1,
        0..=2 * uc_max + 1,
    );
    fam.check("arbitrary_bytes_never_panic", strategy, |(bytes, aux, cut, len, cols)| {
        for f in fam.formats {
            let (name, (uc, ub)) = (f.desc().name, unit(*f));
            let aux_for = |n: usize| &aux[..f.aux_bytes(1, n).unwrap()];
            let q = &bytes[..2 * ub];
            let whole = decode(*f, &Encoded { row: q.to_vec(), aux: aux_for(2 * uc).to_vec() }, 2 * uc);
            for n in [2 * uc - cut % uc, uc - cut % uc] {
                let q = &q[..f.row_bytes(n).unwrap()];
                let y = decode(*f, &Encoded { row: q.to_vec(), aux: aux_for(n).to_vec() }, n);
                for i in 0..n {
                    prop_assert!(
                        golden::same_f32(y[i], whole[i]),
                        "{}: {} of {} elements: element {} differs",
                        name,
                        n,
                        2 * uc,
                        i
                    );
                }
                check_half(*f, q, aux_for(n), &y).map_err(TestCaseError::fail)?;
            }
            // Any other length: a typed error, never a panic, in every dtype.
            let ok = Ok(len) == f.row_bytes(cols);
            let (q, a) = (&bytes[..len], aux_for(cols));
            let r32 = decode_into(*f, q, a, OutRow::F32(&mut vec![0f32; cols]));
            let r16 = decode_into(*f, q, a, OutRow::F16(&mut vec![f16::ZERO; cols]));
            let rb16 = decode_into(*f, q, a, OutRow::Bf16(&mut vec![bf16::ZERO; cols]));
            prop_assert!(
                r32.is_ok() == ok && r16.is_ok() == ok && rb16.is_ok() == ok,
                "{}: {} bytes, {} cols",
                name,
                len,
                cols
            );
            prop_assert!(
                decode_into(*f, &bytes[..2 * ub - 1], aux_for(2 * uc), OutRow::F32(&mut vec![0f32; 2 * uc])).is_err(),
                "{}",
                name
            );
        }
        Ok(())
    });
}

/// NaN or infinity anywhere in the input is rejected with `QuantError::NonFinite` naming the
/// element and its value, with or without importance weights.
pub fn non_finite_input_is_rejected(fam: &Family) {
    let bad = prop_oneof![Just(f32::NAN), Just(f32::INFINITY), Just(f32::NEG_INFINITY)];
    let strategy = (values(300.max(2 * fam.max_unit().0)), any::<prop::sample::Index>(), bad, any::<bool>());
    fam.check("non_finite_input_is_rejected", strategy, |(mut x, pos, bad, weighted)| {
        let at = pos.index(x.len());
        x[at] = bad;
        let w = vec![1.0; x.len()];
        for f in fam.formats {
            match try_encode(*f, &x, weighted.then_some(&w[..])) {
                Err(QuantError::NonFinite { index, value }) => {
                    prop_assert_eq!(index, at, "{}", f.desc().name);
                    prop_assert!(golden::same_f32(value, bad), "{}: value {}", f.desc().name, value);
                }
                other => prop_assert!(false, "{}: expected NonFinite at {}, got {:?}", f.desc().name, at, other),
            }
        }
        Ok(())
    });
}

/// A row of any length (a partial last unit included) quantizes through `Format`, with or
/// without weights, and dequantizes to its logical length with finite values; a logical length
/// needing more blocks is an error. Without weights the partial last unit is encoded exactly
/// as the row's tail on its own (its bytes and its side section).
pub fn rows_of_any_length_round_trip(fam: &Family) {
    let strategy = (values(fam.max_unit().0 + 40), any::<bool>());
    fam.check("rows_of_any_length_round_trip", strategy, |(x, weighted)| {
        let n = x.len();
        let w: Vec<f32> = (0..n).map(|i| 0.5 + (i % 7) as f32).collect();
        let w = weighted.then_some(&w[..]);
        for f in fam.formats {
            let (name, (bs, bb), (uc, _)) = (f.desc().name, (f.desc().block_size, f.desc().block_bytes), unit(*f));
            let e = encode(*f, &x, w);
            prop_assert_eq!(e.row.len(), n.div_ceil(bs) * bb, "{}", name);
            let y = decode(*f, &e, n);
            prop_assert!(y.iter().all(|v| v.is_finite()), "{}: non-finite decode of finite values", name);
            prop_assert!(decode_into(*f, &e.row, &e.aux, OutRow::F32(&mut vec![0f32; n + bs])).is_err(), "{}", name);
            let tail = n % uc;
            if tail != 0 && (w.is_none() || fam.weighted_blocks_independent) {
                let alone = encode(*f, &x[n - tail..], w.map(|w| &w[n - tail..]));
                let (row, aux) = (&e.row[e.row.len() - alone.row.len()..], &e.aux[e.aux.len() - alone.aux.len()..]);
                prop_assert_eq!(row, &alone.row[..], "{}: the partial last unit depends on the row", name);
                prop_assert_eq!(aux, &alone.aux[..], "{}: the partial last unit's side data depends on the row", name);
            }
        }
        Ok(())
    });
}

/// A full unit (block, group, scale tile) is encoded exactly as on its own, whatever follows
/// it in the row (a partial tail or more units); also with weights where the family's blocks
/// are independent.
pub fn full_blocks_do_not_depend_on_what_follows(fam: &Family) {
    let uc_max = fam.max_unit().0;
    let strategy = (values(uc_max), values(uc_max), any::<bool>());
    fam.check("full_blocks_do_not_depend_on_what_follows", strategy, |(x, tail, weighted)| {
        let weighted = weighted && fam.weighted_blocks_independent;
        for f in fam.formats {
            let uc = unit(*f).0;
            let mut head = x[..x.len().min(uc)].to_vec();
            head.resize(uc, 0.25);
            let mut row = head.clone();
            row.extend_from_slice(&tail);
            let w: Vec<f32> = (0..row.len()).map(|i| 0.5 + (i % 7) as f32).collect();
            let alone = encode(*f, &head, weighted.then_some(&w[..uc]));
            let with_tail = encode(*f, &row, weighted.then_some(&w[..]));
            prop_assert_eq!(&with_tail.row[..alone.row.len()], &alone.row[..], "{}", f.desc().name);
            prop_assert_eq!(&with_tail.aux[..alone.aux.len()], &alone.aux[..], "{}: side data", f.desc().name);
        }
        Ok(())
    });
}

/// Finite input of any magnitude (f32::MAX, subnormals, mixed) with any finite non-negative
/// weights (0 and f32::MAX included) encodes and decodes without panicking; the family's
/// `finite_input_check` judges the decode. Fixed extreme rows first, then arbitrary ones.
pub fn extreme_finite_input_never_panics(fam: &Family) {
    let run = |x: &[f32], w: &[f32]| -> Result<(), TestCaseError> {
        for f in fam.formats {
            for weights in [None, Some(w)] {
                let y = decode(*f, &encode(*f, x, weights), x.len());
                if let Some(check) = fam.finite_input_check {
                    check(*f, x, &y).map_err(|e| TestCaseError::fail(format!("{}: {e}", f.desc().name)))?;
                }
            }
        }
        Ok(())
    };
    let fixed: [&[f32]; 9] = [
        &[f32::MAX, -f32::MAX, 1.0],
        &[1e-45, -1e-45, 0.0, 3e-39],
        &[0.0; 32],
        &[-0.0; 7],
        &[65504.0 * 300.0; 32],
        &[f32::MAX; 64],
        &[f32::MIN_POSITIVE / 1e6; 40],
        &[f32::MAX, -1e-45, 1.0],
        &[f32::MIN_POSITIVE; 300],
    ];
    for x in fixed {
        for w in [vec![1.0; x.len()], vec![0.0; x.len()], vec![f32::MAX; x.len()]] {
            if let Err(e) = run(x, &w) {
                panic!("{x:?}: {e}");
            }
        }
    }
    let strategy = (prop::collection::vec(finite_f32(), 1..=300.max(fam.max_unit().0 + 1)), any::<u32>());
    fam.check("extreme_finite_input_never_panics", strategy, |(x, wseed)| {
        let w: Vec<f32> = x
            .iter()
            .enumerate()
            .map(|(i, v)| match (wseed as usize + i) % 4 {
                0 => 0.0,
                1 => v.abs(),
                2 => f32::MAX,
                _ => 1.0,
            })
            .collect();
        run(&x, &w)
    });
}

/// All-zero rows (of any length, +0 or -0, with or without weights) encode deterministically
/// to blocks that decode to exact zeros.
pub fn zeros_decode_to_zeros(fam: &Family) {
    let uc = fam.max_unit().0;
    for f in fam.formats {
        for n in [1, 45, 300, 2 * uc + 3] {
            for zero in [0.0f32, -0.0] {
                let x = vec![zero; n];
                let w = vec![1.0; n];
                for weights in [None, Some(&w[..])] {
                    let q = encode(*f, &x, weights);
                    assert_eq!(q, encode(*f, &x, weights), "{}: encoding is not deterministic", f.desc().name);
                    let y = decode(*f, &q, n);
                    assert!(y.iter().all(|v| *v == 0.0), "{}: {n} zeros decode to {:?}", f.desc().name, &y[..n.min(4)]);
                }
            }
        }
    }
}
