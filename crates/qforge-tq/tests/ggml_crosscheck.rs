//! Optional edge-case cross-check against ggml's quantizers (data not committed): blocks from
//! subnormal (where `1/amax` overflows) to near `f32::MAX`, and exact halfway points. Generate
//! with `tests/ggml_crosscheck.py DIR` and set `QFORGE_TQ_GGML_DIR=DIR`; skipped otherwise.

fn read_f32(p: &std::path::Path) -> Vec<f32> {
    std::fs::read(p).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[test]
fn ggml_crosscheck_from_env() {
    let Ok(dir) = std::env::var("QFORGE_TQ_GGML_DIR") else { return };
    let dir = std::path::PathBuf::from(dir);
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
