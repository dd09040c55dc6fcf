//! `--device cuda`: without the `cuda` feature it exits 1 saying the build lacks CUDA
//! support; with it and no usable GPU (none here, or hidden by `CUDA_VISIBLE_DEVICES=""`),
//! exit 1 with one line "no CUDA …"; on a GPU (an ignored test: the GPU kit runs it),
//! `dequant --device cuda` writes the same bytes as the CPU and `bench --device cuda` runs.

mod common;
use common::*;

/// A small q4_k tensor (2 × 300: a partial last block) in `tmp`; returns its path.
fn q4k_tensor(tmp: &Tmp) -> String {
    let (x, q) = (tmp.s("x.f32"), tmp.s("x.q4_k"));
    write_f32(&tmp.path("x.f32"), &(0..2 * 300).map(|i| (i as f32 * 0.37).sin()).collect::<Vec<_>>());
    let ok = qforge(&["quantize", "--format", "q4_k", "--input", &x, "--shape", "2,300", "--output", &q]);
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
