//! xtask: the project's own automation, run as `cargo xtask <command>`.
//!
//! * `test-matrix [--device cpu|cuda|all] [--json]`: every registered format × device × op,
//!   each cell checked against its reference (ggml golden vectors where ggml defines the
//!   format); exits non-zero on any `fail` or `missing` cell.

mod matrix;

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
}

fn main() -> ExitCode {
    match Cli::parse().cmd {
        Cmd::TestMatrix { device, json } => match matrix::run(&device, json) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("xtask: error: {e:#}");
                ExitCode::from(2)
            }
        },
    }
}
