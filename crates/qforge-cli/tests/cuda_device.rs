//! `--device cuda` on this machine: without the `cuda` feature it exits 1 saying the build
//! lacks CUDA support; with it and no GPU, exit 1 with one line "no CUDA driver found …"; with
//! a GPU, `dequant --device cuda` writes the same bytes as the CPU.

mod common;
use common::*;

#[test]
fn dequant_and_bench_on_cuda_exit_1_with_one_line_or_match_the_cpu() {
    let tmp = Tmp::new("cuda-device");
    let (x, q) = (tmp.s("x.f32"), tmp.s("x.q4_k"));
    write_f32(&tmp.path("x.f32"), &(0..2 * 300).map(|i| (i as f32 * 0.37).sin()).collect::<Vec<_>>());
    let ok = qforge(&["quantize", "--format", "q4_k", "--input", &x, "--shape", "2,300", "--output", &q]);
    assert!(ok.status.success());
    let (cpu, gpu) = (tmp.s("cpu.f16"), tmp.s("gpu.f16"));
    let args = |out: &str, dev: &str| {
        qforge(&[
            "dequant", "--format", "q4_k", "--input", &q, "--shape", "2,300", "--output", out, "--dtype", "f16",
            "--device", dev,
        ])
    };
    assert!(args(&cpu, "cpu").status.success());
    let out = args(&gpu, "cuda");
    let bench = qforge(&["bench", "--format", "q4_0", "--op", "dequant", "--n", "4096", "--device", "cuda"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    if !cfg!(feature = "cuda") {
        assert_fails(&out, 1, "built without CUDA support");
        assert_fails(&bench, 1, "built without CUDA support");
    } else if err.contains("no CUDA driver found") || err.contains("no CUDA device") {
        assert_fails(&out, 1, "no CUDA");
        assert_fails(&bench, 1, "no CUDA");
    } else {
        assert!(out.status.success(), "{err}");
        assert_eq!(std::fs::read(&cpu).unwrap(), std::fs::read(&gpu).unwrap());
        assert!(bench.status.success());
    }
    assert_fails(&args(&gpu, "tpu"), 2, "expected cpu or cuda");
}
