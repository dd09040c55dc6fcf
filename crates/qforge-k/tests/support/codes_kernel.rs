//! The q8_k dot kernels of the [`Q8KCodes`] formats, checked generically (the tq suite
//! includes this file by path): the unpacking against the format's decode, and the dispatched
//! kernel (AVX2 on such a CPU) against the portable one, bit for bit, one to eight rows.
//!
//! On an x86-64 CPU without AVX2, FMA and F16C the comparison fails (an untested kernel is
//! not a pass) unless `QFORGE_ALLOW_NO_AVX2=1` says to skip it.

use bytemuck::Zeroable;
use qforge_core::le::{F16Le, F32Le, I16Le};
use qforge_core::rand::Rng;
use qforge_core::{MAX_DOT_ROWS, NativeDot};
use qforge_k::BlockQ8K;
use qforge_k::dot::{Q8KCodes, q8k_codes_dot_rows_portable, q8k_codes_vec_dot, q8k_codes_vec_dot_rows};

/// The byte offsets of the f16 `d` and `dmin` fields of `F`'s block (found by probing
/// `d_dmin`); `None` for a `dmin` the format does not store.
pub fn scale_offsets<F: Q8KCodes>() -> [Option<usize>; 2] {
    let mut found = [None; 2];
    for k in 0..size_of::<F::Block>() {
        let mut b = F::Block::zeroed();
        bytemuck::bytes_of_mut(&mut b)[k] = 0x3c;
        for (f, h) in found.iter_mut().zip(F::d_dmin(&b)) {
            if h == F16Le([0, 0x3c]) {
                *f = Some(k - 1);
            }
        }
    }
    assert!(found[0].is_some(), "{}: no d field found", F::DESC.name);
    found
}

/// A finite f16 over a wide range of magnitudes, either sign.
fn finite_f16(rng: &mut Rng) -> F16Le {
    let v = ((rng.next_u64() % 2001) as f32 - 1000.0) * 2f32.powi((rng.next_u64() % 24) as i32 - 20);
    F16Le::from_f32(v)
}

/// A weight block: random bytes, or (`extreme`) bytes drawn from 0x00 / 0xff / 0x80 / 0x7f /
/// 0x3f (maximal and minimal codes and scales), with finite f16 scales unless `raw`.
pub fn weight<F: Q8KCodes>(rng: &mut Rng, offsets: [Option<usize>; 2], raw: bool, extreme: bool) -> F::Block {
    let mut b = F::Block::zeroed();
    for v in bytemuck::bytes_of_mut(&mut b) {
        *v = if extreme { [0x00, 0xff, 0x80, 0x7f, 0x3f][(rng.next_u64() % 5) as usize] } else { rng.next_u64() as u8 };
    }
    if !raw {
        for o in offsets.into_iter().flatten() {
            bytemuck::bytes_of_mut(&mut b)[o..o + 2].copy_from_slice(&finite_f16(rng).0);
        }
    }
    b
}

/// An activation block: `qs` random, or all extreme (-128 / 127 / -1 / 0); `bsums` their
/// sums, or (`raw`) random like the rest of the bytes.
pub fn act(rng: &mut Rng, raw: bool, extreme: bool) -> BlockQ8K {
    let mut a = BlockQ8K::zeroed();
    for q in a.qs.iter_mut() {
        *q = if extreme { [-128, 127, -1, 0][(rng.next_u64() & 3) as usize] } else { rng.next_u64() as i8 };
    }
    for (s, q) in a.bsums.iter_mut().zip(a.qs.chunks_exact(16)) {
        *s = I16Le::new(if raw { rng.next_u64() as i16 } else { q.iter().map(|&v| i16::from(v)).sum() });
    }
    let d = ((rng.next_u64() % 2001) as f32 - 1000.0) * 2f32.powi((rng.next_u64() % 30) as i32 - 25);
    a.d = F32Le::new(if raw { f32::from_bits(rng.next_u64() as u32) } else { d });
    a
}

pub fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

/// Every code is below 64 (16 with `UNIT_SCALES`, whose scales must all be 1), and `d·scale[g]·(u − ZERO) − dmin·min[g]` (in this f32 order) is
/// the format's decoded value, bit for bit, for every element of random blocks.
pub fn codes_match_decode<F: Q8KCodes>(seed: u64) {
    let mut rng = Rng::new(seed);
    let offsets = scale_offsets::<F>();
    for case in 0..2000 {
        let b = weight::<F>(&mut rng, offsets, case % 11 == 5, case % 3 == 1);
        let codes = qforge_k::dot::codes::<F>(&b);
        let (sc, m) = F::scales(&b);
        let [d, dmin] = F::d_dmin(&b).map(F16Le::get);
        let mut y = [0f32; 256];
        F::decode(&b, &mut y);
        for (i, &u) in codes.as_flattened().iter().enumerate() {
            let g = i / 16;
            assert!(u < if F::UNIT_SCALES { 16 } else { 64 }, "{}: code {u} at {i}", F::DESC.name);
            assert!(!F::UNIT_SCALES || sc[g] == 1, "{}: UNIT_SCALES with scale {}", F::DESC.name, sc[g]);
            let v = (d * f32::from(sc[g])) * (i32::from(u) - i32::from(F::ZERO)) as f32 - dmin * f32::from(m[g]);
            assert!(same(v, y[i]), "{} case {case} element {i}: {v:e} from the codes, decode {:e}", F::DESC.name, y[i]);
        }
    }
}

/// Rows of 0..=9 blocks against 1..=8 activation rows: the dispatched multi-row kernel, the
/// dispatched one-row kernel, the format's `NativeDot` (and its mat-vec call on 1..=11 weight
/// rows) all equal the portable kernel, bit for bit (finite and raw scales, extreme codes and
/// activations, inconsistent `bsums`), at every SIMD level the machine has (AVX2, and
/// AVX-512 VNNI where present), forced in turn.
pub fn kernels_agree<F: Q8KCodes + NativeDot<Act = qforge_k::Q8K>>(seed: u64) {
    // Elsewhere than x86-64 the dispatched kernel is the portable one: nothing is skipped.
    if !cfg!(target_arch = "x86_64") {
        return kernels_agree_at::<F>(seed);
    }
    for level in qforge_golden::needs::simd_levels() {
        qforge_core::cpu::with_level(level, || kernels_agree_at::<F>(seed));
    }
}

fn kernels_agree_at<F: Q8KCodes + NativeDot<Act = qforge_k::Q8K>>(seed: u64) {
    let mut rng = Rng::new(seed);
    let offsets = scale_offsets::<F>();
    for case in 0..1500 {
        let nb = case % 10;
        let rows = 1 + case % MAX_DOT_ROWS;
        let (raw, extreme) = (case % 13 == 7, case % 4 == 1);
        let w: Vec<F::Block> = (0..nb).map(|_| weight::<F>(&mut rng, offsets, raw, extreme)).collect();
        let a: Vec<Vec<BlockQ8K>> =
            (0..rows).map(|_| (0..nb).map(|_| act(&mut rng, raw || case % 9 == 2, extreme)).collect()).collect();
        let a: Vec<&[BlockQ8K]> = a.iter().map(Vec::as_slice).collect();
        let mut want = vec![0f32; rows];
        q8k_codes_dot_rows_portable::<F>(&w, &a, &mut want);
        let mut got = vec![0f32; rows];
        q8k_codes_vec_dot_rows::<F>(&w, &a, &mut got);
        let mut native = vec![0f32; rows];
        F::vec_dot_rows(&w, &a, &mut native);
        for r in 0..rows {
            let one = q8k_codes_vec_dot::<F>(&w, a[r]);
            let name = F::DESC.name;
            assert!(same(got[r], want[r]), "{name} case {case} row {r}/{rows}: {:e} vs portable {:e}", got[r], want[r]);
            assert!(same(one, want[r]), "{name} case {case} row {r}: one-row {one:e} vs portable {:e}", want[r]);
            assert!(same(native[r], want[r]) && same(F::vec_dot(&w, a[r]), want[r]), "{name} case {case}: NativeDot");
        }
        // The mat-vec call: 1..=11 weight rows (this one and random others) against `a[0]`.
        let rows = 1 + case % 11;
        let mut ws = w.clone();
        for _ in 1..rows {
            ws.extend((0..nb).map(|_| weight::<F>(&mut rng, offsets, raw, extreme)));
        }
        let mut got = vec![f32::NAN; rows];
        F::vec_dot_weight_rows(&ws, a[0], &mut got);
        for (r, got) in got.iter().enumerate() {
            let mut want = [0f32];
            q8k_codes_dot_rows_portable::<F>(&ws[r * nb..(r + 1) * nb], &a[..1], &mut want);
            let name = F::DESC.name;
            assert!(same(*got, want[0]), "{name} case {case} weight row {r}/{rows}: {got:e} vs portable {:e}", want[0]);
        }
    }
}
