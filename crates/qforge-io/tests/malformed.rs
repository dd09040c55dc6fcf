//! Hostile files: every malformation gives its typed error — no panic, no hang, no
//! allocation beyond the file's size.

mod common;

use common::{RawGguf, read};
use qforge_io::{Container, GgufFile, IoError, ModelFile, SafetensorsFile, imatrix};

fn err(bytes: &[u8]) -> IoError {
    GgufFile::parse(bytes).expect_err("malformed file accepted")
}

#[test]
fn every_truncation_of_a_gguf_fixture_is_an_error() {
    for file in ["model.gguf", "align64.gguf", "imatrix.gguf"] {
        let bytes = read(file);
        let g = GgufFile::parse(&bytes).unwrap();
        let end = g.tensors.iter().map(|t| t.offset as usize + t.size).max().unwrap();
        for n in 0..bytes.len() {
            let r = GgufFile::parse(&bytes[..n]);
            if n < end {
                let e = r.expect_err(&format!("{file} truncated to {n} bytes accepted"));
                assert!(matches!(e, IoError::Truncated { .. } | IoError::OutOfBounds { .. }), "{file}[..{n}]: {e}");
            } else {
                assert!(r.is_ok(), "{file}[..{n}] (all tensor data present) rejected");
            }
        }
    }
}

#[test]
fn every_truncation_of_a_safetensors_fixture_is_an_error() {
    let bytes = read("plain.safetensors");
    SafetensorsFile::parse(&bytes).unwrap();
    for n in 0..bytes.len() {
        let e = SafetensorsFile::parse(&bytes[..n]).expect_err("truncated safetensors accepted");
        assert!(matches!(e, IoError::Safetensors { .. }), "[..{n}]: {e}");
    }
}

#[test]
fn bad_magic_and_versions() {
    assert!(matches!(err(b"GGUX\x03\0\0\0"), IoError::BadMagic { .. }));
    for v in [0u32, 1, 4, 0x0300_0000] {
        let e = err(&RawGguf::header(v, 0, 0).b);
        assert!(matches!(e, IoError::UnsupportedVersion { version } if version == v), "{e}");
    }
    assert!(GgufFile::parse(&RawGguf::header(3, 0, 0).b).is_ok());
}

#[test]
fn lying_counts_fail_before_allocating() {
    for (nt, nkv) in [(u64::MAX, 0), (0, u64::MAX), (1 << 60, 1 << 60), (2, 0)] {
        let e = err(&RawGguf::header(3, nt, nkv).b);
        assert!(matches!(e, IoError::Truncated { .. }), "{nt} {nkv}: {e}");
    }
    // A string length of 2^60 (the "header length 2^60" of GGUF keys).
    let mut r = RawGguf::header(3, 0, 1);
    r.u64(1 << 60).bytes(b"key");
    assert!(matches!(err(&r.b), IoError::Truncated { .. }));
    // An array claiming 2^60 u64 elements: count × size overflows or exceeds the file.
    for count in [1u64 << 60, u64::MAX] {
        let mut r = RawGguf::header(3, 0, 1);
        r.str("k").u32(9).u32(10).u64(count).u64(7);
        let e = err(&r.b);
        assert!(matches!(e, IoError::Truncated { .. } | IoError::Overflow { .. }), "{e}");
    }
    // 2^60 strings / nested arrays.
    for ty in [8u32, 9] {
        let mut r = RawGguf::header(3, 0, 1);
        r.str("k").u32(9).u32(ty).u64(1 << 60);
        assert!(matches!(err(&r.b), IoError::Truncated { .. }));
    }
}

#[test]
fn unknown_types_are_typed_errors() {
    let mut r = RawGguf::header(3, 0, 1);
    r.str("k").u32(13).u32(0);
    assert!(matches!(err(&r.b), IoError::UnknownValueType { id: 13, .. }));
    let mut r = RawGguf::header(3, 0, 1);
    r.str("k").u32(9).u32(77).u64(0);
    assert!(matches!(err(&r.b), IoError::UnknownValueType { id: 77, .. }));
    for (id, unsupported) in [(999u32, false), (u32::MAX, false), (36, true), (4, true)] {
        let mut r = RawGguf::header(3, 1, 0);
        r.tensor("w", &[32], id, 0).pad(32).zeros(64);
        match err(&r.b) {
            IoError::UnknownTensorType { id: got, tensor } => assert!(!unsupported && got == id && tensor == "w"),
            IoError::UnsupportedTensorType { id: got, .. } => assert!(unsupported && got == id),
            e => panic!("type {id}: {e}"),
        }
    }
}

#[test]
fn invalid_utf8_in_keys_values_and_names() {
    let mut r = RawGguf::header(3, 0, 1);
    r.u64(2).bytes(&[0xff, 0xfe]).u32(4).u32(1);
    assert!(matches!(err(&r.b), IoError::InvalidUtf8 { what: "metadata key", .. }));
    let mut r = RawGguf::header(3, 0, 1);
    r.str("k").u32(8).u64(1).bytes(&[0xc3]);
    assert!(matches!(err(&r.b), IoError::InvalidUtf8 { .. }));
    let mut r = RawGguf::header(3, 1, 0);
    r.u64(1).bytes(&[0x80]).u32(1).u64(32).u32(0).u64(0).pad(32).zeros(128);
    assert!(matches!(err(&r.b), IoError::InvalidUtf8 { what: "tensor name", .. }));
}

#[test]
fn duplicates_are_errors() {
    let mut r = RawGguf::header(3, 0, 2);
    r.kv_u32("a", 1).kv_u32("a", 2);
    assert!(matches!(err(&r.b), IoError::DuplicateKey { key } if key == "a"));
    let mut r = RawGguf::header(3, 2, 0);
    r.tensor("w", &[8], 0, 0).tensor("w", &[8], 0, 32).pad(32).zeros(64);
    assert!(matches!(err(&r.b), IoError::DuplicateTensor { name } if name == "w"));
}

#[test]
fn dimensions_that_overflow_or_are_zero() {
    for ne in [&[1u64 << 32, 1 << 32][..], &[u64::MAX], &[1 << 62, 4], &[256, 1 << 62, 1 << 62]] {
        let mut r = RawGguf::header(3, 1, 0);
        r.tensor("w", ne, 0, 0).pad(32).zeros(64);
        assert!(matches!(err(&r.b), IoError::Overflow { .. } | IoError::OutOfBounds { .. }), "{ne:?}");
    }
    let mut r = RawGguf::header(3, 1, 0);
    r.tensor("w", &[8, 0], 0, 0).pad(32);
    assert!(matches!(err(&r.b), IoError::BadTensor { .. }));
    let mut r = RawGguf::header(3, 1, 0);
    r.tensor("w", &[1, 1, 1, 1, 1], 0, 0).pad(32).zeros(32);
    assert!(matches!(err(&r.b), IoError::BadTensor { .. }));
    // q4_0 rows must be whole 32-blocks, as ggml requires.
    let mut r = RawGguf::header(3, 1, 0);
    r.tensor("w", &[40], 2, 0).pad(32).zeros(64);
    assert!(matches!(err(&r.b), IoError::BadTensor { .. }));
}

#[test]
fn offsets_past_the_end_or_misaligned() {
    for off in [32u64, 1 << 40, u64::MAX - 31] {
        let mut r = RawGguf::header(3, 1, 0);
        r.tensor("w", &[8], 0, off).pad(32).zeros(32);
        assert!(matches!(err(&r.b), IoError::OutOfBounds { .. }), "offset {off}");
    }
    let mut r = RawGguf::header(3, 1, 0);
    r.tensor("w", &[8], 0, 4).pad(32).zeros(64);
    assert!(matches!(err(&r.b), IoError::BadTensor { .. }));
}

#[test]
fn bad_alignment_values() {
    for (ty, v) in [(4u32, 0u32), (4, 3), (5, 32)] {
        let mut r = RawGguf::header(3, 0, 1);
        r.str("general.alignment").u32(ty).u32(v);
        assert!(matches!(err(&r.b), IoError::BadAlignment { .. }), "{ty} {v}");
    }
}

#[test]
fn deep_nesting_is_bounded() {
    let mut r = RawGguf::header(3, 0, 1);
    r.str("k").u32(9);
    for _ in 0..10_000 {
        r.u32(9).u64(1);
    }
    assert!(matches!(err(&r.b), IoError::TooDeep { .. }));
}

#[test]
fn safetensors_hostile_headers() {
    let st = |b: &[u8]| SafetensorsFile::parse(b).expect_err("accepted");
    // Header length 2^60.
    let mut b = (1u64 << 60).to_le_bytes().to_vec();
    b.extend_from_slice(b"{}");
    assert!(matches!(st(&b), IoError::Safetensors { .. }));
    let mk = |json: &str, data: usize| {
        let mut b = (json.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(json.as_bytes());
        b.resize(b.len() + data, 0);
        b
    };
    for (json, data) in [
        (r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}}"#, 16),
        (r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,1000]}}"#, 8),
        (r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#, 16),
        (r#"{"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}}"#, 8),
        (r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]"#, 8),
        ("\u{fffd}", 0),
    ] {
        assert!(matches!(st(&mk(json, data)), IoError::Safetensors { .. }), "{json}");
    }
    let mut bad_utf8 = mk(r#"{"a":1}"#, 0);
    bad_utf8[9] = 0xff;
    assert!(matches!(st(&bad_utf8), IoError::Safetensors { .. }));
    // A dtype qforge does not handle is a typed error in the model view.
    let b = mk(r#"{"a":{"dtype":"BOOL","shape":[8],"data_offsets":[0,8]}}"#, 8);
    assert!(matches!(ModelFile::parse(&b, Container::Safetensors), Err(IoError::BadTensor { .. })));
}

#[test]
fn malformed_imatrix_files() {
    assert!(matches!(imatrix::parse(b""), Err(IoError::Truncated { .. })));
    assert!(matches!(imatrix::parse(&0i32.to_le_bytes()), Err(IoError::Imatrix { .. })));
    let mut b = 1i32.to_le_bytes().to_vec();
    b.extend_from_slice(&(-5i32).to_le_bytes());
    assert!(matches!(imatrix::parse(&b), Err(IoError::Imatrix { .. })));
    let mut b = 1i32.to_le_bytes().to_vec();
    b.extend_from_slice(&1i32.to_le_bytes());
    b.push(b'w');
    b.extend_from_slice(&1i32.to_le_bytes());
    b.extend_from_slice(&i32::MAX.to_le_bytes());
    assert!(matches!(imatrix::parse(&b), Err(IoError::Truncated { .. })));
    // The trailer (chunk count, dataset name: 19 bytes) is optional; anything shorter fails.
    let dat = read("imatrix.dat");
    for n in 0..dat.len() - 19 {
        assert!(imatrix::parse(&dat[..n]).is_err(), "imatrix.dat[..{n}]");
    }
}
