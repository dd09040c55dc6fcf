//! fp8 properties: every property of the conformance suite (`property_suite!`, a row as a
//! tensor of one row with its grid row), and through the tensor-level API (values + scale
//! grid): error bounds, the grid from real elements only, any shape, non-finite input and
//! arbitrary bytes in tensors of many rows, zeros, the rows standing alone as 1-row tensors,
//! the activation format, and the 1x128 dot against an f64 reference.

use proptest::prelude::*;
use qforge_core::{ActKind, ActRow, DType, Format, Layout, OutRow, QuantError, QuantTensor, Shape};
use qforge_fp8::{E4m3, FORMATS, Fp8Kind, from_f32, grid, to_f32};

fn finite(_: &dyn Format, _: &[f32], y: &[f32]) -> Result<(), String> {
    match y.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(format!("element {i} decodes to {}", y[i])),
        None => Ok(()),
    }
}

// Every property of the conformance suite that needs no ggml vectors, as the block formats
// run them. Importance weights cannot change fp8's encoding, so units are independent with
// them too.
qforge_golden::property_suite!(FORMATS, cases: 64, weighted_blocks_independent: true, finite_input_check: Some(finite));

/// (mantissa bits, bias, max) of a registered fp8 format.
fn kind(f: &dyn Format) -> (i32, i32, f32) {
    match f.desc().name {
        "fp8_e4m3" => (3, 7, 448.0),
        "fp8_e5m2" => (2, 15, 57344.0),
        n => panic!("{n}"),
    }
}

fn quantize(f: &'static dyn Format, rows: usize, cols: usize, x: &[f32]) -> QuantTensor<'static> {
    qforge_cpu::quantize(f, Shape::new([rows, cols]).unwrap(), x, None).unwrap()
}

fn grid_of(t: &QuantTensor<'_>) -> Vec<f32> {
    t.aux().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

/// A tensor whose 128×128 blocks have very different magnitudes.
fn tensor() -> impl Strategy<Value = (usize, usize, Vec<f32>)> {
    (1usize..300, 1usize..300).prop_flat_map(|(r, c)| {
        (Just(r), Just(c), prop::collection::vec(-1.0f32..1.0, r * c), prop::collection::vec(-6.0f32..6.0, 9)).prop_map(
            |(r, c, mut x, mag)| {
                for (i, v) in x.iter_mut().enumerate() {
                    let (row, col) = (i / c, i % c);
                    *v *= 10f32.powf(mag[(row / 128 % 3) * 3 + col / 128 % 3]);
                }
                (r, c, x)
            },
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Grid = amax/MAX over each block's real elements; |x − x̂| ≤ 2^-(M+1)·|x| (2^-4 for e4m3,
    /// 2^-3 for e5m2) or half a subnormal step of the block scale; f16 / bf16 are the RNE of f32.
    #[test]
    fn round_trip_within_bounds((rows, cols, x) in tensor()) {
        for &f in FORMATS {
            let (m, bias, max) = kind(f);
            let t = quantize(f, rows, cols, &x);
            prop_assert_eq!(t.data().len(), rows * cols + grid::bytes(rows, cols).unwrap());
            let g = grid_of(&t);
            let (gr, gc) = grid::dims(rows, cols);
            prop_assert_eq!(g.len(), gr * gc);
            for bi in 0..gr {
                for bj in 0..gc {
                    let mut amax = 0f32;
                    for r in bi * 128..(bi * 128 + 128).min(rows) {
                        for c in bj * 128..(bj * 128 + 128).min(cols) {
                            amax = amax.max(x[r * cols + c].abs());
                        }
                    }
                    let want = if amax == 0.0 { 1.0 } else { amax / max };
                    prop_assert_eq!(g[bi * gc + bj], want, "block ({}, {})", bi, bj);
                }
            }
            let y: Vec<f32> = qforge_cpu::dequantize(&t).unwrap();
            for (i, (&a, &b)) in x.iter().zip(&y).enumerate() {
                let s = f64::from(g[(i / cols / 128) * gc + (i % cols) / 128]);
                let err = (f64::from(a) - f64::from(b)).abs();
                let bound = (f64::from(a).abs() * 2f64.powi(-(m + 1))).max(s * 2f64.powi(-bias - m));
                prop_assert!(err <= bound * (1.0 + 1e-6), "{} element {}: {} -> {} (scale {})", f.desc().name, i, a, b, s);
            }
            let h: Vec<half::f16> = qforge_cpu::dequantize(&t).unwrap();
            let bh: Vec<half::bf16> = qforge_cpu::dequantize(&t).unwrap();
            for i in 0..y.len() {
                prop_assert_eq!(h[i].to_bits(), half::f16::from_f32(y[i]).to_bits());
                prop_assert_eq!(bh[i].to_bits(), half::bf16::from_f32(y[i]).to_bits());
            }
        }
    }

    /// A row's bytes depend only on its own values and its grid row: quantizing the tensor
    /// equals quantizing each row with the grid (rows in any order), and rows decode alone.
    #[test]
    fn rows_decode_with_their_grid_row((rows, cols, x) in tensor(), pick in any::<prop::sample::Index>()) {
        for &f in FORMATS {
            let t = quantize(f, rows, cols, &x);
            let r = pick.index(rows);
            let mut q = vec![0u8; cols];
            f.quantize_row_at(&x[r * cols..(r + 1) * cols], None, r, t.aux(), &mut q).unwrap();
            prop_assert_eq!(&q[..], t.row(r).unwrap());
            let mut y = vec![0f32; cols];
            f.dequant_row_at(&q, r, t.aux(), OutRow::F32(&mut y)).unwrap();
            let all: Vec<f32> = qforge_cpu::dequantize(&t).unwrap();
            prop_assert_eq!(&y[..], &all[r * cols..(r + 1) * cols]);
        }
    }

    /// NaN / Inf anywhere: `NonFinite` with its index, from the tensor and from a row.
    #[test]
    fn non_finite_input_is_rejected((rows, cols, mut x) in tensor(), pos in any::<prop::sample::Index>(), bad in prop_oneof![Just(f32::NAN), Just(f32::INFINITY), Just(f32::NEG_INFINITY)]) {
        let at = pos.index(x.len());
        x[at] = bad;
        for &f in FORMATS {
            let e = qforge_cpu::quantize(f, Shape::new([rows, cols]).unwrap(), &x, None).unwrap_err();
            prop_assert!(matches!(e, QuantError::NonFinite { index, .. } if index == at), "{:?}", e);
            let r = at / cols;
            let aux = vec![0x3f; grid::bytes(rows, cols).unwrap()]; // some positive finite scales
            let e = f.quantize_row_at(&x[r * cols..(r + 1) * cols], None, r, &aux, &mut vec![0; cols]).unwrap_err();
            prop_assert!(matches!(e, QuantError::NonFinite { index, .. } if index == at % cols), "{:?}", e);
        }
    }

    /// Arbitrary value and grid bytes decode without panicking; wrong lengths are typed errors.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..700), cols in 0usize..300, row in 0usize..400, auxlen in 0usize..40) {
        for &f in FORMATS {
            let aux = &bytes[..auxlen.min(bytes.len())];
            let vals = &bytes[..cols.min(bytes.len())];
            let mut y = vec![0f32; cols];
            let ok = vals.len() == cols
                && (cols == 0 || (auxlen.min(bytes.len()) % (4 * cols.div_ceil(128)) == 0
                    && row / 128 < aux.len() / (4 * cols.div_ceil(128))));
            let r = f.dequant_row_at(vals, row, aux, OutRow::F32(&mut y));
            prop_assert_eq!(r.is_ok(), ok, "{:?}", r);
            let r16 = f.dequant_row_at(vals, row, aux, OutRow::F16(&mut vec![half::f16::ZERO; cols]));
            prop_assert_eq!(r16.is_ok(), ok);
            let _ = f.dot_row(vals, row, aux, ActRow::Fp8 { q: vals, scales: &[1.0; 3] });
            if let Ok(rows) = QuantTensor::new(f, Shape::new([2, cols.max(1)]).unwrap(), bytes.clone()) {
                let _: Vec<f32> = qforge_cpu::dequantize(&rows).unwrap();
            }
        }
    }

    /// The 1x128 dot equals the f64 dot of the dequantized weights and activations.
    #[test]
    fn dot_matches_f64_reference((rows, cols, x) in tensor(), a in prop::collection::vec(-50.0f32..50.0, 300), sa in prop::collection::vec(1e-3f32..1e2, 3), pick in any::<prop::sample::Index>()) {
        for &f in FORMATS {
            prop_assert_eq!(f.native_act(), ActKind::Fp8x128);
            let t = quantize(f, rows, cols, &x);
            let r = pick.index(rows);
            let aq: Vec<u8> = a[..cols].iter().map(|v| from_f32::<E4m3>(*v)).collect();
            let sa = &sa[..cols.div_ceil(128)];
            let got = f.dot_row(t.row(r).unwrap(), r, t.aux(), ActRow::Fp8 { q: &aq, scales: sa }).unwrap().unwrap();
            let mut w = vec![0f32; cols];
            f.dequant_row_at(t.row(r).unwrap(), r, t.aux(), OutRow::F32(&mut w)).unwrap();
            let terms: Vec<f64> = (0..cols).map(|k| f64::from(w[k]) * f64::from(to_f32::<E4m3>(aq[k])) * f64::from(sa[k / 128])).collect();
            let want: f64 = terms.iter().sum();
            let mag: f64 = terms.iter().map(|v| v.abs()).sum();
            prop_assert!((f64::from(got) - want).abs() <= 2e-6 * mag + 1e-35, "{} got {} want {} mag {}", f.desc().name, got, want, mag);
            let int8 = f.dot_row(t.row(r).unwrap(), r, t.aux(), ActRow::Int8 { q: &[], scale: 1.0, zero_point: 0 });
            prop_assert!(int8.is_none(), "int8 activations");
            let short = f.dot_row(t.row(r).unwrap(), r, t.aux(), ActRow::Fp8 { q: &aq[1..], scales: sa });
            prop_assert!(matches!(short, Some(Err(QuantError::ShapeMismatch { .. }))), "short activation");
            let no_scales = f.dot_row(t.row(r).unwrap(), r, t.aux(), ActRow::Fp8 { q: &aq, scales: &[] });
            prop_assert!(matches!(no_scales, Some(Err(QuantError::ShapeMismatch { .. }))), "no scales");
        }
    }
}

#[test]
fn zeros_decode_to_zeros_with_unit_scales() {
    for &f in FORMATS {
        for (rows, cols) in [(1, 1), (3, 45), (130, 300)] {
            for z in [0.0f32, -0.0] {
                let t = quantize(f, rows, cols, &vec![z; rows * cols]);
                assert!(grid_of(&t).iter().all(|s| *s == 1.0));
                let y: Vec<f32> = qforge_cpu::dequantize(&t).unwrap();
                assert!(y.iter().all(|v| *v == 0.0));
            }
        }
    }
}

/// A row standing alone is a 1-row tensor: its values, then its grid row. `quantize_row` /
/// `dequant_row` give exactly the bytes and values of the tensor path; wrong lengths are
/// typed errors.
#[test]
fn a_row_alone_is_a_one_row_tensor() {
    for &f in FORMATS {
        for n in [1usize, 5, 128, 129, 300] {
            let x: Vec<f32> =
                (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) * 10f32.powi((i / 128) as i32 - 1)).collect();
            let t = quantize(f, 1, n, &x);
            assert_eq!(f.tensor_bytes(1, n).unwrap(), n + 4 * n.div_ceil(128));
            let mut alone = vec![0u8; f.tensor_bytes(1, n).unwrap()];
            f.quantize_row(&x, None, &mut alone).unwrap();
            assert_eq!(alone, t.data(), "{} n={n}", f.desc().name);
            let mut y = vec![0f32; n];
            f.dequant_row(&alone, OutRow::F32(&mut y)).unwrap();
            let want: Vec<f32> = qforge_cpu::dequantize(&t).unwrap();
            assert_eq!(
                y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
            // Values alone (no grid row) are the wrong length for a row standing alone.
            let e = f.dequant_row(&alone[..n], OutRow::F32(&mut y)).unwrap_err();
            assert!(matches!(e, QuantError::ShapeMismatch { .. }), "{e}");
            let e = f.quantize_row(&x, None, &mut alone[..n].to_vec()).unwrap_err();
            assert!(matches!(e, QuantError::ShapeMismatch { .. }), "{e}");
        }
    }
}

#[test]
fn bad_grids_and_weights_are_typed_errors() {
    for &f in FORMATS {
        // Bad grid scales and bad weights are rejected when quantizing a row.
        let e = f.quantize_row_at(&[1.0; 4], None, 0, &0f32.to_le_bytes(), &mut [0; 4]).unwrap_err();
        assert!(matches!(e, QuantError::Unsupported { .. }), "{e}");
        let e = f.quantize_row_at(&[1.0; 4], Some(&[1.0; 3]), 0, &1f32.to_le_bytes(), &mut [0; 4]).unwrap_err();
        assert!(matches!(e, QuantError::InvalidImatrix { .. }), "{e}");
        let e = f.dequant_row_at(&[0; 4], 0, &[], OutRow::F32(&mut [0.0; 4])).unwrap_err();
        assert!(matches!(e, QuantError::ShapeMismatch { .. }), "{e}");
        assert_eq!(f.aux_bytes(257, 129).unwrap(), 3 * 2 * 4);
        assert!(f.aux_bytes(usize::MAX, usize::MAX).is_err());
        let d = f.desc();
        assert_eq!((d.family, d.ggml_type, d.block_size, d.block_bytes, d.dot_type), ("fp8", None, 1, 1, None));
        let Layout::Grid { tile_rows, tile_cols, scale_dtype, .. } = f.layout() else { panic!("{}", d.name) };
        assert_eq!((tile_rows, tile_cols, scale_dtype, f.split_granularity()), (128, 128, DType::F32, (128, 128)));
    }
}

/// The activation format (1 x 128 tiles, e4m3) against the rule written out: per 128
/// elements s = amax / 448 (1 for zeros), q = e4m3_rne_saturating(x / s).
#[test]
fn activation_format_is_e4m3_with_1x128_scales() {
    let act = FORMATS[1].act_format(ActKind::Fp8x128).unwrap();
    assert_eq!(act.layout(), FORMATS[0].act_format(ActKind::Fp8x128).unwrap().layout());
    assert!(FORMATS[0].act_format(ActKind::Int8Dyn).is_none());
    assert_eq!(act.layout().scale_tile(), (1, 128));
    for n in [1usize, 128, 200, 384] {
        let x: Vec<f32> =
            (0..n).map(|i| if (128..256).contains(&i) { 0.0 } else { (i as f32 * 0.37).sin() * 3.0 }).collect();
        let mut aux = vec![0u8; act.aux_bytes(1, n).unwrap()];
        act.quantize_aux(&x, 1, n, &mut aux).unwrap();
        let mut q = vec![0u8; act.row_bytes(n).unwrap()];
        act.quantize_row_at(&x, None, 0, &aux, &mut q).unwrap();
        // qforge-cpu's fp8-1x128 activations (padded by 5 zeros) come from the same format.
        let qa = qforge_cpu::QuantAct::new(ActKind::Fp8x128, &x, n + 5).unwrap();
        let Some(ActRow::Fp8 { q: cq, scales: cs }) = qa.as_row() else { panic!("{qa:?}") };
        assert_eq!((cq.len(), cs.len()), (n + 5, (n + 5).div_ceil(128)));
        for (b, xs) in x.chunks(128).enumerate() {
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            let s = if amax == 0.0 { 1.0 } else { amax / E4m3::MAX };
            assert_eq!((f32::from_le_bytes(aux[4 * b..4 * b + 4].try_into().unwrap()), cs[b]), (s, s));
            for (i, &v) in xs.iter().enumerate() {
                assert_eq!(q[b * 128 + i], from_f32::<E4m3>(v / s), "n={n} block {b} element {i}");
                assert_eq!(cq[b * 128 + i], q[b * 128 + i]);
            }
        }
        assert!(cq[n..].iter().all(|&c| c == 0), "padding quantizes to 0");
    }
}

#[test]
fn extreme_finite_input_saturates_never_inf() {
    for &f in FORMATS {
        let x = [f32::MAX, -f32::MAX, 1.0, 1e-45, -1e-45, f32::MIN_POSITIVE];
        let t = quantize(f, 1, x.len(), &x);
        let y: Vec<f32> = qforge_cpu::dequantize(&t).unwrap();
        assert!(y.iter().all(|v| v.is_finite()), "{y:?}");
        assert_eq!((y[0], y[1]), (f32::MAX, -f32::MAX));
        // Only tiny values: the scale would underflow to 0 and is kept at the smallest f32.
        let t = quantize(f, 1, 3, &[1e-45, -1e-45, 0.0]);
        let y: Vec<f32> = qforge_cpu::dequantize(&t).unwrap();
        assert_eq!(y, [1e-45, -1e-45, 0.0], "{}", f.desc().name);
    }
}

#[test]
fn raw_layout_is_values_then_grid() {
    // 130 x 200: grid 2 x 2. Block (1, 1) holds rows 128..130, cols 128..200.
    let (rows, cols) = (130, 200);
    let mut x = vec![0f32; rows * cols];
    x[129 * cols + 199] = -896.0;
    x[5] = 448.0 * 3.0;
    let f = FORMATS[0];
    let t = quantize(f, rows, cols, &x);
    assert_eq!(grid_of(&t), [3.0, 1.0, 1.0, 2.0]);
    assert_eq!(t.data()[5], 0x7E);
    assert_eq!(t.data()[129 * cols + 199], 0xFE);
    assert_eq!(<E4m3 as Fp8Kind>::MAX, 448.0);
}
