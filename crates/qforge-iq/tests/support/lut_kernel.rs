//! The nibble-table formats' dot kernel (`qforge_legacy::kernels::lut_vec_dot`) on their real
//! block types, shared by the iq (iq4_nl) and fp4 (mxfp4, nvfp4) tests (`#[path]`-included by
//! both): the dispatched kernel (AVX2 where the CPU has it) and `lut_vec_dot_rows` give the
//! portable reference's bits for random blocks (raw scales: NaN / Inf too; every code) and
//! activations (-128 / 127 edges included), rows of every batch tail length.

use qforge_core::rand::Rng;
use qforge_legacy::BlockQ8_0;
use qforge_legacy::kernels::{LutBlock, lut_vec_dot, lut_vec_dot_portable, lut_vec_dot_rows};

fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

/// Random blocks; unless `raw`, every f16 field of the block (`halves` of them at its start)
/// is replaced by a finite value in a wide range.
fn random<B: bytemuck::Pod>(rng: &mut Rng, halves: usize, raw: bool) -> B {
    let mut b = rng.bytes(size_of::<B>());
    if !raw {
        for h in b.chunks_exact_mut(2).take(halves) {
            let v = ((rng.next_u64() % 2001) as f32 - 1000.0) * 2f32.powi((rng.next_u64() % 20) as i32 - 16);
            h.copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
        }
    }
    bytemuck::pod_read_unaligned(&b)
}

/// `whalves`: the leading f16 fields of a `W` block (0 where its scales are not f16).
pub fn check<W: LutBlock>(whalves: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..600 {
        let nb = case % 27;
        let raw = case % 9 == 4;
        let w: Vec<W> = (0..nb).map(|_| random(&mut rng, whalves, raw)).collect();
        let m = 1 + case % 10;
        let a: Vec<Vec<BlockQ8_0>> = (0..m)
            .map(|r| {
                (0..nb * W::UNITS)
                    .map(|_| {
                        let mut b: BlockQ8_0 = random(&mut rng, 1, raw);
                        if (case + r) % 3 == 0 {
                            b.qs = std::array::from_fn(|_| [-128, 127, -1, 0, -127][(rng.next_u64() % 5) as usize]);
                        }
                        b
                    })
                    .collect()
            })
            .collect();
        let want: Vec<f32> = a.iter().map(|a| lut_vec_dot_portable(&w, a)).collect();
        for (r, a) in a.iter().enumerate() {
            let got = lut_vec_dot(&w, a);
            assert!(same(got, want[r]), "case {case} ({nb} blocks) row {r}: {got:e} vs portable {:e}", want[r]);
        }
        let refs: Vec<&[BlockQ8_0]> = a.iter().map(Vec::as_slice).collect();
        let mut out = vec![0f32; m];
        lut_vec_dot_rows(&w, &refs, &mut out);
        for (r, (o, want)) in out.iter().zip(&want).enumerate() {
            assert!(same(*o, *want), "case {case}: row {r} of {m}: {o:e} vs portable {want:e}");
        }
    }
}
