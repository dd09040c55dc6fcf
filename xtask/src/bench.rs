//! `cargo xtask bench`: qforge's CPU throughput next to ggml's, measured in one run on the
//! same machine, as ratios.
//!
//! qforge is measured with the release `qforge bench --json`; ggml with its own C functions
//! (`quantize_<type>`, `dequantize_row_<type>`) from PyPI `ggml-py` through
//! `xtask/scripts/ggml_bench.py`. Both single-threaded (ggml's row functions are), plus
//! qforge on all cores.
//!
//! `--op matvec` measures mat-vec (M = 1) on an N×K weight (`--shape`, default 4096×4096):
//! qforge `bench --op matvec --act-quant native` (the format's own activation quantization and
//! integer dot) against ggml's real mat-vec, a `ggml_mul_mat` graph computed with
//! `ggml_graph_compute_with_ctx(.., 1)` — one thread, quantization of x to ggml's
//! `vec_dot_type` included on both sides. Rates are N·K weight elements/s and weight bytes/s;
//! formats ggml has no CPU `vec_dot` for get a qforge figure and no ratio.
//!
//! How qforge is built: by default a plain `cargo build --release -p qforge-cli` (the caller's
//! `RUSTFLAGS`, if any, and nothing else), i.e. what a user gets; qforge picks its SIMD
//! kernels at run time (`is_x86_feature_detected!`). ggml-py builds its C library on the
//! machine it is installed on with the host's native CPU flags, so `--native` measures a
//! qforge built the same way (`RUSTFLAGS=-C target-cpu=native`, into `<target>/bench-native`,
//! leaving the normal builds portable) for comparison; figures from it are not what users of
//! a plain build get. Native flags cannot change qforge's results: Rust never contracts
//! `a*b+c` into an FMA.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A Python that can `import ggml`: the system one, or `.venv/` (created on demand).
fn python() -> Result<PathBuf> {
    let ok = |py: &Path| {
        Command::new(py).args(["-c", "import ggml, numpy"]).output().map(|o| o.status.success()).unwrap_or(false)
    };
    let sys = PathBuf::from("python3");
    if ok(&sys) {
        return Ok(sys);
    }
    let venv = root().join(".venv");
    let py = venv.join("bin/python3");
    if !ok(&py) {
        eprintln!("xtask: installing ggml-py==0.10.1 and numpy into {} (git-ignored)", venv.display());
        let st = Command::new("python3").arg("-m").arg("venv").arg(&venv).status().context("python3 -m venv")?;
        if !st.success() {
            bail!("could not create {}", venv.display());
        }
        let st = Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "ggml-py==0.10.1", "numpy"])
            .status()
            .context("pip install ggml-py")?;
        if !st.success() || !ok(&py) {
            bail!("could not install ggml-py into {}", venv.display());
        }
    }
    Ok(py)
}

fn json_of(mut cmd: Command) -> Result<serde_json::Value> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let line = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(line.trim()).with_context(|| format!("parsing output of {cmd:?}: {line}"))
}

/// The extra rustc flags of the `--native` build.
const NATIVE: &str = "-C target-cpu=native";

/// The `RUSTFLAGS` of the benchmarked build: the caller's, plus [`NATIVE`] with `--native`.
fn rustflags(native: bool) -> String {
    let caller = std::env::var("RUSTFLAGS").unwrap_or_default();
    match (caller.trim(), native) {
        ("", true) => NATIVE.to_string(),
        (f, true) => format!("{f} {NATIVE}"),
        (f, false) => f.to_string(),
    }
}

/// Builds the release CLI: plainly into the usual target dir, or with `--native` for the
/// host CPU into `<target>/bench-native`; returns its path.
fn build_cli(native: bool) -> Result<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"));
    let dir = if native { target.join("bench-native") } else { target };
    let flags = rustflags(native);
    let st = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--release", "-p", "qforge-cli", "--target-dir"])
        .arg(&dir)
        .env("RUSTFLAGS", &flags)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .current_dir(root())
        .status()
        .context("cargo build --release -p qforge-cli")?;
    if !st.success() {
        bail!("building the qforge CLI (RUSTFLAGS='{flags}') failed");
    }
    Ok(dir.join("release/qforge"))
}

/// Which ops `cargo xtask bench` measures (`--op`).
pub fn parse_ops(op: &str) -> Result<Vec<&'static str>> {
    let mut ops = Vec::new();
    for o in op.split(',').map(str::trim) {
        match o {
            "dequant" => ops.push("dequant"),
            "quantize" => ops.push("quantize"),
            "matvec" => ops.push("matvec"),
            "all" => ops.extend(["dequant", "quantize", "matvec"]),
            _ => bail!("--op '{o}': expected dequant, quantize, matvec or all (comma-separated)"),
        }
    }
    Ok(ops)
}

pub fn run(
    formats: Option<&str>,
    n: usize,
    ops: &[&str],
    shape: (usize, usize),
    native: bool,
    json: bool,
) -> Result<bool> {
    let qforge = build_cli(native)?;
    let flags = rustflags(native);
    if !json {
        let how = if flags.is_empty() { "a plain release build".to_string() } else { format!("RUSTFLAGS='{flags}'") };
        println!("qforge: {} ({how}); ggml: PyPI ggml-py (built with the host's native flags)", qforge.display());
    }
    let py = python()?;
    let names: Vec<String> = match formats {
        Some(list) => list.split(',').map(|s| s.trim().to_ascii_lowercase()).collect(),
        None => qforge_formats::registry().iter().map(|f| f.desc().name.to_string()).collect(),
    };
    let cores = std::thread::available_parallelism().map_or(1, |p| p.get());
    let mut rows = Vec::new();
    let elementwise: Vec<&str> = ops.iter().copied().filter(|o| *o != "matvec").collect();
    if !json && !elementwise.is_empty() {
        println!("n = {n} elements; Gelem/s, median of runs; ratio = qforge / ggml (> 1: qforge faster)");
        println!(
            "{:<8} {:<9} {:>13} {:>13} {:>8} {:>15} {:>9}",
            "format",
            "op",
            "qforge Gel/s",
            "ggml Gel/s",
            "ratio",
            format!("qforge {cores}T"),
            "ratio"
        );
    }
    for name in &names {
        for &op in &elementwise {
            let q = |threads: usize| {
                let mut c = Command::new(&qforge);
                c.args(["bench", "--format", name, "--op", op, "--n", &n.to_string(), "--json"]);
                c.args(["--threads", &threads.to_string()]);
                json_of(c)
            };
            let q1 = q(1)?;
            let qn = q(cores)?;
            let mut c = Command::new(&py);
            c.arg(root().join("xtask/scripts/ggml_bench.py")).args([name, op, &n.to_string()]);
            // numpy asks for transparent huge pages on its arrays and Rust's allocator does
            // not; on this VM that alone moves memory-bound ratios by up to 2x. Measure both
            // sides with ordinary pages.
            c.env("NUMPY_MADVISE_HUGEPAGE", "0");
            let g = json_of(c)?;
            let rate = |v: &serde_json::Value| v["elements_per_s"].as_f64();
            let (r1, rn, rg) = (rate(&q1), rate(&qn), rate(&g));
            let ratio = |a: Option<f64>| a.zip(rg).map(|(a, g)| a / g);
            if json {
                rows.push(serde_json::json!({
                    "format": name, "op": op, "n": n, "qforge_1t_elements_per_s": r1,
                    "qforge_all_elements_per_s": rn, "threads": cores, "ggml_elements_per_s": rg,
                    "ratio_1t": ratio(r1), "ratio_all": ratio(rn),
                }));
            } else {
                let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.4}", v / 1e9));
                let fr = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}x"));
                println!(
                    "{:<8} {:<9} {:>13} {:>13} {:>8} {:>15} {:>9}",
                    name,
                    op,
                    f(r1),
                    f(rg),
                    fr(ratio(r1)),
                    f(rn),
                    fr(ratio(rn))
                );
            }
        }
    }
    if ops.contains(&"matvec") {
        matvec_rows(&qforge, &py, &names, shape, cores, json, &mut rows)?;
    }
    if json {
        let v = serde_json::json!({ "qforge_rustflags": flags, "results": rows });
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(true)
}

/// The `matvec` rows: qforge (1 thread and all cores) and ggml (1 thread) on an N×K weight.
fn matvec_rows(
    qforge: &Path,
    py: &Path,
    names: &[String],
    (n, k): (usize, usize),
    cores: usize,
    json: bool,
    rows: &mut Vec<serde_json::Value>,
) -> Result<()> {
    let shape = format!("{n},{k}");
    if !json {
        println!();
        println!(
            "matvec (M = 1), W {n}x{k}, --act-quant native (x quantized to the format's activation type, \
             timed on both sides); Gel/s = N*K/s, GB/s = weight bytes/s; ratio = qforge / ggml (1 thread each)"
        );
        println!(
            "{:<9} {:>13} {:>9} {:>13} {:>9} {:>8} {:>15} {:>9}",
            "format",
            "qforge Gel/s",
            "GB/s",
            "ggml Gel/s",
            "GB/s",
            "ratio",
            format!("qforge {cores}T"),
            "ratio"
        );
    }
    for name in names {
        let q = |threads: usize| {
            let mut c = Command::new(qforge);
            c.args(["bench", "--format", name, "--op", "matvec", "--act-quant", "native", "--shape", &shape, "--json"]);
            c.args(["--threads", &threads.to_string()]);
            json_of(c)
        };
        let q1 = q(1)?;
        let qn = q(cores)?;
        let mut c = Command::new(py);
        c.arg(root().join("xtask/scripts/ggml_bench.py")).args([name.as_str(), "matvec", &shape]);
        c.env("NUMPY_MADVISE_HUGEPAGE", "0");
        let g = json_of(c)?;
        let rate = |v: &serde_json::Value| v["elements_per_s"].as_f64();
        // Weight bytes/s: the quantized weight read once per mat-vec.
        let wrate =
            |v: &serde_json::Value| v["quantized_bytes"].as_f64().zip(v["seconds"].as_f64()).map(|(b, s)| b / s);
        let (r1, rn, rg) = (rate(&q1), rate(&qn), rate(&g));
        let ratio = |a: Option<f64>| a.zip(rg).map(|(a, g)| a / g);
        if json {
            rows.push(serde_json::json!({
                "format": name, "op": "matvec", "shape": [n, k], "act_quant": "native",
                "qforge_1t_elements_per_s": r1, "qforge_1t_weight_bytes_per_s": wrate(&q1),
                "qforge_all_elements_per_s": rn, "threads": cores,
                "ggml_elements_per_s": rg, "ggml_weight_bytes_per_s": wrate(&g),
                "ratio_1t": ratio(r1), "ratio_all": ratio(rn),
            }));
        } else {
            let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.4}", v / 1e9));
            let fb = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.3}", v / 1e9));
            let fr = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}x"));
            println!(
                "{:<9} {:>13} {:>9} {:>13} {:>9} {:>8} {:>15} {:>9}",
                name,
                f(r1),
                fb(wrate(&q1)),
                f(rg),
                fb(wrate(&g)),
                fr(ratio(r1)),
                f(rn),
                fr(ratio(rn))
            );
        }
    }
    Ok(())
}

/// `--shape N,K` for the mat-vec rows.
pub fn parse_shape(s: &str) -> Result<(usize, usize)> {
    let parts: Vec<_> = s.split(',').map(|p| p.trim().parse::<usize>()).collect();
    match parts.as_slice() {
        [Ok(n), Ok(k)] if *n > 0 && *k > 0 => Ok((*n, *k)),
        _ => bail!("--shape '{s}': expected N,K (two positive integers)"),
    }
}
