//! The shared q8_0 / q8_1 kernel on every real block type that uses it (q4_0 … q8_1, iq4_nl,
//! mxfp4, nvfp4, q1_0, q2_0): the dispatched kernel (AVX2 here), and the multi-row kernel for
//! 1..=11 rows (one weight row against several activation rows, and several weight rows
//! against one), give the portable reference's bits for random blocks (raw scales: NaN / Inf
//! too; every code) against activations with -128 / 127 edges, rows of every batch tail
//! length; short activation rows and padding blocks change nothing. (What the dot means —
//! agreement with the dequantized f64 dot and with ggml — is checked in each family's tests.)
//!
//! Each check runs at every SIMD level the machine has (AVX2, and AVX-512 VNNI where present),
//! forced in turn.
//!
//! The packed layout ([`qforge_simd::q8::packed`]) of every format that has one (q8_0 / q8_1
//! included, whose weights may be -128): packing keeps every value and scale; the dispatched
//! kernel equals the portable one bit for bit at every level (the portable level included), on
//! random blocks against activations with -128 / 127 edges and, a third of the time, without
//! -128 (as the quantizers make them: the 8-bit codes' AVX2 path); and with finite scales every
//! row is the exact dot to f32 rounding. These tests need AVX2, FMA and F16C. On an x86-64 CPU without them they fail (an untested
//! kernel is not a pass) unless `QFORGE_ALLOW_NO_AVX2=1` says to skip them.
#![cfg(target_arch = "x86_64")]

use qforge_core::le::F16Le;
use qforge_core::rand::Rng;
use qforge_legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use qforge_simd::planes::ROWS;
use qforge_simd::q8::packed::{Layout, dot_group_portable, dot_groups, dot_groups_rows, pack, packable, unsigned_form};
use qforge_simd::q8::{
    Q8Act, Q8Weight, half_scales, unit_values, vec_dot, vec_dot_portable, vec_dot_rows, vec_dot_tile,
    vec_dot_weight_rows,
};

fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

/// A random block; unless `raw`, its leading `halves` f16 fields are finite values in a wide
/// range; `extreme`: every other byte is 0x80 / 0x7f / 0xff / 0x00 (i8 -128, 127, -1, 0).
fn block<B: bytemuck::Pod>(rng: &mut Rng, halves: usize, raw: bool, extreme: bool) -> B {
    let mut b = rng.bytes(size_of::<B>());
    if extreme {
        for x in &mut b[2 * halves..] {
            *x = [0x80, 0x7f, 0xff, 0x00][(rng.next_u64() & 3) as usize];
        }
    }
    if !raw {
        for h in b.chunks_exact_mut(2).take(halves) {
            let v = ((rng.next_u64() % 2001) as f32 - 1000.0) * 2f32.powi((rng.next_u64() % 24) as i32 - 20);
            h.copy_from_slice(&F16Le::from_f32(v).0);
        }
    }
    bytemuck::pod_read_unaligned(&b)
}

/// Activation blocks as qforge's quantizers make them: every -128 quant (after the `ah`
/// leading f16 fields) made -127.
fn no_min<'a, A: Q8Act + 'a>(blocks: impl IntoIterator<Item = &'a mut A>, ah: usize) {
    for b in blocks {
        for q in &mut bytemuck::bytes_of_mut(b)[2 * ah..] {
            if *q == 0x80 {
                *q = 0x81;
            }
        }
    }
}

/// `wh` / `ah`: the leading f16 fields of a weight / activation block. Every SIMD level the
/// machine has (AVX2; AVX-512 VNNI) is forced in turn.
fn check<W: Q8Weight, A: Q8Act>(wh: usize, ah: usize, seed: u64) {
    let levels = qforge_golden::needs::simd_levels();
    for level in levels {
        qforge_core::cpu::with_level(level, || check_at::<W, A>(wh, ah, seed));
    }
    if packable::<W>() {
        check_packed::<W, A>(wh, ah, seed);
    }
}

fn check_at<W: Q8Weight, A: Q8Act>(wh: usize, ah: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..800 {
        let nb = case % 41;
        let (raw, extreme) = (case % 7 == 3, case % 5 == 1);
        let w: Vec<W> = (0..nb).map(|_| block(&mut rng, wh, raw, extreme)).collect();
        // 1 ..= 19 rows: the AVX2 tile runs from 12.
        let nrows = 1 + case % 11 + 8 * (case % 2);
        let mut a: Vec<Vec<A>> = (0..nrows)
            .map(|r| (0..nb * W::UNITS).map(|_| block(&mut rng, ah, raw, extreme || (case + r) % 3 == 0)).collect())
            .collect();
        if case % 3 == 1 {
            // As the quantizers make them: no -128 activation (the 8-bit kernel's fast path).
            no_min(a.iter_mut().flatten(), ah);
        }
        let want: Vec<f32> = a.iter().map(|a| vec_dot_portable(&w, a)).collect();
        for (r, a) in a.iter().enumerate() {
            let got = vec_dot(&w, a);
            assert!(same(got, want[r]), "case {case} ({nb} blocks) row {r}: {got:e} vs portable {:e}", want[r]);
        }
        let refs: Vec<&[A]> = a.iter().map(Vec::as_slice).collect();
        let mut out = vec![f32::NAN; nrows];
        vec_dot_rows(&w, &refs, &mut out);
        for (r, (o, want)) in out.iter().zip(&want).enumerate() {
            assert!(same(*o, *want), "case {case}: row {r} of {nrows}: {o:e} vs portable {want:e}");
        }
        // Mat-vec: `nrows` weight rows (one after another) against the first activation row.
        let ws: Vec<W> = (0..nrows * nb).map(|_| block(&mut rng, wh, raw, extreme || case % 4 == 2)).collect();
        let mut out = vec![f32::NAN; nrows];
        vec_dot_weight_rows(&ws, &a[0], &mut out);
        for (r, (o, w)) in out.iter().zip(ws.chunks(nb.max(1))).enumerate() {
            let want = vec_dot_portable(if nb == 0 { &[] } else { w }, &a[0]);
            assert!(same(*o, want), "case {case}: weight row {r} of {nrows}: {o:e} vs portable {want:e}");
        }
        // Mat-mul tile: those weight rows against every activation row, into a strided output
        // (the tile kernels: AVX-512 VNNI's from eight rows, AVX2's from twelve where no quant
        // is -128).
        if nb > 0 {
            let stride = nrows + 1;
            let mut out = vec![f32::NAN; nrows * stride];
            assert!(vec_dot_tile(&ws, nb, &refs, &mut out, stride), "case {case}: the tile ran");
            for (i, w) in ws.chunks(nb).enumerate() {
                for (j, a) in a.iter().enumerate() {
                    let (o, want) = (out[i * stride + j], vec_dot_portable(w, a));
                    assert!(
                        same(o, want),
                        "case {case}: tile {nrows} x {nrows}, ({i}, {j}): {o:e} vs portable {want:e}"
                    );
                }
                assert!(out[i * stride + nrows].is_nan(), "case {case}: the gap written");
            }
        }
    }
    // Weight rows against a short activation row: each truncated to it, as `vec_dot` does.
    let ws: Vec<W> = (0..5 * 9).map(|_| block(&mut rng, wh, false, false)).collect();
    let a: Vec<A> = (0..4 * W::UNITS + 1).map(|_| block(&mut rng, ah, false, false)).collect();
    let mut out = vec![f32::NAN; 5];
    vec_dot_weight_rows(&ws, &a, &mut out);
    for (o, w) in out.iter().zip(ws.chunks(9)) {
        assert!(same(*o, vec_dot_portable(w, &a)), "weight rows, short activation row");
    }
    // Rows of different lengths: each result is that row's own dot (the weight row truncated).
    let w: Vec<W> = (0..9).map(|_| block(&mut rng, wh, false, false)).collect();
    let a: Vec<Vec<A>> = (0..6).map(|r| (0..3 * r + 1).map(|_| block(&mut rng, ah, false, false)).collect()).collect();
    let refs: Vec<&[A]> = a.iter().map(Vec::as_slice).collect();
    let mut out = vec![f32::NAN; 6];
    vec_dot_rows(&w, &refs, &mut out);
    for (o, a) in out.iter().zip(&a) {
        assert!(same(*o, vec_dot_portable(&w, a)), "short rows");
    }
    // Padding (zero weight blocks against zero activations) never changes a result.
    for case in 0..200 {
        let nb = case % 23;
        let mut w: Vec<W> = (0..nb).map(|_| block(&mut rng, wh, false, false)).collect();
        let mut a: Vec<A> = (0..nb * W::UNITS).map(|_| block(&mut rng, ah, false, case % 2 == 0)).collect();
        let (fast, slow) = (vec_dot(&w, &a), vec_dot_portable(&w, &a));
        for extra in 1..=9 {
            w.push(W::zeroed());
            a.extend((0..W::UNITS).map(|_| A::zeroed()));
            assert!(same(vec_dot(&w, &a), fast), "case {case} + {extra} padding blocks");
            assert!(same(vec_dot_portable(&w, &a), slow), "case {case} + {extra}: portable");
        }
    }
}

/// The exact dot of one row with `a` in f64 and its terms' magnitude.
fn exact<W: Q8Weight, A: Q8Act>(w: &[W], a: &[A]) -> (f64, f64) {
    let (mut sum, mut mag) = (0f64, 0f64);
    for (b, a) in w.iter().zip(a.chunks_exact(W::UNITS)) {
        for (u, a) in a.iter().enumerate() {
            let v = unit_values(b, u);
            let ad = f64::from(F16Le(a.d_bits().to_le_bytes()).get());
            let mut t = 0f64;
            for (h, s) in half_scales(b, u).into_iter().enumerate() {
                let dot: i64 = (16 * h..16 * h + 16).map(|i| i64::from(v[i]) * i64::from(a.qs()[i])).sum();
                t += f64::from(s) * ad * dot as f64;
            }
            let m = if W::AFFINE {
                f64::from(F16Le(b.m_bits().to_le_bytes()).get()) * f64::from(F16Le(a.s_bits().to_le_bytes()).get())
            } else {
                0.0
            };
            sum += t + m;
            mag += t.abs() + m.abs();
        }
    }
    (sum, mag)
}

/// The packed layout of `W` (see the module docs).
fn check_packed<W: Q8Weight, A: Q8Act>(wh: usize, ah: usize, seed: u64) {
    assert!(packable::<W>(), "a format with a packed layout");
    let l = Layout::of::<W>();
    let (table, z) = unsigned_form::<W>().expect("an unsigned form");
    let run = || {
        let mut rng = Rng::new(seed);
        for case in 0..300 {
            let (nr, n) = (1 + case % 19, case % 6);
            let (raw, extreme) = (case % 7 == 3, case % 5 == 1);
            let w: Vec<W> = (0..nr * n).map(|_| block(&mut rng, wh, raw, extreme)).collect();
            let mut a: Vec<A> = (0..n * W::UNITS).map(|_| block(&mut rng, ah, raw, extreme || case % 3 == 0)).collect();
            if case % 3 == 1 {
                no_min(&mut a, ah);
            }
            let p = pack(&w, nr, n);
            assert_eq!(p.len(), nr.div_ceil(ROWS) * n * l.size);
            // Every value comes back from the planes (through the unsigned form).
            for (row, wr) in w.chunks_exact(n.max(1)).enumerate().take(if n == 0 { 0 } else { nr }) {
                for (b, blk) in wr.iter().enumerate() {
                    let pb = &p[((row / ROWS) * n + b) * l.size..][..l.size];
                    for u in 0..W::UNITS {
                        let unit = &pb[l.codes + u * l.planes.unit..][..l.planes.unit];
                        let want = unit_values(blk, u);
                        for (e, &v) in want.iter().enumerate() {
                            let c = l.planes.get(unit, row % ROWS, e);
                            let t = if matches!(W::VALUES, qforge_simd::q8::Values::Table(_)) {
                                table[usize::from(c)]
                            } else {
                                c
                            };
                            assert_eq!(
                                i16::from(t) - i16::from(z),
                                i16::from(v),
                                "case {case} row {row} unit {u} element {e}"
                            );
                        }
                    }
                    if matches!(W::SCALE, qforge_simd::q8::Scale::F16) {
                        assert_eq!(&pb[l.d + 2 * (row % ROWS)..][..2], &blk.d_bits().to_le_bytes(), "case {case}: d");
                    }
                }
            }
            let groups = nr.div_ceil(ROWS);
            let mut got = vec![f32::NAN; groups * ROWS];
            dot_groups::<W, A>(&p, n, &a, &mut got);
            // 1 to 6 activation rows at once (up to four per pass): each row's part is the
            // bits of its one-row call.
            let mut more: Vec<Vec<A>> =
                (0..case % 6).map(|_| (0..n * W::UNITS).map(|_| block(&mut rng, ah, raw, extreme)).collect()).collect();
            if case % 3 == 1 {
                no_min(more.iter_mut().flatten(), ah);
            }
            let rows: Vec<&[A]> = std::iter::once(a.as_slice()).chain(more.iter().map(Vec::as_slice)).collect();
            let mut all = vec![f32::NAN; rows.len() * got.len()];
            dot_groups_rows::<W, A>(&p, n, &rows, &mut all);
            for (mi, (ar, part)) in rows.iter().zip(all.chunks_exact(got.len().max(1))).enumerate() {
                let mut one = vec![f32::NAN; got.len()];
                dot_groups::<W, A>(&p, n, ar, &mut one);
                let same_bits = part.iter().zip(&one).all(|(x, y)| same(*x, *y));
                assert!(same_bits, "case {case} act {mi}: the multi-row kernel differs from one row");
                for (g, part) in part.chunks_exact(ROWS).enumerate() {
                    let want = dot_group_portable::<W, A>(&p[g * n * l.size..][..n * l.size], ar);
                    assert!(part.iter().zip(&want).all(|(x, y)| same(*x, *y)), "case {case} act {mi}: vs portable");
                }
            }
            for (g, got) in got.chunks_exact(ROWS).enumerate() {
                let want = dot_group_portable::<W, A>(&p[g * n * l.size..][..n * l.size], &a);
                for (r, (x, y)) in got.iter().zip(&want).enumerate() {
                    assert!(same(*x, *y), "case {case} row {}: {x:e} vs portable {y:e}", g * ROWS + r);
                }
            }
            if raw {
                continue;
            }
            for (row, got) in got.iter().take(if n == 0 { 0 } else { nr }).enumerate() {
                let (want, mag) = exact(&w[row * n..][..n], &a);
                if mag.is_nan() || mag > f64::from(f32::MAX) {
                    // Byte scales are not drawn small (every byte is a scale): beyond f32's
                    // range only the bit-for-bit check above applies.
                    continue;
                }
                assert!(
                    (f64::from(*got) - want).abs() <= 6e-6 * mag + 1e-30,
                    "case {case} row {row}: {got:e} vs exact {want:e}"
                );
            }
        }
    };
    for level in qforge_golden::needs::simd_levels() {
        qforge_core::cpu::with_level(level, run);
    }
    qforge_core::cpu::with_level(qforge_core::cpu::Level::Scalar, run);
}

#[test]
fn legacy_formats() {
    check::<BlockQ4_0, BlockQ8_0>(1, 1, 1);
    check::<BlockQ4_1, BlockQ8_1>(2, 2, 2);
    check::<BlockQ5_0, BlockQ8_0>(1, 1, 3);
    check::<BlockQ5_1, BlockQ8_1>(2, 2, 4);
    check::<BlockQ8_0, BlockQ8_0>(1, 1, 5);
    check::<BlockQ8_1, BlockQ8_1>(2, 2, 6);
}

#[test]
fn nibble_table_formats() {
    check::<qforge_iq::BlockIq4Nl, BlockQ8_0>(1, 1, 7);
    check::<qforge_fp4::BlockMxfp4, BlockQ8_0>(0, 1, 8);
    check::<qforge_fp4::BlockNvfp4, BlockQ8_0>(0, 1, 9);
}

#[test]
fn low_bit_formats() {
    check::<qforge_lowbit::BlockQ1_0, BlockQ8_0>(1, 1, 10);
    check::<qforge_lowbit::BlockQ2_0, BlockQ8_0>(1, 1, 11);
}

/// Every format of the shared kernel has a packed layout, of the same bytes per row and
/// block as the plain one; 8-bit codes are stored as whole bytes, `v + 128`.
#[test]
fn packed_layouts() {
    assert!(packable::<BlockQ8_0>() && packable::<BlockQ8_1>());
    assert!(packable::<BlockQ4_0>() && packable::<qforge_iq::BlockIq4Nl>() && packable::<qforge_fp4::BlockNvfp4>());
    assert_eq!(Layout::of::<BlockQ8_0>().size, ROWS * size_of::<BlockQ8_0>());
    assert_eq!(Layout::of::<BlockQ4_0>().size, ROWS * size_of::<BlockQ4_0>());
    assert_eq!(unsigned_form::<BlockQ8_0>().map(|f| f.1), Some(128));
    let w: Vec<BlockQ8_0> = (0..8)
        .map(|r| {
            let mut b: BlockQ8_0 = bytemuck::Zeroable::zeroed();
            bytemuck::bytes_of_mut(&mut b)[2..].iter_mut().enumerate().for_each(|(e, q)| *q = (r * 32 + e) as u8);
            b
        })
        .collect();
    let p = pack(&w, 8, 1);
    let l = Layout::of::<BlockQ8_0>();
    // Quad m of row r: bytes 32m + 4r .. of the unit, each code with its sign bit flipped.
    assert_eq!(p[l.codes + 32 * 3 + 4 * 5], ((5 * 32 + 12) as u8) ^ 0x80);
}
