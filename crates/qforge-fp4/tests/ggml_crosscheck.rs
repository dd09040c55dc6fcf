//! Optional edge-case cross-check against ggml (data not committed): every scale byte decoded,
//! and quantization of blocks from subnormal to near `f32::MAX`, of values just below powers
//! of two and of halfway points. Generate with `tests/ggml_crosscheck.py DIR` and set
//! `QFORGE_FP4_GGML_DIR=DIR`. The test is `#[ignore]`d: run it with `--ignored`, where it
//! fails without the data.

use qforge_core::OutRow;

fn read_f32(p: &std::path::Path) -> Vec<f32> {
    std::fs::read(p).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[test]
#[ignore = "needs ggml data not committed: tests/ggml_crosscheck.py DIR, then QFORGE_FP4_GGML_DIR=DIR cargo test -p qforge-fp4 --test ggml_crosscheck -- --ignored"]
fn ggml_crosscheck_from_env() {
    let dir = qforge_golden::needs::env_dir("QFORGE_FP4_GGML_DIR");
    let cols = 512;
    let x = read_f32(&dir.join("inputs.f32"));
    let mut bad = Vec::new();
    for f in qforge_fp4::FORMATS {
        let name = f.desc().name;
        let raw = std::fs::read(dir.join(format!("{name}.all.bin"))).unwrap();
        let want = read_f32(&dir.join(format!("{name}.all.f32")));
        let mut got = vec![0f32; want.len()];
        f.dequant_row(&raw, OutRow::F32(&mut got)).unwrap();
        if let Some((i, g, w)) = qforge_golden::first_mismatch(&got, &want) {
            bad.push(format!("{name} decode element {i}: {g:e} vs ggml {w:e}"));
        }
        let want = std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
        let rb = f.row_bytes(cols).unwrap();
        for (r, (xr, wr)) in x.chunks_exact(cols).zip(want.chunks_exact(rb)).enumerate() {
            let mut q = vec![0u8; rb];
            f.quantize_row(xr, None, &mut q).unwrap();
            if let Some(b) =
                q.chunks(f.desc().block_bytes).zip(wr.chunks(f.desc().block_bytes)).position(|(a, b)| a != b)
            {
                let bs = f.desc().block_size;
                bad.push(format!("{name} row {r} block {b} differs (x[0] = {:e})", xr[b * bs]));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
