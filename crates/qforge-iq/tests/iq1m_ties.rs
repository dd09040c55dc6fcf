//! iq1_m rows whose split search is a near-tie (tests/golden/gen_iq1m_ties.py): the chosen
//! split, and so the bytes, depend on the order of the float operations, and must be those of
//! the ggml that llama-quantize uses (per-half prefix sums).

use qforge_core::BlockFormat;
use qforge_iq::{BlockIq1M, Iq1M};

const X: &[u8] = include_bytes!("../../../tests/golden/iq1_m/ties_x.f32");
const IM: &[u8] = include_bytes!("../../../tests/golden/iq1_m/ties_imatrix.f32");
const QUANT: &[u8] = include_bytes!("../../../tests/golden/iq1_m/ties_quant.bin");

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[test]
fn near_tie_rows_match_ggml() {
    let (x, im) = (f32s(X), f32s(IM));
    let rows = QUANT.len() / 56;
    assert!(rows > 0 && x.len() == 256 * rows && im.len() == x.len());
    let mut differing = Vec::new();
    for r in 0..rows {
        let mut b: BlockIq1M = bytemuck::Zeroable::zeroed();
        Iq1M::encode(&x[256 * r..256 * (r + 1)], Some(&im[256 * r..256 * (r + 1)]), &mut b);
        if bytemuck::bytes_of(&b) != &QUANT[56 * r..56 * (r + 1)] {
            differing.push(r);
        }
    }
    assert!(differing.is_empty(), "rows {differing:?} of {rows} differ from ggml");
}
