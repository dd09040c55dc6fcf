//! The formats' CUDA device code, compiled for the host by nvcc (build script, feature
//! `cuda`), checked against the Rust reference. No GPU needed: this is what keeps the
//! kernels' arithmetic honest between GPU runs.
//!
//! * dequant f32 / f16 / bf16 (the kernels' own work items, partial last blocks included) of
//!   random blocks — NaN / Inf / subnormal scales included — bit for bit with the Rust
//!   `dequant_row` (NaN where it gives NaN);
//! * mat-vec (M = 1..8) with activations quantized to q8_1 by the device code: within 1e-5
//!   of Σ|terms| of an f64 dot of the Rust-dequantized weights and the q8_1 activations;
//! * the activation quantizer: d = amax/127, |x - d·q| ≤ d/2, s = d·Σq;
//! * a format's optional `decode_h2` (the GEMM's f16 pairs): decode's values packed to f16,
//!   bit for bit.
#![cfg(feature = "cuda")]

use qforge_core::{DType, Format, QuantTensor, Shape};
use qforge_cuda::host::{self, HostFns, QfBlockQ8_1};

/// The shared deterministic generator, with this file's wide-range floats.
use qforge_core::rand::Rng;

trait WideF32 {
    /// Uniform in [-1, 1) times 2^e, e in -8..8.
    fn f32(&mut self) -> f32;
}

impl WideF32 for Rng {
    fn f32(&mut self) -> f32 {
        let u = self.unit_f32();
        let e = (self.next_u64() % 16) as i32 - 8;
        (2.0 * u - 1.0) * 2f32.powi(e)
    }
}

fn formats_with_code() -> Vec<(&'static dyn Format, &'static HostFns)> {
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for f in qforge_formats::registry().iter() {
        match (&f.desc().cuda, host::get(f.desc().name)) {
            (Some(_), Some(h)) => out.push((f, h)),
            (Some(_), None) => panic!("{} has device code but no host wrappers", f.desc().name),
            (None, _) => missing.push(f.desc().name),
        }
    }
    if !missing.is_empty() {
        eprintln!("MISSING CUDA device code (no kernels, not checked): {}", missing.join(" "));
    }
    assert!(!out.is_empty());
    out
}

fn same(a: u32, b: u32, nan: fn(u32) -> bool) -> bool {
    a == b || (nan(a) && nan(b))
}

/// Blocks with every scale field hit: a random block per byte offset o, with the f16 at o set
/// to +Inf, -Inf, a subnormal or -0 in turn, and the f32 at o (4-aligned) set to +Inf / NaN.
/// Wherever a format keeps its scales, some of these blocks have special ones.
fn special_blocks(block_bytes: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for o in 0..block_bytes - 1 {
        for v in [[0x00, 0x7c], [0x00, 0xfc], [0x01, 0x00], [0x00, 0x80]] {
            let mut b = rng.bytes(block_bytes);
            b[o..o + 2].copy_from_slice(&v);
            out.extend_from_slice(&b);
        }
        if o % 4 == 0 && o + 4 <= block_bytes {
            for v in [f32::INFINITY, f32::NAN] {
                let mut b = rng.bytes(block_bytes);
                b[o..o + 4].copy_from_slice(&v.to_le_bytes());
                out.extend_from_slice(&b);
            }
        }
    }
    out
}

/// Format-specific special blocks: scale fields the byte-offset sweep of [`special_blocks`]
/// cannot hit, as (byte offset, mask of the bits to set, value) patches on a random block.
/// iq1_m keeps its f16 super-block scale in the top nibbles of its four u16 scales (bytes 49,
/// 51, 53, 55): nibbles 0, 0, 0xC, 0x7 are d = 0x7C00 (+Inf), 0, 0, 0xE, 0x7 a NaN.
fn format_special_blocks(name: &str, block_bytes: usize, rng: &mut Rng) -> Vec<u8> {
    let patches: &[&[(usize, u8, u8)]] = match name {
        "iq1_m" => &[
            &[(49, 0xf0, 0x00), (51, 0xf0, 0x00), (53, 0xf0, 0xc0), (55, 0xf0, 0x70)],
            &[(49, 0xf0, 0x00), (51, 0xf0, 0x00), (53, 0xf0, 0xe0), (55, 0xf0, 0x70)],
        ],
        _ => &[],
    };
    let mut out = Vec::new();
    for p in patches {
        let mut b = rng.bytes(block_bytes);
        for &(o, mask, v) in *p {
            b[o] = (b[o] & !mask) | v;
        }
        out.extend_from_slice(&b);
    }
    out
}

/// A format's optional `decode_h2` (f16 pairs for the GEMM's f16 tensor-core inputs) gives,
/// for every chunk of random and special-scale blocks (Inf, subnormal, -0, NaN), the bits of
/// its `decode`'s values packed for the f16 mma, NaN as NaN. The formats that have one are
/// named here, so that one losing it (or gaining one unchecked) fails.
#[test]
fn decode_h2_is_decode_packed_to_f16_bit_for_bit() {
    const WITH_H2: &[&str] = &["q4_0", "q5_0", "q8_0", "q8_1"];
    let mut rng = Rng::new(0x4832);
    let mut checked = Vec::new();
    for (f, h) in formats_with_code() {
        let bb = f.desc().block_bytes;
        let mut blocks = rng.bytes(bb * 512);
        blocks.extend(special_blocks(bb, &mut rng));
        let name = f.desc().name;
        let bad = h.h2_mismatches(&blocks, bb);
        assert_eq!(bad.is_some(), WITH_H2.contains(&name), "{name}: decode_h2 present = {}", bad.is_some());
        if let Some(bad) = bad {
            assert_eq!(bad, 0, "{name}: {bad} f16 values of decode_h2 differ from decode's");
            checked.push(name);
        }
    }
    assert_eq!(checked, WITH_H2);
}

/// Formats whose decode cannot give NaN / cannot give Inf, whatever the bytes: nvfp4 (a
/// UE4M3 scale whose NaN code decodes to 0, at most 224 times e2m1's 6) gives neither;
/// mxfp4 (an e8m0 scale, 0xFF a finite 2^127 that can overflow to Inf) no NaN. Every
/// other format must show both in the data below, so a format that can produce them but is
/// never exercised with them fails the test. The list itself is checked: a listed format
/// that does give NaN / Inf on any block fails too.
const NEVER_NAN: &[&str] = &["nvfp4", "mxfp4"];
const NEVER_INF: &[&str] = &["nvfp4"];

/// Every format with device code decodes random bytes bit for bit like the Rust reference.
#[test]
fn dequant_matches_rust_reference_bit_for_bit() {
    for (f, h) in formats_with_code() {
        let d = f.desc();
        let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15 ^ d.block_bytes as u64);
        let (mut nans, mut infs) = (0, 0);
        // 64 rows × (3 blocks + 5 elements): whole blocks and a partial last block per row
        // (random bytes: NaN / subnormal f16 scales many times over); then one block per row
        // of the special-scale blocks. A grid format (fp8) has its specials in the grid
        // instead: 130 × 300 random codes (partial grid cells at both edges) with the grid
        // cells set to ±Inf, NaN, a subnormal, -0 and random scales in turn.
        let unit = f.split_granularity().1;
        let cases = if is_grid(f) {
            vec![(64, 3 * unit + 5, None, false), (130, 2 * unit, None, false), (130, 300, None, true)]
        } else {
            let mut special = special_blocks(d.block_bytes, &mut rng);
            special.extend(format_special_blocks(d.name, d.block_bytes, &mut rng));
            let nspecial = special.len() / d.block_bytes;
            vec![(64, 3 * unit + 5, None, false), (64, 4 * unit, None, false), (nspecial, unit, Some(special), false)]
        };
        for (rows, cols, fixed, special_grid) in cases {
            let mut bytes = fixed.unwrap_or_else(|| rng.bytes(rows * d.row_bytes(cols).unwrap()));
            bytes.extend(grid_cells(f, rows, cols, &mut rng, special_grid));
            let t = QuantTensor::new(f, Shape::new([rows, cols]).unwrap(), bytes).unwrap();
            for dtype in DType::ALL {
                let got = h.dequant(&t, dtype).unwrap();
                let want = qforge_cpu::dequantize_dyn(&t, dtype).unwrap();
                let want = want.le_bytes();
                assert_eq!(got.len(), want.len(), "{} {dtype}: output length", d.name);
                let sz = dtype.size();
                let word = |b: &[u8]| b.iter().rev().fold(0u32, |w, &x| w << 8 | u32::from(x));
                let nan: fn(u32) -> bool = match dtype {
                    DType::F32 => |w| f32::from_bits(w).is_nan(),
                    DType::F16 => |w| w & 0x7c00 == 0x7c00 && w & 0x3ff != 0,
                    DType::Bf16 => |w| w & 0x7f80 == 0x7f80 && w & 0x7f != 0,
                };
                for (i, (g, w)) in got.chunks_exact(sz).zip(want.chunks_exact(sz)).enumerate() {
                    let (g, w) = (word(g), word(w));
                    assert!(
                        same(g, w, nan),
                        "{} {dtype}: element {i} (row {}, col {}): device code gives {g:#x}, Rust {w:#x}",
                        d.name,
                        i / cols,
                        i % cols
                    );
                    nans += usize::from(dtype == DType::F32 && nan(w));
                    infs += usize::from(dtype == DType::F32 && f32::from_bits(w).is_infinite());
                }
            }
        }
        let (no_nan, no_inf) = (NEVER_NAN.contains(&d.name), NEVER_INF.contains(&d.name));
        assert!(!no_nan || nans == 0, "{}: listed as never NaN but decodes {nans} NaN values", d.name);
        assert!(!no_inf || infs == 0, "{}: listed as never Inf but decodes {infs} Inf values", d.name);
        assert!(no_nan || nans > 0, "{}: the data must cover NaN results (none decoded)", d.name);
        assert!(no_inf || infs > 0, "{}: the data must cover Inf results (none decoded)", d.name);
        eprintln!("{}: bit-exact in f32/f16/bf16 ({nans} NaN, {infs} Inf values)", d.name);
    }
}

/// Whether `f` is a grid format (its tensors carry a side section: the fp8 scale grid).
fn is_grid(f: &dyn Format) -> bool {
    f.aux_bytes(1, 1).unwrap() > 0
}

/// The side section of a rows × cols tensor of a grid format (empty for block formats): f32
/// scale cells, random finite ones, or with `special` ±Inf, NaN, a subnormal, -0 and random
/// ones in turn.
fn grid_cells(f: &dyn Format, rows: usize, cols: usize, rng: &mut Rng, special: bool) -> Vec<u8> {
    let specials = [f32::INFINITY, f32::NAN, f32::NEG_INFINITY, 1e-40, -0.0];
    let cells = f.aux_bytes(rows, cols).unwrap() / 4;
    let cell = |i: usize, rng: &mut Rng| if special && i < specials.len() { specials[i] } else { rng.f32() };
    (0..cells).flat_map(|i| cell(i, rng).to_le_bytes()).collect()
}

/// Random weights whose decoded values are all finite (a block with a non-finite value is
/// re-rolled until there is none; a grid format gets positive finite scales): the tensor's
/// bytes (side section included) and its values.
fn finite_weights(f: &'static dyn Format, rng: &mut Rng, n: usize, k: usize) -> (Vec<u8>, Vec<f32>) {
    let d = f.desc();
    let rb = d.row_bytes(k).unwrap();
    let aux: Vec<u8> =
        (0..f.aux_bytes(n, k).unwrap() / 4).flat_map(|_| (rng.f32().abs() + 0.01).to_le_bytes()).collect();
    let mut bytes = Vec::with_capacity(n * rb + aux.len());
    let mut vals = Vec::with_capacity(n * k);
    let mut row = vec![0f32; k];
    for r in 0..n {
        let mut b = rng.bytes(rb);
        loop {
            f.dequant_row_at(&b, r, &aux, qforge_core::OutRow::F32(&mut row)).unwrap();
            let Some(i) = row.iter().position(|v| !(v.is_finite() && v.abs() < 1e30)) else { break };
            let bi = i / d.block_size;
            let fresh = rng.bytes(d.block_bytes);
            b[bi * d.block_bytes..(bi + 1) * d.block_bytes].copy_from_slice(&fresh);
        }
        bytes.extend_from_slice(&b);
        vals.extend_from_slice(&row);
    }
    bytes.extend_from_slice(&aux);
    (bytes, vals)
}

/// The mat-vec work items (dot_q8_1 of every format) against an f64 reference.
#[test]
fn matvec_matches_f64_reference() {
    for (f, h) in formats_with_code() {
        let d = f.desc();
        let mut rng = Rng::new(0x1234_5678 ^ d.block_bytes as u64);
        let unit = f.split_granularity().1;
        for (n, k, m) in [(7, 2 * unit, 1), (5, 3 * unit + 7, 3), (3, unit, 8), (130, unit + 40, 2)] {
            let (bytes, wv) = finite_weights(f, &mut rng, n, k);
            let t = QuantTensor::new(f, Shape::new([n, k]).unwrap(), bytes).unwrap();
            let x: Vec<f32> = (0..m * k).map(|_| rng.f32()).collect();
            let nblocks = host::q8_1_blocks(d, k);
            let act = host::quantize_q8_1(&x, m, k, nblocks);
            let y = h.matvec(&t, &act, m).unwrap();
            for (o, (&got, (sum, abs))) in y.iter().zip(host::matvec_reference(&wv, &act, n, k, m)).enumerate() {
                let got = f64::from(got);
                assert!(
                    (got - sum).abs() <= 1e-5 * abs + 1e-30,
                    "{} matvec n={n} k={k} m={m}: y[{}][{}] = {got}, f64 reference {sum} (Σ|terms| {abs})",
                    d.name,
                    o / n,
                    o % n
                );
            }
        }
        eprintln!("{}: matvec within 1e-5 of Σ|terms| for M = 1, 3, 8", d.name);
    }
}

/// The activation quantizer: ggml's q8_1 arithmetic, padding quantized as 0.
#[test]
fn quantize_q8_1_is_amax_scaled_rounding() {
    let mut rng = Rng::new(42);
    let (m, k, nblocks) = (3, 100, 4);
    let mut x: Vec<f32> = (0..m * k).map(|_| rng.f32()).collect();
    x[5..37].fill(0.0); // an all-zero block: d = 0, q = 0
    x[0] = 0.0;
    let act = host::quantize_q8_1(&x, m, k, nblocks);
    for r in 0..m {
        for b in 0..nblocks {
            let a: QfBlockQ8_1 = act[r * nblocks + b];
            let xs: Vec<f32> = (0..32).map(|i| if b * 32 + i < k { x[r * k + b * 32 + i] } else { 0.0 }).collect();
            let amax = xs.iter().fold(0f32, |s, v| s.max(v.abs()));
            assert_eq!(a.d, amax / 127.0);
            let sum: i32 = a.qs.iter().map(|&q| i32::from(q)).sum();
            assert_eq!(a.s, a.d * sum as f32);
            for (i, (&q, &v)) in a.qs.iter().zip(&xs).enumerate() {
                assert!((v - a.d * f32::from(q)).abs() <= a.d * 0.5 * 1.0001, "row {r} block {b} elem {i}: {v} -> {q}");
                if b * 32 + i >= k {
                    assert_eq!(q, 0, "padding quantizes to 0");
                }
            }
        }
    }
}
