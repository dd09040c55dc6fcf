//! The native dot product of q1_0 / q2_0 with q8_0 activations, as ggml's CPU
//! `ggml_vec_dot_q1_0_q8_0` / `ggml_vec_dot_q2_0_q8_0` compute it (written once, generic over
//! [`Spec`]): per weight block, per 32-element q8_0 block `k`, the exact integer sum
//! `sumi_k = Σ level(c)·q8`; then `sumi += d_y[k] · sumi_k` and `sumf += d · sumi` in f32, in
//! the generic kernel's order (ggml's AVX2 kernels reorder those f32 operations).

use crate::codec::code;
use crate::spec::{QS_BYTES, Spec, level};
use qforge_core::MAX_DOT_ROWS;
use qforge_core::le::F16Le;
use qforge_legacy::BlockQ8_0;

/// The scale and codes of a weight block.
pub trait Parts {
    fn parts(&self) -> (F16Le, &[u8; QS_BYTES]);
}

/// The levels (`STEP·c − 1`) of elements `32k .. 32k + 32` of a block.
#[inline(always)]
fn sub_levels<S: Spec>(qs: &[u8; QS_BYTES], k: usize) -> [i8; 32] {
    std::array::from_fn(|i| level::<S>(code::<S>(qs, 32 * k + i)))
}

/// `Σ l·q` exactly.
#[inline(always)]
fn idot(l: &[i8; 32], q: &[i8; 32]) -> i32 {
    l.iter().zip(q).map(|(&a, &b)| i32::from(a) * i32::from(b)).sum()
}

/// One weight row against one activation row (`a.len() == w.len() · QK / 32`).
pub fn vec_dot<S: Spec, B: Parts>(w: &[B], a: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0f32;
    for (x, ys) in w.iter().zip(a.chunks_exact(S::QK / 32)) {
        let (d, qs) = x.parts();
        let mut sumi = 0f32;
        for (k, y) in ys.iter().enumerate() {
            sumi += y.d.get() * idot(&sub_levels::<S>(qs, k), &y.qs) as f32;
        }
        sumf += d.get() * sumi;
    }
    sumf
}

/// [`vec_dot`] of one weight row with up to [`MAX_DOT_ROWS`] activation rows, each weight
/// sub-block unpacked once: the same operations per row, so the same bits.
pub fn vec_dot_rows<S: Spec, B: Parts>(w: &[B], a: &[&[BlockQ8_0]], out: &mut [f32]) {
    assert!(a.len() == out.len() && a.len() <= MAX_DOT_ROWS, "one output per activation row");
    let per = S::QK / 32;
    let mut sumf = [0f32; MAX_DOT_ROWS];
    for (i, x) in w.iter().enumerate() {
        let (d, qs) = x.parts();
        let mut sumi = [0f32; MAX_DOT_ROWS];
        for k in 0..per {
            let l = sub_levels::<S>(qs, k);
            for (s, row) in sumi.iter_mut().zip(a) {
                let y = &row[i * per + k];
                *s += y.d.get() * idot(&l, &y.qs) as f32;
            }
        }
        for (f, s) in sumf.iter_mut().zip(&sumi[..a.len()]) {
            *f += d.get() * s;
        }
    }
    out.copy_from_slice(&sumf[..a.len()]);
}
