//! Mat-vec and mat-mul cells of the test matrix: every format × {matvec (M = 1), matmul
//! (M = 3)} on an N = 7, K = 300 weight (a partial last block for every block size), in each
//! activation mode. A cell passes when every mode matches its exact semantics — the f64 sum
//! of dequantized weights times the values the quantized activations stand for — to 1e-5 of
//! the sum of the terms' magnitudes, and the native mode runs on an integer kernel (or the
//! format's native activations are f32). The detail reports each mode's error against the
//! plain f64 product with unquantized activations.

use super::Cell;
use qforge_core::{ActKind, Format, Shape};
use qforge_cpu::ActQuant;

/// A run's outputs, the exact-semantics reference and the sums of |terms|.
type Outcome = (Vec<f32>, Vec<f64>, Vec<f64>);

const N: usize = 7;
const K: usize = 300;
/// Tolerance of a kernel against its exact semantics, relative to Σ|terms|.
const RTOL: f64 = 1e-5;

fn data(n: usize, seed: u64) -> Vec<f32> {
    qforge_golden::signal(n, seed)
}

/// Relative error ||y − r|| / ||r|| (f64).
fn rel(y: &[f32], r: &[f64]) -> f64 {
    let (mut e, mut s) = (0f64, 0f64);
    for (a, b) in y.iter().zip(r) {
        e += (*a as f64 - b).powi(2);
        s += b * b;
    }
    if s == 0.0 { e.sqrt() } else { (e / s).sqrt() }
}

fn mode_label(f: &dyn Format, mode: ActQuant) -> String {
    match mode.kind(f) {
        ActKind::Blocks(name) => format!("{mode}[{name}]"),
        _ => mode.to_string(),
    }
}

pub fn cell(f: &'static dyn Format, op: &'static str) -> Cell {
    let m = if op == "matvec" { 1 } else { 3 };
    let mut c = Cell::new(f.desc().name, "cpu", op);
    c.reference = format!(
        "f64 sum of dequantized weight x quantized activation (exact semantics, rtol {RTOL:e} of sum|terms|); errors vs f64 with f32 activations"
    );
    let x = data(N * K, 0x51ed_2701);
    let w = match qforge_cpu::quantize(f, Shape::new([N, K]).expect("fixed shape"), &x, None) {
        Ok(w) => w,
        Err(e) => {
            c.detail = format!("quantize failed: {e}");
            return c;
        }
    };
    let a = data(m * K, 0x0bad_5eed);
    let plain = match qforge_cpu::quantize_acts(&w, &a, m, ActQuant::None)
        .and_then(|q| qforge_cpu::reference_f64(&w, &q, RTOL))
    {
        Ok((y, _)) => y,
        Err(e) => {
            c.detail = format!("reference failed: {e}");
            return c;
        }
    };
    let mut parts = Vec::new();
    let mut failures = Vec::new();
    let (mut worst_exact, mut rmse_native) = (0f64, None);
    for mode in ActQuant::ALL {
        let label = mode_label(f, mode);
        let run = || -> Result<Outcome, String> {
            let acts = qforge_cpu::quantize_acts(&w, &a, m, mode).map_err(|e| e.to_string())?;
            let (r, s) = qforge_cpu::reference_f64(&w, &acts, RTOL).map_err(|e| e.to_string())?;
            let y = qforge_cpu::matmul(&w, &a, m, mode).map_err(|e| e.to_string())?;
            Ok((y, r, s))
        };
        match run() {
            Ok((y, r, s)) => {
                let bad = y
                    .iter()
                    .zip(r.iter().zip(&s))
                    .filter(|(v, (r, s))| (**v as f64 - **r).abs() > RTOL * **s + 1e-30)
                    .count();
                let worst = y
                    .iter()
                    .zip(r.iter().zip(&s))
                    .map(|(v, (r, s))| (*v as f64 - r).abs() / s.max(1e-30))
                    .fold(0f64, f64::max);
                worst_exact = worst_exact.max(worst);
                if bad > 0 {
                    failures.push(format!(
                        "{label}: {bad}/{} outputs off their exact semantics (worst {worst:.1e})",
                        y.len()
                    ));
                }
                let e = rel(&y, &plain);
                if mode == ActQuant::Native {
                    rmse_native = Some(e);
                    let kind = mode.kind(f);
                    let integer = kind != ActKind::F32
                        && w.row(0).is_some_and(|r0| {
                            qforge_cpu::quantize_acts(&w, &a[..K], 1, mode)
                                .ok()
                                .and_then(|q| q[0].as_row().and_then(|row| f.dot_row(r0, 0, w.aux(), row)))
                                .is_some()
                        });
                    if kind != ActKind::F32 && !integer {
                        failures.push(format!("{label}: no integer dot kernel"));
                    }
                    if kind == ActKind::F32 {
                        failures.push("native: the format has no native activation quantization".into());
                    }
                }
                parts.push(format!("{label} {e:.2e}"));
            }
            Err(e) => failures.push(format!("{label}: {e}")),
        }
    }
    c.max_abs_err = Some(worst_exact);
    c.rmse = rmse_native;
    if failures.is_empty() {
        c.status = "pass";
        c.detail = format!("rel. err vs f64: {}", parts.join(" | "));
    } else {
        c.detail = failures.join("; ");
    }
    c
}
