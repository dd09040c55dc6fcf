//! The ternary grid formats iq1_s and iq1_m: 256-value super-blocks whose values are
//! `dl * (g + delta)`, `g in {-1, 0, 1}` an 8-value point of a 2048-entry grid, `delta` a
//! per-group shift of `±1/8` and `dl` an odd 3-bit multiple of the block scale.
//!
//! The encoders are ggml's `quantize_row_iq1_s_impl` / `quantize_row_iq1_m_impl`: per
//! sub-block, the values are sorted and every split of them into the three levels is scored
//! exactly (weighted least squares with the best scale), for each shift, from prefix sums in
//! ggml's order of operations (near-ties must round as in ggml); groups whose level
//! pattern is not a grid point move to the best of their precomputed neighbours.

use crate::common::QK_K;
use crate::lattice::{Lattice, levels_of};
use crate::tables::{IQ1M_DELTA, IQ1S_DELTA, IQ1S_GRID};
use crate::unpack::{GridSigns, GridWords, SubBlock, SubBlocks, no_gather_word, per32, spread_bytes};
use bytemuck::{Pod, Zeroable};
use qforge_core::le::F16Le;
use qforge_core::{BlockFormat, Elem, FormatDesc, Role};
use qforge_ggml_search::{NoImatrix, c_max, nearest_int, padded, search_weights, sigma2};
use std::sync::OnceLock;

/// The quantizer's iq1 grid (levels 0, 1, 2 for -1, 0, 1), shared by iq1_s and iq1_m.
fn lattice() -> &'static Lattice<8> {
    static LAT: OnceLock<Lattice<8>> = OnceLock::new();
    LAT.get_or_init(|| Lattice::new(&levels_of(IQ1S_GRID.iter().copied(), |b| (b as i8 + 1) as u8), 2, 43692, 3))
}

/// Writes the 8 values `dl * (g[j] + delta)` of grid point `idx` to `dst` (8 elements).
#[inline(always)]
fn emit8<O: Elem>(dst: &mut [O], dl: f32, idx: usize, delta: f32) {
    let g = IQ1S_GRID[idx & 2047].to_le_bytes();
    if let Ok(dst) = <&mut [O; 8]>::try_from(dst) {
        for (o, &b) in dst.iter_mut().zip(&g) {
            *o = O::from_f32(dl * (b as i8 as f32 + delta));
        }
    }
}

/// The three level values with a positive (`.0`) and a negative (`.1`) shift.
const fn shifted(delta: f32) -> ([f32; 3], [f32; 3]) {
    ([-1.0 + delta, delta, 1.0 + delta], [-1.0 - delta, -delta, 1.0 - delta])
}

/// Indices of `x` in ascending order of value, stable (ggml's `qsort` of (value, index)
/// pairs; glibc's merge sort keeps equal values in index order).
fn sorted_order<const N: usize>(x: &[f32]) -> [u8; N] {
    let mut idx: [u8; N] = std::array::from_fn(|i| i as u8);
    for i in 1..N {
        let cur = idx[i];
        let mut j = i;
        while j > 0 && x[cur as usize] < x[idx[j - 1] as usize] {
            idx[j] = idx[j - 1];
            j -= 1;
        }
        idx[j] = cur;
    }
    idx
}

/// Levels from the best split: sorted positions `< i1` get 0, `< i2` get 1, the rest 2.
fn split_levels(order: &[u8], i1: usize, i2: usize, l: &mut [i8]) {
    for (j, &i) in order.iter().enumerate() {
        l[i as usize] = if j < i1 {
            0
        } else if j < i2 {
            1
        } else {
            2
        };
    }
}

/// The best of ggml's exhaustive split search: splits `(i1, i2)`, `i1 ≤ i2 ≤ BS`, in ggml's
/// order (`i1`, then `i2`, then candidate `k`), each candidate scored by its sums `(sumqx,
/// sumq2)`; a candidate wins when `sumq2 > 0` and `sumqx² > best · sumq2`, and then `scale =
/// sumqx / sumq2`, `best = scale · sumqx`. Returns the last winner `(i1, i2, k)` and its
/// scale (`max` when none won).
///
/// `fill(i1, qx, q2)` writes candidate `k`'s sums of every split `(i1, i2)` to `qx[k][i2]`,
/// `q2[k][i2]` for `i2` in `i1..=BS` (a loop over `i2` that LLVM vectorizes: the same
/// operations per lane as one at a time, so the same bits). The scan then tests 8 splits at
/// once against the best so far, and replays them one by one, with the sequential rule, only
/// where one of them wins: before the first winner of a chunk nothing changes, so the result
/// is the sequential search's. `N ≥ BS + 8`: the lanes past `BS` keep `q2 = 0` and never win.
///
/// iq1_s's search (1122 candidates per 32 values) quantizes 0.0061 → 0.0082 Gel/s this way
/// (EPYC, one thread, best of 6, 3 alternated runs). iq1_m keeps its own loop: over its
/// 16-value sub-blocks with four candidates per split, most chunks hold a winner and the
/// replay made it slower.
#[inline(always)]
fn best_split<const BS: usize, const N: usize, const K: usize>(
    max: f32,
    mut fill: impl FnMut(usize, &mut [[f32; N]; K], &mut [[f32; N]; K]),
) -> Option<(usize, usize, usize, f32)> {
    const { assert!(N >= BS + 8) };
    let (mut best_score, mut scale) = (-f32::MAX, max);
    let mut best = None;
    let (mut qx, mut q2) = ([[0.0f32; N]; K], [[0.0f32; N]; K]);
    for i1 in 0..=BS {
        fill(i1, &mut qx, &mut q2);
        for i2 in (i1..=BS).step_by(8) {
            let wins = |x: f32, w: f32, best: f32| w > 0.0 && x * x > best * w;
            // Over fixed arrays and without an early exit, so that it vectorizes.
            let mut hit = false;
            for (x, w) in qx.iter().zip(&q2) {
                if let (Some(x), Some(w)) = (x[i2..].first_chunk::<8>(), w[i2..].first_chunk::<8>()) {
                    hit |= x.iter().zip(w).fold(false, |h, (&x, &w)| h | wins(x, w, best_score));
                }
            }
            if !hit {
                continue;
            }
            for j in i2..(i2 + 8).min(BS + 1) {
                for k in 0..K {
                    if wins(qx[k][j], q2[k][j], best_score) {
                        scale = qx[k][j] / q2[k][j];
                        best_score = scale * qx[k][j];
                        best = Some((i1, j, k));
                    }
                }
            }
        }
    }
    best.map(|(i1, i2, k)| (i1, i2, k, scale))
}

/// ggml's `iq1_find_best_neighbour2`: the neighbour of off-grid `key` minimizing
/// `sum w (scale * xg[l] - x)^2`. Writes its levels to `l`, returns its index.
fn best_neighbour2(
    lat: &Lattice<8>,
    key: usize,
    x: &[f32],
    w: &[f32],
    scale: f32,
    xg: &[f32; 3],
    l: &mut [i8],
) -> usize {
    let list = lat.neighbours(key);
    // Each position's term for each of its three levels, `w·(scale·xg − x)²` as ggml computes
    // it per neighbour (the same operations, so the same bits): a neighbour's distance is then
    // eight lookups summed in ggml's order.
    let mut terms = [[0.0f32; 3]; 8];
    for (i, t) in terms.iter_mut().enumerate() {
        for (t, &v) in t.iter_mut().zip(xg) {
            let diff = scale * v - x[i];
            *t = w[i] * diff * diff;
        }
    }
    let mut best = (f32::MAX, list.first().map_or(0, |&j| j as usize));
    for &j in list {
        let g = &lat.grid[j as usize];
        let mut d2 = 0.0f32;
        for (t, &g) in terms.iter().zip(g) {
            d2 += t[((g - 1) / 2) as usize];
        }
        if d2 < best.0 {
            best = (d2, j as usize);
        }
    }
    lat.levels_into(best.1, l);
    best.1
}

/// Grid indices of the groups of `l` (off-grid groups move to their best neighbour with
/// group `k` valued by `xg(k)`), and the least-squares scale re-fitted if any group moved.
fn grid_indices<const K: usize>(
    xb: &[f32],
    w: &[f32],
    l: &mut [i8],
    mut scale: f32,
    xg: impl Fn(usize) -> &'static [f32; 3],
) -> ([usize; K], f32) {
    let lat = lattice();
    let mut index = [0usize; K];
    let mut all_on_grid = true;
    for (k, ix) in index.iter_mut().enumerate() {
        let r = 8 * k..8 * k + 8;
        let key = lat.key(&l[r.clone()]);
        *ix = match lat.index(key) {
            Some(j) => j,
            None => {
                all_on_grid = false;
                best_neighbour2(lat, key, &xb[r.clone()], &w[r.clone()], scale, xg(k), &mut l[r])
            }
        };
    }
    if !all_on_grid {
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for (k, &ix) in index.iter().enumerate() {
            let g = &lat.grid[ix];
            for j in 0..8 {
                let (wj, q) = (w[8 * k + j], xg(k)[((g[j] - 1) / 2) as usize]);
                sumqx += wj * q * xb[8 * k + j];
                sumq2 += wj * q * q;
            }
        }
        if sumqx > 0.0 && sumq2 > 0.0 {
            scale = sumqx / sumq2;
        }
    }
    (index, scale)
}

static IQ1S_SHIFTS: ([f32; 3], [f32; 3]) = shifted(IQ1S_DELTA);
static IQ1M_SHIFTS: ([f32; 3], [f32; 3]) = shifted(IQ1M_DELTA);

qforge_core::c_block! {
    /// ggml's `block_iq1_s` (50 bytes, 1.5625 bpw).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockIq1S {
        /// The block's f16 super-scale.
        pub d: F16Le,
        /// Low 8 bits of the 32 grid indices (one per 8 values).
        pub qs: [u8; 32],
        /// Per 32 values a LE `u16`: 3 high bits of each of its 4 grid indices (bits 0..12), the
        /// 3-bit scale (bits 12..15) and the sign of the shift (bit 15).
        pub qh: [u8; 16],
    }
}

/// The iq1_s format (GGML type 19).
pub struct Iq1S;

impl BlockFormat for Iq1S {
    type Block = BlockIq1S;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "iq1_s",
        family: "iq",
        ggml_type: Some(19),
        block_size: QK_K,
        block_bytes: 50,
        role: Role::Weight,
        dot_type: Some("q8_k"),
        summary: "1.56 bpw ternary grid quant: 2048-entry {-1,0,1} grid shifted by 1/8, 3-bit scales per 32",
        cuda: crate::device_code("qf_iq1_s"),
    };

    /// Straight to f16 / bf16 with AVX2 (`unpack::decode_row`: a table of rounded magnitudes).
    const DIRECT_16BIT: bool = true;

    fn decode_row<O: Elem>(blocks: &[BlockIq1S], out: &mut [O]) {
        crate::unpack::decode_row::<Self, O>(blocks, out)
    }

    #[inline(always)]
    fn decode<O: Elem>(b: &BlockIq1S, out: &mut [O]) {
        let d = b.d.get();
        for ((sub, qh), qs) in out.chunks_exact_mut(32).zip(b.qh.chunks_exact(2)).zip(b.qs.chunks_exact(4)) {
            let qh = u16::from_le_bytes([qh[0], qh[1]]) as usize;
            let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
            let delta = if qh & 0x8000 != 0 { -IQ1S_DELTA } else { IQ1S_DELTA };
            for (l, (dst, &q)) in sub.chunks_exact_mut(8).zip(qs).enumerate() {
                emit8(dst, dl, q as usize | ((qh >> (3 * l)) & 7) << 8, delta);
            }
        }
    }

    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockIq1S) {
        const BS: usize = 32;
        let (xp, xm) = (&IQ1S_SHIFTS.0, &IQ1S_SHIFTS.1);
        let (xs, n) = padded::<QK_K>(x);
        let s2 = sigma2(&xs, n, 2.0);
        let mut w = [0.0f32; QK_K];
        search_weights(&xs, n, weights, s2, NoImatrix::Uniform, &mut w);
        *out = Zeroable::zeroed();
        let mut scales = [0.0f32; QK_K / BS];
        let mut shifts = [1i8; QK_K / BS];
        let mut max_scale = 0.0f32;
        for ib in 0..QK_K / BS {
            let (xb, wb) = (&xs[BS * ib..BS * (ib + 1)], &w[BS * ib..BS * (ib + 1)]);
            let max = xb[1..].iter().fold(xb[0].abs(), |m, &v| c_max(m, v.abs()));
            if max < 1e-12 {
                continue;
            }
            let order = sorted_order::<BS>(xb);
            let (mut sumx, mut sumw) = ([0.0f32; BS + 1], [0.0f32; BS + 1]);
            for (j, &i) in order.iter().enumerate() {
                sumx[j + 1] = sumx[j] + wb[i as usize] * xb[i as usize];
                sumw[j + 1] = sumw[j] + wb[i as usize];
            }
            let vs = [xp, xm];
            let found = best_split::<BS, { BS + 8 }, 2>(max, |i1, qx, q2| {
                let (x1, w1, xn, wn) = (sumx[i1], sumw[i1], sumx[BS], sumw[BS]);
                let (a, aw) = (x1 - sumx[0], w1 - sumw[0]);
                for ((qx, q2), v) in qx.iter_mut().zip(q2.iter_mut()).zip(vs) {
                    let lanes = qx[i1..BS + 1].iter_mut().zip(&mut q2[i1..BS + 1]);
                    for ((qx, q2), (&x2, &w2)) in lanes.zip(sumx[i1..].iter().zip(&sumw[i1..])) {
                        let (b, c, bw, cw) = (x2 - x1, xn - x2, w2 - w1, wn - w2);
                        *qx = a * v[0] + b * v[1] + c * v[2];
                        *q2 = aw * v[0] * v[0] + bw * v[1] * v[1] + cw * v[2] * v[2];
                    }
                }
            });
            let Some((i1, i2, k, mut scale)) = found else { continue };
            let mut shift = if k == 0 { 1i8 } else { -1 };
            let mut l = [0i8; BS];
            split_levels(&order, i1, i2, &mut l);
            if scale < 0.0 {
                l.iter_mut().for_each(|v| *v = 2 - *v);
                scale = -scale;
                shift = -shift;
            }
            let xx = if shift == 1 { xp } else { xm };
            let (index, scale) = grid_indices::<4>(xb, wb, &mut l, scale, |_| xx);
            let mut h = 0u16;
            for (k, &ix) in index.iter().enumerate() {
                out.qs[4 * ib + k] = ix as u8;
                h |= ((ix >> 8) as u16) << (3 * k);
            }
            out.qh[2 * ib..2 * ib + 2].copy_from_slice(&h.to_le_bytes());
            scales[ib] = scale;
            shifts[ib] = shift;
            max_scale = c_max(max_scale, scale);
        }
        if max_scale == 0.0 {
            return;
        }
        let d = max_scale / 15.0;
        out.d = F16Le::from_f32(d * 1.125f32);
        let id = 1.0 / d;
        for ib in 0..QK_K / BS {
            let mut l = nearest_int(0.5f32 * (id * scales[ib] - 1.0)).clamp(0, 7) as u16;
            if shifts[ib] == -1 {
                l |= 8;
            }
            out.qh[2 * ib + 1] |= (l << 4) as u8;
        }
    }
}

qforge_core::c_block! {
    /// ggml's `block_iq1_m` (56 bytes, 1.75 bpw).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockIq1M {
        /// Low 8 bits of the 32 grid indices (one per 8 values).
        pub qs: [u8; 32],
        /// Per 8 values a nibble: 3 high index bits and the sign of the shift (bit 3).
        pub qh: [u8; 16],
        /// Four LE `u16`: 3-bit scales per 16 values (bits 0..12) and, in the top nibbles,
        /// the f16 super-block scale.
        pub scales: [u8; 8],
    }
}

/// The iq1_m format (GGML type 29).
pub struct Iq1M;

impl BlockFormat for Iq1M {
    type Block = BlockIq1M;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "iq1_m",
        family: "iq",
        ggml_type: Some(29),
        block_size: QK_K,
        block_bytes: 56,
        role: Role::Weight,
        dot_type: Some("q8_k"),
        summary: "1.75 bpw ternary grid quant: 2048-entry {-1,0,1} grid, shift per 8, 3-bit scales per 16",
        cuda: crate::device_code("qf_iq1_m"),
    };

    /// Straight to f16 / bf16 with AVX2 (`unpack::decode_row`: a table of rounded magnitudes).
    const DIRECT_16BIT: bool = true;

    fn decode_row<O: Elem>(blocks: &[BlockIq1M], out: &mut [O]) {
        crate::unpack::decode_row::<Self, O>(blocks, out)
    }

    #[inline(always)]
    fn decode<O: Elem>(b: &BlockIq1M, out: &mut [O]) {
        let (sc, d) = iq1m_scales(b);
        for (g, dst) in out.chunks_exact_mut(8).enumerate().take(QK_K / 8) {
            let (idx, negative) = iq1m_group(b, g);
            let delta = if negative { -IQ1S_DELTA } else { IQ1S_DELTA };
            emit8(dst, d * iq1m_odd_scale(&sc, g / 2) as f32, idx, delta);
        }
    }

    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockIq1M) {
        const BS: usize = 16;
        const MASKS: [u8; 4] = [0x00, 0x80, 0x08, 0x88];
        let (xp, xm) = (&IQ1M_SHIFTS.0, &IQ1M_SHIFTS.1);
        // Shift pattern k: bit 1 = first group negative, bit 0 = second group negative.
        let group_values = |k: usize, g: usize| {
            let positive = if g == 0 { k < 2 } else { k.is_multiple_of(2) };
            if positive { xp } else { xm }
        };
        let (xs, n) = padded::<QK_K>(x);
        let s2 = sigma2(&xs, n, 2.0);
        let mut w = [0.0f32; QK_K];
        search_weights(&xs, n, weights, s2, NoImatrix::XSquared, &mut w);
        *out = Zeroable::zeroed();
        let mut scales = [0.0f32; QK_K / BS];
        let mut shifts = [0usize; QK_K / BS];
        let mut max_scale = 0.0f32;
        for ib in 0..QK_K / BS {
            let (xb, wb) = (&xs[BS * ib..BS * (ib + 1)], &w[BS * ib..BS * (ib + 1)]);
            let max = xb[1..].iter().fold(xb[0].abs(), |m, &v| c_max(m, v.abs()));
            if max < 1e-7 {
                continue;
            }
            let order = sorted_order::<BS>(xb);
            // Prefix sums per half (each half has its own shift) in sorted order; as
            // v[0] - v[1] = v[1] - v[2] = -1 for both shifts, a split's sums collapse to
            // `T v[2] - px[i1] - px[i2]` and `W v[2]^2 + pw[i1] c1 + pw[i2] c2` (ggml's order).
            let (mut px, mut pw) = ([[0.0f32; BS + 1]; 2], [[0.0f32; BS + 1]; 2]);
            for (j, &i) in order.iter().enumerate() {
                let i = i as usize;
                let h = i / (BS / 2);
                px[h][j + 1] = px[h][j] + wb[i] * xb[i];
                px[1 - h][j + 1] = px[1 - h][j];
                pw[h][j + 1] = pw[h][j] + wb[i];
                pw[1 - h][j + 1] = pw[1 - h][j];
            }
            let coef = |v: &[f32; 3]| (v[2], v[0] * v[0] - v[1] * v[1], v[1] * v[1] - v[2] * v[2]);
            let (cp, cm) = (coef(xp), coef(xm));
            let (mut best_score, mut scale) = (-f32::MAX, max);
            let mut best: Option<(usize, usize, usize)> = None;
            for i1 in 0..=BS {
                for i2 in i1..=BS {
                    // Per half h: [positive, negative] shift sums.
                    let half = |h: usize| {
                        let sx = px[h][i1] + px[h][i2];
                        let (tx, tw) = (px[h][BS], pw[h][BS]);
                        let q =
                            |c: (f32, f32, f32)| (tx * c.0 - sx, tw * c.0 * c.0 + pw[h][i1] * c.1 + pw[h][i2] * c.2);
                        [q(cp), q(cm)]
                    };
                    let (a, b) = (half(0), half(1));
                    for k in 0..4 {
                        let (s0, s1) = (a[k / 2], b[k % 2]);
                        let (sumqx, sumq2) = (s0.0 + s1.0, s0.1 + s1.1);
                        if sumq2 > 0.0 && sumqx * sumqx > best_score * sumq2 {
                            scale = sumqx / sumq2;
                            best_score = scale * sumqx;
                            best = Some((i1, i2, k));
                        }
                    }
                }
            }
            let Some((i1, i2, mut k)) = best else { continue };
            let mut l = [0i8; BS];
            split_levels(&order, i1, i2, &mut l);
            if scale < 0.0 {
                l.iter_mut().for_each(|v| *v = 2 - *v);
                scale = -scale;
                k = 3 - k;
            }
            let (index, scale) = grid_indices::<2>(xb, wb, &mut l, scale, |g| group_values(k, g));
            out.qs[2 * ib] = index[0] as u8;
            out.qs[2 * ib + 1] = index[1] as u8;
            out.qh[ib] = ((index[0] >> 8) | ((index[1] >> 8) << 4)) as u8;
            scales[ib] = scale;
            shifts[ib] = k;
            max_scale = c_max(max_scale, scale);
        }
        if max_scale == 0.0 {
            return;
        }
        let mut sc = [0u16; 4];
        let mut d = max_scale / 15.0;
        let id = 1.0 / d;
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        let lat = lattice();
        for ib in 0..QK_K / BS {
            let l = nearest_int(0.5f32 * (id * scales[ib] - 1.0)).clamp(0, 7);
            sc[ib / 4] |= (l as u16) << (3 * (ib % 4));
            out.qh[ib] |= MASKS[shifts[ib]];
            let (xb, wb) = (&xs[BS * ib..BS * (ib + 1)], &w[BS * ib..BS * (ib + 1)]);
            for g in 0..2 {
                let xx = group_values(shifts[ib], g);
                let idx = out.qs[2 * ib + g] as usize + (((out.qh[ib] as usize) << (8 - 4 * g)) & 0x700);
                let pg = &lat.grid[idx];
                for j in 0..8 {
                    let wj = wb[8 * g + j];
                    let q = xx[((pg[j] - 1) / 2) as usize] * (2 * l + 1) as f32;
                    sumqx += wj * q * xb[8 * g + j];
                    sumq2 += wj * q * q;
                }
            }
        }
        if sumq2 > 0.0 {
            d = sumqx / sumq2;
        }
        let s = F16Le::from_f32(d * 1.1125f32).bits();
        sc[0] |= (s & 0x000f) << 12;
        sc[1] |= (s & 0x00f0) << 8;
        sc[2] |= (s & 0x0f00) << 4;
        sc[3] |= s & 0xf000;
        for (dst, v) in out.scales.chunks_exact_mut(2).zip(sc) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// iq1_m's four LE `u16` scale words and the f16 super-block scale spread over their top
/// nibbles.
#[inline(always)]
fn iq1m_scales(b: &BlockIq1M) -> ([u16; 4], f32) {
    let sc = iq1m_words(b);
    (sc, F16Le(iq1m_d_bits(&sc).to_le_bytes()).get())
}

/// iq1_m's four LE `u16` scale words.
#[inline(always)]
fn iq1m_words(b: &BlockIq1M) -> [u16; 4] {
    let (w, _) = b.scales.as_chunks::<2>();
    std::array::from_fn(|i| u16::from_le_bytes(w[i]))
}

/// The bits of iq1_m's f16 super-block scale, from the top nibbles of its scale words.
#[inline(always)]
fn iq1m_d_bits(sc: &[u16; 4]) -> u16 {
    (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)
}

/// The odd scale `2s + 1` of iq1_m's 16-value sub-block `k`.
#[inline(always)]
fn iq1m_odd_scale(sc: &[u16; 4], k: usize) -> i32 {
    2 * i32::from((sc[k / 4] >> (3 * (k % 4))) & 7) + 1
}

/// Grid index of iq1_m's 8-value group `g`, and whether its shift is negative.
#[inline(always)]
fn iq1m_group(b: &BlockIq1M, g: usize) -> (usize, bool) {
    let h = b.qh[g / 2] as usize;
    let shift = 4 * (g % 2);
    (b.qs[g] as usize | ((h << (8 - shift)) & 0x700), h & (0x08 << shift) != 0)
}

// ---- Native dots with q8_k (ggml's `ggml_vec_dot_iq1_*_q8_K`) -----------------------------
//
// Both are [`SubBlocks`]: their values are `8·g ± 1` ([`SubBlock::Shifted`]: ggml's `g + δ`,
// `δ = ±IQ1S_DELTA`, times 8, and `D_MUL` = 1/8 takes the 8 back, exactly), so ggml's
// `d·(Σ ls·Σ g·q8 + δ·Σ ls·bsums)` is `(d/8)·Σ ls·Σ (8g ± 1)·q8`, in exact integer lanes
// added up in f32 as every sub-block format's are (`dot::sub_block_vec_dot_portable`).

/// `8 · IQ1S_DELTA = 8 · IQ1M_DELTA = 1`: the shift is ±1 in the values times 8.
const _: () = assert!(IQ1S_DELTA * 8.0 == 1.0 && IQ1M_DELTA * 8.0 == 1.0);

/// iq1_s: `ls = 2s + 1` per 32 values, one shift sign per 32 values.
impl SubBlocks for Iq1S {
    const VEX_ON_INTEL: bool = true;
    const D_MUL: f32 = IQ1S_DELTA;
    /// The block's 32 grid indices.
    type Pre = [u16; QK_K / 8];
    const OFFSET_ACTS: bool = true;

    #[inline(always)]
    fn d_bits(b: &BlockIq1S) -> u16 {
        b.d.bits()
    }

    /// Index `4ib + l`: byte `qs[4ib + l]` and bits `3l .. 3l + 3` of `qh[ib]` above it,
    /// four indices per 64-bit word ([`spread_bytes`], [`spread_triples`]).
    #[inline(always)]
    fn prepare(b: &BlockIq1S) -> [u16; QK_K / 8] {
        let (qs, _) = b.qs.as_chunks::<4>();
        let words: [u64; QK_K / 32] =
            std::array::from_fn(|ib| spread_bytes(qs[ib]) | spread_triples(u64::from(iq1s_qh(b, ib))) << 8);
        bytemuck::cast(words)
    }

    #[inline(always)]
    fn sub_block<'a>(b: &'a BlockIq1S, idx: &Self::Pre, ib: usize) -> SubBlock<'a> {
        let ib = ib & 7; // (in range anyway: lets LLVM drop the bounds checks)
        let qh = iq1s_qh(b, ib);
        SubBlock::Shifted(
            GridWords::W64(std::array::from_fn(|l| grid_word(idx[4 * ib + l]))),
            GridSigns::Words(if qh & 0x8000 != 0 { 0x0F } else { 0 }),
        )
    }

    #[inline(always)]
    fn scales(b: &BlockIq1S) -> [i16; QK_K / 16] {
        per32(|ib| 2 * ((iq1s_qh(b, ib) >> 12) & 7) as i16 + 1)
    }
}

/// Bits `3l .. 3l + 3` of `h` in 16-bit lane `l` (`l` in `0..4`): a copy of the low 12 bits
/// at bit `13l`, so triple `l` of copy `l` lands at `16l`; the copies do not overlap and the
/// mask keeps only those triples. Shifts and ORs, not one multiplication by `1 | 1 << 13 |
/// …` (the same bits, no carries): without AVX-512 DQ a 64-bit vector multiplication is
/// several `vpmuludq`, shifts and adds.
#[inline(always)]
fn spread_triples(h: u64) -> u64 {
    let x = h & 0xFFF;
    (x | x << 13 | x << 26 | x << 39) & 0x0007_0007_0007_0007
}

/// The low 3 bits of nibble `l` of the 16-bit `h` in 16-bit lane `l`: the even nibbles'
/// triples (bits 0, 8) and the odd ones' (bits 4, 12) each copied twice by shifts whose
/// copies do not overlap, as [`spread_triples`].
#[inline(always)]
fn spread_nibble_triples(h: u64) -> u64 {
    let (e, o) = (h & 0x0707, h & 0x7070);
    let even = (e | e << 24) & 0x0000_0007_0000_0007;
    let odd = (o << 12 | o << 36) & 0x0007_0000_0007_0000;
    even | odd
}

/// The iq1 grid entry of index `i` (11 bits). The index passes through a general register
/// ([`no_gather_word`]): computed in vector registers, LLVM would otherwise load the entries
/// of a sub-block with a (microcoded, slow) gather.
#[inline(always)]
fn grid_word(i: u16) -> &'static u64 {
    let grid: &'static [u64; 2048] = &IQ1S_GRID;
    &grid[no_gather_word(u64::from(i)) as usize & 2047]
}

/// iq1_s's `qh` word of sub-block `ib`.
#[inline(always)]
fn iq1s_qh(b: &BlockIq1S, ib: usize) -> u16 {
    let (qh, _) = b.qh.as_chunks::<2>();
    u16::from_le_bytes(qh[ib & 7])
}

/// iq1_m: `ls = 2s + 1` per 16 values, one shift sign per 8 values.
impl SubBlocks for Iq1M {
    const VEX_ON_INTEL: bool = true;
    const D_MUL: f32 = IQ1M_DELTA;
    /// The block's 32 grid indices.
    type Pre = [u16; QK_K / 8];
    const OFFSET_ACTS: bool = true;

    #[inline(always)]
    fn d_bits(b: &BlockIq1M) -> u16 {
        iq1m_d_bits(&iq1m_words(b))
    }

    /// Index `4ib + l`: byte `qs[4ib + l]` and the low 3 bits of nibble `l` of `qh` word
    /// `ib` above it, four indices per 64-bit word ([`spread_bytes`], [`spread_nibble_triples`]).
    #[inline(always)]
    fn prepare(b: &BlockIq1M) -> [u16; QK_K / 8] {
        let (qs, _) = b.qs.as_chunks::<4>();
        let (qh, _) = b.qh.as_chunks::<2>();
        let words: [u64; QK_K / 32] = std::array::from_fn(|ib| {
            let h = u64::from(u16::from_le_bytes(qh[ib]));
            spread_bytes(qs[ib]) | spread_nibble_triples(h) << 8
        });
        bytemuck::cast(words)
    }

    #[inline(always)]
    fn sub_block<'a>(b: &'a BlockIq1M, idx: &Self::Pre, ib: usize) -> SubBlock<'a> {
        let ib = ib & 7; // (in range anyway: lets LLVM drop the bounds checks)
        // The nibbles of groups 4ib .. 4ib + 4: 3 high index bits, the shift's sign (bit 3).
        let (qh, _) = b.qh.as_chunks::<2>();
        let h = u16::from_le_bytes(qh[ib]);
        // The shifts' signs: bits 3, 7, 11, 15 of `h` moved to bits 12..16 by one
        // multiplication (no carries: every partial product lands on its own bit).
        let negative = (((u32::from(h) & 0x8888) * 0x249) >> 12) & 15;
        SubBlock::Shifted(
            GridWords::W64(std::array::from_fn(|l| grid_word(idx[4 * ib + l]))),
            GridSigns::Words(negative as u8),
        )
    }

    #[inline(always)]
    fn scales(b: &BlockIq1M) -> [i16; QK_K / 16] {
        let sc = iq1m_words(b);
        std::array::from_fn(|k| iq1m_odd_scale(&sc, k) as i16)
    }
}

#[cfg(test)]
mod shifted_tests {
    use super::*;
    use crate::unpack::{KDot, shifted_word};
    use qforge_core::rand::Rng;

    /// The dot's integers are the format: `d · scale · v` is the decoded value, exactly
    /// (`d·ls` and `g ± 1/8` are short enough that both sides are exact products).
    fn ints_decode<F: SubBlocks>(seed: u64) {
        let mut rng = Rng::new(seed);
        for _ in 0..2000 {
            let b: F::Block = bytemuck::pod_read_unaligned(&rng.bytes(size_of::<F::Block>()));
            let d = <F as KDot>::d(&b);
            if !d.is_finite() {
                continue;
            }
            let mut v = [[0i8; 8]; QK_K / 8];
            let scales = <F as KDot>::ints(&b, &mut v);
            let v: [i8; QK_K] = bytemuck::cast(v);
            let mut x = [0f32; QK_K];
            F::decode(&b, &mut x);
            for k in 0..QK_K {
                assert_eq!(x[k], d * f32::from(scales[k / 16]) * f32::from(v[k]), "{} value {k}", F::DESC.name);
            }
        }
    }

    #[test]
    fn spreads_put_each_field_in_its_lane() {
        let mut rng = Rng::new(9);
        for _ in 0..1000 {
            let b: [u8; 4] = rng.bytes(4).try_into().unwrap();
            let h = u64::from(u16::from_le_bytes(rng.bytes(2).try_into().unwrap()));
            let lanes = |w: u64| -> [u64; 4] { std::array::from_fn(|l| (w >> (16 * l)) & 0xFFFF) };
            assert_eq!(lanes(spread_bytes(b)), b.map(u64::from));
            assert_eq!(lanes(spread_triples(h)), std::array::from_fn(|l| (h >> (3 * l)) & 7));
            assert_eq!(lanes(spread_nibble_triples(h)), std::array::from_fn(|l| (h >> (4 * l)) & 7));
        }
    }

    #[test]
    fn ints_are_the_decoded_values() {
        ints_decode::<Iq1S>(1);
        ints_decode::<Iq1M>(2);
    }

    #[test]
    fn shifted_word_is_8g_plus_minus_1() {
        for word in IQ1S_GRID {
            let g = word.to_le_bytes().map(|v| v as i8);
            for m in [0, 0xFF, 0xFF00_FF00_0000_00FF] {
                let want: [i8; 8] = std::array::from_fn(|j| 8 * g[j] + if m >> (8 * j) & 0xFF != 0 { -1 } else { 1 });
                let got: [i8; 8] = shifted_word(word, m).to_le_bytes().map(|v| v as i8);
                assert_eq!(got, want, "{word:#x} {m:#x}");
            }
        }
    }
}
