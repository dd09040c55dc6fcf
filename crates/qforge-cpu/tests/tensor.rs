//! The parallel tensor paths agree with the formats' row references, for every format.

use qforge_core::{Format, OutRow, QuantError, QuantTensor, Shape, bf16, f16};

fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32 - 0.5) * 4.0
        })
        .collect()
}

fn formats() -> Vec<&'static dyn Format> {
    let v: Vec<_> = qforge_formats::registry().iter().collect();
    assert!(v.len() >= 12, "the registry lost formats: {}", v.len());
    v
}

#[test]
fn parallel_tensor_paths_equal_row_references() {
    // 130 rows of 300 columns: several rayon tasks, and a partial last block in every row.
    let (rows, cols) = (130, 300);
    let x = data(rows * cols, 7);
    for f in formats() {
        let t = qforge_cpu::quantize(f, Shape::new([rows, cols]).unwrap(), &x, None).unwrap();
        let rb = f.row_bytes(cols).unwrap();
        let mut row = vec![0u8; rb];
        for r in 0..rows {
            f.quantize_row_at(&x[r * cols..(r + 1) * cols], None, r, t.aux(), &mut row).unwrap();
            assert_eq!(t.row(r).unwrap(), &row[..], "{} row {r}", f.desc().name);
        }
        let y32 = qforge_cpu::dequantize::<f32>(&t).unwrap();
        let y16 = qforge_cpu::dequantize::<f16>(&t).unwrap();
        let yb = qforge_cpu::dequantize::<bf16>(&t).unwrap();
        let mut one = vec![0f32; cols];
        for r in 0..rows {
            f.dequant_row_at(t.row(r).unwrap(), r, t.aux(), OutRow::F32(&mut one)).unwrap();
            assert_eq!(&y32[r * cols..(r + 1) * cols], &one[..], "{}", f.desc().name);
        }
        for i in 0..y32.len() {
            assert_eq!(y16[i].to_bits(), f16::from_f32(y32[i]).to_bits(), "{} f16 {i}", f.desc().name);
            assert_eq!(yb[i].to_bits(), bf16::from_f32(y32[i]).to_bits(), "{} bf16 {i}", f.desc().name);
        }
        let d = qforge_cpu::dequantize_dyn(&t, qforge_core::DType::F16).unwrap();
        assert_eq!(d, qforge_cpu::Dequantized::F16(y16.clone()));
        let bytes = d.le_bytes();
        assert_eq!(bytes.len(), rows * cols * 2);
        assert_eq!(u16::from_le_bytes([bytes[2], bytes[3]]), y16[1].to_bits());
    }
}

#[test]
fn non_finite_input_reports_its_global_index() {
    let (rows, cols) = (64, 256);
    let mut x = data(rows * cols, 3);
    let at = 41 * cols + 77;
    x[at] = f32::INFINITY;
    for f in formats() {
        let e = qforge_cpu::quantize(f, Shape::new([rows, cols]).unwrap(), &x, None).unwrap_err();
        assert_eq!(e, QuantError::NonFinite { index: at, value: f32::INFINITY }, "{}", f.desc().name);
    }
}

#[test]
fn wrong_sizes_are_typed_errors() {
    let f = qforge_formats::get("q4_0").unwrap();
    let s = Shape::new([2, 64]).unwrap();
    assert!(matches!(qforge_cpu::quantize(f, s.clone(), &[0.0; 100], None), Err(QuantError::ShapeMismatch { .. })));
    assert!(matches!(
        qforge_cpu::quantize(f, s.clone(), &[0.0; 128], Some(&[1.0; 63])),
        Err(QuantError::InvalidImatrix { .. })
    ));
    assert!(matches!(QuantTensor::new(f, s.clone(), vec![0u8; 71]), Err(QuantError::NotWholeBlocks { .. })));
    assert!(matches!(QuantTensor::new(f, s.clone(), vec![0u8; 54]), Err(QuantError::ShapeMismatch { .. })));
    let t = QuantTensor::new(f, s, vec![0u8; 72]).unwrap();
    let mut small = vec![0f32; 10];
    assert!(matches!(qforge_cpu::dequantize_into(&t, &mut small), Err(QuantError::ShapeMismatch { .. })));
    assert_eq!(qforge_cpu::dequantize::<f32>(&t).unwrap(), vec![0.0; 128]);
}

/// The formats whose f16 / bf16 rows need no f32 pass say so, so that `dequantize` takes that
/// path (their values are checked above and below, as every format's): those looked up in a
/// 16-bit table per group (qforge-simd's `half_lut`), and those whose values are rounded in
/// registers before the store (qforge-simd's `store8`: the grid I-quants, q6_k, tq1_0, fp8,
/// q8_0 / q8_k).
#[test]
fn formats_without_an_f32_pass_write_16_bit_rows_directly() {
    let direct: Vec<&str> = formats().into_iter().filter(|f| f.direct_16bit()).map(|f| f.desc().name).collect();
    let tables = ["q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "iq4_nl", "iq4_xs", "mxfp4", "nvfp4"];
    let grids = ["iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"];
    let one_pass = ["q6_k", "tq1_0", "fp8_e4m3", "fp8_e5m2", "q8_0", "q8_k"];
    for name in tables.into_iter().chain(["int4g", "tq2_0"]).chain(one_pass).chain(grids) {
        assert!(direct.contains(&name), "{name} lost its direct 16-bit path: {direct:?}");
    }
}

/// Every format's row decode (`Format::dequant_row_at`, which runs compiled for the CPU's SIMD
/// level: `qforge_core::cpu::dispatch`) gives the portable build's bits at every level the
/// machine has, for f32 / f16 / bf16, on raw random bytes (NaN / Inf / subnormal scales
/// included) and a partial last block.
#[test]
fn row_decode_is_the_same_at_every_simd_level() {
    use qforge_core::cpu::{Level, testable_levels, with_level};
    let levels = testable_levels();
    assert!(levels.contains(&Level::Scalar));
    let mut rng = qforge_core::rand::Rng::new(11);
    let cols = 1000;
    let bits = |f: &dyn Format, row: &[u8], aux: &[u8], level: Level| {
        with_level(level, || {
            let (mut a, mut b, mut c) = (vec![0f32; cols], vec![f16::ZERO; cols], vec![bf16::ZERO; cols]);
            f.dequant_row_at(row, 0, aux, OutRow::F32(&mut a)).unwrap();
            f.dequant_row_at(row, 0, aux, OutRow::F16(&mut b)).unwrap();
            f.dequant_row_at(row, 0, aux, OutRow::Bf16(&mut c)).unwrap();
            let mut v: Vec<u32> = a.iter().map(|x| x.to_bits()).collect();
            v.extend(b.iter().map(|x| u32::from(x.to_bits())));
            v.extend(c.iter().map(|x| u32::from(x.to_bits())));
            v
        })
    };
    for f in formats() {
        // A real tensor's side section (fp8's scale grid), and random bytes for the blocks.
        let t = qforge_cpu::quantize(f, Shape::new([1, cols]).unwrap(), &data(cols, 5), None).unwrap();
        for _ in 0..20 {
            let row = rng.bytes(t.row(0).unwrap().len());
            let want = bits(f, &row, t.aux(), Level::Scalar);
            for &l in &levels {
                assert_eq!(bits(f, &row, t.aux(), l), want, "{} at {}", f.desc().name, l.name());
            }
        }
    }
}

/// A format without a 16-bit row path of its own (every registered one has one): blocks of 4
/// signed bytes, value `code / 16`.
struct Toy;

impl qforge_core::BlockFormat for Toy {
    type Block = [u8; 4];
    const DESC: qforge_core::FormatDesc = qforge_core::FormatDesc {
        name: "toy",
        family: "test",
        ggml_type: None,
        block_size: 4,
        block_bytes: 4,
        role: qforge_core::Role::Weight,
        dot_type: None,
        summary: "4 x i8 codes, fixed scale 1/16",
        cuda: None,
    };
    fn decode<O: qforge_core::Elem>(block: &[u8; 4], out: &mut [O]) {
        for (o, &b) in out.iter_mut().zip(block) {
            *o = O::from_f32(f32::from(b as i8) / 16.0);
        }
    }
    fn encode(x: &[f32], _weights: Option<&[f32]>, out: &mut [u8; 4]) {
        *out = [0; 4];
        for (o, &v) in out.iter_mut().zip(x) {
            *o = (v * 16.0).round().clamp(-128.0, 127.0) as i8 as u8;
        }
    }
}

/// `dequantize` to f16 / bf16 of a format without `DIRECT_16BIT` decodes each row to an f32
/// scratch row and converts it: the same bits as converting its f32 dequantization, rows
/// with a partial last block, several rayon tasks.
#[test]
fn formats_without_a_16_bit_path_convert_an_f32_row() {
    static TOY: qforge_core::Registered<Toy> = qforge_core::Registered::<Toy>::NEW;
    let toy: &dyn Format = &TOY;
    assert!(!toy.direct_16bit());
    let (rows, cols) = (70, 1001);
    let t = qforge_cpu::quantize(toy, Shape::new([rows, cols]).unwrap(), &data(rows * cols, 9), None).unwrap();
    let y32 = qforge_cpu::dequantize::<f32>(&t).unwrap();
    let y16 = qforge_cpu::dequantize::<f16>(&t).unwrap();
    let yb = qforge_cpu::dequantize::<bf16>(&t).unwrap();
    assert!(y32.iter().any(|&v| v != 0.0 && v.fract() != 0.0));
    for ((&a, h), b) in y32.iter().zip(&y16).zip(&yb) {
        assert_eq!(h.to_bits(), f16::from_f32(a).to_bits());
        assert_eq!(b.to_bits(), bf16::from_f32(a).to_bits());
    }
}
