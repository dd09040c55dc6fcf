//! The dequant rows (`decode_row`: `qforge_k::decode_blocks`, compiled for AVX2 where the CPU
//! has it) against the format's own block `decode` called block by block from this (portable)
//! build: the same bits for every output type, raw bytes (NaN / Inf scales) included, whole
//! rows and rows ending in a partial block.

use half::{bf16, f16};
use qforge_core::rand::Rng;
use qforge_core::{BlockFormat, Elem};
use qforge_tq::{QK_K, Tq1_0, Tq2_0};

fn rows_equal<F: BlockFormat, O: Elem>(seed: u64, bits: impl Fn(&O) -> u32) {
    let mut rng = Rng::new(seed);
    let bb = size_of::<F::Block>();
    for case in 0..300 {
        let nb = 1 + case % 6;
        let bytes: Vec<u8> = (0..nb * bb).map(|_| rng.next_u64() as u8).collect();
        let blocks: Vec<F::Block> = bytes.chunks_exact(bb).map(bytemuck::pod_read_unaligned).collect();
        let n = nb * QK_K - [0, 1, 200][case % 3];
        let (mut row, mut each) = (vec![O::default(); n], vec![O::default(); n]);
        F::decode_row(&blocks, &mut row);
        for (b, out) in blocks.iter().zip(each.chunks_mut(QK_K)) {
            F::decode(b, out);
        }
        for (i, (a, b)) in row.iter().zip(&each).enumerate() {
            assert_eq!(bits(a), bits(b), "{} case {case} value {i}", F::DESC.name);
        }
    }
}

#[test]
fn rows_equal_block_decode() {
    if !qforge_golden::needs::avx2() {
        return;
    }
    rows_equal::<Tq1_0, f32>(1, |v| v.to_bits());
    rows_equal::<Tq2_0, f32>(2, |v| v.to_bits());
    rows_equal::<Tq1_0, f16>(3, |v| v.to_bits().into());
    rows_equal::<Tq2_0, bf16>(4, |v| v.to_bits().into());
}
