//! Optional edge-case cross-check against ggml's quantizers (data not committed): blocks from
//! subnormal (where `1/amax` overflows) to near `f32::MAX`, and exact halfway points. Generate
//! with `tests/ggml_crosscheck.py DIR` and set `QFORGE_TQ_GGML_DIR=DIR`. The test is
//! `#[ignore]`d: run it with `--ignored`, where it fails without the data.

fn read_f32(p: &std::path::Path) -> Vec<f32> {
    std::fs::read(p).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[test]
#[ignore = "needs ggml data not committed: tests/ggml_crosscheck.py DIR, then QFORGE_TQ_GGML_DIR=DIR cargo test -p qforge-tq --test ggml_crosscheck -- --ignored"]
fn ggml_crosscheck_from_env() {
    let dir = qforge_golden::needs::env_dir("QFORGE_TQ_GGML_DIR");
    let cols = 512;
    let x = read_f32(&dir.join("inputs.f32"));
    let mut bad = Vec::new();
    for f in qforge_tq::FORMATS {
        let name = f.desc().name;
        let want = std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
        let rb = f.row_bytes(cols).unwrap();
        for (r, (xr, wr)) in x.chunks_exact(cols).zip(want.chunks_exact(rb)).enumerate() {
            let mut q = vec![0u8; rb];
            f.quantize_row(xr, None, &mut q).unwrap();
            if q != wr {
                bad.push(format!("{name} row {r} differs (x[0] = {:e})", xr[0]));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
