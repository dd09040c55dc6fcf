//! Plain-float conversions (`decode_f32`, `to_dtype`, `encode` to a float type), which run
//! chunk by chunk on all cores: every value of tensors longer than several chunks, in every
//! direction, equals `half`'s (and Rust's `as`) conversion of that one value.

use half::{bf16, f16};
use qforge_core::{DType, rand::Rng};
use qforge_io::{Container, GgufWriter, ModelFile, Plain, TensorType, decode_f32, encode, to_dtype};

/// A length that is not a multiple of any chunk size, and spans several of them.
const N: usize = 3 * (1 << 15) + 4099;

/// Random bit patterns of `size`-byte values (NaNs, infinities, subnormals included), with
/// some ordinary values in between.
fn random_bytes(size: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut b = Vec::with_capacity(N * size);
    for i in 0..N {
        let bits = rng.next_u64();
        let v = match (i % 3, size) {
            (0, 2) => u64::from(f16::from_f32(i as f32 * 0.013 - 7.0).to_bits()),
            (0, 4) => u64::from((i as f32 * 0.013 - 7.0).to_bits()),
            (0, _) => (i as f64 * 0.013 - 7.0).to_bits(),
            _ => bits,
        };
        b.extend_from_slice(&v.to_le_bytes()[..size]);
    }
    b
}

fn model(p: Plain, data: &[u8]) -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_tensor("t.weight", TensorType::Plain(p), &[N]).unwrap();
    let mut s = w.start(Vec::new()).unwrap();
    s.write_tensor(data).unwrap();
    s.finish().unwrap()
}

/// The reference: each value widened on its own.
fn reference_f32(p: Plain, b: &[u8]) -> Vec<f32> {
    match p {
        Plain::F32 => b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect(),
        Plain::F16 => b.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
        Plain::Bf16 => b.chunks_exact(2).map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
        Plain::F64 => b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap()) as f32).collect(),
        _ => unreachable!("float types only"),
    }
}

/// NaNs compare as "both NaN" (their payloads are not part of the contract); everything
/// else bit for bit.
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn plain_conversions_equal_value_by_value_conversion() {
    for (seed, p) in [Plain::F32, Plain::F16, Plain::Bf16, Plain::F64].into_iter().enumerate() {
        let data = random_bytes(p.size(), seed as u64 + 1);
        let file = model(p, &data);
        let m = ModelFile::parse(&file, Container::Gguf).unwrap();
        let t = &m.tensors[0];
        let want = reference_f32(p, &data);
        let got = decode_f32(t).unwrap();
        assert_eq!(got.len(), N);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(same(*g, *w), "{} -> f32, value {i}: {g:e} vs {w:e}", p.name());
        }
        for d in [DType::F32, DType::F16, DType::Bf16] {
            let out = to_dtype(t, d).unwrap();
            let via_encode = encode(t, TensorType::Plain(Plain::from_dtype(d)), None).unwrap();
            assert_eq!(out, via_encode);
            let back: Vec<f32> = match d {
                DType::F32 => out.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect(),
                DType::F16 => out.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
                DType::Bf16 => out.chunks_exact(2).map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            };
            assert_eq!(back.len(), N, "{} -> {d:?}", p.name());
            for (i, (b, w)) in back.iter().zip(&want).enumerate() {
                let r = match d {
                    DType::F32 => *w,
                    DType::F16 => f16::from_f32(*w).to_f32(),
                    DType::Bf16 => bf16::from_f32(*w).to_f32(),
                };
                assert!(same(*b, r), "{} -> {d:?}, value {i} ({w:e}): {b:e} vs {r:e}", p.name());
            }
        }
    }
}

#[test]
fn integer_tensors_are_a_typed_error() {
    let data = vec![7u8; N * 4];
    let file = model(Plain::I32, &data);
    let m = ModelFile::parse(&file, Container::Gguf).unwrap();
    let err = decode_f32(&m.tensors[0]).unwrap_err().to_string();
    assert!(err.contains("integer"), "{err}");
    assert!(to_dtype(&m.tensors[0], DType::F16).is_err());
}
