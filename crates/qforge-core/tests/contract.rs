//! The contract machinery (Registered, Registry, QuantTensor, Shape) with a toy format, so
//! these tests do not depend on any real family.

use proptest::prelude::*;
use qforge_core::le::F32Le;
use qforge_core::*;

qforge_core::c_block! {
    /// A toy format: 4 signed bytes with one f32 scale; value = d * q.
    #[repr(C)]
    #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    struct ToyBlock {
        d: F32Le,
        q: [i8; 4],
    }
}

/// The C struct the CUDA build would generate for it: the Rust fields, in order.
#[test]
fn block_layout_renders_as_c() {
    let f: &dyn Format = &Registered::<Toy>::NEW;
    assert_eq!(c_struct("toy_block", f.c_block()), "struct toy_block { uint8_t d[4]; int8_t q[4]; };");
}

struct Toy;

impl BlockFormat for Toy {
    type Block = ToyBlock;
    const DESC: FormatDesc = FormatDesc {
        name: "toy",
        family: "test",
        ggml_type: None,
        block_size: 4,
        block_bytes: 8,
        role: Role::Weight,
        dot_type: None,
        summary: "test format",
        cuda: None,
    };
    fn decode<O: Elem>(b: &ToyBlock, out: &mut [O]) {
        for (o, q) in out.iter_mut().zip(b.q) {
            *o = O::from_f32(b.d.get() * q as f32);
        }
    }
    fn encode(x: &[f32], _w: Option<&[f32]>, out: &mut ToyBlock) {
        let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = if d == 0.0 { 0.0 } else { 1.0 / d };
        out.d = F32Le::new(d);
        out.q = [0; 4];
        for (q, v) in out.q.iter_mut().zip(x) {
            *q = (v * id).round() as i8;
        }
    }
}

static TOY: &dyn Format = &Registered::<Toy>::NEW;

#[test]
fn registry_lookup_is_case_insensitive_and_rejects_duplicates() {
    let mut r = Registry::new();
    r.register(TOY).unwrap();
    assert_eq!(r.get("TOY").unwrap().desc().name, "toy");
    assert_eq!(r.get(" Toy ").unwrap().desc().name, "toy");
    assert!(matches!(r.get("q4_0"), Err(QuantError::UnknownFormat { .. })));
    assert!(r.register(TOY).is_err());
    assert_eq!(r.len(), 1);
}

#[test]
fn row_api_validates_before_the_format_sees_anything() {
    let mut out = [0u8; 16];
    assert!(matches!(
        TOY.quantize_row(&[1.0, f32::NAN, 0.0], None, &mut out[..8]),
        Err(QuantError::NonFinite { index: 1, .. })
    ));
    assert!(matches!(TOY.quantize_row(&[1.0; 5], None, &mut out[..8]), Err(QuantError::ShapeMismatch { .. })));
    assert!(matches!(
        TOY.quantize_row(&[1.0; 4], Some(&[1.0; 3]), &mut out[..8]),
        Err(QuantError::InvalidImatrix { .. })
    ));
    assert!(matches!(
        TOY.quantize_row(&[1.0; 4], Some(&[1.0, -1.0, 1.0, 1.0]), &mut out[..8]),
        Err(QuantError::InvalidImatrix { .. })
    ));
    let mut y = [0f32; 5];
    assert!(matches!(TOY.dequant_row(&out[..15], OutRow::F32(&mut y)), Err(QuantError::NotWholeBlocks { .. })));
    assert!(matches!(TOY.dequant_row(&out[..8], OutRow::F32(&mut y)), Err(QuantError::ShapeMismatch { .. })));
}

proptest! {
    #[test]
    fn partial_rows_round_trip_and_keep_the_logical_length(x in prop::collection::vec(-100f32..100.0, 1..40)) {
        let rb = TOY.row_bytes(x.len()).unwrap();
        prop_assert_eq!(rb, x.len().div_ceil(4) * 8);
        let mut q = vec![0u8; rb];
        TOY.quantize_row(&x, None, &mut q).unwrap();
        let mut y = vec![0f32; x.len()];
        TOY.dequant_row(&q, OutRow::F32(&mut y)).unwrap();
        let mut h = vec![f16::ZERO; x.len()];
        TOY.dequant_row(&q, OutRow::F16(&mut h)).unwrap();
        for (i, (a, b)) in x.iter().zip(&y).enumerate() {
            let blk = &x[i / 4 * 4..(i / 4 * 4 + 4).min(x.len())];
            let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
            prop_assert!((a - b).abs() <= amax / 254.0 * 1.001 + 1e-6);
            prop_assert_eq!(h[i].to_bits(), f16::from_f32(*b).to_bits());
        }
    }

    #[test]
    fn quant_tensor_accepts_exactly_the_implied_size(rows in 1usize..50, cols in 1usize..50, len in 0usize..2000) {
        let want = rows * cols.div_ceil(4) * 8;
        let r = QuantTensor::new(TOY, Shape::new([rows, cols]).unwrap(), vec![0u8; len]);
        prop_assert_eq!(r.is_ok(), len == want);
        if let Ok(t) = r {
            prop_assert_eq!(t.rows_iter().count(), rows);
            prop_assert_eq!(t.padded_cols(), cols.div_ceil(4) * 4);
            prop_assert!(t.row(rows).is_none());
        }
    }

    #[test]
    fn shapes_never_panic(dims in prop::collection::vec(0usize..=usize::MAX, 0..5)) {
        match Shape::new(dims.clone()) {
            Ok(s) => {
                prop_assert!(dims.iter().all(|&d| d > 0));
                prop_assert_eq!(s.numel(), s.rows() * s.cols());
            }
            Err(e) => {
                let typed = matches!(e, QuantError::InvalidShape { .. } | QuantError::Overflow { .. });
                prop_assert!(typed, "unexpected error {:?}", e);
            }
        }
    }
}
