//! qforge-cli: the `qforge` binary — list formats, quantize and dequantize raw tensor files.
//!
//! Exit codes: 0 success, 1 failed operation, 2 bad usage or bad input, with one line on
//! stderr. The spellings of commands and flags are a contract (docs/cli.md).

mod bench;
mod commands;
mod device;
mod exit;
mod files;
mod gemm_config;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "qforge", version, about = "Quantize, dequantize and inspect quantized LLM weights")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List every format qforge supports.
    Formats {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Quantize a raw little-endian f32 tensor (row-major) into a raw quantized file.
    Quantize {
        /// Format name (case-insensitive), e.g. q4_0, q4_k.
        #[arg(long)]
        format: String,
        /// Input .f32 file (little-endian f32, row-major).
        #[arg(long)]
        input: PathBuf,
        /// Logical shape ROWS,COLS (COLS is the quantized row length).
        #[arg(long)]
        shape: String,
        /// Output: the quantized blocks row after row, as GGUF stores them.
        #[arg(long)]
        output: PathBuf,
        /// Importance weights: one little-endian f32 per column.
        #[arg(long)]
        imatrix: Option<PathBuf>,
        /// Group size for group-wise formats.
        #[arg(long)]
        group_size: Option<usize>,
    },
    /// Dequantize a raw quantized file to f32, f16 or bf16 (little-endian, row-major).
    Dequant {
        #[arg(long)]
        format: String,
        #[arg(long)]
        input: PathBuf,
        /// Logical shape ROWS,COLS of the tensor.
        #[arg(long)]
        shape: String,
        #[arg(long)]
        output: PathBuf,
        /// Output element type: f32, f16 or bf16.
        #[arg(long, default_value = "f32")]
        dtype: String,
        /// Device to run on: cpu or cuda.
        #[arg(long, default_value = "cpu")]
        device: String,
        #[arg(long)]
        group_size: Option<usize>,
    },
    /// Measure the throughput of one op on one format (elements/s and bytes/s).
    Bench {
        #[arg(long)]
        format: String,
        /// dequant or quantize (matvec / matmul arrive with the mat-mul issue).
        #[arg(long)]
        op: String,
        /// Number of elements (a multiple of 4096; rows of 4096). Default 4194304.
        #[arg(long)]
        n: Option<usize>,
        /// Shape N,K instead of --n.
        #[arg(long)]
        shape: Option<String>,
        /// Worker threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        #[arg(long, default_value = "cpu")]
        device: String,
        /// One JSON object instead of a line of text.
        #[arg(long)]
        json: bool,
    },
    /// Choose the GEMM tiling config (tiles, stages, split-k, kernel variant) for a shape.
    GemmConfig {
        /// Rows of the activations (tokens).
        #[arg(long)]
        m: Option<u64>,
        /// Output features (rows of the weight matrix).
        #[arg(long)]
        n: Option<u64>,
        /// Input features (the quantized row length).
        #[arg(long)]
        k: Option<u64>,
        /// Weight format: a registry format (q4_k, ...) or f32, f16, bf16, fp8_e4m3, fp8_e5m2, int4g.
        #[arg(long)]
        format: String,
        /// Built-in device: h100, h200, a100, l40s, rtx4090, rtx3090, t4.
        #[arg(long)]
        device: String,
        /// Activation dtype: f32, f16, bf16, int8, fp8 (default: fp8 for fp8 weights, int8 for int4g, else f16).
        #[arg(long)]
        act_dtype: Option<String>,
        /// Output dtype: f32, f16, bf16.
        #[arg(long, default_value = "f16")]
        out_dtype: String,
        /// Group size for int4g (a power of two >= 32; default 128).
        #[arg(long)]
        group_size: Option<u64>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Explain why the config won and what was rejected.
        #[arg(long)]
        explain: bool,
        /// Read "M N K" lines from stdin; write one JSON object per line.
        #[arg(long)]
        batch: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Formats { json } => commands::formats(json),
        Cmd::Quantize { format, input, shape, output, imatrix, group_size } => {
            commands::quantize(&format, &input, &shape, &output, imatrix.as_deref(), group_size)
        }
        Cmd::Dequant { format, input, shape, output, dtype, device, group_size } => {
            commands::dequant(&format, &input, &shape, &output, &dtype, &device, group_size)
        }
        Cmd::Bench { format, op, n, shape, threads, device, json } => bench::bench(bench::BenchArgs {
            format: &format,
            op: &op,
            n,
            shape: shape.as_deref(),
            threads,
            device: &device,
            json,
        }),
        Cmd::GemmConfig { m, n, k, format, device, act_dtype, out_dtype, group_size, json, explain, batch } => {
            gemm_config::gemm_config(gemm_config::GemmArgs {
                m,
                n,
                k,
                format: &format,
                device: &device,
                act_dtype: act_dtype.as_deref(),
                out_dtype: &out_dtype,
                group_size,
                json,
                explain,
                batch,
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("qforge: error: {e}");
            ExitCode::from(e.code())
        }
    }
}
