//! `qforge quality IN [--against ORIGINAL] [--imatrix FILE] [--json]`: what a quantized model
//! costs and how far it is from the original, per tensor and in total — what llama.cpp's
//! quantize-stats reports, so that a user can choose a preset from numbers.
//!
//! Per tensor: type, elements, bits per weight (stored bits / elements). With `--against`,
//! for every tensor of IN that ORIGINAL has with the same element count: RMSE, the relative
//! error ‖q − o‖ / ‖o‖ and the largest absolute error of IN's dequantized values against
//! ORIGINAL's; with `--imatrix`, the RMSE weighted by each column's importance (the error the
//! quantizers minimise). Tensors are read one at a time (both sides), in parallel.

use crate::exit::{Classify, CliResult, bad_input};
use crate::inspect;
use qforge_io::{ModelFile, TensorView, decode_f32, imatrix};
use rayon::prelude::*;
use std::io::Write;
use std::path::Path;

#[derive(serde::Serialize, Clone)]
struct Row {
    name: String,
    #[serde(rename = "type")]
    ty: &'static str,
    elements: usize,
    bytes: usize,
    bits_per_weight: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    rmse: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    relative_error: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_abs_error: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    weighted_rmse: Option<f64>,
    #[serde(skip)]
    sums: Option<Sums>,
}

/// Σ(q−o)², Σo², Σw(q−o)², Σw over one tensor (f64).
#[derive(Clone, Copy, Default)]
struct Sums {
    err2: f64,
    ref2: f64,
    werr2: f64,
    w: f64,
}

fn error_row(q: &[f32], o: &[f32], cols: usize, weights: Option<&[f32]>) -> (Sums, f64) {
    let mut s = Sums::default();
    let mut max = 0f64;
    for (i, (a, b)) in q.iter().zip(o).enumerate() {
        let d = f64::from(*a) - f64::from(*b);
        s.err2 += d * d;
        s.ref2 += f64::from(*b) * f64::from(*b);
        max = max.max(d.abs());
        if let Some(w) = weights {
            // Importance per column; a 3-D expert tensor has one vector per matrix.
            let per_matrix = o.len() / (w.len() / cols).max(1);
            let wi = f64::from(w[(i / per_matrix) * cols + i % cols]);
            s.werr2 += wi * d * d;
            s.w += wi;
        }
    }
    (s, max)
}

fn row(t: &TensorView<'_>, original: Option<&ModelFile<'_>>, im: Option<&imatrix::Imatrix>) -> CliResult<Row> {
    let (elements, bytes) = (t.numel(), t.size());
    let mut r = Row {
        name: t.name.clone(),
        ty: t.ty.name(),
        elements,
        bytes,
        bits_per_weight: if elements == 0 { 0.0 } else { bytes as f64 * 8.0 / elements as f64 },
        rmse: None,
        relative_error: None,
        max_abs_error: None,
        weighted_rmse: None,
        sums: None,
    };
    let Some(o) = original.and_then(|m| m.tensor(&t.name)).filter(|o| o.numel() == elements && t.ty.is_float()) else {
        return Ok(r);
    };
    let decode = |v: &TensorView<'_>| decode_f32(v).map_err(|e| bad_input(format!("tensor '{}': {e}", v.name)));
    let (q, ov) = (decode(t)?, decode(o)?);
    let cols = t.dims.last().copied().unwrap_or(1).max(1);
    let weights = im
        .and_then(|m| m.get(&t.name))
        .map(Vec::as_slice)
        .filter(|w| w.len() % cols == 0 && !w.is_empty() && elements % (w.len() / cols * cols).max(1) == 0);
    let (s, max) = error_row(&q, &ov, cols, weights);
    let n = elements.max(1) as f64;
    r.rmse = Some((s.err2 / n).sqrt());
    r.relative_error = Some(if s.ref2 > 0.0 { (s.err2 / s.ref2).sqrt() } else { 0.0 });
    r.max_abs_error = Some(max);
    r.weighted_rmse = weights.map(|_| if s.w > 0.0 { (s.werr2 / s.w).sqrt() } else { 0.0 });
    r.sums = Some(s);
    Ok(r)
}

fn fmt(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.4e}"))
}

pub fn quality(input: &Path, against: Option<&Path>, imatrix_path: Option<&Path>, json: bool) -> CliResult<()> {
    let src = inspect::open(input)?;
    let model = inspect::parse(&src, input)?;
    let orig_src = against.map(inspect::open).transpose()?;
    let original = match (&orig_src, against) {
        (Some(s), Some(p)) => Some(inspect::parse(s, p)?),
        _ => None,
    };
    if imatrix_path.is_some() && original.is_none() {
        return Err(bad_input("--imatrix weights the error against an original: give --against ORIGINAL too"));
    }
    let im = match imatrix_path {
        Some(p) => {
            let map = qforge_io::MappedFile::open(p).input()?;
            Some(imatrix::parse(map.bytes()).map_err(|e| bad_input(format!("{}: {e}", p.display())))?)
        }
        None => None,
    };
    let rows: Vec<Row> =
        model.tensors.par_iter().map(|t| row(t, original.as_ref(), im.as_ref())).collect::<CliResult<_>>()?;
    let (elements, bytes) = rows.iter().fold((0usize, 0usize), |(e, b), r| (e + r.elements, b + r.bytes));
    let compared: Vec<&Row> = rows.iter().filter(|r| r.sums.is_some()).collect();
    let total = compared.iter().filter_map(|r| r.sums).fold(Sums::default(), |a, s| Sums {
        err2: a.err2 + s.err2,
        ref2: a.ref2 + s.ref2,
        werr2: a.werr2 + s.werr2,
        w: a.w + s.w,
    });
    let n_cmp: usize = compared.iter().map(|r| r.elements).sum();
    let total_rmse = (!compared.is_empty()).then(|| (total.err2 / n_cmp.max(1) as f64).sqrt());
    let total_rel =
        (!compared.is_empty()).then(|| if total.ref2 > 0.0 { (total.err2 / total.ref2).sqrt() } else { 0.0 });
    let total_w = (total.w > 0.0).then(|| (total.werr2 / total.w).sqrt());
    let bpw = if elements == 0 { 0.0 } else { bytes as f64 * 8.0 / elements as f64 };
    let mut out = std::io::stdout().lock();
    if json {
        let doc = serde_json::json!({
            "file": input.display().to_string(),
            "against": against.map(|p| p.display().to_string()),
            "tensors": rows,
            "total": {
                "tensors": rows.len(), "elements": elements, "bytes": bytes, "bits_per_weight": bpw,
                "compared_tensors": compared.len(), "rmse": total_rmse, "relative_error": total_rel,
                "weighted_rmse": total_w,
            },
        });
        return writeln!(out, "{}", serde_json::to_string_pretty(&doc).failed()?).failed();
    }
    writeln!(
        out,
        "{:<40} {:<9} {:>11} {:>7} {:>11} {:>11} {:>11} {:>11}",
        "tensor", "type", "elements", "bpw", "rmse", "rel_err", "max_abs", "w_rmse"
    )
    .failed()?;
    for r in &rows {
        writeln!(
            out,
            "{:<40} {:<9} {:>11} {:>7.4} {:>11} {:>11} {:>11} {:>11}",
            r.name,
            r.ty,
            r.elements,
            r.bits_per_weight,
            fmt(r.rmse),
            fmt(r.relative_error),
            fmt(r.max_abs_error),
            fmt(r.weighted_rmse)
        )
        .failed()?;
    }
    writeln!(
        out,
        "total: {} tensors, {elements} weights, {bytes} bytes, {bpw:.4} bits per weight; {} compared: rmse {}, relative error {}{}",
        rows.len(),
        compared.len(),
        fmt(total_rmse),
        fmt(total_rel),
        total_w.map_or(String::new(), |w| format!(", importance-weighted rmse {w:.4e}"))
    )
    .failed()
}
