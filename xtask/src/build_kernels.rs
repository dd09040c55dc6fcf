//! `cargo xtask build-kernels [--json] [--jobs N]`: compiles every format's kernel module to
//! PTX, `jobs` nvcc processes at a time, and reports per format the compile seconds, the PTX
//! path and size and the kernels it defines (its `.entry` lines). A format without device
//! code is reported MISSING and makes the command exit non-zero, as does a module that lacks
//! one of the kernels the runtime expects.
//!
//! The modules are generated exactly as qforge-cuda's build script generates them
//! (`qforge_cuda::codegen`), into `<target>/qforge-kernels/`.

use crate::setup_cuda::workspace_root;
use anyhow::{Context, Result, bail};
use qforge_core::FormatDesc;
use qforge_cuda::{codegen, toolkit};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

#[derive(Serialize)]
struct Module {
    format: &'static str,
    ptx: String,
    ptx_bytes: u64,
    compile_seconds: f64,
    kernels: Vec<String>,
    #[serde(skip)]
    error: Option<String>,
}

#[derive(Serialize)]
struct Report {
    total_seconds: f64,
    jobs: usize,
    nvcc: String,
    formats: Vec<Module>,
    /// Registered formats without device code (no kernels at all).
    missing: Vec<&'static str>,
}

fn out_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
        .join("qforge-kernels")
}

/// The `.entry` names of a PTX module.
pub fn entries(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|l| l.split_once(".entry ").map(|(_, rest)| rest))
        .map(|rest| rest.split(|c: char| c == '(' || c.is_whitespace()).next().unwrap_or("").to_string())
        .collect()
}

fn compile(tk: &toolkit::Toolkit, dir: &Path, d: &'static FormatDesc) -> Module {
    let stem = codegen::module_stem(d.name);
    let cu = dir.join(format!("{stem}.cu"));
    let ptx = dir.join(format!("{stem}.ptx"));
    let started = Instant::now();
    let result = (|| -> Result<Vec<String>> {
        std::fs::write(&cu, codegen::module_source(d).context("no device code")?)?;
        let out = Command::new(&tk.nvcc)
            .args(codegen::NVCC_PTX_FLAGS)
            .arg(format!("-I{}", workspace_root().join("kernels-cuda").display()))
            .arg(format!("-I{}", dir.display()))
            .arg(&cu)
            .arg("-o")
            .arg(&ptx)
            .output()
            .with_context(|| format!("running {}", tk.nvcc.display()))?;
        if !out.status.success() {
            bail!("nvcc failed:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        let kernels = entries(&std::fs::read_to_string(&ptx)?);
        let absent: Vec<String> =
            codegen::module_kernel_names(d.name).into_iter().filter(|k| !kernels.contains(k)).collect();
        if !absent.is_empty() {
            bail!("the PTX lacks {}", absent.join(", "));
        }
        Ok(kernels)
    })();
    let compile_seconds = started.elapsed().as_secs_f64();
    let ptx_bytes = std::fs::metadata(&ptx).map(|m| m.len()).unwrap_or(0);
    let (kernels, error) = match result {
        Ok(k) => (k, None),
        Err(e) => (Vec::new(), Some(format!("{e:#}"))),
    };
    Module { format: d.name, ptx: ptx.display().to_string(), ptx_bytes, compile_seconds, kernels, error }
}

pub fn run(json: bool, jobs: usize) -> Result<bool> {
    let tk = toolkit::find(&workspace_root()).context(toolkit::NOT_FOUND)?;
    let descs: Vec<&'static FormatDesc> = qforge_formats::registry().iter().map(|f| f.desc()).collect();
    let missing: Vec<&'static str> = descs.iter().filter(|d| d.cuda.is_none()).map(|d| d.name).collect();
    let todo: Vec<&'static FormatDesc> = descs.into_iter().filter(|d| d.cuda.is_some()).collect();
    let dir = out_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for (file, text) in codegen::headers(todo.iter().copied()) {
        std::fs::write(dir.join(file), text)?;
    }
    std::fs::write(dir.join(codegen::BLOCKS_HEADER), codegen::blocks_header(qforge_formats::registry().iter()))?;

    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| {
                while let Some(d) = todo.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let m = compile(&tk, &dir, d);
                    done.lock().unwrap_or_else(|p| p.into_inner()).push(m);
                }
            });
        }
    });
    let mut formats = done.into_inner().unwrap_or_else(|p| p.into_inner());
    formats.sort_by_key(|m| todo.iter().position(|d| d.name == m.format));
    let report = Report {
        total_seconds: started.elapsed().as_secs_f64(),
        jobs: jobs.max(1),
        nvcc: tk.nvcc.display().to_string(),
        formats,
        missing,
    };
    let failed: Vec<&Module> = report.formats.iter().filter(|m| m.error.is_some()).collect();
    for m in &failed {
        eprintln!("build-kernels: {} FAILED: {}", m.format, m.error.as_deref().unwrap_or(""));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{:<10} {:>8} {:>10}  kernels  ptx", "format", "seconds", "ptx bytes");
        for m in &report.formats {
            println!(
                "{:<10} {:>8.2} {:>10}  {:>7}  {}",
                m.format,
                m.compile_seconds,
                m.ptx_bytes,
                m.kernels.len(),
                m.ptx
            );
        }
        for name in &report.missing {
            println!("{name:<10} MISSING: no CUDA device code (FormatDesc::cuda is None), no kernels");
        }
        let bytes: u64 = report.formats.iter().map(|m| m.ptx_bytes).sum();
        println!(
            "{} modules, {} bytes of PTX, {:.1} s wall with {} nvcc processes (budget 120 s); {} failed, {} MISSING",
            report.formats.len(),
            bytes,
            report.total_seconds,
            report.jobs,
            failed.len(),
            report.missing.len()
        );
    }
    if !report.missing.is_empty() {
        eprintln!("build-kernels: MISSING device code for {}", report.missing.join(" "));
    }
    Ok(failed.is_empty() && report.missing.is_empty())
}
