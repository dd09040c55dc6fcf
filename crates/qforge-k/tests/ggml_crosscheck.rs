//! Optional, larger cross-check against ggml's quantizers (not part of the committed golden
//! vectors). Generate the data with ggml-py and point `QFORGE_K_GGML_DIR` at it:
//! `inputs.f32` and `imatrix.f32` (rows of `QFORGE_K_GGML_COLS`, default 1024, columns) and
//! `<fmt>.plain.bin` / `<fmt>.im.bin` with ggml's `quantize_<fmt>` output, as written by
//! `tests/ggml_crosscheck.py`. The test is `#[ignore]`d: run it with `--ignored`, where it
//! fails without the data.

fn read_f32(p: &std::path::Path) -> Vec<f32> {
    std::fs::read(p).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[test]
#[ignore = "needs ggml data not committed: tests/ggml_crosscheck.py DIR, then QFORGE_K_GGML_DIR=DIR cargo test -p qforge-k --test ggml_crosscheck -- --ignored"]
fn ggml_crosscheck_from_env() {
    let dir = qforge_golden::needs::env_dir("QFORGE_K_GGML_DIR");
    let cols: usize = qforge_golden::needs::env_usize("QFORGE_K_GGML_COLS", 1024);
    let x = read_f32(&dir.join("inputs.f32"));
    let im = read_f32(&dir.join("imatrix.f32"));
    let mut bad = Vec::new();
    for f in qforge_k::FORMATS {
        let name = f.desc().name;
        for (tag, w) in [("plain", None), ("im", Some(&im[..]))] {
            let Ok(want) = std::fs::read(dir.join(format!("{name}.{tag}.bin"))) else { continue };
            let rb = f.row_bytes(cols).unwrap();
            let (mut rows, mut differ) = (0, 0);
            for (xr, wr) in x.chunks_exact(cols).zip(want.chunks_exact(rb)) {
                let mut got = vec![0u8; rb];
                f.quantize_row(xr, w, &mut got).unwrap();
                rows += 1;
                if got != wr {
                    differ += 1;
                }
            }
            println!("{name} {tag}: {differ} of {rows} rows differ");
            if differ > 0 {
                bad.push(format!("{name} {tag}"));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:?}");
}
