//! Random operands for the kernels' tests (`simd`, `tile`): weight groups with every code and
//! scales of every magnitude, activation rows with `-128` / `127` runs and extreme zero points.

use crate::block::BlockInt4g;
use crate::dot::Int8Row;
use crate::scale::ScaleKind;
use qforge_core::rand::Rng;

/// `count` random groups.
pub(crate) fn groups<S: ScaleKind, const H: usize>(rng: &mut Rng, count: usize) -> Vec<BlockInt4g<S, H>> {
    (0..count)
        .map(|_| {
            let mut qs = [0u8; H];
            qs.iter_mut().for_each(|q| *q = rng.next_u64() as u8);
            let v = (rng.next_u64() % 1000) as f32 * 2f32.powi((rng.next_u64() % 20) as i32 - 12);
            BlockInt4g { d: S::encode(v), qs }
        })
        .collect()
}

/// Special f16 scale bits in every fifth block (signaling / quiet NaN, Inf, the smallest
/// subnormal, -0; as bf16 / f32 scales other values): the kernels' f16 conversions against
/// `f16::to_f32`.
pub(crate) fn special_scales<S: ScaleKind, const H: usize>(w: &mut [BlockInt4g<S, H>], case: usize) {
    for (k, b) in w.iter_mut().enumerate().filter(|(k, _)| (k + case).is_multiple_of(5)) {
        let special: [u8; 2] = [[0x01, 0x7C], [0x01, 0x7E], [0x00, 0x7C], [0x01, 0x00], [0x00, 0x80]][k % 5];
        bytemuck::bytes_of_mut(&mut b.d)[..2].copy_from_slice(&special);
    }
}

/// `m` activation rows of `len` codes for test case `case`: all `-128`, runs of `127`, or
/// random, by row.
pub(crate) fn act_codes(rng: &mut Rng, case: usize, m: usize, len: usize) -> Vec<Vec<i8>> {
    (0..m)
        .map(|r| {
            (0..len)
                .map(|i| match (case + r) % 4 {
                    0 => -128,
                    1 if i % 3 == 0 => 127,
                    _ => rng.next_u64() as i8,
                })
                .collect()
        })
        .collect()
}

/// The rows `qs` with scales `0.37 + r` and zero points -128, 127, 0, -5 in turn.
pub(crate) fn act_rows(qs: &[Vec<i8>], case: usize) -> Vec<Int8Row<'_>> {
    qs.iter()
        .enumerate()
        .map(|(r, q)| Int8Row { q, scale: 0.37 + r as f32, zp: [-128, 127, 0, -5][(case + r) % 4] })
        .collect()
}
