//! Optional refinement with importance weights. ggml's fp4 quantizers ignore importance
//! weights; qforge starts from ggml's scale and also tries the neighbouring scale codes,
//! keeping a neighbour only when it strictly lowers the weighted squared error. The result is
//! therefore never worse (in weighted error) than ggml's, and without weights it is ggml's.

/// `Σ w·(x - y)²` over the real elements, in f64.
pub(crate) fn weighted_sse(x: &[f32], w: &[f32], y: &[f32]) -> f64 {
    x.iter().zip(w).zip(y).map(|((&a, &wi), &b)| f64::from(wi) * (f64::from(a) - f64::from(b)).powi(2)).sum()
}

/// Re-encodes `out` with each candidate scale code (`encode`) and keeps the one with the
/// smallest `err`, the current encoding on ties.
pub(crate) fn refine<B: Copy>(out: &mut B, cands: &[Option<u8>], encode: impl Fn(u8, &mut B), err: impl Fn(&B) -> f64) {
    let mut best = err(out);
    for &c in cands.iter().flatten() {
        let mut trial = *out;
        encode(c, &mut trial);
        let e = err(&trial);
        if e < best {
            best = e;
            *out = trial;
        }
    }
}
