//! Generation of the per-format kernel modules from the registry: each registered format with
//! device code (`FormatDesc::cuda`) gets one `.cu` that includes `kernels-cuda/common.cuh`,
//! the family header and `kernels-cuda/templates.cuh`, and instantiates its kernels.
//!
//! Shared by qforge-cuda's build script (`#[path]`), `cargo xtask build-kernels` and the
//! runtime (kernel names), so the three always agree.

use qforge_core::{Format, FormatDesc, c_struct};

/// The nvcc flags of every PTX module: baseline `compute_80` PTX (JIT-compiled by the driver
/// on newer GPUs), no FMA contraction (device arithmetic rounds as the Rust reference does),
/// C++17 (`if constexpr` in the headers).
pub const NVCC_PTX_FLAGS: &[&str] = &["--gpu-architecture=sm_80", "--ptx", "-fmad=false", "-std=c++17"];

/// The nvcc flags of the host compilation checked by the tests (same dialect, no FMA
/// contraction on the host either).
pub const NVCC_HOST_FLAGS: &[&str] =
    &["--gpu-architecture=sm_80", "-c", "-fmad=false", "-std=c++17", "-Xcompiler", "-ffp-contract=off,-fPIC,-O2"];

/// The kernels module of a format, in the order the runtime expects them.
pub fn kernel_names(format: &str) -> [String; 5] {
    [
        format!("qforge_dequant_{format}_f32"),
        format!("qforge_dequant_{format}_f16"),
        format!("qforge_dequant_{format}_bf16"),
        format!("qforge_matvec_{format}"),
        "qforge_quantize_q8_1".to_string(),
    ]
}

/// A CTA tile of the fused GEMM (`qf_gemm_cfg` in `kernels-cuda/gemm.cuh`): `bm` activation
/// rows × `bn` weight rows, K in steps of `bk`, `wm` × `wn` warps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmTile {
    /// Activation rows (of M) per CTA.
    pub bm: usize,
    /// Weight rows (of N) per CTA.
    pub bn: usize,
    /// K elements per main-loop step (a multiple of 16, the mma's k, and of every format's
    /// decode chunk).
    pub bk: usize,
    /// Warps along M.
    pub wm: usize,
    /// Warps along N.
    pub wn: usize,
}

impl GemmTile {
    /// Threads per CTA (32 per warp).
    pub const fn threads(&self) -> usize {
        32 * self.wm * self.wn
    }

    /// The C++ type the templates instantiate (`qf_gemm_cfg<bm, bn, bk, wm, wn>`).
    pub fn cpp(&self) -> String {
        format!("qf_gemm_cfg<{}, {}, {}, {}, {}>", self.bm, self.bn, self.bk, self.wm, self.wn)
    }
}

/// The tile every GEMM kernel is compiled with today: 64 × 64 × 32, 2 × 2 warps (each warp
/// 32 × 32 of the output: 2 × 4 mma tiles). The launch grid is `(ceil(N / bn), ceil(M / bm), splits)`.
pub const GEMM_TILE: GemmTile = GemmTile { bm: 64, bn: 64, bk: 32, wm: 2, wn: 2 };

/// Split-k: the fewest k-steps one split takes (so each range amortizes its partial-sum
/// write and the reduction).
pub const GEMM_MIN_SPLIT_STEPS: usize = 8;
/// Split-k: the most K ranges one GEMM is cut into.
pub const GEMM_MAX_SPLITS: usize = 16;

impl GemmTile {
    /// How many K ranges the fused GEMM cuts `y[m×n] = x[m×k] · Wᵀ` into on a device with
    /// `sms` multiprocessors: 1 when the output tiles already give every SM a CTA; else enough
    /// splits to do so, each at least [`GEMM_MIN_SPLIT_STEPS`] k-steps, at most
    /// [`GEMM_MAX_SPLITS`]. (Small M with a large K, the decode-heavy shapes of prompt
    /// processing in small batches, is where it pays.)
    pub fn splits(&self, m: usize, n: usize, k: usize, sms: usize) -> usize {
        let tiles = m.div_ceil(self.bm).saturating_mul(n.div_ceil(self.bn));
        if tiles == 0 || tiles >= sms {
            return 1;
        }
        let steps = k.div_ceil(self.bk);
        sms.div_ceil(tiles).min(steps / GEMM_MIN_SPLIT_STEPS).clamp(1, GEMM_MAX_SPLITS)
    }
}

/// `#define QF_GEMM_CFG …`: the tile a translation unit's GEMM kernels are instantiated with.
pub fn gemm_define(t: &GemmTile) -> String {
    format!("#define QF_GEMM_CFG {}\n", t.cpp())
}

/// The tensor-core input types of the fused GEMM (`qf_mma_<type>` in `kernels-cuda/warp.cuh`):
/// weights decoded and activations rounded to this type in shared memory.
pub const GEMM_MMA_TYPES: [&str; 2] = ["f16", "bf16"];

/// The output types of the fused GEMM.
pub const GEMM_OUT_TYPES: [&str; 3] = ["f32", "f16", "bf16"];

/// The fused GEMM kernels of a format, `qforge_gemm_<format>_<mma>_<out>`, every pair of
/// [`GEMM_MMA_TYPES`] and [`GEMM_OUT_TYPES`] (`QF_GEMM_ALL` in `kernels-cuda/gemm.cuh`).
pub fn gemm_kernel_names(format: &str) -> Vec<String> {
    GEMM_MMA_TYPES
        .iter()
        .flat_map(|m| GEMM_OUT_TYPES.iter().map(move |o| format!("qforge_gemm_{format}_{m}_{o}")))
        .collect()
}

/// Every kernel of a format's module: [`kernel_names`] then [`gemm_kernel_names`] (what
/// `build-kernels` and the GPU kit check each PTX module for).
pub fn module_kernel_names(format: &str) -> Vec<String> {
    kernel_names(format).into_iter().chain(gemm_kernel_names(format)).chain(a8_kernel_names(format)).collect()
}

/// The module of kernels that belong to no format, a plain file in `kernels-cuda/`.
pub const UTIL_MODULE_FILE: &str = "qforge_util.cu";

/// Index of `qforge_reduce_splits_f32` in [`UTIL_KERNELS`]; f16 and bf16 follow (the order
/// of `DType::ALL`).
pub const UTIL_REDUCE_FIRST: usize = 2;

/// The kernels of the util module, in the order the runtime loads them (what a kit checks
/// its PTX for).
pub const UTIL_KERNELS: &[&str] = &[
    "qforge_cast_f32_f16",
    "qforge_cast_f32_bf16",
    "qforge_reduce_splits_f32",
    "qforge_reduce_splits_f16",
    "qforge_reduce_splits_bf16",
];

/// File stem of a format's module (`qforge_q4_0` → `qforge_q4_0.cu` / `.ptx`).
pub fn module_stem(format: &str) -> String {
    format!("qforge_{format}")
}

/// The generated `.cu` of one format, or `None` if the format has no device code.
/// Include paths: `kernels-cuda/` and the folder the family headers are written to.
pub fn module_source(d: &FormatDesc) -> Option<String> {
    let c = d.cuda.as_ref()?;
    Some(format!(
        "// Generated by qforge-cuda from the registry; do not edit.\n\
         #include \"common.cuh\"\n#include \"{BLOCKS_HEADER}\"\n{}{}#include \"{}\"\n#include \"templates.cuh\"\n\
         QF_INSTANTIATE({}, {}, {})\n{}",
        gemm_define(&GEMM_TILE),
        format_define(d.name),
        c.header_file,
        c.traits,
        d.name,
        d.block_bytes,
        a8_instantiate(d, "QF_GEMM_A8_INSTANTIATE")
    ))
}

/// `#define QF_FORMAT_<name> 1`: which formats a translation unit instantiates, so that family
/// headers define only the tables those formats use (a module carries no other format's grids).
pub fn format_define(format: &str) -> String {
    format!("#define QF_FORMAT_{format} 1\n")
}

/// The generated header of block structs, included by every module after `common.cuh`.
pub const BLOCKS_HEADER: &str = "qf_blocks.cuh";

/// The device struct's name for `format`'s block: `qf_<format>_block`.
pub fn block_struct(format: &str) -> String {
    format!("qf_{format}_block")
}

/// [`BLOCKS_HEADER`]: the device struct `qf_<format>_block` of every block format with device
/// code, generated from its Rust block ([`Format::c_block`]), so the family headers name these
/// structs instead of declaring the layout a second time. Group and grid formats (no fixed
/// block struct) have none.
pub fn blocks_header(formats: impl IntoIterator<Item = &'static dyn Format>) -> String {
    let mut s = String::from("// Generated by qforge-cuda from the Rust block structs; do not edit.\n#pragma once\n");
    for f in formats.into_iter().filter(|f| f.desc().cuda.is_some() && !f.c_block().is_empty()) {
        s += &c_struct(&block_struct(f.desc().name), f.c_block());
        s.push('\n');
    }
    s
}

/// The family headers of `formats` as (file name, text), each once.
pub fn headers<'a>(formats: impl IntoIterator<Item = &'a FormatDesc>) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for c in formats.into_iter().filter_map(|d| d.cuda.as_ref()) {
        if !out.iter().any(|(f, _)| *f == c.header_file) {
            out.push((c.header_file, c.header));
        }
    }
    out
}

/// The host-check translation unit: every format with device code, wrapped in `extern "C"`
/// host functions `qf_host_dequant_<f>_{f32,f16,bf16}` / `qf_host_matvec_<f>`.
pub fn host_source<'a>(formats: impl IntoIterator<Item = &'a FormatDesc> + Clone) -> String {
    let mut s = format!(
        "// Generated by qforge-cuda from the registry; do not edit.\n#include \"common.cuh\"\n#include \"{BLOCKS_HEADER}\"\n"
    );
    s += &gemm_define(&GEMM_TILE);
    for d in formats.clone().into_iter().filter(|d| d.cuda.is_some()) {
        s += &format_define(d.name);
    }
    for (file, _) in headers(formats.clone()) {
        s += &format!("#include \"{file}\"\n");
    }
    s += "#include \"templates.cuh\"\n";
    // The mma fragment layouts of warp.cuh, for the test that holds them to the PTX ISA.
    s += "extern \"C\" void qf_host_frag_coords(int lane, int* rc) {\n    \
          for (int i = 0; i < 8; ++i) { rc[2 * i] = qf_frag_a_row(lane, i); rc[2 * i + 1] = qf_frag_a_col(lane, i); }\n    \
          for (int i = 0; i < 4; ++i) { rc[16 + 2 * i] = qf_frag_b_row(lane, i); rc[17 + 2 * i] = qf_frag_b_col(lane); }\n    \
          for (int i = 0; i < 4; ++i) { rc[24 + 2 * i] = qf_frag_c_row(lane, i); rc[25 + 2 * i] = qf_frag_c_col(lane, i); }\n}\n";
    s += "extern \"C\" void qf_host_quantize_q8_1(const float* x, qf_block_q8_1* out, long long k, \
          long long nblocks, long long m) {\n    for (long long t = 0; t < m * nblocks; ++t) \
          qf_quantize_q8_1_item(x, out, k, nblocks, t);\n}\n";
    for d in formats.clone() {
        if let Some(c) = &d.cuda {
            s += &format!("QF_HOST_INSTANTIATE({}, {}, {})\n", c.traits, d.name, d.block_bytes);
        }
    }
    s + &a8_host_source(formats)
}

include!("codegen8.rs");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_with_device_code_gets_a_module_and_the_others_none() {
        let reg = qforge_formats::registry();
        let mut with = 0;
        for f in reg.iter() {
            let d = f.desc();
            match (module_source(d), &d.cuda) {
                (Some(src), Some(c)) => {
                    with += 1;
                    let inst = format!("QF_INSTANTIATE({}, {}, {})", c.traits, d.name, d.block_bytes);
                    assert!(src.contains(&inst) && src.contains(&format!("#include \"{}\"", c.header_file)));
                    let define = src.find(&format_define(d.name)).expect("the module defines QF_FORMAT_<name>");
                    assert!(define < src.find(c.header_file).unwrap(), "QF_FORMAT_<name> precedes the header");
                    assert_eq!(c.traits, format!("qf_{}", d.name), "traits struct naming convention");
                    assert!(
                        c.header.contains(&format!("struct {} ", c.traits)),
                        "{} not in {}",
                        c.traits,
                        c.header_file
                    );
                }
                (None, None) => {}
                _ => panic!("{}: module source and device code disagree", d.name),
            }
        }
        assert!(with >= 12, "the legacy and k families have device code");
        let descs: Vec<&FormatDesc> = reg.iter().map(|f| f.desc()).collect();
        let host = host_source(descs.iter().copied());
        assert_eq!(host.matches("QF_HOST_INSTANTIATE(").count(), with);
        assert_eq!(host.matches("#define QF_FORMAT_").count(), with);
        assert_eq!(crate::missing_formats().len(), reg.len() - with);
    }

    #[test]
    fn split_k_fills_the_device_only_where_the_tiles_do_not() {
        let t = GEMM_TILE;
        // 4096 x 4096 at M = 16: 64 tiles on 132 SMs, 128 k-steps: 3 splits.
        assert_eq!(t.splits(16, 4096, 4096, 132), 3);
        // Enough tiles already, or too little K to cut: one.
        assert_eq!(t.splits(512, 4096, 4096, 132), 1);
        assert_eq!(t.splits(16, 4096, 200, 132), 1);
        assert_eq!(t.splits(0, 4096, 4096, 132), 1);
        // One tile, a long K: capped at GEMM_MAX_SPLITS; each split at least 8 steps.
        assert_eq!(t.splits(1, 7, 1 << 20, 132), GEMM_MAX_SPLITS);
        assert_eq!(t.splits(1, 7, 32 * 8 * 5, 132), 5);
        for (i, d) in qforge_core::DType::ALL.iter().enumerate() {
            assert_eq!(UTIL_KERNELS[UTIL_REDUCE_FIRST + i], format!("qforge_reduce_splits_{d}"));
        }
        for (m, n, k) in [(1, 1, 1), (9, 129, 4097), (17, 7, 100000), (100, 1, 33)] {
            let s = t.splits(m, n, k, 132);
            assert!((1..=GEMM_MAX_SPLITS).contains(&s) && (s == 1 || k.div_ceil(t.bk) / s >= GEMM_MIN_SPLIT_STEPS));
        }
    }

    #[test]
    fn headers_are_deduplicated_per_family() {
        let descs: Vec<_> = qforge_formats::registry().iter().map(|f| f.desc()).collect();
        let h = headers(descs.iter().copied());
        let mut names: Vec<_> = h.iter().map(|(f, _)| *f).collect();
        names.dedup();
        assert_eq!(names.len(), h.len());
        assert!(names.contains(&"legacy.cuh") && names.contains(&"k.cuh"));
    }

    /// Every block format with device code gets its struct, generated from the Rust block and
    /// as large as the registry's block; group and grid formats get none.
    #[test]
    fn block_structs_come_from_the_rust_blocks() {
        let reg = qforge_formats::registry();
        let h = blocks_header(reg.iter());
        eprintln!("{h}");
        for f in reg.iter().filter(|f| f.desc().cuda.is_some()) {
            let name = block_struct(f.desc().name);
            let fixed = matches!(f.layout(), qforge_core::Layout::Blocks { .. });
            assert_eq!(h.contains(&format!("struct {name} {{")), fixed, "{name}");
            if fixed {
                assert_eq!(f.c_block().iter().map(|c| c.count).sum::<usize>(), f.desc().block_bytes, "{name}");
            }
        }
        assert!(h.contains("struct qf_q4_0_block { uint8_t d[2]; uint8_t qs[16]; };"), "{h}");
    }
}
