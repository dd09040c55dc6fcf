//! A8W4DQ's integer dot: int4g weights against per-token asymmetric int8 activations.

use crate::block::{BlockInt4g, Int4g};
use crate::scale::ScaleKind;
use qforge_core::{ActKind, ActRow, DotKernel, QuantError};

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

    fn dot(w: &[BlockInt4g<S, H>], act: ActRow<'_>) -> Option<Result<f32, QuantError>> {
        let mut out = [0f32];
        Some(Self::dot_rows(w, &[act], &mut out)?.map(|()| out[0]))
    }

    fn dot_rows(w: &[BlockInt4g<S, H>], acts: &[ActRow<'_>], out: &mut [f32]) -> Option<Result<(), QuantError>> {
        if acts.len() != out.len() {
            return Some(Err(QuantError::ShapeMismatch {
                what: "dot outputs for the activation rows",
                expected: acts.len(),
                actual: out.len(),
            }));
        }
        let rows = match int8_rows(w.len() * 2 * H, acts)? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        rows_dot(w, &rows, out);
        Some(Ok(()))
    }

    /// From two activation rows on AVX2 / AVX-512 VNNI, the tile kernel (8 or 16 weight rows
    /// per vector, each group decoded once for every activation row; `tile.rs`): the same bits
    /// as `dot_rows`.
    fn dot_tile(
        w: &[BlockInt4g<S, H>],
        n: usize,
        acts: &[ActRow<'_>],
        out: &mut [f32],
        stride: usize,
    ) -> Option<Result<(), QuantError>> {
        let rows = match int8_rows(n * 2 * H, acts)? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        #[cfg(target_arch = "x86_64")]
        if rows.len() >= crate::tile::TILE_MIN_ACTS && crate::tile::dot_tile(w, n, &rows, out, stride) {
            return Some(Ok(()));
        }
        for (i, w) in w.chunks_exact(n.max(1)).enumerate() {
            rows_dot(w, &rows, &mut out[i * stride..][..rows.len()]);
        }
        Some(Ok(()))
    }

    fn dot_weight_rows(
        w: &[BlockInt4g<S, H>],
        n: usize,
        act: ActRow<'_>,
        out: &mut [f32],
    ) -> Option<Result<(), QuantError>> {
        // One validation and one pass over the activation's group sums for all the rows.
        let row = match int8_row(n * 2 * H, act)? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        if n == 0 {
            // No groups: every row is the portable kernel's empty sum.
            out.fill(dot_portable::<S, H>(&[], &row));
            return Some(Ok(()));
        }
        #[cfg(target_arch = "x86_64")]
        if crate::simd::dot_weight_rows(w, n, &row, out) {
            return Some(Ok(()));
        }
        for (o, wr) in out.iter_mut().zip(w.chunks_exact(n)) {
            *o = dot_portable(wr, &row);
        }
        Some(Ok(()))
    }
}

/// `out[i]` = the weight row `w`'s dot with `rows[i]` (validated): the row kernel where the
/// CPU has AVX2, else the portable one.
fn rows_dot<S: ScaleKind, const H: usize>(w: &[BlockInt4g<S, H>], rows: &[Int8Row<'_>], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::dot_rows(w, rows, out) {
        return;
    }
    for (o, r) in out.iter_mut().zip(rows) {
        *o = dot_portable(w, r);
    }
}

/// The activation rows of `acts` validated for rows of `len` elements: `None` for another
/// kind of row, the first error otherwise.
fn int8_rows<'a>(len: usize, acts: &[ActRow<'a>]) -> Option<Result<Vec<Int8Row<'a>>, QuantError>> {
    let mut rows = Vec::with_capacity(acts.len());
    for act in acts {
        match int8_row(len, *act)? {
            Ok(r) => rows.push(r),
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(rows))
}

/// One validated int8 activation row: `x ≈ scale · (q − zp)`.
pub(crate) struct Int8Row<'a> {
    pub q: &'a [i8],
    pub scale: f32,
    pub zp: i16,
}

/// `act` as an int8 row of `want` elements: `None` for another kind of row, an error for a
/// wrong length or a zero point outside `i8`.
fn int8_row(want: usize, act: ActRow<'_>) -> Option<Result<Int8Row<'_>, QuantError>> {
    let ActRow::Int8 { q, scale, zero_point } = act else { return None };
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
    Some(Ok(Int8Row { q, scale, zp: zero_point as i16 }))
}

/// The reference kernel: exact integer group sums, scaled and accumulated in f32 in group
/// order, the activation scale applied once at the end.
pub(crate) fn dot_portable<S: ScaleKind, const H: usize>(w: &[BlockInt4g<S, H>], a: &Int8Row<'_>) -> f32 {
    let mut acc = 0f32;
    for (b, x) in w.iter().zip(a.q.chunks_exact(2 * H)) {
        let (a_lo, a_hi) = x.split_at(H);
        acc += group_isum(&b.qs, a_lo, a_hi, a.zp) as f32 * S::decode(b.d);
    }
    acc * a.scale
}

/// `Σ (x0 − zp)·(lo − 8) + (x1 − zp)·(hi − 8)` over one group, exact: each pair of products is
/// an `i16` (|x − zp| ≤ 255, |q − 8| ≤ 8: at most 4080), summed in 16 `i32` lanes — vectorized
/// 16 bytes at a time, no per-element `i32` multiplies.
#[inline(always)]
pub(crate) fn group_isum(qs: &[u8], a_lo: &[i8], a_hi: &[i8], zp: i16) -> i32 {
    #[inline(always)]
    fn pair(q: u8, x0: i8, x1: i8, zp: i16) -> i16 {
        (i16::from(x0) - zp) * (i16::from(q & 0x0F) - 8) + (i16::from(x1) - zp) * (i16::from(q >> 4) - 8)
    }
    let mut lanes = [0i32; 16];
    let (qc, qt) = qs.as_chunks::<16>();
    let (lc, lt) = a_lo.as_chunks::<16>();
    let (hc, ht) = a_hi.as_chunks::<16>();
    for ((q, x0), x1) in qc.iter().zip(lc).zip(hc) {
        for l in 0..16 {
            lanes[l] += i32::from(pair(q[l], x0[l], x1[l], zp));
        }
    }
    let mut sum: i32 = qt.iter().zip(lt).zip(ht).map(|((&q, &x0), &x1)| i32::from(pair(q, x0, x1, zp))).sum();
    for v in lanes {
        sum += v;
    }
    sum
}
