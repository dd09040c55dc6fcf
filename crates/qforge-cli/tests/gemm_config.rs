//! `qforge gemm-config`: exit codes, one line on stderr for bad input, JSON fields, --batch.

mod common;

use common::{assert_fails, qforge, qforge_stdin};

fn config(args: &[&str]) -> serde_json::Value {
    let out = qforge(args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

const FIELDS: [&str; 14] = [
    "block_m",
    "block_n",
    "block_k",
    "stages",
    "warps",
    "split_k",
    "smem_bytes",
    "variant",
    "waves",
    "efficiency",
    "predicted_us",
    "raster",
    "persistent",
    "rejected",
];

#[test]
fn json_has_the_contract_fields_for_fp8_k128() {
    for m in ["1", "64", "128", "4096"] {
        let v = config(&[
            "gemm-config",
            "--m",
            m,
            "--n",
            "7168",
            "--k",
            "128",
            "--format",
            "fp8_e4m3",
            "--device",
            "h100",
            "--json",
        ]);
        for f in FIELDS {
            assert!(v.get(f).is_some(), "missing {f} in {v}");
        }
        assert!(v["stages"].as_u64().unwrap() >= 1);
        assert!(v["smem_bytes"].as_u64().unwrap() <= 232448);
    }
}

#[test]
fn every_registry_format_and_builtin_layout_works_on_every_device() {
    let fs: serde_json::Value = serde_json::from_slice(&qforge(&["formats", "--json"]).stdout).unwrap();
    let mut names: Vec<String> =
        fs.as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap().to_string()).collect();
    names.extend(["f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "int4g"].map(String::from));
    for dev in ["h100", "h200", "a100", "l40s", "rtx4090", "rtx3090", "t4"] {
        for f in &names {
            let out =
                qforge_stdin(&["gemm-config", "--format", f, "--device", dev, "--batch"], "1 288 288\n32 768 288\n");
            assert!(out.status.success(), "{f} on {dev}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
        }
    }
}

#[test]
fn human_output_and_explain() {
    let out =
        qforge(&["gemm-config", "--m", "1", "--n", "4096", "--k", "4096", "--format", "q4_k", "--device", "rtx4090"]);
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert_eq!(s.lines().count(), 1, "{s}");
    assert!(s.contains("stages=") && s.contains("smem="), "{s}");
    let out = qforge(&[
        "gemm-config",
        "--m",
        "4096",
        "--n",
        "4096",
        "--k",
        "4096",
        "--format",
        "f16",
        "--device",
        "t4",
        "--explain",
    ]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("why:") && s.contains("rejected") && s.contains("runner-up"), "{s}");
}

#[test]
fn batch_writes_one_json_object_per_shape() {
    let input =
        "# a comment\n\n1 4096 4096\n  16 11008 4096  # trailing comment\n4096 128256 4096\n1 1 1\n2147483648 1 1\n";
    let out =
        qforge_stdin(&["gemm-config", "--format", "int4g", "--group-size", "32", "--device", "a100", "--batch"], input);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[1]["m"], 16);
    assert_eq!(lines[1]["n"], 11008);
    assert_eq!(lines[0]["group_size"], 32);
    assert_eq!(lines[0]["act_dtype"], "int8");
    for l in &lines {
        for f in FIELDS {
            assert!(l.get(f).is_some(), "missing {f} in {l}");
        }
    }
}

#[test]
fn batch_handles_thousands_of_shapes_per_second() {
    let mut input = String::new();
    for i in 0..5000u64 {
        input += &format!("{} {} {}\n", 1 + i % 4096, 128 + (i * 37) % 20000, 64 + (i * 101) % 16384);
    }
    let t = std::time::Instant::now();
    let out = qforge_stdin(&["gemm-config", "--format", "q4_k", "--device", "h100", "--batch"], &input);
    let secs = t.elapsed().as_secs_f64();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 5000);
    eprintln!("{:.0} shapes/s", 5000.0 / secs);
    assert!(secs < 5.0, "5000 shapes took {secs} s");
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let base = ["gemm-config", "--n", "4096", "--k", "4096", "--device", "h100", "--format", "q4_k"];
    let with = |extra: &[&str]| qforge(&[&base[..], extra].concat());
    assert_fails(&with(&["--m", "0"]), 2, "dimension M is 0");
    assert_fails(&with(&["--m", "2147483649"]), 2, "larger than the supported maximum");
    assert_fails(&with(&[]), 2, "--m is required");
    assert_fails(&with(&["--m", "1", "--group-size", "64"]), 2, "fixed block size");
    assert_fails(&with(&["--m", "1", "--act-dtype", "int3"]), 2, "unknown activation dtype");
    assert_fails(&with(&["--m", "1", "--out-dtype", "int8"]), 2, "unknown output dtype");
    let dev = qforge(&["gemm-config", "--m", "1", "--n", "1", "--k", "1", "--format", "f16", "--device", "h900"]);
    assert_fails(&dev, 2, "unknown device 'h900'");
    let fmt = qforge(&["gemm-config", "--m", "1", "--n", "1", "--k", "1", "--format", "q9_9", "--device", "t4"]);
    assert_fails(&fmt, 2, "unknown format 'q9_9'");
    let g = qforge(&[
        "gemm-config",
        "--m",
        "1",
        "--n",
        "1",
        "--k",
        "1",
        "--format",
        "int4g",
        "--group-size",
        "48",
        "--device",
        "t4",
    ]);
    assert_fails(&g, 2, "invalid group size 48");
    let b = ["gemm-config", "--format", "f16", "--device", "h100", "--batch"];
    assert_fails(&qforge_stdin(&b, "1 2\n"), 2, "line 1");
    assert_fails(&qforge_stdin(&b, "# ok\n1 2 3\n1 -2 3\n"), 2, "line 3");
    assert_fails(&qforge_stdin(&b, "1 0 3\n"), 2, "dimension N is 0");
}
