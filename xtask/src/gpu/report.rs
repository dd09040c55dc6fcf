//! `xtask gpu-report --dir OUTDIR [--kit KIT] [--seconds S]`: gathers what the kit's `run.sh`
//! left in OUTDIR (steps.tsv, device.txt, the test logs, matrix.json, bench.json) into
//! `gpu-report.json` and `gpu-report.md`. Exits non-zero unless every step passed: every test
//! binary ran and reported no failure, the matrix's CUDA cells all passed (on a GPU a skipped
//! cell is a failure: the GPU was not used), and the benchmarks measured every format. The
//! benchmark targets are reported, met or not; they are not pass / fail.

use super::{
    BenchReport, DEQUANT_TARGET, F16_DIRECT_TARGET, GEMM_LARGE_M_VS_DENSE_TARGET, GEMM_SMALL_M_VS_DENSE_TARGET,
    GEMM_VS_DEQUANT_TARGET, GemmRow, MATVEC_TARGET, MATVEC_TARGET_SHAPE,
};
use anyhow::{Context, Result};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

#[derive(Serialize, Debug, PartialEq)]
pub struct Step {
    pub name: String,
    pub rc: i32,
    pub ms: u64,
    pub log: String,
    /// pass | fail | timeout
    pub status: &'static str,
}

#[derive(Serialize, Debug, Default, PartialEq)]
pub struct Tests {
    /// Test binaries that printed a final `test result:` line.
    pub binaries_reporting: usize,
    pub passed: u64,
    pub failed: u64,
    pub ignored: u64,
    pub failed_tests: Vec<String>,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct Target {
    pub what: String,
    pub target: f64,
    pub met: usize,
    pub of: usize,
    /// The worst case: (what, value).
    pub worst: Option<(String, f64)>,
}

#[derive(Serialize, Debug)]
pub struct Report {
    pub ok: bool,
    pub failures: Vec<String>,
    pub seconds: Option<u64>,
    pub kit: Vec<String>,
    pub device: String,
    pub steps: Vec<Step>,
    pub tests: Tests,
    pub matrix: Option<serde_json::Value>,
    pub targets: Vec<Target>,
    pub bench: Option<BenchReport>,
    /// The peers' GEMM times from `torch_ref.py` (cuBLAS f16 / bf16, cuBLASLt FP8), if it ran.
    pub torch: Option<serde_json::Value>,
}

/// FP8 target (issue 13): qforge's FP8 block-scaled GEMM against cuBLASLt FP8
/// (`torch._scaled_mm`) on the same shape, time ratio.
pub const FP8_VS_CUBLASLT_TARGET: f64 = 0.8;

/// (case, torch FP8 ms / qforge FP8 ms) for every GEMM row with an FP8 time that the peer
/// measured too.
fn fp8_vs_torch<'a>(b: &'a BenchReport, torch: &'a serde_json::Value) -> impl Iterator<Item = (String, f64)> + 'a {
    let rows = torch.get("rows").and_then(serde_json::Value::as_array).cloned().unwrap_or_default();
    b.gemm.iter().filter_map(move |g| {
        let i = g.int8.as_ref().filter(|i| i.path == "fp8-1x128")?;
        let t = rows.iter().find(|r| {
            let u = |k: &str| r.get(k).and_then(serde_json::Value::as_u64);
            (u("n"), u("k"), u("m")) == (Some(g.n as u64), Some(g.k as u64), Some(g.m as u64))
        })?;
        Some((gemm_case(g), t.get("fp8_ms")?.as_f64()? / i.ms))
    })
}

/// The rows of steps.tsv (`name<TAB>rc<TAB>ms<TAB>log`).
pub fn parse_steps(text: &str) -> Vec<Step> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let [name, rc, ms, log] = f[..] else { return None };
            let rc: i32 = rc.trim().parse().ok()?;
            let status = match rc {
                0 => "pass",
                124 | 137 => "timeout",
                _ => "fail",
            };
            Some(Step { name: name.into(), rc, ms: ms.trim().parse().unwrap_or(0), log: log.into(), status })
        })
        .collect()
}

/// Adds a libtest log's `test result:` counts and failed test names to `t`.
pub fn parse_test_log(text: &str, t: &mut Tests) {
    let num = |line: &str, word: &str| -> u64 {
        line.split(';')
            .find_map(|part| part.trim().strip_suffix(word).and_then(|n| n.trim().rsplit(' ').next()?.parse().ok()))
            .unwrap_or(0)
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("test result: ") {
            t.binaries_reporting += 1;
            t.passed += num(rest, "passed");
            t.failed += num(rest, "failed");
            t.ignored += num(rest, "ignored");
        } else if let Some(name) = line.strip_prefix("test ").and_then(|l| l.strip_suffix(" ... FAILED")) {
            t.failed_tests.push(name.to_string());
        }
    }
}

fn worst<'a>(items: impl Iterator<Item = (String, f64)> + 'a, target: f64, what: &str) -> Target {
    let v: Vec<(String, f64)> = items.collect();
    Target {
        what: what.into(),
        target,
        met: v.iter().filter(|(_, x)| *x >= target).count(),
        of: v.len(),
        worst: v.into_iter().min_by(|a, b| a.1.total_cmp(&b.1)),
    }
}

/// The issue's targets over a benchmark run.
pub fn targets(b: &BenchReport) -> Vec<Target> {
    let (tn, tk) = MATVEC_TARGET_SHAPE;
    vec![
        worst(
            b.dequant.iter().map(|r| (format!("{} {}", r.format, r.dtype), r.of_copy)),
            DEQUANT_TARGET,
            "dequant, fraction of copy bandwidth",
        ),
        worst(
            b.matvec.iter().filter(|r| r.m == 1 && r.n == tn && r.k == tk).map(|r| (r.format.clone(), r.of_copy)),
            MATVEC_TARGET,
            &format!("mat-vec M = 1 on {tn}x{tk}, fraction of copy bandwidth"),
        ),
        worst(
            b.f16_direct_vs_cast.iter().map(|r| (r.format.clone(), r.speedup)),
            F16_DIRECT_TARGET,
            "direct f16 dequant vs f32 dequant + cast, speedup",
        ),
        worst(
            b.gemm.iter().map(|g| (gemm_case(g), g.dequant_cublas_ms / g.best_fused_ms())),
            GEMM_VS_DEQUANT_TARGET,
            "fused GEMM (the faster of f16 and int8 / fp8) vs its dequant + cuBLAS, every M, speedup",
        ),
        worst(
            gemm_vs_dense(b, |g| g.m <= 16 && four_bit(&g.format)),
            GEMM_SMALL_M_VS_DENSE_TARGET,
            "fused GEMM of 4-bit formats vs cuBLAS f16 at M <= 16, speedup",
        ),
        worst(
            gemm_vs_dense(b, |g| g.m >= 512),
            GEMM_LARGE_M_VS_DENSE_TARGET,
            "fused GEMM vs cuBLAS f16 at M >= 512, speedup",
        ),
    ]
}

fn gemm_case(g: &GemmRow) -> String {
    format!("{} {}x{} M={}", g.format, g.n, g.k, g.m)
}

/// The 4-bit formats of the small-M target: 4 to 5 bits per weight (scales included).
fn four_bit(format: &str) -> bool {
    qforge_formats::get(format).is_ok_and(|f| (4.0..5.0).contains(&f.desc().bits_per_weight()))
}

/// (case, dense ms / fused ms) for the GEMM rows `keep` selects that have a dense row.
fn gemm_vs_dense<'a>(
    b: &'a BenchReport,
    keep: impl Fn(&GemmRow) -> bool + 'a,
) -> impl Iterator<Item = (String, f64)> + 'a {
    b.gemm.iter().filter(move |g| keep(g)).filter_map(|g| {
        let d = b.gemm_dense.iter().find(|d| (d.n, d.k, d.m) == (g.n, g.k, g.m))?;
        Some((gemm_case(g), d.ms / g.best_fused_ms()))
    })
}

fn pct(x: f64) -> String {
    format!("{:.0}%", 100.0 * x)
}

/// The benchmark tables in Markdown (also printed by `gpu-bench` itself).
pub fn bench_markdown(b: &BenchReport) -> String {
    let mut s = String::new();
    let d = &b.device;
    let _ = writeln!(
        s,
        "Device: **{}** (compute capability {}, {} SMs, L2 {} MiB, {} GiB), driver CUDA {}.\n",
        d.name,
        d.compute_capability,
        d.multiprocessors,
        d.l2_cache_bytes >> 20,
        d.memory_bytes >> 30,
        d.driver_cuda
    );
    let _ = writeln!(
        s,
        "Device-to-device copy: **{:.0} GB/s** (bytes read + written; {} MiB per copy). Method: {}.\n",
        b.copy.gbps,
        b.copy.bytes >> 21,
        b.method
    );
    let mut formats: Vec<&str> = Vec::new();
    for f in b.dequant.iter().map(|r| r.format.as_str()).chain(b.matvec.iter().map(|r| r.format.as_str())) {
        if !formats.contains(&f) {
            formats.push(f);
        }
    }
    s += "### Dequant (bytes read + written per second, fraction of copy) and direct f16 vs f32 + cast\n\n";
    s += "| format | f32 | f16 | bf16 | direct f16 vs f32 + cast |\n|---|---|---|---|---|\n";
    for f in &formats {
        let cell = |dt: &str| {
            b.dequant
                .iter()
                .find(|r| r.format == *f && r.dtype == dt)
                .map_or("-".into(), |r| format!("{:.0} GB/s ({})", r.gbps, pct(r.of_copy)))
        };
        let cast = b
            .f16_direct_vs_cast
            .iter()
            .find(|r| r.format == *f)
            .map_or("-".into(), |r| format!("{:.2}× ({:.3} vs {:.3} ms)", r.speedup, r.direct_f16_ms, r.detour_ms));
        let _ = writeln!(s, "| {f} | {} | {} | {} | {cast} |", cell("f32"), cell("f16"), cell("bf16"));
    }
    let shapes: Vec<(usize, usize)> = {
        let mut v: Vec<(usize, usize)> = b.matvec.iter().map(|r| (r.n, r.k)).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let ms: Vec<usize> = {
        let mut v: Vec<usize> = b.matvec.iter().map(|r| r.m).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    s += "\n### Mat-vec (weight bytes per second as a fraction of copy bandwidth; activation quantization included)\n\n| format |";
    for (n, k) in &shapes {
        for m in &ms {
            let _ = write!(s, " {n}x{k} M={m} |");
        }
    }
    s += "\n|---|";
    s += &"---|".repeat(shapes.len() * ms.len());
    s += "\n";
    for f in &formats {
        let _ = write!(s, "| {f} |");
        for (n, k) in &shapes {
            for m in &ms {
                let c = b.matvec.iter().find(|r| r.format == *f && r.n == *n && r.k == *k && r.m == *m);
                let _ = write!(s, " {} |", c.map_or("-".into(), |r| pct(r.of_copy)));
            }
        }
        s += "\n";
    }
    s += &gemm_markdown(b);
    if !b.errors.is_empty() {
        s += "\nNot measured / notes:\n";
        for e in &b.errors {
            let _ = writeln!(s, "- {e}");
        }
    }
    s
}

/// The GEMM table: per format, shape and M, the fused GEMM's TFLOP/s and its speed against
/// its own dequant + cuBLAS path and against cuBLAS f16 on unquantized weights (time ratios:
/// above 1 the fused GEMM is faster).
fn gemm_markdown(b: &BenchReport) -> String {
    if b.gemm.is_empty() && b.gemm_dense.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n### GEMM (prompt processing; f16 inputs, f32 output; time ratios, > 1: the fused GEMM is faster)\n\n",
    );
    s += "| format | N×K | M | fused ms | fused TFLOP/s | vs dequant + cuBLAS | vs cuBLAS f16 (unquantized) | int8 / fp8 tensor cores: path, ms, vs dequant + cuBLAS | fused instance (tiler) | skinny ms above its M | tiled instances, unsplit, ms |\n";
    s += "|---|---|---|---|---|---|---|---|---|---|---|\n";
    for d in &b.gemm_dense {
        let _ = writeln!(
            s,
            "| f16 (cuBLAS) | {}×{} | {} | {:.3} | {:.1} | - | 1 | - | - | - | - |",
            d.n, d.k, d.m, d.ms, d.tflops
        );
    }
    for g in &b.gemm {
        let dense = b.gemm_dense.iter().find(|d| (d.n, d.k, d.m) == (g.n, g.k, g.m));
        let _ = writeln!(
            s,
            "| {} | {}×{} | {} | {:.3} | {:.1} | {:.2}× | {} | {} | {} | {} | {} |",
            g.format,
            g.n,
            g.k,
            g.m,
            g.fused_ms,
            g.fused_tflops,
            g.dequant_cublas_ms / g.fused_ms,
            dense.map_or("-".into(), |d| format!("{:.2}×", d.ms / g.fused_ms)),
            g.int8.as_ref().map_or("-".into(), |i| {
                let mut c = format!("{} {:.3} ms, {:.2}×", i.path, i.ms, g.dequant_cublas_ms / i.ms);
                if let Some(cfg) = &i.config {
                    c += &format!(" ({cfg}; ");
                    c += &i.instances.iter().map(|(t, ms)| format!("{t} {ms:.3}")).collect::<Vec<_>>().join(", ");
                    c += ")";
                }
                c
            }),
            g.fused_config.as_deref().unwrap_or("-"),
            g.skinny_ms.map_or("-".into(), |ms| format!("{ms:.3}")),
            if g.tiled_ms.is_empty() {
                "-".into()
            } else {
                g.tiled_ms.iter().map(|(t, ms)| format!("{t} {ms:.3}")).collect::<Vec<_>>().join(", ")
            }
        );
    }
    s
}

fn read(dir: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(name)).ok()
}

/// Builds the report from a run's folder.
pub fn gather(dir: &Path, kit: Option<&Path>, seconds: Option<u64>) -> Report {
    let mut failures = Vec::new();
    let steps = read(dir, "steps.tsv").map(|t| parse_steps(&t)).unwrap_or_default();
    if steps.is_empty() {
        failures.push("steps.tsv is missing or empty: run.sh did not run its steps".to_string());
    }
    let mut tests = Tests::default();
    let test_steps: Vec<&Step> = steps.iter().filter(|s| s.name.starts_with("test:")).collect();
    for s in &test_steps {
        parse_test_log(&read(dir, &s.log).unwrap_or_default(), &mut tests);
    }
    for s in steps.iter().filter(|s| s.status != "pass") {
        failures.push(format!("step {} {} (rc {}, see {})", s.name, s.status, s.rc, s.log));
    }
    if test_steps.is_empty() || tests.binaries_reporting < test_steps.len() {
        failures.push(format!("{} of {} test binaries reported a result", tests.binaries_reporting, test_steps.len()));
    }
    if tests.failed > 0 || tests.passed == 0 {
        failures.push(format!("tests: {} passed, {} failed {:?}", tests.passed, tests.failed, tests.failed_tests));
    }
    let matrix: Option<serde_json::Value> =
        read(dir, "matrix.json").and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let summary = matrix.as_ref().and_then(|m| m.get("summary").cloned());
    match &summary {
        None => failures.push("matrix.json is missing or has no summary".into()),
        Some(sm) => {
            let n = |k: &str| sm.get(k).and_then(serde_json::Value::as_u64).unwrap_or(u64::MAX);
            if n("fail") != 0 || n("missing") != 0 || n("skip") != 0 || n("pass") == 0 {
                failures.push(format!(
                    "test matrix: {} pass, {} fail, {} skip, {} missing (on a GPU every CUDA cell must run and pass)",
                    n("pass"),
                    n("fail"),
                    n("skip"),
                    n("missing")
                ));
            }
        }
    }
    let bench: Option<BenchReport> = read(dir, "bench.json").and_then(|t| serde_json::from_str(&t).ok());
    match &bench {
        None => failures.push("bench.json is missing or unreadable".into()),
        Some(b) => {
            failures.extend(b.errors.iter().filter(|e| !e.contains("no graph timing")).map(|e| format!("bench: {e}")))
        }
    }
    let torch: Option<serde_json::Value> =
        read(dir, "torch.json").and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let mut targets = bench.as_ref().map(targets).unwrap_or_default();
    if let (Some(b), Some(t)) = (&bench, &torch) {
        targets.push(worst(
            fp8_vs_torch(b, t),
            FP8_VS_CUBLASLT_TARGET,
            "FP8 block-scaled GEMM vs cuBLASLt FP8 (torch._scaled_mm), speedup",
        ));
    }
    let kit_lines = kit
        .and_then(|k| std::fs::read_to_string(k.join("kit.txt")).ok())
        .map(|t| t.lines().filter_map(|l| l.strip_prefix("# ")).map(str::to_string).collect())
        .unwrap_or_default();
    let device = read(dir, "device.txt").unwrap_or_default().trim().to_string();
    Report {
        ok: failures.is_empty(),
        failures,
        seconds,
        kit: kit_lines,
        device,
        steps,
        tests,
        matrix: summary,
        targets,
        bench,
        torch,
    }
}

pub fn markdown(r: &Report) -> String {
    let mut s = String::from("# qforge GPU report\n\n");
    let _ = writeln!(
        s,
        "**{}**{}\n",
        if r.ok { "PASS" } else { "FAIL" },
        r.seconds.map_or(String::new(), |t| format!(", whole run {t} s"))
    );
    for l in &r.kit {
        let _ = writeln!(s, "- kit: {l}");
    }
    let _ = writeln!(s, "\n```\n{}\n```\n", r.device);
    for f in &r.failures {
        let _ = writeln!(s, "- FAILURE: {f}");
    }
    s += "\n| step | status | rc | seconds |\n|---|---|---|---|\n";
    for st in &r.steps {
        let _ = writeln!(s, "| {} | {} | {} | {:.1} |", st.name, st.status, st.rc, st.ms as f64 / 1e3);
    }
    let t = &r.tests;
    let _ = writeln!(
        s,
        "\nTests: {} passed, {} failed, {} ignored (from {} test binaries).",
        t.passed, t.failed, t.ignored, t.binaries_reporting
    );
    if let Some(m) = &r.matrix {
        let _ = writeln!(s, "Test matrix (CUDA cells): `{m}`");
    }
    if !r.targets.is_empty() {
        s += "\n| target | met | worst |\n|---|---|---|\n";
        for tg in &r.targets {
            let worst = tg.worst.as_ref().map_or("-".into(), |(w, v)| format!("{w}: {v:.2}"));
            let _ = writeln!(s, "| {} ≥ {} | {} / {} | {worst} |", tg.what, tg.target, tg.met, tg.of);
        }
    }
    if let Some(b) = &r.bench {
        s += "\n";
        s += &bench_markdown(b);
    }
    if let Some(t) = &r.torch {
        s += &torch_markdown(t);
    }
    s
}

/// The peers' table from `torch_ref.py`'s JSON.
fn torch_markdown(t: &serde_json::Value) -> String {
    let str_of = |v: Option<&serde_json::Value>| v.and_then(serde_json::Value::as_str).unwrap_or("?").to_string();
    let mut s = format!(
        "\n### Peers: PyTorch {} on {} (cuBLAS f16 / bf16 out, cuBLASLt FP8 bf16 out)\n\n",
        str_of(t.get("torch")),
        str_of(t.get("device"))
    );
    s += "| N×K | M | f16 ms | bf16 ms | FP8 ms | FP8 scaling |\n|---|---|---|---|---|---|\n";
    let ms = |r: &serde_json::Value, k: &str| {
        r.get(k).and_then(serde_json::Value::as_f64).map_or("-".into(), |v| format!("{v:.3}"))
    };
    for r in t.get("rows").and_then(serde_json::Value::as_array).into_iter().flatten() {
        let u = |k: &str| r.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        let _ = writeln!(
            s,
            "| {}×{} | {} | {} | {} | {} | {} |",
            u("n"),
            u("k"),
            u("m"),
            ms(r, "f16_ms"),
            ms(r, "bf16_ms"),
            ms(r, "fp8_ms"),
            str_of(r.get("fp8_scaling"))
        );
    }
    for e in t.get("fp8_unavailable_scalings").and_then(serde_json::Value::as_array).into_iter().flatten() {
        let _ = writeln!(s, "- not available here: {}", e.as_str().unwrap_or("?"));
    }
    s
}

pub fn run(dir: &Path, kit: Option<&Path>, seconds: Option<u64>) -> Result<bool> {
    let r = gather(dir, kit, seconds);
    std::fs::write(dir.join("gpu-report.json"), serde_json::to_string_pretty(&r)?)
        .with_context(|| format!("writing {}", dir.join("gpu-report.json").display()))?;
    let md = markdown(&r);
    std::fs::write(dir.join("gpu-report.md"), &md)?;
    println!("{md}");
    Ok(r.ok)
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
