//! `qforge matmul`: Y = X · Wᵀ on a raw quantized weight file.

use crate::commands::{format_by_name, parse_shape};
use crate::device::Device;
use crate::exit::{CliResult, bad_input};
use crate::files;
use qforge_core::QuantTensor;
use qforge_cpu::ActQuant;
use std::path::Path;

pub struct MatmulArgs<'a> {
    pub format: &'a str,
    pub weights: &'a Path,
    pub shape: &'a str,
    pub input: &'a Path,
    pub rows: usize,
    pub output: &'a Path,
    pub act_quant: &'a str,
    /// `--act-quant` was not given (on the GPU that means native).
    pub act_quant_default: bool,
    pub device: &'a str,
    pub group_size: Option<usize>,
}

pub fn matmul(a: MatmulArgs<'_>) -> CliResult<()> {
    let f = format_by_name(a.format, a.group_size)?;
    let mode: ActQuant = a.act_quant.parse().map_err(|_| {
        bad_input(format!("--act-quant '{}': expected none, native, int8-dyn or fp8-1x128", a.act_quant))
    })?;
    let shape = parse_shape(a.shape)?;
    if shape.dims().len() != 2 {
        return Err(bad_input(format!("--shape {}: the weight is a matrix N,K", a.shape)));
    }
    if a.rows == 0 {
        return Err(bad_input("--rows must be at least 1"));
    }
    let device = crate::device::parse(a.device)?;
    // On the GPU, no `--act-quant` means native (q8_1 activations, the integer dot).
    let mode = if device == Device::Cuda && a.act_quant_default { ActQuant::Native } else { mode };
    files::check_distinct(a.output, &[a.weights, a.input])?;
    let expected = QuantTensor::expected_bytes(f, &shape).map_err(|e| bad_input(format!("--shape {shape}: {e}")))?;
    let data = files::read_blocks(a.weights, expected, "weights", (f.desc().name, f.desc().block_bytes))?;
    let k = shape.cols();
    let count = a.rows.checked_mul(k).ok_or_else(|| bad_input("--rows x K overflows"))?;
    let x = files::read_f32(a.input, count, "input activations (M x K f32)")?;
    let w = QuantTensor::new(f, shape, data).map_err(|e| bad_input(format!("weights: {e}")))?;
    let y = match device {
        Device::Cuda => crate::device::matmul(&w, &x, a.rows, mode)?,
        Device::Cpu => qforge_cpu::matmul(&w, &x, a.rows, mode).map_err(|e| bad_input(format!("matmul: {e}")))?,
    };
    files::write_atomic(a.output, bytemuck::cast_slice(&to_le(y)))
}

fn to_le(mut y: Vec<f32>) -> Vec<f32> {
    if cfg!(target_endian = "big") {
        y.iter_mut().for_each(|v| *v = f32::from_bits(v.to_bits().to_le()));
    }
    y
}
