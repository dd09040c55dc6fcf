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
