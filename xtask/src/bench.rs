//! `cargo xtask bench`: qforge's CPU throughput next to ggml's, measured in one run on the
//! same machine, as ratios.
//!
//! qforge is measured with the release `qforge bench --json`; ggml with its own C functions
//! (`quantize_<type>`, `dequantize_row_<type>`) from PyPI `ggml-py` through
//! `xtask/scripts/ggml_bench.py`. Both single-threaded (ggml's row functions are), plus
//! qforge on all cores.
//!
//! `--op matvec` measures mat-vec (M = 1) and `--op matmul` mat-mul (M = `--rows`, default
//! 64) on an N×K weight (`--shape`, default 4096×4096): qforge `bench --op matvec|matmul
//! --act-quant native` (the format's own activation quantization and integer dot) against
//! ggml's real `ggml_mul_mat` graph on its CPU backend — quantization of x to ggml's
//! `vec_dot_type` included on both sides — each with one thread and with all cores, the four
//! measurements taken back to back per format. Rates are N·K·M weight elements/s; formats
//! ggml has no CPU `vec_dot` for get a qforge figure and no ratio. Formats with a packed
//! layout (`Format::packing`) get a second qforge column, `qforge bench --packed`: the same
//! native dot on the weight copied once into its row-interleaved layout (`PackedMatrix`);
//! and ggml gets a second column with W in its CPU backend's repack buffer type (ggml's own
//! interleaved layouts, which llama.cpp uses by default where it has one: q4_0, q4_K, q2_K,
//! iq4_nl here). The packed ratio is against the faster of ggml's two.
//!
//! How qforge is built: by default a plain `cargo build --release -p qforge-cli` (the caller's
//! `RUSTFLAGS`, if any, and nothing else), i.e. what a user gets; qforge picks its SIMD
//! kernels at run time (`is_x86_feature_detected!`). ggml-py builds its C library on the
//! machine it is installed on with the host's native CPU flags, so `--native` measures a
//! qforge built the same way (`RUSTFLAGS=-C target-cpu=native`, into `<target>/bench-native`,
//! leaving the normal builds portable) for comparison; figures from it are not what users of
//! a plain build get. Native flags cannot change qforge's results: Rust never contracts
//! `a*b+c` into an FMA.
//!
//! Before measuring, the release binary is disassembled (`objdump`) and every qforge function
//! that calls an intrinsic out of line is named on stderr ([`crate::outlined`]).

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Which kernels both sides run (`--cpu`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Cpu {
    /// The best this CPU has: qforge's run-time pick, ggml-py built with the host's native flags.
    Native,
    /// AVX2 + FMA + F16C + BMI2 only, on any x86-64 machine that has them: qforge capped by
    /// `QFORGE_CPU=avx2`, ggml-py built from source with `GGML_NATIVE=OFF` and exactly those
    /// flags (into `.venv-avx2/`). The AVX2-machine table, measured on an AVX-512 machine.
    Avx2,
}

impl Cpu {
    pub fn parse(s: &str) -> Result<Cpu> {
        match s.trim() {
            "native" => Ok(Cpu::Native),
            "avx2" => Ok(Cpu::Avx2),
            _ => bail!("--cpu '{s}': expected native or avx2"),
        }
    }

    /// `QFORGE_CPU` for the qforge processes (None: qforge's own pick).
    fn qforge_cap(self) -> Option<&'static str> {
        match self {
            Cpu::Native => None,
            Cpu::Avx2 => Some("avx2"),
        }
    }

    /// The git-ignored virtual environment holding this level's ggml-py.
    fn venv(self) -> PathBuf {
        root().join(match self {
            Cpu::Native => ".venv",
            Cpu::Avx2 => ".venv-avx2",
        })
    }

    /// How ggml-py is installed: from its source distribution either way (PyPI has no
    /// wheel), with `CMAKE_ARGS` fixing the instruction sets for `Avx2`. `--no-cache-dir`:
    /// pip would otherwise reuse a wheel it built earlier with other flags.
    fn pip_install(self, pip: &Path) -> Command {
        let mut c = Command::new(pip);
        c.args(["install", "-q", "ggml-py==0.10.1", "numpy"]);
        if self == Cpu::Avx2 {
            c.args(["--no-cache-dir", "--no-binary", "ggml-py"]);
            c.env(
                "CMAKE_ARGS",
                "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
                 -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF \
                 -DGGML_AVX512_BF16=OFF",
            );
        }
        c
    }
}

/// Names a Python whose `import ggml` loads another ggml to measure against (for example a
/// copy of `.venv/` whose `ggml/lib/` holds the libraries of a newer llama.cpp): used as is,
/// nothing installed. The report names the ggml version it loaded.
const PEER_ENV: &str = "QFORGE_GGML_PYTHON";

/// The ggml side of a run: the Python that drives it and what its library says of itself
/// (`ggml_bench.py --features`: version and instruction sets).
struct Peer {
    py: PathBuf,
    /// `$QFORGE_GGML_PYTHON` chose it (not a ggml-py that xtask installs).
    from_env: bool,
    version: String,
}

/// A Python that can `import ggml`: `$QFORGE_GGML_PYTHON`, else for `--cpu native` the system
/// one or `.venv/`, for `--cpu avx2` `.venv-avx2/` (each created on demand). For `--cpu avx2`
/// a ggml that does not report AVX2 without AVX-512 (an environment built some other way, or
/// a `$QFORGE_GGML_PYTHON` one) is refused rather than measured.
fn peer(cpu: Cpu) -> Result<Peer> {
    let ok = |py: &Path| {
        Command::new(py).args(["-c", "import ggml, numpy"]).output().map(|o| o.status.success()).unwrap_or(false)
    };
    let env = std::env::var_os(PEER_ENV).filter(|p| !p.is_empty()).map(PathBuf::from);
    let from_env = env.is_some();
    let py = if let Some(py) = env {
        if !ok(&py) {
            bail!("{PEER_ENV}={}: that Python cannot import ggml and numpy", py.display());
        }
        py
    } else if cpu == Cpu::Native && ok(Path::new("python3")) {
        PathBuf::from("python3")
    } else {
        let venv = cpu.venv();
        let py = venv.join("bin/python3");
        if !ok(&py) {
            eprintln!("xtask: installing ggml-py==0.10.1 and numpy into {} (git-ignored)", venv.display());
            let st = Command::new("python3").arg("-m").arg("venv").arg(&venv).status().context("python3 -m venv")?;
            if !st.success() {
                bail!("could not create {}", venv.display());
            }
            let st = cpu.pip_install(&venv.join("bin/pip")).status().context("pip install ggml-py")?;
            if !st.success() || !ok(&py) {
                bail!("could not install ggml-py into {}", venv.display());
            }
        }
        py
    };
    let mut c = Command::new(&py);
    c.arg(root().join("xtask/scripts/ggml_bench.py")).arg("--features");
    let f = json_of(c)?;
    if cpu == Cpu::Avx2 && (f["avx512"].as_bool() != Some(false) || f["avx2"].as_bool() != Some(true)) {
        let fix = if from_env {
            format!("unset {PEER_ENV} or point it at an AVX2-only build")
        } else {
            "delete the folder to rebuild it".into()
        };
        bail!("{}: its ggml reports {f}, not an AVX2-only build; {fix}", py.display());
    }
    let version = f["version"].as_str().unwrap_or("ggml (version unknown)").to_string();
    Ok(Peer { py, from_env, version })
}

fn json_of(mut cmd: Command) -> Result<serde_json::Value> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let line = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(line.trim()).with_context(|| format!("parsing output of {cmd:?}: {line}"))
}

/// A `qforge` command running at `cpu`'s kernel level (the caller's `QFORGE_CPU` never leaks
/// into a native run).
fn qforge_cmd(qforge: &Path, cpu: Cpu) -> Command {
    let mut c = Command::new(qforge);
    match cpu.qforge_cap() {
        Some(level) => c.env("QFORGE_CPU", level),
        None => c.env_remove("QFORGE_CPU"),
    };
    c
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
            "matmul" => ops.push("matmul"),
            "all" => ops.extend(["dequant", "quantize", "matvec", "matmul"]),
            _ => bail!("--op '{o}': expected dequant, quantize, matvec, matmul or all (comma-separated)"),
        }
    }
    Ok(ops)
}

/// What `cargo xtask bench` measures.
pub struct Args<'a> {
    pub formats: Option<&'a str>,
    /// Elements per dequant / quantize measurement.
    pub n: usize,
    pub ops: &'a [&'static str],
    /// Mat-vec / mat-mul weight N×K.
    pub shape: (usize, usize),
    /// Mat-mul activation rows (one table row per M).
    pub rows: &'a [usize],
    pub native: bool,
    /// Which kernels both sides run.
    pub cpu: Cpu,
    /// Rounds of measurements per table row; each cell keeps its best.
    pub rounds: usize,
    pub json: bool,
}

pub fn run(a: &Args<'_>) -> Result<bool> {
    let Args { formats, n, ops, shape, rows: mrows, native, cpu, rounds, json } = *a;
    if cpu == Cpu::Avx2 {
        if native {
            // `-C target-cpu=native` lets LLVM use AVX-512 anywhere in the build, which no
            // AVX2 machine runs: the two options contradict each other.
            bail!("--native builds qforge for this CPU's AVX-512; it cannot be measured as --cpu avx2");
        }
        if qforge_core::cpu::cpu_level() < qforge_core::cpu::Level::Avx2 {
            bail!("--cpu avx2: this CPU lacks AVX2 / FMA / F16C (kernels: {})", qforge_core::cpu::levels());
        }
    }
    let qforge = build_cli(native)?;
    let flags = rustflags(native);
    // Kernels whose intrinsics are calls measure 10-50x slow; say so before the figures.
    match crate::outlined::scan(&qforge) {
        None => eprintln!("xtask: objdump (binutils) not found: the intrinsics inlining check is skipped"),
        Some(found) => {
            for (f, calls) in &found {
                eprintln!(
                    "xtask: WARNING: {f} calls {calls} intrinsics out of line (a closure or a helper without the kernel's target features)"
                );
            }
        }
    }
    let peer = peer(cpu)?;
    if !json {
        let how = if flags.is_empty() { "a plain release build".to_string() } else { format!("RUSTFLAGS='{flags}'") };
        let (kernels, built) = match (cpu, peer.from_env) {
            (Cpu::Native, false) => (qforge_core::cpu::levels(), "built with the host's native flags"),
            (Cpu::Native, true) => (qforge_core::cpu::levels(), "as built there"),
            (Cpu::Avx2, _) => ("QFORGE_CPU=avx2".to_string(), "its CPU code reports AVX2 and no AVX-512"),
        };
        let source = if peer.from_env { format!("${PEER_ENV}") } else { "PyPI ggml-py".to_string() };
        println!("qforge: {} ({how}; kernels: {kernels})", qforge.display());
        println!("ggml: {} ({source}, {built}) via {}", peer.version, peer.py.display());
    }
    let py = peer.py.clone();
    let names: Vec<String> = match formats {
        Some(list) => list.split(',').map(|s| s.trim().to_ascii_lowercase()).collect(),
        None => qforge_formats::registry().iter().map(|f| f.desc().name.to_string()).collect(),
    };
    let cores = std::thread::available_parallelism().map_or(1, |p| p.get());
    let mut rows = Vec::new();
    let elementwise: Vec<&str> = ops.iter().copied().filter(|o| !matches!(*o, "matvec" | "matmul")).collect();
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
                let mut c = qforge_cmd(&qforge, cpu);
                c.args(["bench", "--format", name, "--op", op, "--n", &n.to_string(), "--json"]);
                c.args(["--threads", &threads.to_string()]);
                json_of(c)
            };
            let g = || {
                let mut c = Command::new(&py);
                c.arg(root().join("xtask/scripts/ggml_bench.py")).args([name, op, &n.to_string()]);
                // numpy asks for transparent huge pages on its arrays and Rust's allocator
                // does not; on this VM that alone moves memory-bound ratios by up to 2x.
                // Measure both sides with ordinary pages.
                c.env("NUMPY_MADVISE_HUGEPAGE", "0");
                json_of(c)
            };
            let [r1, rn, rg] = best_of(rounds, || Ok([rate(&q(1)?), rate(&q(cores)?), rate(&g()?)]))?;
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
    let tools = Tools { qforge: &qforge, py: &py, cpu, cores, rounds, json };
    if ops.contains(&"matvec") {
        mul_mat_rows(&tools, &names, shape, 1, &mut rows)?;
    }
    if ops.contains(&"matmul") {
        for &m in mrows {
            mul_mat_rows(&tools, &names, shape, m, &mut rows)?;
        }
    }
    if json {
        let cpu = format!("{cpu:?}").to_ascii_lowercase();
        let v = serde_json::json!({
            "qforge_rustflags": flags, "cpu": cpu, "rounds": rounds, "ggml": peer.version, "results": rows
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(true)
}

/// The two programs measured and how the table is printed.
struct Tools<'a> {
    qforge: &'a Path,
    py: &'a Path,
    cpu: Cpu,
    cores: usize,
    rounds: usize,
    json: bool,
}

/// The mat-vec (M = 1) or mat-mul rows: qforge (plain, and packed where the format has a
/// packed layout) and ggml, each with 1 thread and all cores, on an N×K weight with M
/// activation rows.
fn mul_mat_rows(
    t: &Tools<'_>,
    names: &[String],
    (n, k): (usize, usize),
    m: usize,
    rows: &mut Vec<serde_json::Value>,
) -> Result<()> {
    let shape = format!("{n},{k}");
    let op = if m == 1 { "matvec" } else { "matmul" };
    let cores = t.cores;
    if !t.json {
        println!();
        println!(
            "{op} (M = {m}), W {n}x{k}, --act-quant native (x quantized to the format's activation type, \
             timed on both sides); Gel/s = N*K*M/s; ratio = qforge / ggml at the same thread count"
        );
        println!(
            "packed: qforge on the weight's packed layout (PackedMatrix, `qforge bench --packed`); \
             repack: ggml with W in its CPU repack buffer type (its interleaved layouts), where it has one; \
             ratio = qforge / ggml, packed = packed / the faster ggml"
        );
        println!(
            "{:<9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6}",
            "format",
            "qforge 1T",
            "packed 1T",
            "ggml 1T",
            "repack 1T",
            "ratio",
            "packed",
            format!("qforge {cores}T"),
            format!("packed {cores}T"),
            format!("ggml {cores}T"),
            format!("repack {cores}T"),
            "ratio",
            "packed"
        );
    }
    for name in names {
        let packs = qforge_formats::get(name).ok().and_then(|f| f.packing()).is_some();
        let q = |threads: usize, packed: bool| {
            if packed && !packs {
                return Ok(serde_json::Value::Null);
            }
            let mut c = qforge_cmd(t.qforge, t.cpu);
            c.args(["bench", "--format", name, "--op", op, "--act-quant", "native", "--shape", &shape, "--json"]);
            c.args(["--rows", &m.to_string(), "--threads", &threads.to_string()]);
            if packed {
                c.arg("--packed");
            }
            json_of(c)
        };
        let g = |threads: usize, repack: bool| {
            let mut c = Command::new(t.py);
            c.arg(root().join("xtask/scripts/ggml_bench.py"));
            c.args([name.as_str(), op, &shape, &m.to_string(), &threads.to_string()]);
            if repack {
                c.arg("repack");
            }
            c.env("NUMPY_MADVISE_HUGEPAGE", "0");
            json_of(c)
        };
        // Back to back, alternating sides, so a change in the machine's load hits both.
        let [r1, p1, rg1, rr1, rn, pn, rgn, rrn] = best_of(t.rounds, || {
            Ok([
                rate(&q(1, false)?),
                rate(&q(1, true)?),
                rate(&g(1, false)?),
                rate(&g(1, true)?),
                rate(&q(cores, false)?),
                rate(&q(cores, true)?),
                rate(&g(cores, false)?),
                rate(&g(cores, true)?),
            ])
        })?;
        let ratio = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b);
        // The faster of ggml's two layouts.
        let best = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if t.json {
            rows.push(serde_json::json!({
                "format": name, "op": op, "shape": [n, k], "rows": m, "act_quant": "native", "threads": cores,
                "qforge_1t_elements_per_s": r1, "ggml_1t_elements_per_s": rg1, "ratio_1t": ratio(r1, rg1),
                "qforge_all_elements_per_s": rn, "ggml_all_elements_per_s": rgn, "ratio_all": ratio(rn, rgn),
                "packed_1t_elements_per_s": p1, "ggml_repack_1t_elements_per_s": rr1,
                "ratio_packed_1t": ratio(p1, best(rg1, rr1)),
                "packed_all_elements_per_s": pn, "ggml_repack_all_elements_per_s": rrn,
                "ratio_packed_all": ratio(pn, best(rgn, rrn)),
            }));
        } else {
            let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.3}", v / 1e9));
            let fr = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}x"));
            println!(
                "{:<9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6}",
                name,
                f(r1),
                f(p1),
                f(rg1),
                f(rr1),
                fr(ratio(r1, rg1)),
                fr(ratio(p1, best(rg1, rr1))),
                f(rn),
                f(pn),
                f(rgn),
                f(rrn),
                fr(ratio(rn, rgn)),
                fr(ratio(pn, best(rgn, rrn)))
            );
        }
    }
    Ok(())
}

/// A measurement's rate (elements/s), `None` where the side has no kernel.
fn rate(v: &serde_json::Value) -> Option<f64> {
    v["elements_per_s"].as_f64()
}

/// `rounds` runs of `measure` (each a row's cells, taken back to back), every cell's best
/// (highest) rate kept: on a shared machine a cell is only ever slowed down, so the best of
/// a few alternated rounds is the steadiest figure of each side.
fn best_of<const C: usize>(
    rounds: usize,
    mut measure: impl FnMut() -> Result<[Option<f64>; C]>,
) -> Result<[Option<f64>; C]> {
    let mut best = [None; C];
    for _ in 0..rounds.max(1) {
        for (b, v) in best.iter_mut().zip(measure()?) {
            *b = match (*b, v) {
                (Some(b), Some(v)) => Some(f64::max(b, v)),
                (b, v) => b.or(v),
            };
        }
    }
    Ok(best)
}

/// `--rows M,..` for the mat-mul rows.
pub fn parse_rows(s: &str) -> Result<Vec<usize>> {
    s.split(',')
        .map(|p| match p.trim().parse::<usize>() {
            Ok(m) if m >= 2 => Ok(m),
            _ => bail!("--rows '{s}': expected activation row counts >= 2, comma-separated (M = 1 is --op matvec)"),
        })
        .collect()
}

/// `--shape N,K` for the mat-vec rows.
pub fn parse_shape(s: &str) -> Result<(usize, usize)> {
    let parts: Vec<_> = s.split(',').map(|p| p.trim().parse::<usize>()).collect();
    match parts.as_slice() {
        [Ok(n), Ok(k)] if *n > 0 && *k > 0 => Ok((*n, *k)),
        _ => bail!("--shape '{s}': expected N,K (two positive integers)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_of_keeps_each_cells_highest_rate() {
        let runs = [[Some(3.0), None, Some(1.0)], [Some(2.0), None, Some(5.0)], [Some(4.0), None, None]];
        let mut it = runs.iter();
        let best = best_of(3, || Ok(*it.next().expect("three rounds"))).unwrap();
        assert_eq!(best, [Some(4.0), None, Some(5.0)]);
        // Zero rounds still measure once.
        let mut calls = 0;
        best_of(0, || {
            calls += 1;
            Ok([Some(1.0)])
        })
        .unwrap();
        assert_eq!(calls, 1);
    }

    #[test]
    fn cpu_levels_parse_and_name_their_environments() {
        assert_eq!(Cpu::parse("avx2").unwrap(), Cpu::Avx2);
        assert_eq!(Cpu::parse("native").unwrap(), Cpu::Native);
        assert!(Cpu::parse("avx512").is_err());
        assert_eq!(Cpu::Avx2.qforge_cap(), Some("avx2"));
        assert_eq!(Cpu::Native.qforge_cap(), None);
        assert!(Cpu::Avx2.venv().ends_with(".venv-avx2"));
        let cmd = Cpu::Avx2.pip_install(Path::new("pip"));
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(args.iter().any(|a| a == "--no-cache-dir"), "{args:?}");
        let cmake = cmd.get_envs().find(|(k, _)| *k == "CMAKE_ARGS").and_then(|(_, v)| v).expect("CMAKE_ARGS");
        let cmake = cmake.to_string_lossy();
        assert!(cmake.contains("-DGGML_NATIVE=OFF") && cmake.contains("-DGGML_AVX512=OFF"), "{cmake}");
    }
}
