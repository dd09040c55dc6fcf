//! The flags several subcommands share, each defined once (name, value type, help, default)
//! and flattened into the subcommands with `#[command(flatten)]`, so `--group-size` or
//! `--threads` mean the same wherever they appear. The test in main.rs checks that no
//! subcommand defines one of them differently, except where docs/cli.md says so.

use clap::Args;

/// `--format F`: the format to quantize to or read.
#[derive(Args)]
pub struct FormatArg {
    /// Format name (case-insensitive): q4_0, q4_k, iq2_xxs, mxfp4, int4g, fp8_e4m3, … (see `qforge formats`).
    #[arg(long)]
    pub format: String,
}

/// `--group-size G`: the group size of a group-wise format.
#[derive(Args)]
pub struct GroupSizeArg {
    /// Group size for group-wise formats (int4g: a power of two); fixed-block formats refuse it.
    #[arg(long)]
    pub group_size: Option<usize>,
}

/// `--device cpu|cuda`: where an operation runs.
#[derive(Args)]
pub struct DeviceArg {
    /// Device to run on: cpu or cuda (a CUDA build, on a GPU).
    #[arg(long, default_value = "cpu")]
    pub device: String,
}

/// `--threads T`: the size of the CPU worker pool.
#[derive(Args)]
pub struct ThreadsArg {
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// `--dtype f32|f16|bf16`: the element type of dequantized output.
#[derive(Args)]
pub struct DtypeArg {
    /// Output element type: f32, f16 or bf16.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
}

/// `--act-quant MODE`: how activations are quantized for a product. Its default depends on
/// the operation, as docs/cli.md documents: `matmul` computes the f32 reference (`none`) on
/// the CPU and `native` on CUDA; `bench` measures the `native` kernel.
#[derive(Args)]
pub struct ActQuantArg {
    /// Activation quantization: none, native, int8-dyn or fp8-1x128 (default: matmul none on the CPU and native with --device cuda; bench native).
    #[arg(long)]
    pub act_quant: Option<String>,
}
