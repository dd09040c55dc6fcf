//! `cargo xtask setup-cuda`: installs the CUDA 13.0 compiler from PyPI into the git-ignored
//! `.cuda/` folder of the workspace, idempotently.
//!
//! The wheels (nvidia-cuda-nvcc, -runtime, -crt, nvidia-nvvm, nvidia-cuda-cccl, all pinned to
//! 13.0.*) unpack into one ordinary toolkit tree under `.cuda/pkgs/nvidia/cu13/`: `bin/nvcc`
//! with an `nvcc.profile` that finds `nvvm/bin/cicc`, `nvvm/libdevice`, `include/` (crt
//! headers, cccl) and `lib/` relative to itself, so nvcc runs from there as it is: no
//! symlinks, no `NVCC_PREPEND_FLAGS`.

use anyhow::{Context, Result, bail};
use qforge_cuda::toolkit::{self, PACKAGES};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The stamp that records a finished install (the package specs, one per line).
const STAMP: &str = "installed.txt";

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

fn dir_bytes(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else { return 0 };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

pub fn run() -> Result<bool> {
    let ws = workspace_root();
    let dir = ws.join(toolkit::LOCAL_DIR);
    let pkgs = dir.join(toolkit::LOCAL_PKGS);
    let stamp = dir.join(STAMP);
    let want = PACKAGES.join("\n");
    let nvcc = toolkit::local_root(&ws).join("bin").join("nvcc");
    let local = || toolkit::find_local(&ws);

    let installed = std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == want);
    if installed && let Some(t) = local().filter(|t| t.version().is_some()) {
        println!("setup-cuda: nothing to do, CUDA 13.0 is already installed in {}", dir.display());
        report(&t);
        return Ok(true);
    }

    println!("setup-cuda: installing {} from PyPI into {}", PACKAGES.join(" "), pkgs.display());
    let started = Instant::now();
    if pkgs.exists() {
        std::fs::remove_dir_all(&pkgs).with_context(|| format!("removing the old {}", pkgs.display()))?;
    }
    let _ = std::fs::remove_file(&stamp);
    std::fs::create_dir_all(&dir)?;
    let status = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-warn-script-location",
            "--root-user-action=ignore",
        ])
        .arg("--target")
        .arg(&pkgs)
        .args(PACKAGES)
        .status()
        .context("running `python3 -m pip` (setup-cuda needs Python 3 with pip)")?;
    if !status.success() {
        bail!("pip failed ({status}); nothing was recorded as installed");
    }
    let Some(t) = local() else { bail!("pip finished but {} is missing", nvcc.display()) };
    let Some(version) = t.version() else { bail!("{} does not run (`nvcc --version` failed)", nvcc.display()) };
    if !version.contains("release 13.0") {
        bail!("{} reports `{version}`, not CUDA 13.0", nvcc.display());
    }
    std::fs::write(&stamp, format!("{want}\n"))?;
    println!(
        "setup-cuda: installed in {:.1} s, {:.0} MiB on disk",
        started.elapsed().as_secs_f64(),
        dir_bytes(&dir) as f64 / (1024.0 * 1024.0)
    );
    report(&t);
    Ok(true)
}

fn report(t: &toolkit::Toolkit) {
    println!("  nvcc:    {} ({})", t.nvcc.display(), t.version().unwrap_or_default());
    match toolkit::find(&workspace_root()) {
        Some(used) if used.nvcc != t.nvcc => {
            println!("  in use:  {} (from {}; it takes precedence over .cuda/)", used.nvcc.display(), used.source)
        }
        _ => println!("  in use:  this one (qforge-cuda's build script, build-kernels and the host tests find it)"),
    }
    println!("  own toolkit instead: set NVCC=/path/to/nvcc or CUDA_HOME=/usr/local/cuda (checked before .cuda/)");
}
