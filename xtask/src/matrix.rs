//! `cargo xtask test-matrix`: registry × devices × ops, each cell against its reference.
//!
//! References, per format:
//! * dequant_f32: ggml's `to_float` of random blocks (`tests/golden/<fmt>/random.f32`), bit for
//!   bit with NaN where ggml gives NaN. Formats ggml has no `to_float` for are checked against
//!   the format's scalar reference decode, block by block.
//! * dequant_f16 / dequant_bf16: the round-to-nearest-even of that f32 reference, bit for bit.
//! * quantize: ggml's own quantizer on the same data (tests/golden/inputs.f32, every dataset,
//!   with and without an importance matrix): our RMSE must be no worse on every dataset.
//! * matvec / matmul: the exact semantics of each activation mode in f64 (see
//!   `matrix::matmul`); the columns show the worst error relative to Σ|terms| (max_abs_err)
//!   and the native mode's relative error against the f64 product (rmse).

mod cuda;
mod matmul;

use anyhow::{Result, bail};
use qforge_core::{DType, Format, QuantTensor, Shape, bf16, f16};
use serde::Serialize;

#[derive(Serialize, Clone)]
pub struct Cell {
    pub format: &'static str,
    pub device: &'static str,
    pub op: &'static str,
    /// pass | fail | skip (device absent) | missing (no implementation)
    pub status: &'static str,
    pub max_abs_err: Option<f64>,
    pub rmse: Option<f64>,
    /// The reference implementation's RMSE on the same data (quantize cells).
    pub ref_rmse: Option<f64>,
    pub reference: String,
    pub detail: String,
    /// Quantize cells: RMSE per golden dataset, ours and the reference's (no imatrix, then
    /// with the imatrix as importance-weighted RMSE).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub datasets: Vec<DatasetErr>,
}

impl Cell {
    /// The cell as the backend's error leaves it: `missing` or `fail` with the reason.
    fn failed_with(mut self, e: CellError) -> Cell {
        match e {
            CellError::Missing => {
                self.status = "missing";
                self.detail = "no implementation".into();
            }
            CellError::Failed(why) => self.detail = why,
        }
        self
    }
}

#[derive(Serialize, Clone)]
pub struct DatasetErr {
    pub name: String,
    pub imatrix: bool,
    pub rmse: f64,
    pub ref_rmse: f64,
}

/// Why a backend could not produce a result for a cell.
pub enum CellError {
    /// The backend has no implementation for this format/op (a device backend that lacks a
    /// kernel answers this; the generic CPU backend never does).
    #[allow(dead_code)]
    Missing,
    Failed(String),
}

/// A device backend the matrix runs cells on.
pub trait Backend {
    fn name(&self) -> &'static str;
    /// `Err(reason)` when the device is absent on this machine (cells are skipped).
    fn available(&self) -> Result<(), String>;
    /// Dequantize to little-endian bytes of `dtype`.
    fn dequant(&self, t: &QuantTensor<'_>, dtype: DType) -> Result<Vec<u8>, CellError>;
    /// Quantize row-major f32 data.
    fn quantize(
        &self,
        f: &'static dyn Format,
        shape: Shape,
        x: &[f32],
        im: Option<&[f32]>,
    ) -> Result<Vec<u8>, CellError>;
}

struct Cpu;

impl Backend for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }
    fn available(&self) -> Result<(), String> {
        Ok(())
    }
    fn dequant(&self, t: &QuantTensor<'_>, dtype: DType) -> Result<Vec<u8>, CellError> {
        qforge_cpu::dequantize_dyn(t, dtype)
            .map(|y| y.le_bytes().into_owned())
            .map_err(|e| CellError::Failed(e.to_string()))
    }
    fn quantize(
        &self,
        f: &'static dyn Format,
        shape: Shape,
        x: &[f32],
        im: Option<&[f32]>,
    ) -> Result<Vec<u8>, CellError> {
        qforge_cpu::quantize(f, shape, x, im).map(|t| t.into_bytes()).map_err(|e| CellError::Failed(e.to_string()))
    }
}

fn backends(device: &str) -> Result<Vec<Box<dyn Backend>>> {
    match device {
        "cpu" => Ok(vec![Box::new(Cpu)]),
        "cuda" => Ok(vec![Box::new(cuda::Cuda::new())]),
        "all" => Ok(vec![Box::new(Cpu), Box::new(cuda::Cuda::new())]),
        other => bail!("--device '{other}': expected cpu, cuda or all"),
    }
}

/// Random block bytes and the reference f32 decode of them.
struct DecodeRef {
    blocks: Vec<u8>,
    f32: Vec<f32>,
    source: String,
}

fn decode_ref(f: &dyn Format) -> Result<DecodeRef> {
    let d = f.desc();
    let golden = qforge_golden::manifest().formats.contains_key(d.name);
    let blocks =
        if golden { qforge_golden::random_blocks(d.name) } else { pseudo_random_bytes(64 * f.layout().row_unit().1) };
    if let Some(want) = golden.then(|| qforge_golden::random_f32(d.name)).flatten() {
        return Ok(DecodeRef { blocks, f32: want, source: "ggml to_float (golden)".into() });
    }
    // No ggml to_float: the format's scalar reference, one block at a time. A format with a
    // tensor side section (fp8's scale grid) gets a pseudo-random valid one: the rows are
    // then `block_size` wide rows of one tensor and decoded with their row index.
    let (unit, unit_bytes) = f.layout().row_unit();
    let mut out = vec![0f32; blocks.len() / unit_bytes * unit];
    let rows = out.len() / unit;
    let aux_len = f.aux_bytes(rows, unit)?;
    // Scales in 0.5..4.5, stored in the layout's scale dtype.
    let scale_dtype = f.layout().scale_dtype().unwrap_or(DType::F32);
    let aux: Vec<u8> = pseudo_random_bytes(aux_len / scale_dtype.size())
        .iter()
        .flat_map(|b| {
            let v = 0.5f32 + *b as f32 / 64.0;
            match scale_dtype {
                DType::F32 => v.to_le_bytes().to_vec(),
                DType::F16 => f16::from_f32(v).to_le_bytes().to_vec(),
                DType::Bf16 => bf16::from_f32(v).to_le_bytes().to_vec(),
            }
        })
        .collect();
    for (r, (b, o)) in blocks.chunks_exact(unit_bytes).zip(out.chunks_exact_mut(unit)).enumerate() {
        f.dequant_row_at(b, r, &aux, qforge_core::OutRow::F32(o))?;
    }
    let mut blocks = blocks;
    blocks.extend_from_slice(&aux);
    Ok(DecodeRef { blocks, f32: out, source: "scalar reference decode (ggml has no to_float)".into() })
}

fn pseudo_random_bytes(n: usize) -> Vec<u8> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

impl Cell {
    /// A cell that fails until a check passes it.
    pub fn new(format: &'static str, device: &'static str, op: &'static str) -> Cell {
        Cell {
            format,
            device,
            op,
            status: "fail",
            max_abs_err: None,
            rmse: None,
            ref_rmse: None,
            reference: String::new(),
            detail: String::new(),
            datasets: Vec::new(),
        }
    }
}

fn cell(f: &dyn Format, dev: &dyn Backend, op: &'static str) -> Cell {
    Cell {
        format: f.desc().name,
        device: dev.name(),
        op,
        status: "fail",
        max_abs_err: None,
        rmse: None,
        ref_rmse: None,
        reference: String::new(),
        detail: String::new(),
        datasets: Vec::new(),
    }
}

fn half_bits_equal(a: u16, b: u16, exp_mask: u16, man_mask: u16) -> bool {
    let nan = |x: u16| x & exp_mask == exp_mask && x & man_mask != 0;
    a == b || (nan(a) && nan(b))
}

fn dequant_cell(f: &'static dyn Format, dev: &dyn Backend, r: &DecodeRef, dtype: DType) -> Cell {
    let op = match dtype {
        DType::F32 => "dequant_f32",
        DType::F16 => "dequant_f16",
        DType::Bf16 => "dequant_bf16",
    };
    let mut c = cell(f, dev, op);
    c.reference = match dtype {
        DType::F32 => r.source.clone(),
        _ => format!("round-to-nearest-even of {}", r.source),
    };
    let unit = f.layout().row_unit().0;
    let n = r.f32.len();
    let t = match Shape::new([n / unit, unit]).and_then(|s| QuantTensor::new(f, s, &r.blocks[..])) {
        Ok(t) => t,
        Err(e) => {
            c.detail = format!("reference data does not fit the format: {e}");
            return c;
        }
    };
    let got = match dev.dequant(&t, dtype) {
        Ok(b) => b,
        Err(e) => return c.failed_with(e),
    };
    if got.len() != n * dtype.size() {
        c.detail = format!("{} output bytes, expected {}", got.len(), n * dtype.size());
        return c;
    }
    let (mut mismatches, mut first, mut max_err, mut se, mut cnt) = (0usize, None, 0f64, 0f64, 0usize);
    for i in 0..n {
        let want = r.f32[i];
        let (ok, g) = match dtype {
            DType::F32 => {
                let g = f32::from_le_bytes(got[4 * i..4 * i + 4].try_into().unwrap_or_default());
                (qforge_golden::same_f32(g, want), g)
            }
            DType::F16 => {
                let (g, w) = (u16::from_le_bytes([got[2 * i], got[2 * i + 1]]), f16::from_f32(want));
                (half_bits_equal(g, w.to_bits(), 0x7c00, 0x03ff), f16::from_bits(g).to_f32())
            }
            DType::Bf16 => {
                let (g, w) = (u16::from_le_bytes([got[2 * i], got[2 * i + 1]]), bf16::from_f32(want));
                (half_bits_equal(g, w.to_bits(), 0x7f80, 0x007f), bf16::from_bits(g).to_f32())
            }
        };
        // Errors are measured against the reference in the cell's own dtype.
        let want = match dtype {
            DType::F32 => want,
            DType::F16 => f16::from_f32(want).to_f32(),
            DType::Bf16 => bf16::from_f32(want).to_f32(),
        };
        if !ok {
            mismatches += 1;
            first.get_or_insert((i, g, want));
        }
        if g.is_finite() && want.is_finite() {
            let e = (g as f64 - want as f64).abs();
            max_err = max_err.max(e);
            se += e * e;
            cnt += 1;
        }
    }
    c.max_abs_err = Some(max_err);
    c.rmse = Some(if cnt > 0 { (se / cnt as f64).sqrt() } else { 0.0 });
    let nans = r.f32.iter().filter(|v| v.is_nan()).count();
    if mismatches == 0 {
        c.status = "pass";
        c.detail = format!("{n} values bit-exact ({nans} NaN)");
    } else if let Some((i, g, w)) = first {
        c.detail = format!("{mismatches}/{n} values differ; first at {i}: got {g:e}, want {w:e}");
    }
    c
}

fn rmse_f32(a: &[f32], b: &[f32], w: Option<&[f32]>) -> f64 {
    match w {
        Some(w) => qforge_golden::weighted_rmse(a, b, w),
        None => qforge_golden::rmse(a, b),
    }
}

fn quantize_cell(f: &'static dyn Format, dev: &dyn Backend) -> Cell {
    let mut c = cell(f, dev, "quantize");
    let name = f.desc().name;
    let m = qforge_golden::manifest();
    let x = qforge_golden::inputs();
    let cols = m.cols;
    let rows = x.len() / cols;
    let im = qforge_golden::imatrix();
    let decode = |bytes: Vec<u8>| -> Result<Vec<f32>, String> {
        let t = Shape::new([rows, cols]).and_then(|s| QuantTensor::new(f, s, bytes)).map_err(|e| e.to_string())?;
        qforge_cpu::dequantize::<f32>(&t).map_err(|e| e.to_string())
    };
    let has_golden = m.formats.contains_key(name);
    let mut worse = Vec::new();
    let (mut ours_all, mut ref_all, mut ours_im) = (Vec::new(), Vec::new(), None);
    for with_im in [false, true] {
        let golden = if has_golden { qforge_golden::quant(name, with_im) } else { None };
        if with_im && golden.is_none() {
            continue;
        }
        let w = with_im.then_some(&im[..]);
        let ours = match dev.quantize(f, Shape::new([rows, cols]).expect("manifest shape"), &x, w) {
            Ok(b) => b,
            Err(e) => return c.failed_with(e),
        };
        let ours = match decode(ours) {
            Ok(v) => v,
            Err(e) => {
                c.detail = format!("our output does not decode: {e}");
                return c;
            }
        };
        let reference = match golden.map(decode).transpose() {
            Ok(r) => r,
            Err(e) => {
                c.detail = format!("golden data does not decode: {e}");
                return c;
            }
        };
        let mut row = 0;
        for ds in &m.datasets {
            let span = row * cols..(row + ds.rows) * cols;
            row += ds.rows;
            let (xs, os) = (&x[span.clone()], &ours[span.clone()]);
            let e_ours = rmse_f32(xs, os, w);
            let e_ref = match &reference {
                Some(r) => rmse_f32(xs, &r[span], w),
                // No ggml quantizer: the error must at least be below the signal's RMS.
                None => rmse_f32(xs, &vec![0.0; xs.len()], w),
            };
            c.datasets.push(DatasetErr { name: ds.name.clone(), imatrix: with_im, rmse: e_ours, ref_rmse: e_ref });
            let no_worse = e_ours <= e_ref * (1.0 + 1e-6) + 1e-30; // false for NaN too
            if !no_worse {
                let tag = if with_im { " (imatrix)" } else { "" };
                worse.push(format!("{}{tag}: {e_ours:.4e} vs {e_ref:.4e}", ds.name));
            }
        }
        if with_im {
            ours_im = Some(ours);
        } else {
            ours_all = ours;
            ref_all = reference.unwrap_or_default();
        }
    }
    // Where ggml's quantizer honours importance weights, ours must too: with the skewed
    // golden imatrix, the weighted error must drop compared with quantizing without one.
    let mut gain = String::new();
    if let Some(with) = &ours_im {
        let (e_with, e_without) = (rmse_f32(&x, with, Some(&im)), rmse_f32(&x, &ours_all, Some(&im)));
        gain = format!("; imatrix: weighted RMSE x{:.3}", e_with / e_without);
        if e_with >= e_without {
            worse.push(format!("imatrix does not lower the weighted error ({e_with:.4e} vs {e_without:.4e} without)"));
        }
    }
    // The table shows the first dataset (unit gaussian); --json has every dataset.
    let first = 0..m.datasets.first().map_or(0, |d| d.rows * cols);
    c.rmse = Some(qforge_golden::rmse(&x[first.clone()], &ours_all[first.clone()]));
    c.ref_rmse = (!ref_all.is_empty()).then(|| qforge_golden::rmse(&x[first.clone()], &ref_all[first.clone()]));
    let max_err =
        x[first.clone()].iter().zip(&ours_all[first]).map(|(a, b)| (*a as f64 - *b as f64).abs()).fold(0f64, f64::max);
    c.max_abs_err = Some(max_err);
    c.reference = if has_golden {
        "ggml quantizer RMSE per dataset (golden), with and without imatrix; rmse columns: gaussian dataset".into()
    } else {
        "error below signal RMS (no ggml quantizer)".into()
    };
    if worse.is_empty() {
        c.status = "pass";
        c.detail = format!("{} datasets no worse than reference{gain}", m.datasets.len());
    } else {
        c.detail = format!("worse than reference on {}", worse.join(", "));
    }
    c
}

fn skipped(f: &dyn Format, dev: &dyn Backend, op: &'static str, why: &str) -> Cell {
    let mut c = cell(f, dev, op);
    c.status = "skip";
    c.detail = why.to_string();
    c
}

pub fn run(device: &str, json: bool) -> Result<bool> {
    let devs = backends(&device.to_ascii_lowercase())?;
    let reg = qforge_formats::registry();
    let mut cells = Vec::new();
    const OPS: [&str; 6] = ["quantize", "dequant_f32", "dequant_f16", "dequant_bf16", "matvec", "matmul"];
    for f in reg.iter() {
        let r = decode_ref(f)?;
        for dev in &devs {
            if dev.name() == "cuda" {
                cells.extend(cuda::cells(f, dev.as_ref(), &r));
                continue;
            }
            if let Err(why) = dev.available() {
                cells.extend(OPS.iter().map(|op| skipped(f, dev.as_ref(), op, &why)));
                continue;
            }
            cells.push(quantize_cell(f, dev.as_ref()));
            for dt in DType::ALL {
                cells.push(dequant_cell(f, dev.as_ref(), &r, dt));
            }
            if dev.name() == "cpu" {
                cells.push(matmul::cell(f, "matvec"));
                cells.push(matmul::cell(f, "matmul"));
            }
        }
    }
    // Quantized types ggml defines (its own type table, recorded in the golden manifest) that
    // nothing registers are MISSING cells.
    for name in qforge_golden::manifest().ggml_types.keys() {
        if reg.get(name).is_err() {
            for dev in &devs {
                for op in OPS {
                    cells.push(Cell {
                        format: leak(name),
                        device: dev.name(),
                        op,
                        status: "missing",
                        max_abs_err: None,
                        rmse: None,
                        ref_rmse: None,
                        reference: "ggml's type table".into(),
                        detail: "ggml defines this format but no qforge format is registered for it".into(),
                        datasets: Vec::new(),
                    });
                }
            }
        }
    }
    let ok = !cells.is_empty() && cells.iter().all(|c| c.status == "pass" || c.status == "skip");
    let summary = Summary::of(&cells);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "cells": cells, "summary": summary, "ok": ok }))?
        );
    } else {
        print_table(&cells);
        summary.print();
    }
    Ok(ok)
}

/// The counts by status, and why cells were skipped (each distinct reason with its count):
/// a run that skipped the whole CUDA column says so next to its passes.
#[derive(Serialize, Debug, PartialEq)]
pub struct Summary {
    pub cells: usize,
    pub pass: usize,
    pub fail: usize,
    pub skip: usize,
    pub missing: usize,
    pub skipped_because: Vec<SkipReason>,
}

#[derive(Serialize, Debug, PartialEq)]
pub struct SkipReason {
    pub device: &'static str,
    pub reason: String,
    pub cells: usize,
}

impl Summary {
    pub fn of(cells: &[Cell]) -> Summary {
        let count = |s: &str| cells.iter().filter(|c| c.status == s).count();
        let mut skipped_because: Vec<SkipReason> = Vec::new();
        for c in cells.iter().filter(|c| c.status == "skip") {
            match skipped_because.iter_mut().find(|r| r.device == c.device && r.reason == c.detail) {
                Some(r) => r.cells += 1,
                None => skipped_because.push(SkipReason { device: c.device, reason: c.detail.clone(), cells: 1 }),
            }
        }
        Summary {
            cells: cells.len(),
            pass: count("pass"),
            fail: count("fail"),
            skip: count("skip"),
            missing: count("missing"),
            skipped_because,
        }
    }

    fn print(&self) {
        println!(
            "{} cells: {} pass, {} fail, {} skip, {} missing",
            self.cells, self.pass, self.fail, self.skip, self.missing
        );
        for r in &self.skipped_because {
            println!("  skipped {} {} cells: {}", r.cells, r.device, r.reason);
        }
    }
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3e}"))
}

fn print_table(cells: &[Cell]) {
    println!(
        "{:<9} {:<6} {:<13} {:<8} {:>11} {:>11} {:>11}  detail",
        "format", "device", "op", "status", "max_abs_err", "rmse", "ref_rmse"
    );
    for c in cells {
        println!(
            "{:<9} {:<6} {:<13} {:<8} {:>11} {:>11} {:>11}  {}",
            c.format,
            c.device,
            c.op,
            c.status,
            fmt_opt(c.max_abs_err),
            fmt_opt(c.rmse),
            fmt_opt(c.ref_rmse),
            c.detail
        );
    }
}
