//! qforge-cli: the `qforge` binary — list formats, quantize and dequantize raw tensor files.
//!
//! Exit codes: 0 success, 1 failed operation, 2 bad usage or bad input, with one line on
//! stderr. The spellings of commands and flags are a contract (docs/cli.md).

mod bench;
mod commands;
mod exit;
mod files;

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
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("qforge: error: {e}");
            ExitCode::from(e.code())
        }
    }
}
