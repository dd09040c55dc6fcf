//! The native-dot check of the conformance suite: every format for which ggml has a CPU
//! `vec_dot` (golden vectors from `tests/golden/gen_dot.py`) must carry an integer dot kernel
//! whose results match ggml's to ~1e-6 of the sum of the terms' magnitudes.

use crate::conformance::Family;
use qforge_core::{ActKind, ActRow, Format, OutRow, Role};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One format's entry in `tests/golden/dot/manifest.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct DotEntry {
    /// ggml's `vec_dot_type` for the format (`q8_0`, `q8_1`, `q8_k`).
    pub dot_type: String,
    /// Weight rows in the format's `quant.bin` that were dotted with each activation row.
    pub weight_rows: usize,
}

/// `tests/golden/dot/manifest.json`: the golden vectors of ggml's CPU `vec_dot`.
#[derive(Debug, Clone, Deserialize)]
pub struct DotManifest {
    /// Elements per row (weights and activations).
    pub cols: usize,
    /// The rows of `inputs.f32` quantized as activations (`<fmt>.act.bin`), in file order.
    pub act_rows: Vec<usize>,
    /// Per format (lower-case GGML name) that has a ggml `vec_dot`.
    pub formats: BTreeMap<String, DotEntry>,
}

/// The parsed dot manifest of [`crate::dir`].
///
/// # Panics
///
/// If the file is missing or malformed (a broken checkout).
pub fn dot_manifest() -> DotManifest {
    let p = crate::dir().join("dot/manifest.json");
    let b = std::fs::read(&p).unwrap_or_else(|e| panic!("golden file {} unreadable: {e}", p.display()));
    serde_json::from_slice(&b).expect("tests/golden/dot/manifest.json is malformed")
}

fn read(rel: &str) -> Vec<u8> {
    let p = crate::dir().join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("golden file {} unreadable: {e}", p.display()))
}

/// Relative tolerance of a native dot against ggml's, of `Σ|w·a| + Σ_blocks max|w|·Σ|a|`.
pub const DOT_RTOL: f64 = 2e-6;

fn dequant(f: &dyn Format, bytes: &[u8], cols: usize) -> Vec<f64> {
    let mut y = vec![0f32; cols];
    f.dequant_row(bytes, OutRow::F32(&mut y)).unwrap_or_else(|e| panic!("{}: dequant_row: {e}", f.desc().name));
    y.into_iter().map(f64::from).collect()
}

/// For every format of the family that has golden dot vectors: its native activation kind is
/// ggml's `vec_dot_type`, our quantization of the activation rows equals ggml's `from_float`
/// bytes (when the activation format is reachable), and `dot_row` on ggml's activation bytes
/// matches ggml's `vec_dot` to [`DOT_RTOL`] of `Σ|w·a| + Σ_blocks max|w|·Σ|a|`.
///
/// Every weight format of the family whose native activations are ggml blocks claims a ggml
/// `vec_dot`: it must have golden dot vectors, and at least one weight row × activation row
/// of each must have been compared (a family checking nothing fails).
pub fn native_dot_matches_ggml(fam: &Family) {
    let m = dot_manifest();
    let x = crate::inputs();
    let cols = m.cols;
    let lookup = |name: &str| fam.formats.iter().chain(fam.act_formats).copied().find(|f| f.desc().name == name);
    let mut checked: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for f in fam.formats {
        let name = f.desc().name;
        let claims = f.desc().role == Role::Weight && matches!(f.native_act(), ActKind::Blocks(_));
        let Some(e) = m.formats.get(name) else {
            assert!(!claims, "{name}: a ggml-style native dot but no golden dot vectors (tests/golden/gen_dot.py)");
            continue;
        };
        let counts = checked.entry(name).or_default();
        assert_eq!(
            f.native_act(),
            ActKind::Blocks(leak(&e.dot_type)),
            "{name}: native activation kind must be ggml's vec_dot_type {}",
            e.dot_type
        );
        let w = crate::quant(name, false).unwrap_or_else(|| panic!("{name}: no quant.bin"));
        let acts = read(&format!("dot/{name}.act.bin"));
        let want: Vec<f32> = read(&format!("dot/{name}.dot.f32"))
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let wrb = w.len() / e.weight_rows;
        let arb = acts.len() / m.act_rows.len();
        let act_fmt = lookup(&e.dot_type);
        if let Some(af) = act_fmt {
            for (j, &r) in m.act_rows.iter().enumerate() {
                let mut q = vec![0u8; arb];
                af.quantize_row(&x[r * cols..(r + 1) * cols], None, &mut q).expect("activation quantize");
                assert!(
                    q == acts[j * arb..(j + 1) * arb],
                    "{name}: our {} quantization of activation row {r} differs from ggml's from_float",
                    e.dot_type
                );
                counts.1 += 1;
            }
        }
        for (i, wrow) in w.chunks_exact(wrb).enumerate() {
            let wd = dequant(*f, wrow, cols);
            for (j, arow) in acts.chunks_exact(arb).enumerate() {
                let got = match f.dot_row(wrow, i, &[], ActRow::Blocks(arow)) {
                    Some(Ok(v)) => v,
                    Some(Err(err)) => panic!("{name}: dot_row failed: {err}"),
                    None => panic!("{name}: no native dot kernel for {} activations", e.dot_type),
                };
                let expect = want[i * m.act_rows.len() + j];
                // ggml's SIMD kernels for some formats (tq) sum unsigned codes and subtract
                // the activation sums afterwards, so their rounding scales with
                // max|w|·Σ|a| per block, not only with Σ|w·a|.
                let scale = match act_fmt {
                    Some(af) => {
                        let ad = dequant(af, arow, cols);
                        let terms = wd.iter().zip(&ad).map(|(a, b)| (a * b).abs()).sum::<f64>();
                        let bs = f.desc().block_size;
                        let blocks = wd
                            .chunks(bs)
                            .zip(ad.chunks(bs))
                            .map(|(w, a)| {
                                w.iter().fold(0f64, |m, v| m.max(v.abs())) * a.iter().map(|v| v.abs()).sum::<f64>()
                            })
                            .sum::<f64>();
                        terms + blocks
                    }
                    None => expect.abs() as f64,
                };
                let tol = DOT_RTOL * scale + f32::MIN_POSITIVE as f64;
                let diff = (got as f64 - expect as f64).abs();
                assert!(
                    diff <= tol || got == expect || (got.is_nan() && expect.is_nan()),
                    "{name}: weight row {i} · activation row {j}: ours {got}, ggml {expect} (|diff| {diff:e} > {tol:e})"
                );
                counts.0 += 1;
            }
        }
    }
    for (name, (dots, _)) in &checked {
        assert!(*dots > 0, "{name}: golden dot vectors hold no weight row × activation row");
    }
    let claimed = fam.formats.iter().filter(|f| m.formats.contains_key(f.desc().name)).count();
    assert_eq!(checked.len(), claimed, "every format with golden dot vectors was compared");
    eprintln!("native_dot_matches_ggml: (dots, activation rows) compared per format: {checked:?}");
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}
