//! Optional, larger cross-check against ggml's quantizers (beyond the committed golden
//! vectors). Generate the data with `tests/ggml_crosscheck.py DIR [rows] [cols]` (needs
//! ggml-py) and run with `QFORGE_IQ_GGML_DIR=DIR` (and `QFORGE_IQ_GGML_COLS` if not 1024).
//! The test is `#[ignore]`d: run it with `--ignored`, where it fails without the data. A format
//! without data files is named as not checked (ggml-py 0.10.1 gets no iq1_m data: its quantizer
//! predates the per-half prefix sums of the ggml llama-quantize uses; see the script).
//!
//! Every row must match ggml's bytes, with one documented exception: ggml's iq3_s quantizer
//! does not advance its `qs` / `signs` write positions past a 32-value sub-block that is
//! exactly zero, so the following sub-blocks' grid indices and signs land one slot early
//! (a ggml bug). qforge stores them in place; such rows must instead decode with an error
//! no larger than ggml's.

fn read_f32(p: &std::path::Path) -> Vec<f32> {
    std::fs::read(p).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[test]
#[ignore = "needs ggml data not committed: tests/ggml_crosscheck.py DIR, then QFORGE_IQ_GGML_DIR=DIR cargo test -p qforge-iq --test ggml_crosscheck -- --ignored"]
fn ggml_crosscheck_from_env() {
    let dir = qforge_golden::needs::env_dir("QFORGE_IQ_GGML_DIR");
    let cols: usize = qforge_golden::needs::env_usize("QFORGE_IQ_GGML_COLS", 1024);
    let x = read_f32(&dir.join("inputs.f32"));
    let im = read_f32(&dir.join("imatrix.f32"));
    let (mut bad, mut unchecked) = (Vec::new(), Vec::new());
    let decode = |f: &dyn qforge_core::Format, q: &[u8]| {
        let mut y = vec![0f32; cols];
        f.dequant_row(q, qforge_core::OutRow::F32(&mut y)).unwrap();
        y
    };
    let err = |x: &[f32], y: &[f32], w: Option<&[f32]>| match w {
        Some(w) => qforge_golden::weighted_rmse(x, y, w),
        None => qforge_golden::rmse(x, y),
    };
    for f in qforge_iq::FORMATS {
        let name = f.desc().name;
        for (tag, w) in [("plain", None), ("im", Some(&im[..]))] {
            let Ok(want) = std::fs::read(dir.join(format!("{name}.{tag}.bin"))) else {
                unchecked.push(format!("{name} {tag}"));
                continue;
            };
            let rb = f.row_bytes(cols).unwrap();
            let (mut rows, mut differ) = (0, Vec::new());
            for (r, (xr, wr)) in x.chunks_exact(cols).zip(want.chunks_exact(rb)).enumerate() {
                let mut got = vec![0u8; rb];
                f.quantize_row(xr, w, &mut got).unwrap();
                rows += 1;
                if got != wr {
                    let has_zero_sub_block = xr.chunks(32).any(|c| c.iter().all(|v| *v == 0.0));
                    let (ours, theirs) = (err(xr, &decode(*f, &got), w), err(xr, &decode(*f, wr), w));
                    println!("  row {r}: rmse ours {ours:.6e} ggml {theirs:.6e}");
                    if !(name == "iq3_s" && has_zero_sub_block && ours <= theirs) {
                        differ.push(r);
                    }
                }
            }
            println!("{name} {tag}: {} of {rows} rows differ unexpectedly {differ:?}", differ.len());
            if !differ.is_empty() {
                bad.push(format!("{name} {tag}"));
            }
        }
    }
    println!("not checked (no data): {unchecked:?}");
    assert!(bad.is_empty(), "{bad:?}");
}
