//! xtask: the project's own automation, run as `cargo xtask <command>`.
//!
//! * `test-matrix [--device cpu|cuda|all] [--json]`: every registered format × device × op,
//!   each cell checked against its reference (ggml golden vectors where ggml defines the
//!   format); exits non-zero on any `fail` or `missing` cell.
//! * `bench [--formats a,b] [--op dequant,quantize|matvec|all] [--n N] [--shape N,K] [--json]`:
//!   qforge's CPU quantize / dequantize / mat-vec throughput next to ggml's (PyPI ggml-py),
//!   measured in the same run, as ratios.
//! * `setup-cuda`: installs the CUDA 13.0 compiler from PyPI into `.cuda/` (idempotent).
//! * `build-kernels [--json]`: compiles every format's PTX module in parallel, with figures.

mod bench;
mod build_kernels;
mod matmul_cells;
mod matrix;
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
        /// Ops to measure, comma-separated: dequant, quantize, matvec, or all.
        #[arg(long, default_value = "dequant,quantize")]
        op: String,
        /// Mat-vec weight shape N,K (output features, input features).
        #[arg(long, default_value = "4096,4096")]
        shape: String,
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
}

fn main() -> ExitCode {
    let result = match Cli::parse().cmd {
        Cmd::TestMatrix { device, json } => matrix::run(&device, json),
        Cmd::Bench { formats, n, op, shape, json } => bench::parse_ops(&op)
            .and_then(|ops| Ok((ops, bench::parse_shape(&shape)?)))
            .and_then(|(ops, shape)| bench::run(formats.as_deref(), n, &ops, shape, json)),
        Cmd::SetupCuda => setup_cuda::run(),
        Cmd::BuildKernels { json, jobs } => build_kernels::run(json, jobs),
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
