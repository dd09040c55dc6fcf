//! The subcommands.

use crate::exit::{Classify, CliResult, bad_input};
use crate::files;
use qforge_core::{DType, Format, Params, QuantError, QuantTensor, Role, Shape};
use std::io::Write;
use std::path::Path;

/// Parse `ROWS,COLS` (or any number of comma-separated dimensions, outermost first).
pub fn parse_shape(s: &str) -> CliResult<Shape> {
    let dims = s
        .split(',')
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .map_err(|_| bad_input(format!("--shape '{s}': '{}' is not a positive integer", d.trim())))
        })
        .collect::<CliResult<Vec<_>>>()?;
    Shape::new(dims).map_err(|e| bad_input(format!("--shape '{s}': {e}")))
}

/// The format named `name`, with `--group-size` applied (bad input if the format takes none).
pub fn format_by_name(name: &str, group_size: Option<usize>) -> CliResult<&'static dyn Format> {
    let params = Params { group_size, ..Params::default() };
    qforge_formats::get_with(name, &params).map_err(|e| match e {
        QuantError::Unsupported { .. } if group_size.is_some() => bad_input(format!("--group-size: {e}")),
        e => bad_input(e.to_string()),
    })
}

/// How `--act-quant native` quantizes activations for `f`.
fn native_act(f: &dyn Format) -> &'static str {
    match f.native_act() {
        qforge_core::ActKind::Blocks(name) => name,
        qforge_core::ActKind::Int8Dyn => "int8-dyn",
        qforge_core::ActKind::Fp8x128 => "fp8-1x128",
        qforge_core::ActKind::F32 => "-",
    }
}

pub fn formats(json: bool) -> CliResult<()> {
    let reg = qforge_formats::registry();
    let mut out = std::io::stdout().lock();
    if json {
        let arr: Vec<serde_json::Value> = reg
            .iter()
            .map(|f| {
                let d = f.desc();
                serde_json::json!({
                    "name": d.name,
                    "family": d.family,
                    "block_size": d.block_size,
                    "block_bytes": d.block_bytes,
                    "bits_per_weight": d.bits_per_weight(),
                    "ggml_type_id": d.ggml_type,
                    "role": match d.role { Role::Weight => "weight", Role::Activation => "activation" },
                    "dot_type": d.dot_type,
                    "native_act": native_act(f),
                    "cuda": d.cuda.is_some(),
                    "summary": d.summary,
                })
            })
            .collect();
        let s = serde_json::to_string_pretty(&arr).failed()?;
        writeln!(out, "{s}").failed()?;
    } else {
        writeln!(
            out,
            "{:<10} {:<8} {:>5} {:>6} {:>6} {:>5} {:<10} {:<9} summary",
            "name", "family", "ggml", "block", "bytes", "bpw", "role", "native"
        )
        .failed()?;
        for f in reg.iter() {
            let d = f.desc();
            let role = match d.role {
                Role::Weight => "weight",
                Role::Activation => "activation",
            };
            writeln!(
                out,
                "{:<10} {:<8} {:>5} {:>6} {:>6} {:>5.2} {:<10} {:<9} {}",
                d.name,
                d.family,
                d.ggml_type.map_or("-".to_string(), |t| t.to_string()),
                d.block_size,
                d.block_bytes,
                d.bits_per_weight(),
                role,
                native_act(f),
                d.summary
            )
            .failed()?;
        }
    }
    Ok(())
}

/// What `quantize` and `dequant` share: a format, and a file of a tensor's data in, another
/// out.
pub struct TensorArgs<'a> {
    /// `--format`.
    pub format: &'a str,
    /// `--group-size`.
    pub group_size: Option<usize>,
    /// `--input`.
    pub input: &'a Path,
    /// `--shape`.
    pub shape: &'a str,
    /// `--output`.
    pub output: &'a Path,
}

impl<'a> TensorArgs<'a> {
    /// From the subcommand's flags.
    pub fn of(
        format: &'a crate::args::FormatArg,
        group_size: &crate::args::GroupSizeArg,
        input: &'a Path,
        shape: &'a str,
        output: &'a Path,
    ) -> Self {
        TensorArgs { format: &format.format, group_size: group_size.group_size, input, shape, output }
    }
}

pub fn quantize(a: TensorArgs<'_>, imatrix: Option<&Path>) -> CliResult<()> {
    let TensorArgs { format, group_size, input, shape, output } = a;
    let f = format_by_name(format, group_size)?;
    let shape = parse_shape(shape)?;
    let mut inputs = vec![input];
    inputs.extend(imatrix);
    files::check_distinct(output, &inputs)?;
    let x = files::read_f32(input, shape.numel(), "input")?;
    let im = imatrix.map(|p| files::read_f32(p, shape.cols(), "imatrix (one f32 per column)")).transpose()?;
    let t = qforge_cpu::quantize(f, shape, &x, im.as_deref()).input()?;
    files::write_atomic(output, t.data())
}

pub fn dequant(a: TensorArgs<'_>, dtype: &str, device: &str) -> CliResult<()> {
    let TensorArgs { format, group_size, input, shape, output } = a;
    let f = format_by_name(format, group_size)?;
    let dtype: DType = dtype.parse().map_err(|e| bad_input(format!("--dtype: {e}")))?;
    let shape = parse_shape(shape)?;
    let device = crate::device::parse(device)?;
    files::check_distinct(output, &[input])?;
    let expected = QuantTensor::expected_bytes(f, &shape).map_err(|e| bad_input(format!("--shape {shape}: {e}")))?;
    let data = files::read_blocks(input, expected, "quantized input", (f.desc().name, f.desc().block_bytes))?;
    let t = QuantTensor::new(f, shape, data).input()?;
    if device == crate::device::Device::Cuda {
        return files::write_atomic(output, &crate::device::dequant(&t, dtype)?);
    }
    let y = qforge_cpu::dequantize_dyn(&t, dtype).input()?;
    files::write_atomic(output, &y.le_bytes())
}
