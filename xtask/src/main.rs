//! xtask: the project's own automation, run as `cargo xtask <command>`.
//!
//! * `test-matrix [--device cpu|cuda|all] [--json]`: every registered format × device × op,
//!   each cell checked against its reference (ggml golden vectors where ggml defines the
//!   format); exits non-zero on any `fail` or `missing` cell.
//! * `bench [--formats a,b] [--op dequant,quantize,matvec,matmul|all] [--n N] [--shape N,K] [--rows M,..] [--native] [--cpu native|avx2] [--rounds N] [--json]`:
//!   qforge's CPU quantize / dequantize / mat-vec throughput next to ggml's (PyPI ggml-py),
//!   measured in the same run, as ratios.
//! * `setup-cuda`: installs the CUDA 13.0 compiler from PyPI into `.cuda/` (idempotent).
//! * `build-kernels [--json]`: compiles every format's PTX module in parallel, with figures.
//! * `gpu-kit [--out DIR] [--profile P]`: builds the GPU kit (binaries with `cuda`, test binaries, PTX,
//!   `run.sh`) for a GPU machine without Rust, and checks it here (`run.sh --check`).
//! * `gpu-bench`, `gpu-report`, `kit-check-ptx`: the kit's steps (see [`gpu`]).

mod bench;
mod build_kernels;
mod gpu;
mod matrix;
mod outlined;
mod setup_cuda;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run every format × device × op cell against its reference.
    TestMatrix {
        /// cpu, cuda or all (every device with a backend in this project).
        #[arg(long, default_value = "all")]
        device: String,
        /// Print `{"cells": [...]}` instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// qforge CPU throughput vs ggml's C code on this machine, as ratios.
    Bench {
        /// Comma-separated format names (default: every registered format).
        #[arg(long)]
        formats: Option<String>,
        /// Elements per measurement (a multiple of 4096).
        #[arg(long, default_value_t = 1 << 22)]
        n: usize,
        /// Ops to measure, comma-separated: dequant, quantize, matvec, matmul, or all.
        #[arg(long, default_value = "dequant,quantize")]
        op: String,
        /// Mat-vec / mat-mul weight shape N,K (output features, input features).
        #[arg(long, default_value = "4096,4096")]
        shape: String,
        /// Activation rows M of the mat-mul rows, comma-separated.
        #[arg(long, default_value = "64,512")]
        rows: String,
        /// Build qforge with RUSTFLAGS=-C target-cpu=native (as ggml-py builds ggml) instead
        /// of a plain release build.
        #[arg(long)]
        native: bool,
        /// Kernels on both sides: native (the best this CPU has) or avx2 (qforge capped by
        /// QFORGE_CPU=avx2 against a ggml-py built with AVX2 only, in .venv-avx2/).
        #[arg(long, default_value = "native")]
        cpu: String,
        /// Rounds of measurements per row, alternating sides; each cell keeps its best rate
        /// (steadier figures on a shared machine, N times the time).
        #[arg(long, default_value_t = 1)]
        rounds: usize,
        #[arg(long)]
        json: bool,
    },
    /// Install the CUDA 13.0 compiler (nvcc, from PyPI) into the git-ignored `.cuda/` folder.
    SetupCuda,
    /// Compile every format's kernel module to PTX (in parallel) and report the figures.
    BuildKernels {
        /// Print `{"total_seconds", "formats": [...]}` instead of a table.
        #[arg(long)]
        json: bool,
        /// Parallel nvcc processes.
        #[arg(long, default_value_t = 2)]
        jobs: usize,
    },
    /// Build the GPU kit (default target/gpu-kit) and check it here with its run.sh --check.
    GpuKit {
        /// Where to put the kit (replaced if it is an older kit).
        #[arg(long)]
        out: Option<std::path::PathBuf>,
        /// The cargo profile of the kit's `bin/qforge` and `bin/xtask`. `release` (the
        /// default) for a GPU session; CI checks the kit with `test`, whose artifacts the test
        /// run has already built, instead of a second full optimized build.
        #[arg(long, default_value = "release")]
        profile: String,
    },
    /// On a GPU: dequant / mat-vec / f16-vs-cast benchmarks against device-to-device copy.
    GpuBench {
        /// Comma-separated format names (default: every format with device code).
        #[arg(long)]
        formats: Option<String>,
        /// Comma-separated benchmark groups: dequant, matvec, gemm (default: all).
        #[arg(long)]
        ops: Option<String>,
        /// Comma-separated activation rows for the GEMM benchmarks, every format and shape
        /// (default: 16, 64, 128, 512, 2048, 8192 for the first format of each family, 16, 512,
        /// 2048 for the others).
        #[arg(long)]
        gemm_m: Option<String>,
        /// Write the JSON here instead of stdout.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
    /// Gather a kit run's folder into gpu-report.json and gpu-report.md.
    GpuReport {
        #[arg(long)]
        dir: std::path::PathBuf,
        /// The kit folder (its kit.txt names the commit and toolkit).
        #[arg(long)]
        kit: Option<std::path::PathBuf>,
        /// The whole run's seconds, as run.sh measured them.
        #[arg(long)]
        seconds: Option<u64>,
    },
    /// Check the PTX modules this binary embeds (or a folder of `.ptx.z` files): every
    /// expected module parses (and assembles, with ptxas).
    KitCheckPtx { dir: Option<std::path::PathBuf> },
}

fn main() -> ExitCode {
    let result = match Cli::parse().cmd {
        Cmd::TestMatrix { device, json } => matrix::run(&device, json),
        Cmd::Bench { formats, n, op, shape, rows, native, cpu, rounds, json } => (|| {
            let ops = bench::parse_ops(&op)?;
            let shape = bench::parse_shape(&shape)?;
            let rows = bench::parse_rows(&rows)?;
            let cpu = bench::Cpu::parse(&cpu)?;
            let args = bench::Args {
                formats: formats.as_deref(),
                n,
                ops: &ops,
                shape,
                rows: &rows,
                native,
                cpu,
                rounds,
                json,
            };
            bench::run(&args)
        })(),
        Cmd::SetupCuda => setup_cuda::run(),
        Cmd::BuildKernels { json, jobs } => build_kernels::run(json, jobs),
        Cmd::GpuKit { out, profile } => gpu::kit::build(out, &profile),
        Cmd::GpuBench { formats, ops, gemm_m, out } => {
            gpu_bench(formats.as_deref(), ops.as_deref(), gemm_m.as_deref(), out.as_deref())
        }
        Cmd::GpuReport { dir, kit, seconds } => gpu::report::run(&dir, kit.as_deref(), seconds),
        Cmd::KitCheckPtx { dir } => gpu::kit::check_ptx(dir.as_deref()),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(feature = "cuda")]
fn gpu_bench(
    formats: Option<&str>,
    ops: Option<&str>,
    gemm_m: Option<&str>,
    out: Option<&std::path::Path>,
) -> anyhow::Result<bool> {
    gpu::bench::run(formats, ops, gemm_m, out)
}

#[cfg(not(feature = "cuda"))]
fn gpu_bench(_: Option<&str>, _: Option<&str>, _: Option<&str>, _: Option<&std::path::Path>) -> anyhow::Result<bool> {
    anyhow::bail!("xtask built without its `cuda` feature: gpu-bench runs from the GPU kit (cargo xtask gpu-kit)")
}
