//! qforge-golden: test support that loads the golden vectors produced by ggml's own C code
//! (`tests/golden/gen.py`, committed under `tests/golden/`) and compares results against them.
//!
//! Only tests depend on this crate; it panics with a clear message if a golden file is
//! missing, because that is a broken checkout, not user input.
//!
//! [`conformance`] is the test suite every format family runs with one line:
//! `qforge_golden::conformance_suite!(FORMATS);`. [`needs`] is what a test needs from the
//! machine (AVX2) or its environment (uncommitted data), in one place.

pub mod conformance;
pub mod dot;
pub mod needs;

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One input dataset: `rows` rows of `Manifest::cols` values in `inputs.f32`.
#[derive(Debug, Clone, Deserialize)]
pub struct Dataset {
    /// Dataset name (`gaussian`, `heavy_tailed`, `outliers`, …).
    pub name: String,
    /// Rows it contributes to `inputs.f32`, in manifest order.
    pub rows: usize,
}

/// What the generator recorded for one format.
#[derive(Debug, Clone, Deserialize)]
pub struct FormatEntry {
    /// GGML type id (`enum ggml_type`).
    pub ggml_type: u32,
    /// Elements per block, as ggml's type traits say.
    pub block_size: usize,
    /// Bytes per block, as ggml's type traits say.
    pub block_bytes: usize,
    /// Number of random blocks in `<fmt>/random.bin` (and values / block size in `random.f32`).
    pub random_blocks: usize,
    /// Whether ggml has a `to_float` for the format (`random.f32` exists).
    pub has_to_float: bool,
    /// The quantization files generated: `quant.bin` and / or `quant_imatrix.bin`.
    pub quant_files: Vec<String>,
    /// ggml refuses this format without an importance matrix: `quant.bin` was made with an
    /// all-ones imatrix (uniform weights).
    #[serde(default)]
    pub uniform_imatrix: bool,
    /// The ggml library that produced the files (`ggml <version> (<commit>)`).
    #[serde(default)]
    pub ggml: String,
}

/// A quantized type of ggml's own type table (`ggml_get_type_traits`).
#[derive(Debug, Clone, Deserialize)]
pub struct GgmlType {
    /// GGML type id (`enum ggml_type`).
    pub ggml_type: u32,
    /// Elements per block.
    pub block_size: usize,
    /// Bytes per block.
    pub block_bytes: usize,
}

/// `tests/golden/manifest.json`: what the golden generator produced and with which ggml.
#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    /// The generator's self-description (script and ggml sources).
    pub generator: String,
    /// Values per row of `inputs.f32` (and row length of every `quant*.bin`).
    pub cols: usize,
    /// The input datasets, in the order their rows appear in `inputs.f32`.
    pub datasets: Vec<Dataset>,
    /// Per format (lower-case GGML name): what was generated.
    pub formats: BTreeMap<String, FormatEntry>,
    /// The ggml libraries the generator used.
    pub ggml_libraries: Vec<String>,
    /// Every quantized type ggml defines (lower-case name → id and sizes), read from the type
    /// tables of those libraries rather than from the generator's list: a type here that
    /// nothing registers is `missing` in the test matrix.
    pub ggml_types: BTreeMap<String, GgmlType>,
}

/// `tests/golden/` of the workspace, or `$QFORGE_GOLDEN_DIR` where that is set (a binary
/// run away from its source tree: the GPU kit carries a copy of the folder).
pub fn dir() -> PathBuf {
    match std::env::var_os("QFORGE_GOLDEN_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden"),
    }
}

fn read(rel: &str) -> Vec<u8> {
    let p = dir().join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("golden file {} unreadable: {e}", p.display()))
}

fn to_f32(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// The parsed `manifest.json` of [`dir`].
///
/// # Panics
///
/// If the file is missing or malformed (a broken checkout).
pub fn manifest() -> Manifest {
    serde_json::from_slice(&read("manifest.json")).expect("tests/golden/manifest.json is malformed")
}

/// The manifest entry of `fmt`; panics if the generator did not cover it.
pub fn entry(fmt: &str) -> FormatEntry {
    manifest().formats.get(fmt).cloned().unwrap_or_else(|| panic!("no golden vectors for format {fmt}"))
}

/// Every dataset's rows concatenated, `Manifest::cols` values per row.
pub fn inputs() -> Vec<f32> {
    to_f32(&read("inputs.f32"))
}

/// The importance matrix used for `quant_imatrix.bin` (one weight per column).
pub fn imatrix() -> Vec<f32> {
    to_f32(&read("imatrix.f32"))
}

/// Random block bytes for `fmt`.
pub fn random_blocks(fmt: &str) -> Vec<u8> {
    read(&format!("{fmt}/random.bin"))
}

/// ggml's to_float of [`random_blocks`], if ggml has a to_float for `fmt`.
pub fn random_f32(fmt: &str) -> Option<Vec<f32>> {
    entry(fmt).has_to_float.then(|| to_f32(&read(&format!("{fmt}/random.f32"))))
}

/// ggml's quantization of [`inputs`] (with [`imatrix`] when `with_imatrix`), if generated.
pub fn quant(fmt: &str, with_imatrix: bool) -> Option<Vec<u8>> {
    let f = if with_imatrix { "quant_imatrix.bin" } else { "quant.bin" };
    entry(fmt).quant_files.iter().any(|q| q == f).then(|| read(&format!("{fmt}/{f}")))
}

/// For a family whose formats ggml quantizes without looking at importance weights: ggml has
/// a `to_float` for each, and the generator made no `quant_imatrix.bin` (ggml's would equal
/// its plain quantization).
///
/// # Panics
///
/// When one of `formats` has no golden entry, no `to_float`, or imatrix-quantized vectors.
pub fn ggml_ignores_importance_weights(formats: &[&dyn qforge_core::Format]) {
    for f in formats {
        let name = f.desc().name;
        let e = entry(name);
        assert!(e.has_to_float && !e.uniform_imatrix, "{name}: ggml has a to_float, no uniform imatrix");
        assert!(quant(name, true).is_none(), "ggml ignores importance weights for {name}: no quant_imatrix.bin");
    }
}

/// Bit-identical, or both NaN (ggml's NaN payloads are not part of the contract).
pub fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Index and values of the first element where `got` and `want` differ per [`same_f32`].
pub fn first_mismatch(got: &[f32], want: &[f32]) -> Option<(usize, f32, f32)> {
    assert_eq!(got.len(), want.len(), "length mismatch");
    got.iter().zip(want).position(|(g, w)| !same_f32(*g, *w)).map(|i| (i, got[i], want[i]))
}

/// Root-mean-square error between two equally long slices (f64 accumulation).
pub fn rmse(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    if a.is_empty() {
        return 0.0;
    }
    let s: f64 = a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).powi(2)).sum();
    (s / a.len() as f64).sqrt()
}

/// Importance-weighted RMSE: sqrt(sum w (a-b)^2 / sum w), `w` repeating per row.
pub fn weighted_rmse(a: &[f32], b: &[f32], w: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let (mut s, mut ws) = (0f64, 0f64);
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let wi = w[i % w.len()] as f64;
        s += wi * (*x as f64 - *y as f64).powi(2);
        ws += wi;
    }
    if ws == 0.0 { 0.0 } else { (s / ws).sqrt() }
}

/// Deterministic gaussian-like test data (sum of four uniforms, σ ≈ 1), `n` values from
/// `seed`: for properties and cells that need many shapes without committed files.
pub fn signal(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            let mut acc = 0f32;
            for _ in 0..4 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                acc += (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            }
            acc * 1.7
        })
        .collect()
}
