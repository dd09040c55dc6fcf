//! `--device cuda`: without the `cuda` feature it exits 1 saying the build lacks CUDA
//! support; with it and no usable GPU (none here, or hidden by `CUDA_VISIBLE_DEVICES=""`),
//! exit 1 with one line "no CUDA …"; on a GPU (an ignored test: the GPU kit runs it),
//! `dequant --device cuda` writes the same bytes as the CPU and `bench --device cuda` runs.

mod common;
use common::*;

/// A small q4_k tensor (2 × 300: a partial last block) in `tmp`; returns its path.
fn q4k_tensor(tmp: &Tmp) -> String {
    tensor(tmp, "q4_k")
}

/// A 2 × 300 tensor quantized to `format`, in `x.<format>` (what `matmul_on` reads the format from).
fn tensor(tmp: &Tmp, format: &str) -> String {
    let (x, q) = (tmp.s("x.f32"), tmp.s(&format!("x.{format}")));
    write_f32(&tmp.path("x.f32"), &(0..2 * 300).map(|i| (i as f32 * 0.37).sin()).collect::<Vec<_>>());
    let ok = qforge(&["quantize", "--format", format, "--input", &x, "--shape", "2,300", "--output", &q]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    q
}

fn dequant_args<'a>(q: &'a str, out: &'a str, dev: &'a str) -> [&'a str; 13] {
    [
        "dequant", "--format", "q4_k", "--input", q, "--shape", "2,300", "--output", out, "--dtype", "f16", "--device",
        dev,
    ]
}

const BENCH: [&str; 10] = ["bench", "--format", "q4_0", "--op", "dequant", "--n", "4096", "--device", "cuda", "--json"];

#[test]
fn without_a_usable_gpu_cuda_exits_1_with_one_line() {
    let tmp = Tmp::new("cuda-absent");
    let q = q4k_tensor(&tmp);
    let out = tmp.s("gpu.f16");
    // No device visible, whatever this machine has: the driver (if any) reports none.
    let hidden = [("CUDA_VISIBLE_DEVICES", "")];
    let dq = qforge_env(&dequant_args(&q, &out, "cuda"), &hidden);
    let bench = qforge_env(&BENCH, &hidden);
    let needle = if cfg!(feature = "cuda") { "no CUDA" } else { "built without CUDA support" };
    assert_fails(&dq, 1, needle);
    assert_fails(&bench, 1, needle);
    assert!(!tmp.path("gpu.f16").exists(), "a failed dequant must not leave an output file");
    assert_fails(&qforge(&dequant_args(&q, &out, "tpu")), 2, "expected cpu or cuda");
}

#[test]
#[cfg_attr(not(feature = "cuda"), ignore = "qforge built without the `cuda` feature")]
#[cfg_attr(feature = "cuda", ignore = "needs a CUDA GPU")]
fn on_a_gpu_dequant_matches_the_cpu_and_bench_runs() {
    let tmp = Tmp::new("cuda-device");
    let q = q4k_tensor(&tmp);
    let (cpu, gpu) = (tmp.s("cpu.f16"), tmp.s("gpu.f16"));
    assert!(qforge(&dequant_args(&q, &cpu, "cpu")).status.success());
    let out = qforge(&dequant_args(&q, &gpu, "cuda"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&cpu).unwrap(), std::fs::read(&gpu).unwrap());
    let bench = qforge(&BENCH);
    assert!(bench.status.success(), "{}", String::from_utf8_lossy(&bench.stderr));
    let v: serde_json::Value = serde_json::from_slice(&bench.stdout).expect("bench --json prints one object");
    assert_eq!(v["device"], "cuda");
    assert!(v["elements_per_s"].as_f64().is_some_and(|x| x > 0.0), "{v}");
}

/// `qforge matmul` of the 2 × 300 tensor `q` (format: its extension) with `m` rows of
/// activations on `dev`; the output (m × 2 f32), or the failed run.
fn matmul_on(tmp: &Tmp, q: &str, m: usize, dev: &str, mode: Option<&str>) -> Result<Vec<f32>, std::process::Output> {
    let format = std::path::Path::new(q).extension().and_then(|e| e.to_str()).expect("x.<format>");
    let (x, y) = (tmp.s("act.f32"), tmp.s(&format!("y-{dev}-{}.f32", mode.unwrap_or("default"))));
    write_f32(&tmp.path("act.f32"), &(0..m * 300).map(|i| (i as f32 * 0.11).cos()).collect::<Vec<_>>());
    let rows = m.to_string();
    let mut args =
        vec!["matmul", "--format", format, "--weights", q, "--shape", "2,300", "--input", &x, "--rows", &rows];
    args.extend(["--output", &y, "--device", dev]);
    if let Some(mode) = mode {
        args.extend(["--act-quant", mode]);
    }
    let out = qforge(&args);
    if out.status.success() { Ok(read_f32(&tmp.path(&y))) } else { Err(out) }
}

/// ‖a − b‖ / ‖b‖.
fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum();
    let n: f64 = b.iter().map(|y| f64::from(*y).powi(2)).sum();
    (d / n).sqrt()
}

#[test]
#[cfg_attr(not(feature = "cuda"), ignore = "qforge built without the `cuda` feature")]
#[cfg_attr(feature = "cuda", ignore = "needs a CUDA GPU")]
fn on_a_gpu_int8_dyn_and_fp8_activations_give_the_cpu_semantics() {
    let tmp = Tmp::new("cuda-modes");
    let q = q4k_tensor(&tmp);
    for mode in ["int8-dyn", "fp8-1x128"] {
        for m in [1, 9] {
            let cpu = matmul_on(&tmp, &q, m, "cpu", Some(mode)).expect("cpu matmul");
            let gpu = matmul_on(&tmp, &q, m, "cuda", Some(mode)).expect("cuda matmul");
            // The same quantized activations on both sides; f32 sums in different orders.
            assert!(rel_err(&gpu, &cpu) < 1e-5, "{mode} m={m}: cuda {gpu:?} vs cpu {cpu:?}");
        }
    }
}

/// fp8 weights with fp8-1x128 activations (and fp8's native mode, the same) run the FP8
/// tensor-core GEMM: the CPU's product up to the order of each 128-column block's sum.
#[test]
#[cfg_attr(not(feature = "cuda"), ignore = "qforge built without the `cuda` feature")]
#[cfg_attr(feature = "cuda", ignore = "needs a CUDA GPU")]
fn on_a_gpu_fp8_weights_with_fp8_activations_give_the_cpu_product() {
    let tmp = Tmp::new("cuda-fp8");
    for format in ["fp8_e4m3", "fp8_e5m2"] {
        let q = tensor(&tmp, format);
        for mode in ["fp8-1x128", "native"] {
            for m in [1, 9, 70] {
                let cpu = matmul_on(&tmp, &q, m, "cpu", Some(mode)).expect("cpu matmul");
                let gpu = matmul_on(&tmp, &q, m, "cuda", Some(mode)).expect("cuda matmul");
                // 2⁻¹³ per block sum on the fp8 tensor cores (docs/cuda.md), relative to Σ|terms|.
                assert!(rel_err(&gpu, &cpu) < 1e-2, "{format} {mode} m={m}: cuda {gpu:?} vs cpu {cpu:?}");
            }
        }
    }
}

#[test]
#[cfg_attr(not(feature = "cuda"), ignore = "qforge built without the `cuda` feature")]
#[cfg_attr(feature = "cuda", ignore = "needs a CUDA GPU")]
fn on_a_gpu_matmul_takes_any_m_in_both_modes() {
    let tmp = Tmp::new("cuda-matmul");
    let q = q4k_tensor(&tmp);
    for m in [1, 8, 9, 20] {
        let cpu = matmul_on(&tmp, &q, m, "cpu", Some("none")).expect("cpu matmul");
        let exact = matmul_on(&tmp, &q, m, "cuda", Some("none")).expect("cuda matmul none");
        let native = matmul_on(&tmp, &q, m, "cuda", None).expect("cuda matmul (native by default)");
        assert_eq!((exact.len(), native.len()), (2 * m, 2 * m));
        // none: f32 on both sides, in different orders; native: q8_1 activations (8 bits).
        assert!(rel_err(&exact, &cpu) < 1e-5, "m={m}: none {exact:?} vs cpu {cpu:?}");
        assert!(rel_err(&native, &cpu) < 2e-2, "m={m}: native {native:?} vs cpu {cpu:?}");
    }
    let bench = qforge(&[
        "bench", "--format", "q4_0", "--op", "matmul", "--rows", "20", "--n", "4096", "--device", "cuda", "--json",
    ]);
    assert!(bench.status.success(), "{}", String::from_utf8_lossy(&bench.stderr));
    let v: serde_json::Value = serde_json::from_slice(&bench.stdout).expect("bench --json prints one object");
    assert_eq!((v["rows"].as_u64(), v["kernel"].as_str()), (Some(20), Some("fused-gemm-f16")));
}
