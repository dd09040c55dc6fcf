//! The subcommands.

use crate::exit::{Classify, CliResult, bad_input};
use crate::files;
use qforge_core::{DType, Format, QuantTensor, Role, Shape};
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

fn format_by_name(name: &str) -> CliResult<&'static dyn Format> {
    qforge_formats::get(name).input()
}

fn check_group_size(f: &dyn Format, group_size: Option<usize>) -> CliResult<()> {
    match group_size {
        None => Ok(()),
        Some(g) => Err(bad_input(format!(
            "--group-size {g}: format {} has a fixed block size of {}; only group-wise formats take a group size",
            f.desc().name,
            f.desc().block_size
        ))),
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
            "{:<10} {:<8} {:>5} {:>6} {:>6} {:>5} {:<10} {:<6} summary",
            "name", "family", "ggml", "block", "bytes", "bpw", "role", "dot"
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
                "{:<10} {:<8} {:>5} {:>6} {:>6} {:>5.2} {:<10} {:<6} {}",
                d.name,
                d.family,
                d.ggml_type.map_or("-".to_string(), |t| t.to_string()),
                d.block_size,
                d.block_bytes,
                d.bits_per_weight(),
                role,
                d.dot_type.unwrap_or("-"),
                d.summary
            )
            .failed()?;
        }
    }
    Ok(())
}

pub fn quantize(
    format: &str,
    input: &Path,
    shape: &str,
    output: &Path,
    imatrix: Option<&Path>,
    group_size: Option<usize>,
) -> CliResult<()> {
    let f = format_by_name(format)?;
    check_group_size(f, group_size)?;
    let shape = parse_shape(shape)?;
    let mut inputs = vec![input];
    inputs.extend(imatrix);
    files::check_distinct(output, &inputs)?;
    let x = files::read_f32(input, shape.numel(), "input")?;
    let im = imatrix.map(|p| files::read_f32(p, shape.cols(), "imatrix (one f32 per column)")).transpose()?;
    let t = qforge_cpu::quantize(f, shape, &x, im.as_deref()).input()?;
    files::write_atomic(output, t.data())
}

#[allow(clippy::too_many_arguments)]
pub fn dequant(
    format: &str,
    input: &Path,
    shape: &str,
    output: &Path,
    dtype: &str,
    device: &str,
    group_size: Option<usize>,
) -> CliResult<()> {
    let f = format_by_name(format)?;
    check_group_size(f, group_size)?;
    let dtype: DType = dtype.parse().map_err(|e| bad_input(format!("--dtype: {e}")))?;
    let shape = parse_shape(shape)?;
    let device = crate::device::parse(device)?;
    files::check_distinct(output, &[input])?;
    let expected = f
        .row_bytes(shape.cols())
        .ok()
        .and_then(|rb| rb.checked_mul(shape.rows()))
        .ok_or_else(|| bad_input(format!("--shape {shape}: tensor size overflows")))?;
    let data = files::read_blocks(input, expected, "quantized input", (f.desc().name, f.desc().block_bytes))?;
    let t = QuantTensor::new(f, shape, data).input()?;
    if device == crate::device::Device::Cuda {
        return files::write_atomic(output, &crate::device::dequant(&t, dtype)?);
    }
    let y = qforge_cpu::dequantize_dyn(&t, dtype).input()?;
    files::write_atomic(output, &y.le_bytes())
}
