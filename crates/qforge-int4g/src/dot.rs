//! A8W4DQ's integer dot: int4g weights against per-token asymmetric int8 activations.

use crate::block::Int4g;
use crate::scale::ScaleKind;
use qforge_core::{ActKind, ActRow, BlockFormat, DotKernel, QuantError};

/// The A8W4DQ dot kernel ([`ActKind::Int8Dyn`]): for an activation row
/// `x ≈ scale · (q − zero_point)` (torchao's `choose_qparams_per_token_asymmetric`),
///
/// ```text
/// dot = scale_a · Σ_g ( s_g · Σ_{k in g} (q_a[k] − zp) · q_w[k] )
/// ```
///
/// where the inner sum is exact in i32 (|q_a − zp| ≤ 255, |q_w| ≤ 8, ≤ 4096 terms: at most
/// 8.4·10^6), each group's integer sum is converted to f32 and multiplied by the group's scale
/// (widened to f32), the products are accumulated in f32 in group order, and the activation
/// scale is applied once at the end. Padded weight positions hold `q_w = 0`, so they
/// contribute exactly 0 whatever the activation holds there.
pub struct A8W4Dot;

impl<S: ScaleKind, const H: usize> DotKernel<Int4g<S, H>> for A8W4Dot {
    const ACT: ActKind = ActKind::Int8Dyn;

    fn dot(w: &[<Int4g<S, H> as BlockFormat>::Block], act: ActRow<'_>) -> Option<Result<f32, QuantError>> {
        let ActRow::Int8 { q, scale, zero_point } = act else { return None };
        let g = 2 * H;
        let want = w.len() * g;
        if q.len() != want {
            return Some(Err(QuantError::ShapeMismatch {
                what: "int8 activation elements for the int4g weight row (padded length)",
                expected: want,
                actual: q.len(),
            }));
        }
        if !(-128..=127).contains(&zero_point) {
            return Some(Err(QuantError::Unsupported {
                format: "int4g",
                reason: format!("activation zero point {zero_point} is outside the int8 range -128..=127"),
            }));
        }
        let mut acc = 0f32;
        for (b, a) in w.iter().zip(q.chunks_exact(g)) {
            let mut sum = 0i32;
            let (a_lo, a_hi) = a.split_at(H);
            for ((&qw, &x0), &x1) in b.qs.iter().zip(a_lo).zip(a_hi) {
                sum += (i32::from(x0) - zero_point) * (i32::from(qw & 0x0F) - 8)
                    + (i32::from(x1) - zero_point) * (i32::from(qw >> 4) - 8);
            }
            acc += sum as f32 * S::decode(b.d);
        }
        Some(Ok(acc * scale))
    }
}
