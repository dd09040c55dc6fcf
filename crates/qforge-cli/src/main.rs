//! qforge-cli: the `qforge` binary — list formats, quantize and dequantize raw tensor files,
//! inspect and convert GGUF / safetensors model files.
//!
//! Exit codes: 0 success, 1 failed operation, 2 bad usage or bad input, with one line on
//! stderr. The spellings of commands and flags are a contract (docs/cli.md).

mod args;
mod bench;
mod commands;
mod convert;
#[allow(unsafe_code)] // CUDA device buffers
mod device;
mod exit;
mod files;
mod gemm_config;
mod inspect;
mod matmul;
mod measure;
mod preset;
mod quality;

use args::{ActQuantArg, DeviceArg, DtypeArg, FormatArg, GroupSizeArg, ThreadsArg};
use clap::{Parser, Subcommand};
use commands::TensorArgs;
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
        #[command(flatten)]
        format: FormatArg,
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
        #[command(flatten)]
        group_size: GroupSizeArg,
    },
    /// Dequantize a raw quantized file to f32, f16 or bf16 (little-endian, row-major).
    Dequant {
        #[command(flatten)]
        format: FormatArg,
        /// Input: the quantized blocks row after row, as `quantize` writes them.
        #[arg(long)]
        input: PathBuf,
        /// Logical shape ROWS,COLS of the tensor.
        #[arg(long)]
        shape: String,
        /// Output: ROWS×COLS values of --dtype, little-endian, row-major.
        #[arg(long)]
        output: PathBuf,
        #[command(flatten)]
        dtype: DtypeArg,
        #[command(flatten)]
        device: DeviceArg,
        #[command(flatten)]
        group_size: GroupSizeArg,
    },
    /// Y = X · Wᵀ: multiply M f32 activation rows by an N×K quantized weight (M×N f32 out).
    Matmul {
        #[command(flatten)]
        format: FormatArg,
        /// Quantized weight file (N rows of K, as `quantize` writes it).
        #[arg(long)]
        weights: PathBuf,
        /// Weight shape N,K.
        #[arg(long)]
        shape: String,
        /// Activations: M×K little-endian f32, row-major.
        #[arg(long)]
        input: PathBuf,
        /// M, the number of activation rows.
        #[arg(long)]
        rows: usize,
        /// Output: M×N little-endian f32, row-major.
        #[arg(long)]
        output: PathBuf,
        #[command(flatten)]
        act_quant: ActQuantArg,
        #[command(flatten)]
        device: DeviceArg,
        #[command(flatten)]
        group_size: GroupSizeArg,
    },
    /// Measure the throughput of one op on one format (elements/s and bytes/s).
    Bench {
        #[command(flatten)]
        format: FormatArg,
        /// dequant, quantize, matvec or matmul.
        #[arg(long)]
        op: String,
        /// Number of elements (a multiple of 4096; rows of 4096). Default 4194304.
        #[arg(long)]
        n: Option<usize>,
        /// Shape N,K instead of --n.
        #[arg(long)]
        shape: Option<String>,
        #[command(flatten)]
        threads: ThreadsArg,
        #[command(flatten)]
        device: DeviceArg,
        /// One JSON object instead of a line of text.
        #[arg(long)]
        json: bool,
        /// Activation rows M for --op matmul (default 64; matvec is M = 1).
        #[arg(long)]
        rows: Option<usize>,
        #[command(flatten)]
        act_quant: ActQuantArg,
        #[command(flatten)]
        group_size: GroupSizeArg,
        #[command(flatten)]
        dtype: DtypeArg,
        /// matvec / matmul on the CPU: the weight copied once into its format's packed
        /// (row-interleaved) layout first (not timed); native activations.
        #[arg(long)]
        packed: bool,
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
        #[command(flatten)]
        group_size: GroupSizeArg,
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
    /// Show a GGUF or safetensors file's metadata and tensors (reads headers only).
    Inspect {
        /// The model file (.gguf or .safetensors).
        file: PathBuf,
        /// Print {"metadata": {...}, "tensors": [{"name", "type", "shape", "bytes", "offset"}]}.
        #[arg(long)]
        json: bool,
    },
    /// Bits per weight of every tensor and, against the original, RMSE / relative error.
    Quality {
        /// The (quantized) model: file, Hugging Face directory or index.
        input: PathBuf,
        /// The original model to measure the error against (same tensor names).
        #[arg(long)]
        against: Option<PathBuf>,
        /// llama.cpp importance matrix: adds the importance-weighted RMSE.
        #[arg(long)]
        imatrix: Option<PathBuf>,
        /// One JSON object: {"tensors": [...], "total": {...}}.
        #[arg(long)]
        json: bool,
    },
    /// Convert between GGUF and safetensors (by extension), dequantizing or quantizing.
    Convert {
        /// Input model file (.gguf or .safetensors).
        input: PathBuf,
        /// Output model file (.gguf or .safetensors); never the input.
        output: PathBuf,
        /// Quantize every 2-D+ float tensor to this format (1-D tensors become f32).
        #[arg(long, conflicts_with = "dtype")]
        format: Option<String>,
        /// Dequantize every float tensor to f32, f16 or bf16.
        #[arg(long)]
        dtype: Option<String>,
        #[command(flatten)]
        group_size: GroupSizeArg,
        /// llama.cpp importance matrix (imatrix GGUF or legacy .dat) for --format / --preset.
        #[arg(long)]
        imatrix: Option<PathBuf>,
        /// A llama-quantize preset (Q4_K_M, IQ2_XS, Q8_0, …): each tensor's type by llama.cpp's rules.
        #[arg(long, conflicts_with_all = ["format", "dtype"])]
        preset: Option<String>,
        /// With --preset: the type of output.weight.
        #[arg(long)]
        output_tensor_type: Option<String>,
        /// With --preset: the type of token_embd.weight.
        #[arg(long)]
        token_embedding_type: Option<String>,
        /// With --preset: PATTERN=TYPE, tensors whose name matches the regex get TYPE (repeatable; first match wins).
        #[arg(long = "tensor-type")]
        tensor_type: Vec<String>,
        /// With --preset: the preset's default type for every quantizable tensor, no per-tensor rules.
        #[arg(long)]
        pure: bool,
        /// With --preset: keep output.weight as it is.
        #[arg(long)]
        leave_output_tensor: bool,
        /// Quantize tensors that are already quantized (refused otherwise, as llama-quantize does).
        #[arg(long)]
        allow_requantize: bool,
        #[command(flatten)]
        threads: ThreadsArg,
        /// One line per tensor on stderr (name, types, shape, sizes, time).
        #[arg(long)]
        verbose: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Formats { json } => commands::formats(json),
        Cmd::Quantize { format, input, shape, output, imatrix, group_size } => {
            commands::quantize(TensorArgs::of(&format, &group_size, &input, &shape, &output), imatrix.as_deref())
        }
        Cmd::Dequant { format, input, shape, output, dtype, device, group_size } => commands::dequant(
            TensorArgs::of(&format, &group_size, &input, &shape, &output),
            &dtype.dtype,
            &device.device,
        ),
        Cmd::Matmul { format, weights, shape, input, rows, output, act_quant, device, group_size } => {
            matmul::matmul(matmul::MatmulArgs {
                format: &format.format,
                weights: &weights,
                shape: &shape,
                input: &input,
                rows,
                output: &output,
                act_quant: act_quant.act_quant.as_deref().unwrap_or("none"),
                act_quant_default: act_quant.act_quant.is_none(),
                device: &device.device,
                group_size: group_size.group_size,
            })
        }
        Cmd::Bench { format, op, n, shape, threads, device, json, rows, act_quant, group_size, dtype, packed } => {
            bench::bench(bench::BenchArgs {
                format: &format.format,
                op: &op,
                n,
                shape: shape.as_deref(),
                threads: threads.threads,
                device: &device.device,
                json,
                rows,
                act_quant: act_quant.act_quant.as_deref().unwrap_or("native"),
                group_size: group_size.group_size,
                dtype: &dtype.dtype,
                packed,
            })
        }
        Cmd::GemmConfig { m, n, k, format, device, act_dtype, out_dtype, group_size, json, explain, batch } => {
            gemm_config::gemm_config(gemm_config::GemmArgs {
                m,
                n,
                k,
                format: &format,
                device: &device,
                act_dtype: act_dtype.as_deref(),
                out_dtype: &out_dtype,
                group_size: group_size.group_size.map(|g| g as u64),
                json,
                explain,
                batch,
            })
        }
        Cmd::Inspect { file, json } => inspect::inspect(&file, json),
        Cmd::Quality { input, against, imatrix, json } => {
            quality::quality(&input, against.as_deref(), imatrix.as_deref(), json)
        }
        Cmd::Convert {
            input,
            output,
            format,
            dtype,
            group_size,
            imatrix,
            preset,
            output_tensor_type,
            token_embedding_type,
            tensor_type,
            pure,
            leave_output_tensor,
            allow_requantize,
            threads,
            verbose,
        } => convert::convert(convert::ConvertArgs {
            input: &input,
            output: &output,
            format: format.as_deref(),
            dtype: dtype.as_deref(),
            preset: preset.as_deref(),
            group_size: group_size.group_size,
            imatrix: imatrix.as_deref(),
            tensor_options: preset::TensorOptions {
                output_tensor_type: output_tensor_type.as_deref(),
                token_embedding_type: token_embedding_type.as_deref(),
                tensor_types: &tensor_type,
                pure,
                leave_output_tensor,
            },
            allow_requantize,
            threads: threads.threads,
            verbose,
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`qforge inspect big.gguf | head`): stop quietly, as a Unix
        // tool killed by SIGPIPE would, without an error line.
        Err(e) if stdout_closed(&e.err) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("qforge: error: {e}");
            ExitCode::from(e.code())
        }
    }
}

/// Whether `err` is (or wraps) a write to a closed pipe.
fn stdout_closed(err: &anyhow::Error) -> bool {
    err.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::{CommandFactory, Parser};

    /// The flags several subcommands share, defined once in `args.rs`.
    const SHARED: &[&str] = &["format", "group-size", "device", "threads", "dtype", "act-quant"];

    /// Where a subcommand's flag of a shared name means something else, as docs/cli.md has it.
    const DIFFERENT_ON_PURPOSE: &[(&str, &str)] = &[
        ("gemm-config", "device"), // a GPU model by name (h100, …), not where to run
        ("gemm-config", "format"), // plain dtypes (f16, bf16, f32) too
        ("convert", "format"),     // optional: one of --format, --dtype, --preset
        ("convert", "dtype"),      // optional: a conversion target, no default
    ];

    /// What makes two flags the same: value type, default, help, and whether it takes a value.
    fn signature(a: &clap::Arg) -> String {
        format!(
            "{:?} {:?} {:?} {:?}",
            a.get_value_parser().type_id(),
            a.get_default_values(),
            a.get_help().map(|h| h.to_string()),
            a.get_action().takes_values()
        )
    }

    #[test]
    fn shared_flags_mean_the_same_in_every_subcommand() {
        let cmd = Cli::command();
        for name in SHARED {
            let mut uses = Vec::new();
            for sub in cmd.get_subcommands() {
                let sub_name = sub.get_name();
                if DIFFERENT_ON_PURPOSE.contains(&(sub_name, *name)) {
                    continue;
                }
                if let Some(a) = sub.get_arguments().find(|a| a.get_long() == Some(*name)) {
                    uses.push((sub_name.to_string(), signature(a)));
                }
            }
            assert!(uses.len() >= 2, "--{name} is shared by {uses:?}");
            for (sub, sig) in &uses[1..] {
                assert_eq!(sig, &uses[0].1, "--{name} of {sub} differs from --{name} of {}", uses[0].0);
            }
        }
    }

    /// Every subcommand that takes one of the shared flags parses it with the same type: a
    /// group size is a non-negative integer everywhere (gemm-config once took a u64).
    #[test]
    fn group_size_parses_alike_everywhere() {
        let base: &[&[&str]] = &[
            &["quantize", "--format", "int4g", "--input", "x", "--shape", "1,1", "--output", "y"],
            &["dequant", "--format", "int4g", "--input", "x", "--shape", "1,1", "--output", "y"],
            &[
                "matmul",
                "--format",
                "int4g",
                "--weights",
                "w",
                "--shape",
                "1,1",
                "--input",
                "x",
                "--rows",
                "1",
                "--output",
                "y",
            ],
            &["bench", "--format", "int4g", "--op", "dequant"],
            &["gemm-config", "--format", "int4g", "--device", "h100", "--batch"],
            &["convert", "in.gguf", "out.gguf", "--format", "int4g"],
        ];
        for args in base {
            for (g, ok) in [("64", true), ("-1", false), ("x", false)] {
                let argv = ["qforge"].iter().chain(*args).copied().chain(["--group-size", g]);
                assert_eq!(Cli::try_parse_from(argv).is_ok(), ok, "{} --group-size {g}", args[0]);
            }
        }
    }
}
