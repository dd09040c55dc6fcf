//! Totality: for every shape in 1..=2^31, every layout, dtype pair and built-in device, a
//! config exists, fits the device and passes `Config::validate`; invalid input is a typed error.

use proptest::prelude::*;
use qforge_tiling::{
    ActDType, BUILTIN_DEVICES, Config, CudaProperties, Device, FusedTile, MAX_DIM, OutDType, Planner, Problem, Reject,
    TilingError, Variant, WeightLayout, select, select_fused,
};

fn devices() -> Vec<Device> {
    BUILTIN_DEVICES.iter().map(|n| Device::builtin(n).unwrap()).collect()
}

/// Every registered format (its layout from the registry), every group size a group-wise
/// format accepts, and the dense layouts.
fn layouts() -> Vec<WeightLayout> {
    let mut v: Vec<WeightLayout> =
        qforge_formats::registry().iter().map(|f| WeightLayout::from_format(f).unwrap()).collect();
    for name in WeightLayout::DENSE_NAMES {
        v.push(WeightLayout::lookup(name, None).unwrap());
    }
    for f in qforge_formats::registry().iter().filter(|f| f.params().group_size.is_some()) {
        v.extend((0..16).filter_map(|e| WeightLayout::lookup(f.desc().name, Some(1 << e)).ok()));
    }
    v
}

/// The registry decides: a group-wise format's tiling layouts are exactly its variants (same
/// group sizes, same bytes per group as the format's layout), and grid layouts keep their tile.
#[test]
fn layouts_agree_with_the_registry() {
    for f in qforge_formats::registry().iter() {
        let l = WeightLayout::from_format(f).unwrap();
        let (tr, tc) = f.layout().scale_tile();
        assert_eq!((l.n_block, l.k_block), (tr as u64, tc as u64), "{}", f.desc().name);
        if f.params().group_size.is_none() {
            assert!(matches!(
                WeightLayout::lookup(f.desc().name, Some(64)),
                Err(TilingError::GroupSizeNotAccepted { .. })
            ));
            continue;
        }
        for e in 0..40u32 {
            let g = 1u64 << e;
            let v = f.with_params(&qforge_core::Params::group_size(g as usize));
            match (WeightLayout::lookup(f.desc().name, Some(g)), v) {
                (Ok(l), Ok(v)) => {
                    assert_eq!((l.k_block, l.block_bytes), (g, v.layout().row_unit().1 as u64));
                    assert_eq!(l, WeightLayout::from_format(v).unwrap());
                }
                (Err(TilingError::InvalidGroupSize { group_size, reason }), Err(e)) => {
                    assert_eq!((group_size, reason), (g, e.to_string()))
                }
                (l, v) => panic!("{} g={g}: tiling {l:?} vs format {:?}", f.desc().name, v.map(|v| v.params())),
            }
        }
    }
}

fn check(c: &Config, p: &Problem, d: &Device) {
    assert!(c.block_m >= 1 && c.block_n >= 1 && c.block_k >= 1, "{c:?}");
    assert!(c.stages >= 1 && c.warps >= 1 && c.split_k >= 1, "{c:?}");
    assert!(c.smem_bytes <= d.smem_per_block_optin, "{} > {} on {}", c.smem_bytes, d.smem_per_block_optin, d.name);
    assert!(c.warps * 32 <= d.max_threads_per_block);
    assert!(c.grid >= 1 && c.tiles >= 1);
    assert!(c.predicted_us.is_finite() && c.predicted_us > 0.0);
    assert!(c.efficiency > 0.0 && c.efficiency <= 1.0, "{}", c.efficiency);
    assert!(c.waves > 0.0 && c.wave_efficiency > 0.0 && c.wave_efficiency <= 1.0);
    if let Err(e) = c.validate(p, d) {
        panic!("validate failed for {p:?} on {}: {e}\n{c:?}", d.name);
    }
}

/// Dimensions biased toward edge values.
fn dim() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => prop::sample::select(vec![1u64, 2, 7, 8, 15, 16, 31, 32, 127, 128, 129, 255, 256, 257, 288, 768, 4095, 4096, 4097, 65536, MAX_DIM - 1, MAX_DIM]),
        2 => (0u32..=31).prop_map(|e| 1u64 << e),
        2 => 1u64..=4096,
        1 => 1u64..=MAX_DIM,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
    #[test]
    fn a_valid_config_always_exists(m in dim(), n in dim(), k in dim(), a in 0usize..5, o in 0usize..3) {
        let (act, out) = (ActDType::ALL[a], OutDType::ALL[o]);
        for d in devices() {
            for layout in layouts() {
                let p = Problem::new(m, n, k, layout, act, out).unwrap();
                let c = select(&p, &d).unwrap();
                check(&c, &p, &d);
            }
        }
    }
}

fn h100() -> Device {
    Device::builtin("h100").unwrap()
}

fn fp8() -> WeightLayout {
    WeightLayout::lookup("fp8_e4m3", None).unwrap()
}

fn int4g(g: u64) -> WeightLayout {
    WeightLayout::lookup("int4g", Some(g)).unwrap()
}

#[test]
fn fp8_k128_regression() {
    // DeepGEMM's empty candidate set: FP8 with K = 128.
    for d in devices() {
        for m in [1, 64, 128, 4096] {
            for act in [ActDType::Fp8, ActDType::Bf16] {
                let p = Problem::new(m, 7168, 128, fp8(), act, OutDType::Bf16).unwrap();
                let c = select(&p, &d).unwrap();
                check(&c, &p, &d);
                assert!(c.stages as u64 <= 128u64.div_ceil(c.block_k as u64).max(1));
            }
        }
    }
    let p = Problem::new(4096, 7168, 128, fp8(), ActDType::Fp8, OutDType::Bf16).unwrap();
    let c = select(&p, &h100()).unwrap();
    assert_eq!(c.variant, Variant::Wgmma, "{}", c.explain());
}

#[test]
fn edge_shapes_regression() {
    let q4k = WeightLayout::lookup("q4_k", None).unwrap();
    let q40 = WeightLayout::lookup("q4_0", None).unwrap();
    let shapes: &[(u64, u64, u64)] = &[
        (1, 4096, 1),
        (64, 4096, 1),
        (4096, 1, 4096),
        (1, 1, 1),
        (1, 4096, 127),
        (333, 4096, 127),
        (65536, 65536, 65536),
        (MAX_DIM, MAX_DIM, MAX_DIM),
        // stories15M: dim 288, hidden 768.
        (1, 288, 288),
        (32, 288, 288),
        (1, 768, 288),
        (32, 768, 288),
        (1, 288, 768),
        (32, 288, 768),
    ];
    for d in devices() {
        for &(m, n, k) in shapes {
            for layout in [q4k, q40, WeightLayout::dense(OutDType::F16), int4g(256)] {
                let p = Problem::f16(m, n, k, layout).unwrap();
                let c = select(&p, &d).unwrap();
                check(&c, &p, &d);
            }
        }
    }
    let c = select(&Problem::f16(MAX_DIM, MAX_DIM, 1, q4k).unwrap(), &h100()).unwrap();
    assert!(c.persistent || c.tiles <= h100().max_grid_x);
    // Tiny M on a quantized format prefers gemv; a big square GEMM prefers wgmma on sm_90.
    assert_eq!(select(&Problem::f16(1, 4096, 4096, q4k).unwrap(), &h100()).unwrap().variant, Variant::Gemv);
    let big = select(&Problem::f16(4096, 4096, 4096, WeightLayout::dense(OutDType::F16)).unwrap(), &h100()).unwrap();
    assert_eq!(big.variant, Variant::Wgmma);
    assert_eq!(big.split_k, 1);
    // Small M x N with a huge K splits K.
    let sk = select(&Problem::f16(16, 16, 1 << 20, WeightLayout::dense(OutDType::F16)).unwrap(), &h100()).unwrap();
    assert!(sk.split_k > 1, "{}", sk.explain());
}

#[test]
fn explanation_names_rejections_and_runner_ups() {
    let p = Problem::f16(4096, 4096, 4096, WeightLayout::dense(OutDType::F16)).unwrap();
    let c = select(&p, &Device::builtin("t4").unwrap()).unwrap();
    let e = c.explain();
    assert!(e.contains("runner-up") && e.contains("rejected") && e.contains("needs a newer architecture"), "{e}");
    assert!(c.explanation.evaluated > 1);
    // On sm_80+ the sm75_mma table is skipped, and counted as superseded; on sm_75 it is not.
    let superseded =
        |d: &str| select(&p, &Device::builtin(d).unwrap()).unwrap().explanation.rejected[Reject::Superseded as usize];
    assert_eq!(superseded("t4"), 0);
    assert!(superseded("a100") > 0 && superseded("h100") == superseded("a100"));
}

#[test]
fn invalid_input_is_a_typed_error() {
    let f16 = WeightLayout::dense(OutDType::F16);
    assert_eq!(Problem::f16(0, 1, 1, f16), Err(TilingError::ZeroDimension { dim: "M" }));
    assert_eq!(Problem::f16(1, 0, 1, f16), Err(TilingError::ZeroDimension { dim: "N" }));
    assert_eq!(Problem::f16(1, 1, 0, f16), Err(TilingError::ZeroDimension { dim: "K" }));
    assert_eq!(
        Problem::f16(1, MAX_DIM + 1, 1, f16),
        Err(TilingError::DimensionTooLarge { dim: "N", value: MAX_DIM + 1 })
    );
    assert!(matches!(Device::builtin("h900"), Err(TilingError::UnknownDevice { .. })));
    for g in [0, 16, 48, 100, 8192, 1 << 31] {
        assert!(
            matches!(WeightLayout::lookup("int4g", Some(g)), Err(TilingError::InvalidGroupSize { group_size, .. }) if group_size == g)
        );
    }
    assert!(matches!(WeightLayout::lookup("q9_9", None), Err(TilingError::UnknownLayout { .. })));
    assert!(matches!(WeightLayout::lookup("f16", Some(64)), Err(TilingError::GroupSizeNotAccepted { .. })));
    assert!(matches!("int3".parse::<ActDType>(), Err(TilingError::UnknownDType { .. })));
    // A hand-built problem with bad fields is refused by select, not asserted.
    let mut p = Problem::f16(1, 1, 1, f16).unwrap();
    p.k = 0;
    assert!(matches!(select(&p, &h100()), Err(TilingError::ZeroDimension { dim: "K" })));
    // A device too small for the simple kernel.
    let mut tiny = Device::builtin("t4").unwrap();
    tiny.smem_per_block_optin = 1024;
    assert!(matches!(Planner::new(tiny.clone()), Err(TilingError::DeviceTooSmall { .. })));
    tiny.smem_per_block_optin = 65536;
    tiny.sm_count = 0;
    assert!(matches!(select(&Problem::f16(1, 1, 1, f16).unwrap(), &tiny), Err(TilingError::DeviceTooSmall { .. })));
}

#[test]
fn validate_rejects_a_tampered_config() {
    let d = Device::builtin("rtx4090").unwrap();
    let p = Problem::f16(512, 4096, 4096, WeightLayout::dense(OutDType::F16)).unwrap();
    let c = select(&p, &d).unwrap();
    let mut bad = c;
    bad.stages = 40;
    assert!(matches!(bad.validate(&p, &d), Err(TilingError::InvalidConfig { .. })));
    let mut bad = c;
    bad.smem_bytes += 128;
    assert!(matches!(bad.validate(&p, &d), Err(TilingError::InvalidConfig { .. })));
    let mut bad = c;
    bad.variant = Variant::Wgmma;
    assert!(matches!(bad.validate(&p, &d), Err(TilingError::InvalidConfig { .. })));
}

#[test]
fn a_minimal_device_still_gets_the_simple_kernel() {
    let props = CudaProperties {
        name: "tiny".into(),
        major: 6,
        minor: 1,
        multi_processor_count: 1,
        shared_mem_per_block: 4096,
        shared_mem_per_block_optin: 4096,
        shared_mem_per_multiprocessor: 4096,
        regs_per_multiprocessor: 4096,
        regs_per_block: 4096,
        max_threads_per_multi_processor: 64,
        max_threads_per_block: 64,
        max_blocks_per_multi_processor: 1,
        ..CudaProperties::default()
    };
    let d = Device::from_properties(&props).unwrap();
    for layout in layouts() {
        let p = Problem::new(4097, 129, 4096, layout, ActDType::F32, OutDType::F32).unwrap();
        let c = select(&p, &d).unwrap();
        check(&c, &p, &d);
    }
}

#[test]
fn from_properties_matches_the_table_roughly() {
    let h = h100();
    let props = CudaProperties {
        name: "NVIDIA H100 80GB HBM3".into(),
        major: 9,
        minor: 0,
        multi_processor_count: 132,
        shared_mem_per_block: 49152,
        shared_mem_per_block_optin: 232448,
        shared_mem_per_multiprocessor: 233472,
        reserved_shared_mem_per_block: 1024,
        regs_per_multiprocessor: 65536,
        regs_per_block: 65536,
        max_threads_per_multi_processor: 2048,
        max_threads_per_block: 1024,
        max_blocks_per_multi_processor: 32,
        l2_cache_size: 52428800,
        max_grid_size_x: (1 << 31) - 1,
        clock_rate_khz: Some(1_830_000),
        memory_clock_rate_khz: Some(2_619_000),
        memory_bus_width_bits: Some(5120),
    };
    let d = Device::from_properties(&props).unwrap();
    assert_eq!(d.smem_per_block_optin, h.smem_per_block_optin);
    assert_eq!(d.smem_per_sm, h.smem_per_sm);
    assert!((d.mem_bandwidth_gbs / h.mem_bandwidth_gbs - 1.0).abs() < 0.05, "{}", d.mem_bandwidth_gbs);
    assert!((d.peaks.f16 / h.peaks.f16 - 1.0).abs() < 0.05, "{}", d.peaks.f16);
    assert_eq!(d.tensor, h.tensor);
    // Unknown clocks fall back to estimates that are still usable.
    let d2 = Device::from_properties(&CudaProperties { clock_rate_khz: None, memory_clock_rate_khz: None, ..props })
        .unwrap();
    assert!(d2.mem_bandwidth_gbs > 1000.0 && d2.peaks.f16 > 500.0);
}

#[test]
fn builtin_table_figures() {
    let d = |n| Device::builtin(n).unwrap();
    assert_eq!((d("h100").sm_count, d("h100").smem_per_block_optin, d("h100").cc()), (132, 232448, 90));
    assert_eq!((d("a100").sm_count, d("a100").smem_per_block_optin, d("a100").cc()), (108, 166912, 80));
    assert_eq!((d("t4").sm_count, d("t4").smem_per_block_optin, d("t4").cc()), (40, 65536, 75));
    assert_eq!((d("rtx4090").sm_count, d("rtx4090").smem_per_block_optin), (128, 101376));
    assert_eq!(d("H200").sm_count, 132);
}

#[test]
fn planner_caches_and_is_shareable_across_threads() {
    let planner = Planner::builtin("a100").unwrap();
    let layout = int4g(32);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let planner = &planner;
            s.spawn(move || {
                for m in 1..=50 {
                    let p = Problem::new(m * (t + 1), 4096, 4096, layout, ActDType::Int8, OutDType::Bf16).unwrap();
                    assert_eq!(planner.select(&p).unwrap(), select(&p, planner.device()).unwrap());
                }
            });
        }
    });
    assert!(planner.cached() > 50);
}

#[test]
fn selection_takes_microseconds() {
    let d = h100();
    let p = Problem::f16(4096, 14336, 4096, WeightLayout::dense(OutDType::F16)).unwrap();
    let n = 200;
    let t = std::time::Instant::now();
    for i in 0..n {
        let p = Problem { m: p.m + i, ..p };
        std::hint::black_box(select(&p, &d).unwrap());
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    eprintln!("select: {us:.1} us per call");
    assert!(us < 2000.0, "{us} us per selection");
}

/// The devices with f16 / bf16 `mma.sync` (sm_80+), where the fused GEMM runs.
fn fused_devices() -> Vec<Device> {
    devices().into_iter().filter(|d| d.cc() >= 80).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// The fused GEMM: for every shape, layout, f16 / bf16 activations, output dtype and
    /// sm_80+ device, `select_fused` returns a valid config whose kernel exists (it is one of
    /// `FUSED_GEMM_TILES`, the list qforge-cuda generates its kernels from).
    #[test]
    fn the_chosen_fused_configs_kernel_exists(m in dim(), n in dim(), k in dim(), a in 1usize..3, o in 0usize..3) {
        let (act, out) = (ActDType::ALL[a], OutDType::ALL[o]);
        for d in fused_devices() {
            for layout in layouts() {
                let p = Problem::new(m, n, k, layout, act, out).unwrap();
                let c = select_fused(&p, &d).unwrap();
                let inst = FusedTile::of(&c.tile());
                prop_assert!(inst.is_some(), "{c:?} is no instance");
                prop_assert!(c.smem_bytes >= inst.unwrap().smem_bytes());
                prop_assert!(c.split_k >= 1 && c.split_k <= qforge_tiling::MAX_SPLIT_K);
                check(&c, &p, &d);
            }
        }
    }
}

/// Below sm_80, and for activations that are not a tensor-core type, there is no fused
/// kernel: a typed error, not a config that names a kernel that does not exist.
#[test]
fn no_fused_kernel_is_a_typed_error() {
    let l = WeightLayout::lookup("q4_0", None).unwrap();
    let t4 = Device::builtin("t4").unwrap();
    let p = Problem::f16(16, 4096, 4096, l).unwrap();
    assert!(matches!(select_fused(&p, &t4), Err(TilingError::NoFusedKernel { .. })));
    let p32 = Problem::new(16, 4096, 4096, l, ActDType::F32, OutDType::F32).unwrap();
    assert!(matches!(select_fused(&p32, &h100()), Err(TilingError::NoFusedKernel { .. })));
    // Small M takes the small tile; split-k where the tiles leave SMs idle.
    let c = select_fused(&p, &h100()).unwrap();
    assert!(FusedTile::of(&c.tile()).is_some());
    let planner = Planner::new(h100()).unwrap();
    assert_eq!(planner.select_fused(&p).unwrap(), c);
}

/// Up to `SKINNY_MAX_M` the fused GEMM runs its skinny instances: the smallest token tile
/// that holds M, K split so that every multiprocessor gets about `SKINNY_CTAS_PER_SM` CTAs;
/// past it, the tiled instances.
#[test]
fn small_m_takes_the_skinny_instances() {
    let h100 = Device::builtin("h100").unwrap();
    for name in ["q4_0", "q4_k", "iq2_xxs", "fp8_e4m3", "int4g", "tq1_0"] {
        let l = WeightLayout::from_format(qforge_formats::registry().get(name).unwrap()).unwrap();
        for (m, bm, bn) in [(1, 16, 256), (16, 16, 256), (17, 64, 128), (32, 64, 128), (33, 64, 128), (64, 64, 128)] {
            let c = select_fused(&Problem::f16(m, 4096, 4096, l).unwrap(), &h100).unwrap();
            let inst = FusedTile::of(&c.tile()).unwrap();
            assert!(inst.skinny && inst.bm == bm && inst.bn == bn, "{name} m = {m}: {}", inst.name());
            let ctas = m.div_ceil(bm as u64) * 4096 / bn as u64;
            let want = (qforge_tiling::SKINNY_CTAS_PER_SM * 132 / ctas).clamp(1, 16);
            assert_eq!(c.split_k as u64, want, "{name} m = {m}");
        }
        let c = select_fused(&Problem::f16(qforge_tiling::SKINNY_MAX_M + 1, 4096, 4096, l).unwrap(), &h100).unwrap();
        assert!(!FusedTile::of(&c.tile()).unwrap().skinny, "{name}");
    }
}

/// Above `SKINNY_MAX_M` on an H200, the fused GEMM takes its 128 × 128 instance unsplit from
/// M = 512 up, for every layout kind: on the device it was the faster tiled instance in every
/// measured cell (q4_0, q4_k, iq2_xxs, fp8_e4m3; 4096², 14336 × 4096, 4096 × 14336; M = 512 to
/// 8192), 1.2–1.7× the 64 × 64 one (docs/cuda-figures.md, 2026-11-28).
#[test]
fn large_m_takes_the_large_tiled_instance() {
    let h200 = Device::builtin("h200").unwrap();
    for name in ["q4_0", "q4_k", "iq2_xxs", "fp8_e4m3"] {
        let l = WeightLayout::from_format(qforge_formats::registry().get(name).unwrap()).unwrap();
        for (n, k) in [(4096, 4096), (14336, 4096), (4096, 14336)] {
            for m in [512, 2048, 8192] {
                let c = select_fused(&Problem::f16(m, n, k, l).unwrap(), &h200).unwrap();
                let inst = FusedTile::of(&c.tile()).unwrap();
                assert!(!inst.skinny && inst.bm == 128 && inst.bn == 128, "{name} {n}x{k} m = {m}: {}", inst.name());
                assert_eq!(c.split_k, 1, "{name} {n}x{k} m = {m}");
            }
        }
    }
}
