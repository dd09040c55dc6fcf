//! The fp8 conversions against ml_dtypes (tests/golden/fp8/gen.py): all 256 codes decode to
//! ml_dtypes' values, and f32 → fp8 gives ml_dtypes' saturating round-to-nearest-even codes
//! on a sweep with ties and subnormals; plus a brute-force nearest-value check over a large
//! strided sweep of f32 bit patterns.

use qforge_fp8::{E4m3, E5m2, Fp8Kind, from_f32, to_f32};
use std::path::PathBuf;

fn read(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/fp8").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn decode_matches<K: Fp8Kind>(name: &str) {
    let want = f32s(&read(&format!("decode_{name}.f32")));
    assert_eq!(want.len(), 256);
    for (c, w) in want.iter().enumerate() {
        let got = to_f32::<K>(c as u8);
        assert!(got.to_bits() == w.to_bits() || (got.is_nan() && w.is_nan()), "{name} code {c:#04x}: {got} vs {w}");
    }
    assert_eq!(K::MAX, want.iter().copied().filter(|v| v.is_finite()).fold(0f32, f32::max));
}

fn sweep_matches<K: Fp8Kind>(name: &str) {
    let x = f32s(&read("sweep.f32"));
    let want = read(&format!("sweep_{name}.u8"));
    assert_eq!(x.len(), want.len());
    let mut ties = 0;
    for (v, w) in x.iter().zip(&want) {
        let got = from_f32::<K>(*v);
        assert_eq!(got, *w, "{name}: {v:e} ({:#010x}) -> {got:#04x}, ml_dtypes {w:#04x}", v.to_bits());
        ties += usize::from(v.abs() < K::MAX && (from_f32::<K>(v.next_up()) != from_f32::<K>(v.next_down())));
    }
    assert!(x.len() > 30_000 && ties > 400, "{name}: sweep too small ({} values, {ties} near ties)", x.len());
}

#[test]
fn e4m3_decodes_like_ml_dtypes() {
    decode_matches::<E4m3>("e4m3");
}
#[test]
fn e5m2_decodes_like_ml_dtypes() {
    decode_matches::<E5m2>("e5m2");
}
#[test]
fn e4m3_rounds_like_ml_dtypes() {
    sweep_matches::<E4m3>("e4m3");
}
#[test]
fn e5m2_rounds_like_ml_dtypes() {
    sweep_matches::<E5m2>("e5m2");
}

/// For 2^22 f32 bit patterns spread over the whole range (both signs): the code is the
/// nearest finite fp8 value (saturating), ties to the even code, the sign kept.
fn nearest_everywhere<K: Fp8Kind>() {
    let mut vals: Vec<(f32, u8)> = (0u8..=0x7F).map(|c| (to_f32::<K>(c), c)).filter(|(v, _)| v.is_finite()).collect();
    vals.sort_by(|a, b| a.0.total_cmp(&b.0));
    for i in 0u32..(1 << 22) {
        let bits = i.wrapping_mul(1024) | (i & 1023);
        let x = f32::from_bits(bits);
        if x.is_nan() {
            continue;
        }
        let a = f64::from(x.abs());
        let j = vals.partition_point(|(v, _)| f64::from(*v) <= a);
        let want = if j == vals.len() {
            vals[j - 1].1
        } else {
            let (lo, hi) = (vals[j - 1], vals[j]);
            let (dl, dh) = (a - f64::from(lo.0), f64::from(hi.0) - a);
            if dl < dh || (dl == dh && lo.1 % 2 == 0) { lo.1 } else { hi.1 }
        };
        let want = want | if x.is_sign_negative() { 0x80 } else { 0 };
        assert_eq!(from_f32::<K>(x), want, "{x:e} ({bits:#010x})");
    }
}

#[test]
fn e4m3_nearest_even_everywhere() {
    nearest_everywhere::<E4m3>();
}
#[test]
fn e5m2_nearest_even_everywhere() {
    nearest_everywhere::<E5m2>();
}
