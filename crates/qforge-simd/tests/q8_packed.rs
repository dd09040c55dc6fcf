//! The q8 packed layout ([`qforge_simd::q8::packed`]) on every real block type that has one
//! (q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4, nvfp4, q1_0, q2_0) and not on the others: packing keeps every value and
//! scale; the dispatched kernel equals the portable one bit for bit at every SIMD level the
//! machine has (forced in turn, the portable level included), on random blocks (raw scales:
//! NaN / Inf too) against activations with -128 / 127 edges; and with finite scales every row
//! is the exact dot to f32 rounding.

use qforge_core::le::F16Le;
use qforge_core::rand::Rng;
use qforge_legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use qforge_lowbit::{BlockQ1_0, BlockQ2_0};
use qforge_simd::planes::ROWS;
use qforge_simd::q8::packed::{Layout, dot_group_portable, dot_groups, pack, packable, unsigned_form};
use qforge_simd::q8::{Q8Act, Q8Weight, half_scales, unit_values};

fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

/// A random block; unless `raw`, its leading `halves` f16 fields are finite values in a wide
/// range; `extreme`: every other byte is 0x80 / 0x7f / 0xff / 0x00.
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

fn check<W: Q8Weight, A: Q8Act>(wh: usize, ah: usize, seed: u64) {
    assert!(packable::<W>(), "a format with a packed layout");
    let l = Layout::of::<W>();
    let (table, z) = unsigned_form::<W>().expect("an unsigned form");
    let run = || {
        let mut rng = Rng::new(seed);
        for case in 0..300 {
            let (nr, n) = (1 + case % 19, case % 6);
            let (raw, extreme) = (case % 7 == 3, case % 5 == 1);
            let w: Vec<W> = (0..nr * n).map(|_| block(&mut rng, wh, raw, extreme)).collect();
            let a: Vec<A> = (0..n * W::UNITS).map(|_| block(&mut rng, ah, raw, extreme || case % 3 == 0)).collect();
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
}

#[test]
fn low_bit_formats() {
    check::<BlockQ1_0, BlockQ8_0>(1, 1, 5);
    check::<BlockQ2_0, BlockQ8_0>(1, 1, 6);
}

#[test]
fn nibble_table_formats() {
    check::<qforge_iq::BlockIq4Nl, BlockQ8_0>(1, 1, 7);
    check::<qforge_fp4::BlockMxfp4, BlockQ8_0>(0, 1, 8);
    check::<qforge_fp4::BlockNvfp4, BlockQ8_0>(0, 1, 9);
}

/// The formats without a packed layout say so (8-bit signed codes).
#[test]
fn the_others_have_none() {
    assert!(!packable::<BlockQ8_0>() && !packable::<BlockQ8_1>());
}
