//! Properties of padding, sharding and packing over every registered format.

use proptest::prelude::*;
use qforge_core::{Format, QuantError, QuantTensor, Shape};
use qforge_cpu::{ActQuant, dequantize, matmul};
use qforge_pack::nibble::{NibbleOrder, pack_bits, pack_nibbles, repack_nibbles, unpack_bits, unpack_nibbles};
use qforge_pack::{Axis, concat, interleave, pad_matrix, pad_tensor, shard, shard_at, unpad_matrix};

fn formats() -> Vec<&'static dyn Format> {
    qforge_formats::registry().iter().collect()
}

fn values(n: usize, seed: u64) -> Vec<f32> {
    // A cheap deterministic generator: xorshift → roughly gaussian-ish via sum of uniforms.
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            let mut acc = 0f32;
            for _ in 0..3 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                acc += (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            }
            acc
        })
        .collect()
}

fn quantized(f: &'static dyn Format, n: usize, k: usize, seed: u64) -> (QuantTensor<'static>, Vec<f32>) {
    let x = values(n * k, seed);
    (qforge_cpu::quantize(f, Shape::new([n, k]).unwrap(), &x, None).unwrap(), x)
}

fn cfg() -> ProptestConfig {
    ProptestConfig { cases: 96, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(cfg())]

    /// pad → dequant → unpad equals the dequantization of the tensor quantized from its real
    /// elements; padded rows and whole padded blocks decode to exact zeros.
    #[test]
    fn padding_keeps_real_elements(fi in 0usize..64, n in 1usize..6, k in 1usize..700, nm in 1usize..9, km in prop::sample::select(vec![1usize, 32, 64, 128, 256]), seed in any::<u64>()) {
        let fs = formats();
        let f = fs[fi % fs.len()];
        let (t, _) = quantized(f, n, k, seed);
        let p = pad_tensor(&t, nm, km).unwrap();
        let (np, kp) = (p.rows(), p.cols());
        prop_assert!(np % nm == 0 && np >= n && kp % km == 0 && kp >= k);
        let whole: Vec<f32> = dequantize(&t).unwrap();
        let padded: Vec<f32> = dequantize(&p).unwrap();
        let back = unpad_matrix(&padded, np, kp, n, k).unwrap();
        prop_assert!(whole.iter().zip(&back).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())), "{}", f.desc().name);
        let real_blocks_end = k.div_ceil(f.desc().block_size) * f.desc().block_size;
        for r in 0..np {
            for c in 0..kp {
                if r >= n || c >= real_blocks_end {
                    prop_assert_eq!(padded[r * kp + c], 0.0, "{} padded position ({}, {})", f.desc().name, r, c);
                }
            }
        }
    }

    /// Dequantizing the shards and concatenating equals dequantizing the whole; joining the
    /// shards gives back the same bytes.
    #[test]
    fn sharding_is_invisible(fi in 0usize..64, n in 1usize..9, k in 1usize..1100, d in 1usize..5, along_k in any::<bool>(), seed in any::<u64>()) {
        let fs = formats();
        let f = fs[fi % fs.len()];
        let (t, _) = quantized(f, n, k, seed);
        let axis = if along_k { Axis::K } else { Axis::N };
        let Ok(parts) = shard(&t, axis, d) else {
            let (rg, cg) = f.split_granularity();
            let units = if along_k { k.div_ceil(cg) } else { n.div_ceil(rg) };
            prop_assert!(d > units, "{}: shard refused a feasible split", f.desc().name);
            return Ok(());
        };
        prop_assert_eq!(parts.len(), d);
        let whole: Vec<f32> = dequantize(&t).unwrap();
        let deq: Vec<Vec<f32>> = parts.iter().map(|s| dequantize(s).unwrap()).collect();
        let joined: Vec<f32> = if along_k {
            (0..n).flat_map(|r| parts.iter().zip(&deq).flat_map(move |(s, v)| v[r * s.cols()..(r + 1) * s.cols()].to_vec())).collect()
        } else {
            deq.concat()
        };
        prop_assert!(whole.iter().zip(&joined).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())));
        prop_assert_eq!(whole.len(), joined.len());
        let back = concat(&parts, axis).unwrap();
        prop_assert_eq!(back.data(), t.data());
    }

    /// Mat-mul on the padded weight and zero-padded activations, unpadded, equals mat-mul on
    /// the originals, bit for bit, in every activation mode.
    #[test]
    fn matmul_padded_equals_unpadded(fi in 0usize..64, n in 1usize..5, k in 1usize..600, m in 1usize..4, nm in 1usize..5, km in prop::sample::select(vec![1usize, 64, 128, 256]), mode in 0usize..4, seed in any::<u64>()) {
        let fs = formats();
        let f = fs[fi % fs.len()];
        let mode = ActQuant::ALL[mode];
        let (t, _) = quantized(f, n, k, seed);
        let x = values(m * k, seed ^ 0x9e37);
        let y = match matmul(&t, &x, m, mode) {
            Ok(y) => y,
            // A mode the format does not take is a typed refusal, out of this property's scope.
            Err(e) => {
                prop_assert!(matches!(e, QuantError::Unsupported { .. }), "{} {}: {}", f.desc().name, mode, e);
                return Err(TestCaseError::reject(format!("{} does not take {}", f.desc().name, mode)));
            }
        };
        let p = pad_tensor(&t, nm, km).unwrap();
        let xp = pad_matrix(&x, m, k, m, p.cols(), 0.0).unwrap();
        let yp = matmul(&p, &xp, m, mode).unwrap();
        let back = unpad_matrix(&yp, m, p.rows(), m, n).unwrap();
        prop_assert!(y.iter().zip(&back).all(|(a, b)| a == b || (a.is_nan() && b.is_nan())), "{} {}: {:?} vs {:?}", f.desc().name, mode, y, back);
    }

    #[test]
    fn nibble_orders_round_trip(v in prop::collection::vec(0u8..16, 1..16).prop_map(|v| v.repeat(8)), gi in 0usize..3) {
        let group = [2usize, 8, 16][gi];
        let v: Vec<u8> = v[..v.len() / group * group].to_vec();
        prop_assume!(!v.is_empty());
        for order in [NibbleOrder::SplitHalves, NibbleOrder::Adjacent, NibbleOrder::AdjacentHighFirst] {
            let mut p = vec![0u8; v.len() / 2];
            pack_nibbles(&v, order, group, &mut p).unwrap();
            let mut u = vec![0u8; v.len()];
            unpack_nibbles(&p, order, group, &mut u).unwrap();
            prop_assert_eq!(&u, &v);
            for to in [NibbleOrder::SplitHalves, NibbleOrder::Adjacent, NibbleOrder::AdjacentHighFirst] {
                let r = repack_nibbles(&p, order, to, group).unwrap();
                let mut direct = vec![0u8; v.len() / 2];
                pack_nibbles(&v, to, group, &mut direct).unwrap();
                prop_assert_eq!(r, direct);
            }
        }
    }

    #[test]
    fn bits_round_trip(v in prop::collection::vec(any::<u8>(), 0..100), bits in 1u32..=8) {
        let masked: Vec<u8> = v.iter().map(|x| (*x as u16 & ((1u16 << bits) - 1)) as u8).collect();
        let mut p = vec![0u8; (v.len() * bits as usize).div_ceil(8)];
        pack_bits(&v, bits, &mut p).unwrap();
        let mut u = vec![0u8; v.len()];
        unpack_bits(&p, bits, &mut u).unwrap();
        prop_assert_eq!(u, masked);
    }

    #[test]
    fn interleave_round_trips(fi in 0usize..64, n in 1usize..11, k in 1usize..600, r in 1usize..9, seed in any::<u64>()) {
        let fs = formats();
        let f = fs[fi % fs.len()];
        prop_assume!(f.aux_bytes(n, k).unwrap() == 0);
        let (t, _) = quantized(f, n, k, seed);
        let (data, n_to) = interleave::interleave_rows(&t, r).unwrap();
        prop_assert_eq!(n_to % r, 0);
        let back = interleave::deinterleave_rows(&data, f.desc().block_bytes, t.row_bytes(), r, n).unwrap();
        prop_assert_eq!(&back[..], t.rows_data());
    }
}

/// Known layouts: ggml's q4_0 order puts value j and j+16 in byte j; the adjacent order puts
/// 2j and 2j+1; bit packing is LSB first.
#[test]
fn packing_orders_match_the_formats() {
    let v: Vec<u8> = (0..32).map(|i| (i % 16) as u8).collect();
    let mut p = vec![0u8; 16];
    pack_nibbles(&v, NibbleOrder::SplitHalves, 32, &mut p).unwrap();
    assert_eq!(p[0], v[0] | (v[16] << 4));
    assert_eq!(p[15], v[15] | (v[31] << 4));
    pack_nibbles(&v, NibbleOrder::Adjacent, 32, &mut p).unwrap();
    assert_eq!(p[1], v[2] | (v[3] << 4));
    pack_nibbles(&v, NibbleOrder::AdjacentHighFirst, 32, &mut p).unwrap();
    assert_eq!(p[1], (v[2] << 4) | v[3]);
    let mut b = [0u8; 1];
    pack_bits(&[1, 0, 1, 1, 0, 0, 0, 1], 1, &mut b).unwrap();
    assert_eq!(b[0], 0b1000_1101);
    let mut b3 = [0u8; 2];
    pack_bits(&[7, 1, 2], 3, &mut b3).unwrap();
    assert_eq!(u16::from_le_bytes(b3), 7 | (1 << 3) | (2 << 6));
    assert!(pack_nibbles(&v, NibbleOrder::SplitHalves, 32, &mut [0u8; 15]).is_err());
    assert!(pack_bits(&v, 9, &mut [0u8; 36]).is_err());
}

/// q4_0 (block 32): a 4097-column tensor splits along K only at multiples of 32; N anywhere.
#[test]
fn shard_boundaries_are_validated() {
    let f = qforge_formats::get("q4_0").unwrap();
    let (t, _) = quantized(f, 3, 4097, 7);
    assert!(shard_at(&t, Axis::K, &[100]).is_err());
    assert!(shard_at(&t, Axis::K, &[4096]).is_ok());
    assert!(shard_at(&t, Axis::K, &[64, 32]).is_err());
    assert_eq!(shard_at(&t, Axis::N, &[1, 2]).unwrap().len(), 3);
    assert!(shard(&t, Axis::N, 4).is_err());
    let parts = shard(&t, Axis::K, 3).unwrap();
    assert_eq!(parts.iter().map(|p| p.cols()).collect::<Vec<_>>(), vec![1376, 1376, 1345]);
}

/// Regression (found by `matmul_padded_equals_unpadded`): q4_1's affine terms of the blocks
/// after the last whole batch of 8 were summed into one slot, so zero blocks appended by
/// padding regrouped them and the native result moved by one ulp.
#[test]
fn q4_1_native_padding_regression() {
    let f = qforge_formats::get("q4_1").unwrap();
    let (n, k, m) = (2, 373, 3);
    let (t, _) = quantized(f, n, k, 2804097317293875370);
    let x = values(m * k, 2804097317293875370 ^ 0x9e37);
    let y = matmul(&t, &x, m, ActQuant::Native).unwrap();
    let p = pad_tensor(&t, 1, 256).unwrap();
    let xp = pad_matrix(&x, m, k, m, p.cols(), 0.0).unwrap();
    let yp = unpad_matrix(&matmul(&p, &xp, m, ActQuant::Native).unwrap(), m, p.rows(), m, n).unwrap();
    assert_eq!(y, yp);
}
