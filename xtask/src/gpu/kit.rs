//! `cargo xtask gpu-kit [--out DIR]`: everything a GPU machine without Rust needs to prove
//! qforge's CUDA side, built here (no GPU needed) into one folder, default `target/gpu-kit/`
//! (git-ignored), then checked here with its own `run.sh --check`.
//!
//! The folder: `run.sh`; `bin/qforge` and `bin/xtask` (feature `cuda`; the `release` profile,
//! or the one `--profile` names); `tests/`, the
//! CUDA test binaries (`cargo test --workspace --features cuda --no-run`: qforge-cuda's and the
//! CLI's `cuda_device`); `golden/`, the ggml
//! golden vectors the test matrix reads; `kit.txt`, what is in it. Binaries are copied
//! stripped (`strip --strip-all`) and gzip'd (`bin/qforge.gz`, …: a third of their size;
//! `run.sh` unpacks them next to the `.gz` before anything else); the kit and the repository's
//! tracked files together must stay under 64 MiB (what the GPU machine's transfer takes), with
//! 1 MiB to spare. The unpacked copies `run.sh --check` made are removed after it, so the kit
//! travels packed.
//!
//! `xtask kit-check-ptx` (run by `run.sh --check`) parses every module the kit's binaries
//! embed (from `bin/xtask`, or a folder of `.ptx.z` files given as its argument): the `.version`
//! (≤ the 13.0 driver's PTX ISA 9.0), `.target sm_80` (`sm_89` for the sm_89 module), every
//! kernel the runtime loads, no unresolved `.extern`; with `ptxas` on PATH or in `$PTXAS`,
//! each also assembles for its target.

use crate::setup_cuda::workspace_root;
use anyhow::{Context, Result, bail};
use qforge_cuda::{codegen, toolkit};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What the GPU machine's transfer takes: the kit and the repository's own files together.
pub const TRANSFER_BYTES: u64 = 64 << 20;
/// Room left in the transfer beside the kit and the repository (files added in a session).
const TRANSFER_SPARE: u64 = 1 << 20;

/// Bytes of the repository's tracked files (they travel with the kit); 8 MiB if git cannot
/// say.
fn repo_bytes() -> u64 {
    let out = Command::new("git").args(["ls-files", "-z"]).current_dir(workspace_root()).output();
    match out {
        Ok(o) if o.status.success() => o
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .filter_map(|p| std::fs::metadata(workspace_root().join(String::from_utf8_lossy(p).as_ref())).ok())
            .map(|m| m.len())
            .sum(),
        _ => 8 << 20,
    }
}
/// The newest PTX ISA a CUDA 13.0 driver loads.
const MAX_PTX_ISA: (u32, u32) = (9, 0);

/// Test binaries the kit carries: (package, test target); `None` = every target of it.
const TEST_TARGETS: &[(&str, Option<&str>)] = &[("qforge-cuda", None), ("qforge-cli", Some("cuda_device"))];

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(workspace_root());
    c
}

/// One `cargo ... --message-format=json-render-diagnostics` run: its JSON messages.
fn cargo_json(args: &[&str]) -> Result<Vec<serde_json::Value>> {
    eprintln!("gpu-kit: cargo {}", args.join(" "));
    let out = cargo()
        .args(args)
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo")?;
    if !out.status.success() {
        bail!("cargo {} failed ({})", args.join(" "), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
}

fn package_name(msg: &serde_json::Value) -> &str {
    // package_id: "path+file:///…/crates/qforge-cuda#0.1.0" or "…#qforge-cuda@0.1.0".
    let id = msg["package_id"].as_str().unwrap_or("");
    let tail = id.rsplit('/').next().unwrap_or(id);
    let (name, ver) = tail.split_once('#').unwrap_or((tail, ""));
    ver.split_once('@').map_or(name, |(n, _)| n)
}

/// Built executables: (package, target name, path, is a test).
fn executables(msgs: &[serde_json::Value]) -> Vec<(String, String, PathBuf, bool)> {
    msgs.iter()
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter_map(|m| {
            let exe = m["executable"].as_str()?;
            Some((
                package_name(m).to_string(),
                m["target"]["name"].as_str().unwrap_or("").to_string(),
                PathBuf::from(exe),
                m["profile"]["test"].as_bool().unwrap_or(false),
            ))
        })
        .collect()
}

/// `from` stripped and gzip'd into `to` + `.gz` (`run.sh` unpacks it to `to`).
fn copy_stripped(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to).with_context(|| format!("copying {}", from.display()))?;
    // Symbols and debug info go (panic messages keep their file:line, which is data, not
    // debug info); the PTX each binary embeds stays, and is most of what is left.
    let ok = Command::new("strip").arg("--strip-all").arg(to).status().is_ok_and(|s| s.success());
    if !ok {
        eprintln!("gpu-kit: warning: `strip --strip-all {}` failed; kept unstripped", to.display());
    }
    let st = Command::new("gzip").args(["-6", "-n", "-f"]).arg(to).status().context("running gzip")?;
    if !st.success() {
        bail!("gzip {} failed ({st})", to.display());
    }
    Ok(())
}

/// Removes the binaries `run.sh` unpacked (each beside its `.gz`): the kit travels packed.
fn remove_unpacked(kit: &Path) -> Result<()> {
    for sub in ["bin", "tests"] {
        for e in std::fs::read_dir(kit.join(sub))?.flatten() {
            let p = e.path();
            let mut z = p.clone().into_os_string();
            z.push(".gz");
            if p.extension().is_none_or(|x| x != "gz") && Path::new(&z).exists() {
                std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
            }
        }
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let e = e?;
        let p = e.path();
        if e.file_type()?.is_dir() {
            if e.file_name() != ".work" {
                copy_dir(&p, &to.join(e.file_name()))?;
            }
        } else if p.extension().is_none_or(|x| x != "py") {
            std::fs::copy(&p, to.join(e.file_name()))?;
        }
    }
    Ok(())
}

fn dir_bytes(p: &Path) -> u64 {
    std::fs::read_dir(p).map_or(0, |rd| {
        rd.flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => dir_bytes(&e.path()),
                _ => e.metadata().map_or(0, |m| m.len()),
            })
            .sum()
    })
}

/// How many tests of the test binary `exe` are `#[ignore]`d (needing a GPU), from its own
/// `--list --ignored`.
fn gpu_only_tests(exe: &Path) -> Result<usize> {
    let out = Command::new(exe)
        .args(["--list", "--ignored", "--format", "terse"])
        .output()
        .with_context(|| format!("listing the tests of {}", exe.display()))?;
    if !out.status.success() {
        bail!("{} --list failed: {}", exe.display(), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.ends_with(": test")).count())
}

fn git_commit() -> String {
    let out = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).current_dir(workspace_root()).output();
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .current_dir(workspace_root())
        .output()
        .is_ok_and(|o| !o.stdout.is_empty());
    match out {
        Ok(o) if o.status.success() => {
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout).trim(),
                if dirty { " (with uncommitted changes)" } else { "" }
            )
        }
        _ => "unknown".into(),
    }
}

/// Builds the kit into `out` (default `target/gpu-kit`), its binaries with the cargo profile
/// `profile`, then runs its `run.sh --check`.
pub fn build(out: Option<PathBuf>, profile: &str) -> Result<bool> {
    let root = workspace_root();
    let tk = toolkit::find(&root).context(toolkit::NOT_FOUND)?;
    let kit = out.unwrap_or_else(|| {
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from).join("gpu-kit")
    });
    if kit.exists() {
        if !kit.join("kit.txt").exists() && std::fs::read_dir(&kit)?.next().is_some() {
            bail!("{} exists and is not a GPU kit: refusing to replace it", kit.display());
        }
        std::fs::remove_dir_all(&kit).with_context(|| format!("removing the old kit {}", kit.display()))?;
    }
    // The workspace's bins (`qforge`, `xtask`) with the workspace's features, and the test
    // binaries. With `--profile test` both come from one `cargo build --all-targets`: every
    // target `cargo test` builds, so the tests that follow reuse all of it (as fast as the two
    // invocations below on the 2-core EPYC, 2026-11-29). Another profile (release) builds the
    // bins with it and the test binaries, which need the test profile, separately.
    let release = if profile == "test" {
        cargo_json(&["build", "--profile", "test", "--workspace", "--features", "cuda", "--all-targets"])?
    } else {
        cargo_json(&["build", "--profile", profile, "--workspace", "--bins", "--features", "cuda"])?
    };
    let separate_tests = match profile {
        "test" => None,
        _ => Some(cargo_json(&["test", "--workspace", "--features", "cuda", "--no-run"])?),
    };
    let tests = separate_tests.as_deref().unwrap_or(&release);

    for sub in ["bin", "tests"] {
        std::fs::create_dir_all(kit.join(sub))?;
    }
    let mut listing = vec![
        format!("# qforge GPU kit, commit {}", git_commit()),
        format!("# built with {}", tk.version().unwrap_or_else(|| "nvcc (version unknown)".into())),
        format!("# binaries: cargo profile `{profile}`"),
        "#kind path (a line per file; run.sh --check checks each)".to_string(),
        "file run.sh".to_string(),
    ];
    for name in ["qforge", "xtask"] {
        let (_, _, exe, _) = executables(&release)
            .into_iter()
            .find(|(_, t, _, test)| t == name && !test)
            .with_context(|| format!("cargo built no `{name}` binary"))?;
        copy_stripped(&exe, &kit.join("bin").join(name))?;
        listing.push(format!("bin bin/{name}"));
    }
    let mut n_tests = 0;
    for (pkg, target, exe, test) in executables(tests) {
        let wanted = TEST_TARGETS.iter().any(|(p, t)| *p == pkg && t.is_none_or(|t| t == target));
        // A binary without GPU-only tests checks nothing CI does not check already (the
        // host checks): it stays out, leaving the kit's budget to the binaries that need a GPU.
        if test && wanted && gpu_only_tests(&exe)? > 0 {
            let name = format!("{pkg}-{target}");
            copy_stripped(&exe, &kit.join("tests").join(&name))?;
            listing.push(format!("test tests/{name}"));
            n_tests += 1;
        }
    }
    if n_tests == 0 {
        bail!("cargo built none of the CUDA test binaries");
    }
    copy_dir(&qforge_golden::dir(), &kit.join("golden"))?;
    listing.push("file golden/manifest.json".into());
    let run_sh = kit.join("run.sh");
    std::fs::write(&run_sh, include_str!("../../kit/run.sh"))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&run_sh, std::fs::Permissions::from_mode(0o755))?;
    }
    std::fs::write(kit.join("torch_ref.py"), include_str!("../../kit/torch_ref.py"))?;
    listing.push("file torch_ref.py".into());
    std::fs::write(kit.join("kit.txt"), listing.join("\n") + "\n")?;

    let bytes = dir_bytes(&kit);
    eprintln!("gpu-kit: {} — {} test binaries, {:.1} MiB", kit.display(), n_tests, bytes as f64 / (1 << 20) as f64);
    let repo = repo_bytes();
    let limit = TRANSFER_BYTES.saturating_sub(repo + TRANSFER_SPARE);
    if bytes > limit {
        bail!(
            "the kit is {:.1} MiB: with the repository's {:.1} MiB it is over the GPU machine's {} MiB transfer",
            bytes as f64 / (1 << 20) as f64,
            repo as f64 / (1 << 20) as f64,
            TRANSFER_BYTES >> 20
        );
    }
    let status = Command::new("bash")
        .arg(&run_sh)
        .arg("--check")
        .env("PTXAS", tk.bin_dir().join("ptxas"))
        .status()
        .context("running run.sh --check")?;
    remove_unpacked(&kit)?;
    eprintln!(
        "gpu-kit: copy {} to the GPU machine and run `{}/run.sh [OUTDIR]` there",
        kit.display(),
        kit.file_name().map_or("gpu-kit".into(), |n| n.to_string_lossy())
    );
    Ok(status.success())
}

/// One PTX module's problems (empty = fine): header, kernels, unresolved symbols, for a
/// module built for `target` (`sm_80`, or `sm_89` for `codegen::SM89_MODULE`).
pub fn ptx_problems(text: &str, kernels: &[String], target: &str) -> Vec<String> {
    let mut p = Vec::new();
    let directive = |name: &str| text.lines().find_map(|l| l.trim().strip_prefix(name).map(str::trim));
    match directive(".version ").and_then(|v| v.split_once('.')) {
        Some((a, b)) => match (a.parse::<u32>(), b.parse::<u32>()) {
            (Ok(a), Ok(b)) if (a, b) <= MAX_PTX_ISA => {}
            _ => p.push(format!(".version {a}.{b} is newer than the CUDA 13.0 driver's PTX ISA 9.0")),
        },
        None => p.push("no .version directive: not PTX".into()),
    }
    if directive(".target ") != Some(target) {
        p.push(format!(".target is {:?}, want {target}", directive(".target ")));
    }
    if directive(".address_size ") != Some("64") {
        p.push("not .address_size 64".into());
    }
    let entries = crate::build_kernels::entries(text);
    for k in kernels {
        if !entries.contains(k) {
            p.push(format!("lacks kernel {k}"));
        }
    }
    if let Some(l) = qforge_cuda::codegen::unresolved_extern(text) {
        p.push(format!("unresolved `{l}`"));
    }
    if text.matches('{').count() != text.matches('}').count() {
        p.push("unbalanced braces (truncated?)".into());
    }
    p
}

fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS").map(PathBuf::from).filter(|p| p.is_file()) {
        return Some(p);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("ptxas")).find(|p| p.is_file())
}

/// Where `kit-check-ptx` reads the modules: a folder of deflated `.ptx.z` files, or the
/// modules this binary itself embeds (the kit's `bin/xtask`, built with `cuda`, carries the
/// same PTX as every other binary of the kit; a second copy in the kit only took 8.5 MiB of
/// the GPU machine's 64 MiB transfer).
fn module_text(dir: Option<&Path>, file: &str) -> std::result::Result<String, String> {
    let Some(dir) = dir else { return embedded_module(file) };
    let z = std::fs::read(dir.join(file)).map_err(|e| format!("unreadable: {e}"))?;
    let bytes = miniz_oxide::inflate::decompress_to_vec(&z).map_err(|e| format!("does not inflate: {e:?}"))?;
    String::from_utf8(bytes).map_err(|e| format!("not text: {e}"))
}

#[cfg(feature = "cuda")]
fn embedded_module(file: &str) -> std::result::Result<String, String> {
    let stem = file.trim_end_matches(".ptx.z");
    let text = if stem == Path::new(codegen::UTIL_MODULE_FILE).with_extension("").display().to_string() {
        qforge_cuda::util_ptx()
    } else if stem == codegen::SM89_MODULE {
        qforge_cuda::sm89_ptx()
    } else {
        let format = qforge_formats::registry()
            .iter()
            .map(|f| f.desc().name)
            .find(|n| codegen::module_stem(n) == stem)
            .ok_or_else(|| format!("{file}: no registered format has this module"))?;
        qforge_cuda::module_ptx(format).ok_or_else(|| format!("{file}: not embedded in this build"))?
    };
    text.map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
fn embedded_module(file: &str) -> std::result::Result<String, String> {
    Err(format!("{file}: this xtask was built without `cuda`, so it embeds no PTX (name a folder)"))
}

/// `xtask kit-check-ptx [DIR]`: every module the registry expects, from DIR's `.ptx.z` files
/// or (no DIR) as this binary embeds them, parsed (and assembled where ptxas is available).
pub fn check_ptx(dir: Option<&Path>) -> Result<bool> {
    let mut expected: Vec<(String, Vec<String>, &str)> = qforge_formats::registry()
        .iter()
        .filter(|f| f.desc().cuda.is_some())
        .map(|f| {
            let name = f.desc().name;
            (format!("{}.ptx.z", codegen::module_stem(name)), codegen::module_kernel_names(name), "sm_80")
        })
        .collect();
    expected.push((
        format!("{}.z", Path::new(codegen::UTIL_MODULE_FILE).with_extension("ptx").display()),
        codegen::UTIL_KERNELS.iter().map(|k| k.to_string()).collect(),
        "sm_80",
    ));
    expected.push((format!("{}.ptx.z", codegen::SM89_MODULE), codegen::sm89_kernel_names(), "sm_89"));
    let ptxas = find_ptxas();
    let mut bad = 0;
    for (file, kernels, target) in &expected {
        let text = module_text(dir, file);
        let mut problems = match &text {
            Ok(text) => ptx_problems(text, kernels, target),
            Err(e) => vec![e.clone()],
        };
        // ptxas reads a file: the inflated text, in a temporary one.
        let plain =
            std::env::temp_dir().join(format!("qforge-kit-{}-{}", std::process::id(), file.trim_end_matches(".z")));
        if let (Some(ptxas), true, Ok(text)) = (&ptxas, problems.is_empty(), &text) {
            std::fs::write(&plain, text).with_context(|| format!("writing {}", plain.display()))?;
            let out = Command::new(ptxas).arg(format!("-arch={target}")).args(["-o", "/dev/null"]).arg(&plain).output();
            let _ = std::fs::remove_file(&plain);
            match out {
                Ok(o) if o.status.success() => {}
                Ok(o) => problems.push(format!("ptxas: {}", String::from_utf8_lossy(&o.stderr).trim())),
                Err(e) => problems.push(format!("running {}: {e}", ptxas.display())),
            }
        }
        if !problems.is_empty() {
            bad += 1;
            println!("  FAIL  {file}: {}", problems.join("; "));
        }
    }
    println!(
        "  {} PTX modules checked, {} bad{}",
        expected.len(),
        bad,
        ptxas.map_or(" (parsed; no ptxas here to assemble them)".into(), |p| format!(
            " (parsed and assembled for their targets by {})",
            p.display()
        ))
    );
    Ok(bad == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str =
        "//\n.version 9.0\n.target sm_80\n.address_size 64\n\n.visible .entry k_a(\n.param .u64 p\n)\n{\nret;\n}\n";

    #[test]
    fn a_good_module_passes_and_each_defect_is_named() {
        let k = vec!["k_a".to_string()];
        assert!(ptx_problems(GOOD, &k, "sm_80").is_empty(), "{:?}", ptx_problems(GOOD, &k, "sm_80"));
        let cases = [
            (GOOD.replace("9.0", "9.1"), "newer than"),
            (GOOD.replace(".version 9.0\n", ""), "not PTX"),
            (GOOD.replace("sm_80", "sm_90a"), "want sm_80"),
            (GOOD.replace("k_a", "k_b"), "lacks kernel k_a"),
            (format!("{GOOD}.extern .global .align 4 .b8 tab[];\n"), "unresolved"),
            (GOOD.trim_end_matches("}\n").to_string(), "unbalanced"),
            (String::new(), "not PTX"),
        ];
        for (text, want) in cases {
            let p = ptx_problems(&text, &k, "sm_80");
            assert!(p.iter().any(|x| x.contains(want)), "{want}: {p:?}");
        }
    }

    #[test]
    fn package_names_from_both_id_formats() {
        let a = serde_json::json!({"package_id": "path+file:///w/crates/qforge-cuda#0.1.0"});
        let b = serde_json::json!({"package_id": "path+file:///w/xtask#xtask@0.1.0"});
        assert_eq!(package_name(&a), "qforge-cuda");
        assert_eq!(package_name(&b), "xtask");
    }
}
