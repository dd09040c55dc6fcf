//! `qforge bench`: throughput of one op on one format, in elements/s and bytes/s.

use crate::exit::{Classify, CliResult, bad_input};
use crate::measure::{data, time};
use qforge_core::{DType, Elem, Format, QuantTensor, Shape, bf16, f16};
use std::time::Duration;

pub struct BenchArgs<'a> {
    pub format: &'a str,
    pub op: &'a str,
    pub n: Option<usize>,
    pub shape: Option<&'a str>,
    pub threads: Option<usize>,
    pub device: &'a str,
    pub json: bool,
    pub rows: Option<usize>,
    pub act_quant: &'a str,
    pub group_size: Option<usize>,
    /// Output dtype of `--op dequant` (CPU).
    pub dtype: &'a str,
    /// `--packed`: mat-vec / mat-mul on the weight's packed layout (CPU, native activations).
    pub packed: bool,
}

/// Median seconds (and runs) of dequantizing `q` to `O` on `pool`.
fn dequant_time<O: Elem>(pool: &rayon::ThreadPool, q: &QuantTensor<'_>, min: Duration) -> CliResult<(f64, usize)> {
    let mut out = vec![O::default(); q.shape().numel()];
    pool.install(|| time(min, || qforge_cpu::dequantize_into(q, &mut out).input()))
}

pub fn bench(a: BenchArgs<'_>) -> CliResult<()> {
    let f: &'static dyn Format = crate::commands::format_by_name(a.format, a.group_size)?;
    let device = crate::device::parse(a.device)?;
    let shape = match (a.shape, a.n) {
        (Some(_), Some(_)) => return Err(bad_input("give --n or --shape, not both")),
        (Some(s), None) => crate::commands::parse_shape(s)?,
        (None, n) => {
            let n = n.unwrap_or(1 << 22);
            let cols = 4096.min(n);
            if n % cols != 0 {
                return Err(bad_input(format!("--n {n}: use a multiple of 4096 (or --shape ROWS,COLS)")));
            }
            Shape::new([n / cols, cols]).input()?
        }
    };
    let n = shape.numel();
    let threads = a.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |p| p.get()));
    if threads == 0 {
        return Err(bad_input("--threads must be at least 1"));
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().failed()?;
    let x = data(n);
    let q = qforge_cpu::quantize(f, shape.clone(), &x, None).input()?;
    let qbytes = q.data().len();
    let min = Duration::from_millis(700);
    if a.packed && (device == crate::device::Device::Cuda || !matches!(a.op, "matvec" | "matmul")) {
        return Err(bad_input("--packed: mat-vec and mat-mul on the CPU only (--op matvec|matmul)"));
    }
    if a.packed && a.act_quant != "native" {
        return Err(bad_input("--packed: the packed kernels take native activations only (--act-quant native)"));
    }
    if device == crate::device::Device::Cuda {
        let m = if a.op == "matmul" { a.rows.unwrap_or(64) } else { 1 };
        if m == 0 {
            return Err(bad_input("--rows must be at least 1"));
        }
        let (secs, runs, name) = crate::device::bench(&q, a.op, m, min)?;
        // Bytes moved: the quantized weights plus the f32 output (dequant), or the f32
        // activations and outputs (matvec, matmul). Elements: weights × M.
        let side = if a.op == "dequant" { 4 * n } else { 4 * m * (shape.cols() + shape.rows()) };
        let bytes = (qbytes + side) as f64 / secs;
        if a.json {
            let mut v = serde_json::json!({
                "format": f.desc().name, "op": a.op, "device": "cuda", "device_name": name, "n": n,
                "shape": shape.dims(), "runs": runs, "seconds": secs, "elements_per_s": (n * m) as f64 / secs,
                "bytes_per_s": bytes, "quantized_bytes": qbytes,
            });
            if a.op == "matmul" {
                v["rows"] = m.into();
                v["kernel"] = "fused-gemm-f16".into();
            }
            println!("{v}");
        } else {
            println!(
                "{} {} cuda ({name}) n={n}{}: {:.3} ms/run, {:.1} GB/s, {:.3} Tel/s ({runs} runs)",
                f.desc().name,
                a.op,
                if a.op == "matmul" { format!(" m={m}") } else { String::new() },
                secs * 1e3,
                bytes / 1e9,
                (n * m) as f64 / secs / 1e12
            );
        }
        return Ok(());
    }
    let (secs, runs) = match a.op {
        "dequant" => {
            let dtype: DType =
                a.dtype.parse().map_err(|_| bad_input(format!("--dtype '{}': expected f32, f16 or bf16", a.dtype)))?;
            match dtype {
                DType::F32 => dequant_time::<f32>(&pool, &q, min)?,
                DType::F16 => dequant_time::<f16>(&pool, &q, min)?,
                DType::Bf16 => dequant_time::<bf16>(&pool, &q, min)?,
            }
        }
        "quantize" => {
            let mut out = vec![0u8; qbytes];
            pool.install(|| time(min, || qforge_cpu::quantize_into(f, &shape, &x, None, &mut out).input()))?
        }
        "matvec" | "matmul" => {
            let mode: qforge_cpu::ActQuant =
                a.act_quant.parse().map_err(|_| bad_input(format!("--act-quant '{}': unknown mode", a.act_quant)))?;
            let m = if a.op == "matvec" { 1 } else { a.rows.unwrap_or(64) };
            if m == 0 {
                return Err(bad_input("--rows must be at least 1"));
            }
            let xa = data(m * shape.cols());
            if a.packed {
                let p = pool.install(|| qforge_cpu::PackedMatrix::new(&q)).input()?;
                pool.install(|| time(min, || p.matmul(&xa, m).map(|_| ()).input()))?
            } else {
                let mut y = vec![0f32; m * shape.rows()];
                pool.install(|| time(min, || qforge_cpu::matmul_into(&q, &xa, m, mode, &mut y).input()))?
            }
        }
        op => return Err(bad_input(format!("--op '{op}': expected dequant, quantize, matvec or matmul"))),
    };
    let m = match a.op {
        "matvec" => 1,
        "matmul" => a.rows.unwrap_or(64),
        _ => 0,
    };
    // Elements: weights processed (× M for mat-mul). Bytes: quantized weights plus the f32
    // side (dequant / quantize), or weights plus activations and outputs (mat-vec / mat-mul).
    let (elems, bytes) = if m > 0 {
        let act = 4 * m * (shape.cols() + shape.rows());
        ((n * m) as f64 / secs, (qbytes + act) as f64 / secs)
    } else {
        let esize = if a.op == "dequant" && !a.dtype.eq_ignore_ascii_case("f32") { 2 } else { 4 };
        (n as f64 / secs, (qbytes + esize * n) as f64 / secs)
    };
    if a.json {
        let v = serde_json::json!({
            "format": f.desc().name, "op": a.op, "device": "cpu", "n": n, "shape": shape.dims(),
            "threads": threads, "runs": runs, "seconds": secs, "rows": m,
            "dtype": (a.op == "dequant").then_some(a.dtype), "act_quant": (m > 0).then_some(a.act_quant),
            "elements_per_s": elems, "bytes_per_s": bytes, "quantized_bytes": qbytes,
            "simd": qforge_core::cpu::levels(), "packed": a.packed,
        });
        println!("{v}");
    } else {
        println!(
            "{} {}{}{} cpu ({}) threads={threads} n={n}: {:.3} ms/run, {:.3} Gelem/s, {:.3} GB/s ({runs} runs)",
            f.desc().name,
            a.op,
            if a.packed { " packed" } else { "" },
            if a.op == "dequant" { format!(" to {}", a.dtype) } else { String::new() },
            qforge_core::cpu::levels(),
            secs * 1e3,
            elems / 1e9,
            bytes / 1e9
        );
    }
    Ok(())
}
