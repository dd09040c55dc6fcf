//! The AVX2 sub-block kernel against the reference, bit for bit, on this CPU: random blocks of
//! every format (raw bytes: every code, grid index, sign and scale; NaN / Inf f16 scales too)
//! against q8_k rows with edge activations (-128, 127), for rows of 0..=9 blocks and 1..=11
//! activation rows. The reference is written out here from [`KDot::ints`] (its lanes in
//! `i64`, so that an overflow would show), and checked against the crate's portable kernel.
//!
//! These tests need AVX2, FMA and F16C. On an x86-64 CPU without them they fail (an untested
//! kernel is not a pass) unless `QFORGE_ALLOW_NO_AVX2=1` says to skip them.

use super::*;
use crate::dot::sub_block_vec_dot_portable;
use crate::unpack::KDot;
use crate::{Iq1M, Iq1S, Iq2S, Iq2Xs, Iq2Xxs, Iq3S, Iq3Xxs, Iq4Xs};
use qforge_core::NativeDot;
use qforge_core::rand::Rng;

/// The reference: lane `j` of a block = Σ over sub-blocks `ib` of `scale[2ib + j/4]` times
/// the four products of values `32ib + 4j ..`, exact; `acc[j] = fma(d·d_y, lane, acc[j])`;
/// the lanes summed as `((0+4) + (2+6)) + ((1+5) + (3+7))`.
fn reference<F: SubBlocks>(w: &[F::Block], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0f32;
    for (b, a) in w.iter().zip(a) {
        let mut v = [[0i8; 8]; QK_K / 8];
        let scales = <F as KDot>::ints(b, &mut v);
        let v: [i8; QK_K] = bytemuck::cast(v);
        let d = <F as KDot>::d(b) * a.d.get();
        // The block's exact total, then one fused step per block.
        let t: i64 = (0..QK_K).map(|i| i64::from(scales[i / 16]) * i64::from(v[i]) * i64::from(a.qs[i])).sum();
        acc = (i32::try_from(t).expect("an i32") as f32).mul_add(d, acc);
    }
    acc
}

fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

/// Writes the f16 scale bits `d` into the block's bytes `b`: the first two bytes, or iq1_m's
/// four top nibbles of its scale words (bytes 48..56).
fn set_d<F: SubBlocks>(b: &mut [u8], d: u16) {
    if F::DESC.name == "iq1_m" {
        for i in 0..4 {
            let byte = &mut b[49 + 2 * i];
            *byte = (*byte & 0x0F) | ((d >> (4 * i) & 0xF) as u8) << 4;
        }
        let block: F::Block = bytemuck::pod_read_unaligned(b);
        assert_eq!(F::d_bits(&block), d);
    } else {
        b[..2].copy_from_slice(&d.to_le_bytes());
    }
}

/// The kernel of the thread's SIMD level (`rows_vnni` / `rows_avxvnni` where a VNNI level is
/// on, else `rows_avx2`), called directly with `P`; the caller has checked AVX2 (and, for
/// `ACT_SIGNED`, that no quant of `a` is -128). Where the format's own choice
/// ([`vnni_form`], `SubBlocks::VEX_ON_INTEL`) differs from the level's form, both run and
/// must agree, so that the EVEX build stays tested on an Intel CPU with both forms.
fn forced<F: SubBlocks, const P: bool>(w: &[F::Block], a: &[BlockQ8K]) -> f32 {
    let avx2 = Avx2::detect().expect("the caller checked AVX2");
    let level_form = VnniYmm::detect().map(VnniYmm::form);
    // SAFETY: `Avx2::detect` checked AVX2, FMA and F16C, and `VnniYmm::detect` / `vnni_form`
    // give VNNI forms the CPU runs (if any); the caller guarantees `P`'s condition on `a`.
    let [v] = unsafe { rows_at::<F, 1, P, ACTS_NONE>(level_form, w, [a], [Extra::default()], avx2) };
    // SAFETY: as above.
    let [u] = unsafe { rows_at::<F, 1, P, ACTS_NONE>(vnni_form::<F>(), w, [a], [Extra::default()], avx2) };
    assert!(same(u, v), "{}: the format's VNNI form {u:e}, the level's {v:e}", F::DESC.name);
    v
}

fn check<F: SubBlocks + NativeDot<Act = qforge_k::Q8K>>(seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..400 {
        let nb = case % 10;
        let raw = case % 7 == 3;
        let w: Vec<F::Block> = (0..nb)
            .map(|_| {
                let mut b = rng.bytes(size_of::<F::Block>());
                if !raw {
                    let v = ((rng.next_u64() % 2001) as f32 - 1000.0) * 2f32.powi((rng.next_u64() % 16) as i32 - 20);
                    set_d::<F>(&mut b, half::f16::from_f32(v).to_bits());
                }
                bytemuck::pod_read_unaligned(&b)
            })
            .collect();
        let m = 1 + case % 11;
        let a: Vec<Vec<BlockQ8K>> = (0..m)
            .map(|r| {
                (0..nb)
                    .map(|_| {
                        let mut b: BlockQ8K = bytemuck::pod_read_unaligned(&rng.bytes(size_of::<BlockQ8K>()));
                        if (case + r) % 3 == 0 {
                            b.qs = std::array::from_fn(|_| [-128, 127, -1, 0, -127][(rng.next_u64() % 5) as usize]);
                        }
                        if !raw {
                            b.d = qforge_core::le::F32Le::new((rng.next_u64() % 1000) as f32 * 1e-5);
                        }
                        b
                    })
                    .collect()
            })
            .collect();
        let want: Vec<f32> = a.iter().map(|a| reference::<F>(&w, a)).collect();
        for (r, a) in a.iter().enumerate() {
            let got = forced::<F, EXACT>(&w, a);
            assert!(same(got, want[r]), "case {case} ({nb} blocks) row {r}: avx2 {got:e}, reference {:e}", want[r]);
            // The activation-signed kernel, forced, on the row without its -128s.
            let a127: Vec<BlockQ8K> = a.iter().map(|b| BlockQ8K { qs: b.qs.map(|q| q.max(-127)), ..*b }).collect();
            let want127 = reference::<F>(&w, &a127);
            // No quant of `a127` is -128, as `ACT_SIGNED` requires.
            let got = forced::<F, ACT_SIGNED>(&w, &a127);
            assert!(same(got, want127), "case {case} row {r}: activation-signed {got:e}, reference {want127:e}");
            // The mat-vec entry: a few weight rows against the row, with and without -128s.
            let k = 1 + case % 3;
            let ws: Vec<F::Block> = (0..k).flat_map(|j| w.iter().cycle().skip(j).take(nb)).copied().collect();
            for a in [a, &a127] {
                let mut out = vec![f32::NAN; k];
                F::vec_dot_weight_rows(&ws, a, &mut out);
                for (j, o) in out.iter().enumerate() {
                    let want = reference::<F>(&ws[j * nb..(j + 1) * nb], a);
                    assert!(same(*o, want), "case {case} row {r}: weight row {j} of {k}: {o:e} vs {want:e}");
                }
            }
            assert!(same(F::vec_dot(&w, a), want[r]), "case {case} row {r}: dispatch");
            assert!(same(sub_block_vec_dot_portable::<F>(&w, a), want[r]), "case {case} row {r}: portable kernel");
        }
        let refs: Vec<&[BlockQ8K]> = a.iter().map(Vec::as_slice).collect();
        let mut out = vec![0f32; m];
        F::vec_dot_rows(&w, &refs, &mut out);
        for (r, (o, want)) in out.iter().zip(&want).enumerate() {
            assert!(same(*o, *want), "case {case}: row {r} of {m}: {o:e} vs {want:e}");
        }
    }
}

/// Every SIMD level the machine has (AVX2; 256-bit VNNI; AVX-512 VNNI), forced in turn.
#[test]
fn avx2_equals_reference() {
    for level in qforge_golden::needs::simd_levels() {
        qforge_core::cpu::with_level(level, || {
            check::<Iq2Xxs>(1);
            check::<Iq2Xs>(2);
            check::<Iq2S>(3);
            check::<Iq3Xxs>(4);
            check::<Iq3S>(5);
            check::<Iq4Xs>(6);
            check::<Iq1S>(7);
            check::<Iq1M>(8);
        });
    }
}
