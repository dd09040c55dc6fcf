//! The fused GEMM (`kernels-cuda/gemm.cuh`) compiled for the host — the very tile loop,
//! decode into shared memory, predication, fragment loads and epilogue the GPU runs, with
//! `warp.cuh`'s host mma following the PTX ISA's fragment layouts — against an f64
//! reference written here from the Rust side: the CPU dequantization of the weights, weights
//! and activations rounded to the tensor-core input type (f16 / bf16, round to nearest even,
//! with `half`), products summed in f64.
//!
//! Shapes: every K ∈ {1, 33, 100, 128, 257, 288, 4097} × N ∈ {1, 7, 129} × M ∈ {1, 9, 17,
//! 100, 257} for every format with device code (f16 inputs, f32 output), and a cross-section
//! of them for the other input / output types and for split-k (K cut into 2, 3 and 7 ranges,
//! the partials summed as `qforge_reduce_splits` does). No GPU needed.
#![cfg(feature = "cuda")]

use qforge_core::{DType, Format, QuantTensor, Shape};
use qforge_cuda::host;

mod support;
use support::gemm_ref::{Gemm, instance, multi_cta, odd_shapes, other_types, split_k};

fn host_gemm(h: &'static host::HostFns) -> impl Fn(&QuantTensor<'_>, &[f32], usize, DType, DType) -> Vec<u8> {
    move |w, x, m, mma, out| h.gemm(w, x, m, mma, out).unwrap()
}

fn formats() -> Vec<(&'static dyn Format, &'static host::HostFns)> {
    let out: Vec<_> = qforge_formats::registry()
        .iter()
        .filter(|f| f.desc().cuda.is_some())
        .map(|f| (f, host::get(f.desc().name).expect("a format with device code has host wrappers")))
        .collect();
    assert!(out.len() >= 20, "the registry's formats with device code");
    out
}

/// The host GEMM on instance `tile`, K cut into `splits` ranges (1: whole), the partials
/// reduced as `qforge_reduce_splits` does.
fn on_instance(
    h: &'static host::HostFns,
    tile: usize,
    splits: usize,
) -> impl Fn(&QuantTensor<'_>, &[f32], usize, DType, DType) -> Vec<u8> {
    move |w, x, m, mma, out| {
        if splits == 1 {
            return h.gemm_on(tile, w, x, m, mma, out, 1).unwrap();
        }
        let parts = h.gemm_tile_partials(tile, w, x, m, mma, splits).unwrap();
        host::reduce_splits(&parts, splits, out)
    }
}

/// `cases` for every format with device code, on the host GEMM, the formats split over two
/// threads.
fn on_every_format(cases: fn(&'static dyn Format, Gemm<'_>)) {
    let fs = formats();
    std::thread::scope(|s| {
        for chunk in fs.chunks(fs.len().div_ceil(2)) {
            s.spawn(move || chunk.iter().for_each(|&(f, h)| cases(f, &host_gemm(h))));
        }
    });
}

/// Every format, every shape of the grid, f16 tensor-core inputs, f32 output.
#[test]
fn every_format_every_odd_shape_f16() {
    on_every_format(odd_shapes);
}

/// Every format, bf16 inputs and the 16-bit outputs, on shapes that cross every edge: a
/// partial tile in M, N and K, K below one block, K past 4096.
#[test]
fn every_format_other_types() {
    on_every_format(other_types);
}

/// Split-k: every format, K cut into 2, 3 and 7 ranges of whole k-steps (7 is more than some
/// shapes have: empty ranges must add zeros), partial sums reduced in f32 as the device's
/// `qforge_reduce_splits_<out>` does.
#[test]
fn every_format_split_k() {
    let fs = formats();
    std::thread::scope(|s| {
        for chunk in fs.chunks(fs.len().div_ceil(2)) {
            s.spawn(move || {
                for &(f, h) in chunk {
                    for splits in [2, 3, 7] {
                        let gemm = move |w: &QuantTensor<'_>, x: &[f32], m: usize, mma: DType, out: DType| {
                            let parts = h.gemm_split_partials(w, x, m, mma, splits).unwrap();
                            host::reduce_splits(&parts, splits, out)
                        };
                        split_k(f, &gemm, splits);
                    }
                }
            });
        }
    });
}

/// Every instance of the fused GEMM (`FUSED_GEMM_TILES`, the configs qforge-tiling can
/// return) besides instance 0 (the tests above): every format on the edge-crossing shapes,
/// every input / output pair, whole and with K cut into 3 ranges (the pipeline's prologue, steady state and drain all crossed: K = 1
/// has one k-step, fewer than any instance's stages; K = 4097 has 129).
#[test]
fn every_instance_every_format_edge_shapes() {
    let fs = formats();
    assert!(qforge_cuda::codegen::FUSED_GEMM_TILES.len() >= 2);
    std::thread::scope(|s| {
        for chunk in fs.chunks(fs.len().div_ceil(2)) {
            s.spawn(move || {
                for &(f, h) in chunk {
                    assert_eq!(h.gemm.len(), qforge_cuda::codegen::FUSED_GEMM_TILES.len());
                    for tile in 1..h.gemm.len() {
                        for splits in [1, 3] {
                            instance(f, &on_instance(h, tile, splits), splits);
                        }
                    }
                }
            });
        }
    });
}

/// Every instance besides the general one (the skinny ones: weights decoded straight into the
/// mma's A fragments; the large tiled one: 128 × 128 CTAs) on grids of several CTAs along N
/// and M, whole and with K cut into 4 ranges (several 256-element phases each): every format.
#[test]
fn instances_every_format_multi_cta_shapes() {
    let fs = formats();
    let tiles = qforge_cuda::codegen::FUSED_GEMM_TILES;
    assert!(tiles.iter().any(|t| t.skinny) && tiles.iter().skip(1).any(|t| !t.skinny));
    std::thread::scope(|s| {
        for chunk in fs.chunks(fs.len().div_ceil(2)) {
            s.spawn(move || {
                for &(f, h) in chunk {
                    for tile in 1..tiles.len() {
                        for splits in [1, 4] {
                            multi_cta(f, &on_instance(h, tile, splits), splits);
                        }
                    }
                }
            });
        }
    });
}

/// The ldmatrix loads the GEMM uses give exactly the mma's fragments. ldmatrix, from the PTX
/// ISA's text ("Warp-level matrix load instruction: ldmatrix"), transcribed here: for
/// .m8n8.x4 / .x2, threads 8i..8i+7 supply the addresses of rows 0..7 of matrix i, and each
/// thread receives, in its register i, row laneid / 4 and the two elements 2·(laneid % 4),
/// 2·(laneid % 4) + 1 of matrix i. Loading distinct values through warp.cuh's host
/// ldmatrix with the GEMM's own address functions must land every element where the
/// ISA's mma.m16n8k16 fragment layout (transcribed in the next test) puts it.
#[test]
fn ldmatrix_loads_are_the_mma_fragments() {
    let a: [u16; 256] = std::array::from_fn(|i| i as u16);
    let b: [u16; 128] = std::array::from_fn(|i| 1000 + i as u16);
    let (ra, rb) = host::ldsm_frags(&a, &b);
    for lane in 0..32usize {
        let (group, tig) = (lane >> 2, lane % 4);
        for i in 0..8 {
            // mma A element a_i: row groupID (+ 8 for i in {2, 3, 6, 7}), column 2·tig + (i & 1) (+ 8 for i ≥ 4).
            let row = group + if (2..4).contains(&i) || i >= 6 { 8 } else { 0 };
            let col = 2 * tig + (i & 1) + if i >= 4 { 8 } else { 0 };
            let got = (ra[lane][i / 2] >> (16 * (i & 1))) as u16;
            assert_eq!(got, a[row * 16 + col], "A lane {lane} a{i}");
        }
        for i in 0..4 {
            // mma B element b_i: k = 2·tig + (i & 1) (+ 8 for i ≥ 2), n = groupID; stored n-major.
            let k = 2 * tig + (i & 1) + if i >= 2 { 8 } else { 0 };
            let got = (rb[lane][i / 2] >> (16 * (i & 1))) as u16;
            assert_eq!(got, b[group * 16 + k], "B lane {lane} b{i}");
        }
    }
}

/// warp.cuh's fragment layouts are the PTX ISA's ("Matrix Fragments for mma.m16n8k16 with
/// floating point type"), transcribed here from its text: with groupID = laneid >> 2 and
/// threadID_in_group = laneid % 4, A's element ai sits at row groupID for 0 ≤ i < 2 or
/// 4 ≤ i < 6 (groupID + 8 otherwise), column threadID_in_group·2 + (i & 1), + 8 for i ≥ 4; B's
/// bi at row threadID_in_group·2 + (i & 1), + 8 for i ≥ 2, column groupID; C's ci at row
/// groupID (+ 8 for i ≥ 2), column threadID_in_group·2 + (i & 1). The host mma and the
/// GEMM's shared-memory loads share warp.cuh's functions, so a layout both got wrong the same
/// way would pass the shape checks above and fail only on a GPU: this test is what stops that.
#[test]
fn fragment_layouts_are_the_ptx_isa_ones() {
    let mut seen_a = std::collections::HashSet::new();
    for lane in 0..32u32 {
        let (group, tig) = ((lane >> 2) as i32, (lane % 4) as i32);
        let got = host::frag_coords(lane);
        for i in 0..8i32 {
            let row = if (0..2).contains(&i) || (4..6).contains(&i) { group } else { group + 8 };
            let col = tig * 2 + (i & 1) + if i >= 4 { 8 } else { 0 };
            assert_eq!(got.a[i as usize], (row, col), "A lane {lane} a{i}");
            assert!(seen_a.insert((row, col)), "A element ({row}, {col}) held twice");
        }
        for i in 0..4i32 {
            let row = tig * 2 + (i & 1) + if i >= 2 { 8 } else { 0 };
            assert_eq!(got.b[i as usize], (row, group), "B lane {lane} b{i}");
            let crow = if i < 2 { group } else { group + 8 };
            assert_eq!(got.c[i as usize], (crow, tig * 2 + (i & 1)), "C lane {lane} c{i}");
        }
    }
    assert_eq!(seen_a.len(), 256, "the 32 lanes hold all of A, once");
    // "Matrix Fragments for mma.m16n8k32" (.s8 / .u8 / .e4m3 / .e5m2): A's ai sits at row
    // groupID for 0 ≤ i < 4 or 8 ≤ i < 12 (groupID + 8 otherwise), column
    // threadID_in_group·4 + (i & 3), + 16 for i ≥ 8; B's bi at row threadID_in_group·4 +
    // (i & 3), + 16 for i ≥ 4, column groupID; C / D as for m16n8k16 (checked above).
    let (mut seen_a8, mut seen_b8) = (std::collections::HashSet::new(), std::collections::HashSet::new());
    for lane in 0..32u32 {
        let (group, tig) = ((lane >> 2) as i32, (lane % 4) as i32);
        let got = qforge_cuda::host8::frag8_coords(lane);
        for i in 0..16i32 {
            let row = if (0..4).contains(&i) || (8..12).contains(&i) { group } else { group + 8 };
            let col = tig * 4 + (i & 3) + if i >= 8 { 16 } else { 0 };
            assert_eq!(got.a[i as usize], (row, col), "A8 lane {lane} a{i}");
            assert!(seen_a8.insert((row, col)), "A8 element ({row}, {col}) held twice");
        }
        for i in 0..8i32 {
            let row = tig * 4 + (i & 3) + if i >= 4 { 16 } else { 0 };
            assert_eq!(got.b[i as usize], (row, group), "B8 lane {lane} b{i}");
            assert!(seen_b8.insert((row, group)), "B8 element held twice");
        }
    }
    assert_eq!((seen_a8.len(), seen_b8.len()), (16 * 32, 32 * 8), "the 32 lanes hold all of A and B, once");
}

/// Every embedded (deflated) module inflates to PTX that defines every kernel the runtime
/// loads from it, the GEMM's included.
#[test]
fn embedded_modules_hold_every_kernel() {
    for (f, _) in formats() {
        let name = f.desc().name;
        let ptx = qforge_cuda::module_ptx(name).expect("embedded").expect("inflates");
        for k in qforge_cuda::codegen::module_kernel_names(name) {
            assert!(ptx.contains(&format!(".entry {k}(")), "{name}: the PTX lacks {k}");
        }
    }
    assert!(qforge_cuda::module_ptx("no_such_format").is_none());
}

/// The wrapper refuses what it cannot compute, with an error.
#[test]
fn wrong_inputs_are_errors() {
    let (f, h) = formats()[0];
    let w = qforge_cpu::quantize(f, Shape::new([3, 64]).unwrap(), &qforge_golden::signal(192, 1), None).unwrap();
    assert!(h.gemm(&w, &[0.0; 63], 1, DType::F16, DType::F32).is_err());
    assert!(h.gemm(&w, &[0.0; 64], 1, DType::F32, DType::F32).is_err());
}

/// The runtime launches each fused instance with exactly the shared memory its kernel lays
/// out (`FusedTile::smem_bytes` against the C++ config's `SMEM_BYTES`): a smaller launch would
/// overrun it on the GPU, which no host check would see.
#[test]
fn fused_launch_smem_is_the_kernels() {
    for (i, t) in qforge_cuda::codegen::FUSED_GEMM_TILES.iter().enumerate() {
        assert_eq!(host::fused_kernel_smem(i), Some(t.smem_bytes()), "{}", t.name());
    }
    assert_eq!(host::fused_kernel_smem(qforge_cuda::codegen::FUSED_GEMM_TILES.len()), None);
}
