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

/// The kernels module of a format, in the order the runtime expects them: dequant to f32,
/// f16, bf16; the mat-vec for M = 2..=8 (any M in 1..=8) and its M = 1 kernel of its own
/// (token generation: without the larger M's accumulators it needs fewer registers, so more
/// warps fit on a multiprocessor); the q8_1 activation quantizer.
pub fn kernel_names(format: &str) -> [String; 6] {
    [
        format!("qforge_dequant_{format}_f32"),
        format!("qforge_dequant_{format}_f16"),
        format!("qforge_dequant_{format}_bf16"),
        format!("qforge_matvec_{format}"),
        format!("qforge_matvec1_{format}"),
        "qforge_quantize_q8_1".to_string(),
    ]
}

/// The fused GEMM's kernel instances: qforge-tiling's [`FUSED_GEMM_TILES`], the configs
/// [`qforge_tiling::select_fused`] returns. Each becomes a `qf_gemm_cfg_<name>` typedef and
/// six kernels per format ([`gemm_kernel_name`]); nothing here lists tiles by hand.
pub use qforge_tiling::{FUSED_GEMM_TILES, FusedTile};
/// The skinny instances' M limit and split rule (for callers that time an instance directly).
#[allow(unused_imports)] // the build script includes this file and reads only the tables
pub use qforge_tiling::{SKINNY_MAX_M, skinny_split};

/// The C++ type of an instance (a tiled one's `qf_gemmt_cfg<bm, bn, bk, wm, wn, stages, row bytes>` in
/// `kernels-cuda/gemm_tiled.cuh`, or a skinny one's `qf_gemms_cfg<bm, bn, bk, wn, row bytes>`
/// in `kernels-cuda/gemm_skinny.cuh`).
pub fn gemm_cfg_cpp(t: &FusedTile) -> String {
    let seg = qforge_tiling::SKINNY_ROW_BYTES;
    if t.skinny {
        return format!("qf_gemms_cfg<{}, {}, {}, {}, {seg}>", t.bm, t.bn, t.bk, t.wn);
    }
    format!("qf_gemmt_cfg<{}, {}, {}, {}, {}, {}, {seg}>", t.bm, t.bn, t.bk, t.wm, t.wn, t.stages)
}

/// `typedef qf_gemm_cfg<…> qf_gemm_cfg_<name>;` for every instance (after `templates.cuh`).
pub fn gemm_cfg_typedefs() -> String {
    FUSED_GEMM_TILES.iter().map(|t| format!("typedef {} qf_gemm_cfg_{};\n", gemm_cfg_cpp(t), t.name())).collect()
}

/// The tensor-core input types of the fused GEMM (`qf_mma_<type>` in `kernels-cuda/warp.cuh`):
/// weights decoded and activations rounded to this type in shared memory.
pub const GEMM_MMA_TYPES: [&str; 2] = ["f16", "bf16"];

/// `qforge_gemm_<format>_<mma>_<tile>`: one kernel for every output type (its `out` argument,
/// the index of the type in `DType::ALL`, chooses the epilogue's conversion).
pub fn gemm_kernel_name(format: &str, mma: &str, t: &FusedTile) -> String {
    format!("qforge_gemm_{format}_{mma}_{}", t.name())
}

/// Every fused GEMM kernel of a format: instance-major, then [`GEMM_MMA_TYPES`] (the order
/// the runtime loads them in).
pub fn gemm_kernel_names(format: &str) -> Vec<String> {
    FUSED_GEMM_TILES.iter().flat_map(|t| GEMM_MMA_TYPES.iter().map(move |m| gemm_kernel_name(format, m, t))).collect()
}

/// `MACRO(traits, name, mma, qf_mma_<mma>, tile)` for every instance and tensor-core type:
/// the kernels (`QF_GEMM_KERNEL`) or their host wrappers (`QF_HOST_GEMM`).
fn gemm_lines(macro_name: &str, traits: &str, format: &str) -> String {
    FUSED_GEMM_TILES
        .iter()
        .flat_map(|t| GEMM_MMA_TYPES.iter().map(move |m| (t, m)))
        .map(|(t, m)| format!("{macro_name}({traits}, {format}, {m}, qf_mma_{m}, {})\n", t.name()))
        .collect()
}

/// The host wrapper of a format's instance `t` with `mma` inputs (`qf_host_gemm_<format>_<mma>_<tile>`).
pub fn host_gemm_name(format: &str, mma: &str, t: &FusedTile) -> String {
    format!("qf_host_gemm_{format}_{mma}_{}", t.name())
}

/// Every kernel of a format's module: [`kernel_names`] then [`gemm_kernel_names`] (what
/// `build-kernels` and the GPU kit check each PTX module for).
pub fn module_kernel_names(format: &str) -> Vec<String> {
    kernel_names(format)
        .into_iter()
        .chain(gemm_kernel_names(format))
        .chain(a8_kernel_names(format))
        .chain(q8_kernel_names(format))
        .chain(fp8_kernel_names(format))
        .collect()
}

/// The first unresolved symbol of a PTX module (`.extern` other than `.extern .shared`, the
/// declaration of a kernel's dynamic shared memory): a table or function the module uses and
/// does not define.
pub fn unresolved_extern(ptx: &str) -> Option<&str> {
    ptx.lines().find(|l| l.starts_with(".extern") && !l.starts_with(".extern .shared"))
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
         #include \"common.cuh\"\n#include \"{BLOCKS_HEADER}\"\n{}#include \"{}\"\n#include \"templates.cuh\"\n\
         QF_INSTANTIATE({}, {}, {})\n{}{}{}{}{}",
        format_define(d.name),
        c.header_file,
        c.traits,
        d.name,
        d.block_bytes,
        gemm_cfg_typedefs(),
        gemm_lines("QF_GEMM_KERNEL", c.traits, d.name),
        a8_instantiate(d),
        q8_instantiate(d, true),
        fp8_instantiate(d)
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
/// host functions `qf_host_dequant_<f>_{f32,f16,bf16}` / `qf_host_matvec_<f>` (and the GEMMs'
/// `qf_host_gemm_…`). [`host_sources`] with one part.
pub fn host_source<'a>(formats: impl IntoIterator<Item = &'a FormatDesc> + Clone) -> String {
    host_sources(formats, 1).remove(0)
}

/// The host-check code as `parts` translation units that together define what
/// [`host_source`] does, each once: every part includes the headers of every format (their
/// tables have internal linkage, their templates are instantiated where used), part 0 holds
/// the functions that belong to no format, and the formats' wrappers are dealt out to the
/// parts in turn. The build compiles the parts side by side (a single unit took 138 s of one
/// core on a 2-core build machine, the longest step of a `--features cuda` build).
pub fn host_sources<'a>(formats: impl IntoIterator<Item = &'a FormatDesc> + Clone, parts: usize) -> Vec<String> {
    let parts = parts.max(1);
    let with_code: Vec<&FormatDesc> = formats.clone().into_iter().filter(|d| d.cuda.is_some()).collect();
    let mut prelude = format!(
        "// Generated by qforge-cuda from the registry; do not edit.\n#include \"common.cuh\"\n#include \"{BLOCKS_HEADER}\"\n"
    );
    for d in &with_code {
        prelude += &format_define(d.name);
    }
    for (file, _) in headers(formats.clone()) {
        prelude += &format!("#include \"{file}\"\n");
    }
    prelude += "#include \"templates.cuh\"\n";
    prelude += &gemm_cfg_typedefs();
    (0..parts)
        .map(|part| {
            let mut s = prelude.clone();
            let mine: Vec<&FormatDesc> = with_code.iter().copied().skip(part).step_by(parts).collect();
            if part == 0 {
                // The ldmatrix loads of the GEMM (its A / B address functions), for the layout test.
                s += "extern \"C\" void qf_host_ldsm_frags(const uint16_t* a16x16, const uint16_t* b8x16, uint32_t* a, uint32_t* b) {\n    \
                      qf_frag_a fa[32]; qf_frag_b fb[32];\n    qf_ldsm_frag_a(fa, a16x16, 16);\n    qf_ldsm_frag_b(fb, b8x16, 16);\n    \
                      for (int l = 0; l < 32; ++l) { for (int i = 0; i < 4; ++i) a[4 * l + i] = fa[l].r[i]; for (int i = 0; i < 2; ++i) b[2 * l + i] = fb[l].r[i]; }\n}\n";
                // The mma fragment layouts of warp.cuh, for the test that holds them to the PTX ISA.
                s += "extern \"C\" void qf_host_frag_coords(int lane, int* rc) {\n    \
                      for (int i = 0; i < 8; ++i) { rc[2 * i] = qf_frag_a_row(lane, i); rc[2 * i + 1] = qf_frag_a_col(lane, i); }\n    \
                      for (int i = 0; i < 4; ++i) { rc[16 + 2 * i] = qf_frag_b_row(lane, i); rc[17 + 2 * i] = qf_frag_b_col(lane); }\n    \
                      for (int i = 0; i < 4; ++i) { rc[24 + 2 * i] = qf_frag_c_row(lane, i); rc[25 + 2 * i] = qf_frag_c_col(lane, i); }\n}\n";
                // Each fused instance's shared memory as its kernel lays it out, for the test that
                // holds the runtime's launch size (FusedTile::smem_bytes) to it.
                s += "extern \"C\" long long qf_host_fused_smem(int i) {\n    switch (i) {\n";
                for (i, t) in FUSED_GEMM_TILES.iter().enumerate() {
                    s += &format!("    case {i}: return qf_gemm_cfg_{}::SMEM_BYTES;\n", t.name());
                }
                s += "    }\n    return -1;\n}\n";
                s += "extern \"C\" void qf_host_quantize_q8_1(const float* x, qf_block_q8_1* out, long long k, \
                      long long nblocks, long long m) {\n    for (long long t = 0; t < m * nblocks; ++t) \
                      qf_quantize_q8_1_item(x, out, k, nblocks, t);\n}\n";
            }
            for d in &mine {
                if let Some(c) = &d.cuda {
                    s += &format!("QF_HOST_INSTANTIATE({}, {}, {})\n", c.traits, d.name, d.block_bytes);
                    s += &gemm_lines("QF_HOST_GEMM", c.traits, d.name);
                }
            }
            let common = part == 0;
            s + &a8_host_source(mine.iter().copied(), common)
                + &q8_host_source(mine.iter().copied())
                + &fp8_host_source(mine.iter().copied(), common)
        })
        .collect()
}

include!("codegen8.rs");
include!("codegen_q8.rs");
include!("codegen_fp8.rs");

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

    /// The host code split into parts defines every function of the single unit exactly once
    /// (no symbol twice at link time, none missing).
    #[test]
    fn host_parts_define_each_function_once() {
        let descs: Vec<&FormatDesc> = qforge_formats::registry().iter().map(|f| f.desc()).collect();
        let whole = host_source(descs.iter().copied());
        let defs = |s: &str| -> Vec<String> {
            s.lines().filter(|l| l.starts_with("QF_HOST") || l.starts_with("extern \"C\"")).map(str::to_owned).collect()
        };
        let mut want = defs(&whole);
        want.sort();
        assert!(want.len() > 100, "{} host definitions", want.len());
        for parts in [2, 3, 4, 7] {
            let units = host_sources(descs.iter().copied(), parts);
            assert_eq!(units.len(), parts);
            let mut got: Vec<String> = units.iter().flat_map(|u| defs(u)).collect();
            got.sort();
            assert_eq!(got, want, "{parts} parts");
            assert!(units.iter().all(|u| u.contains("#include \"templates.cuh\"")));
        }
    }

    #[test]
    fn every_instance_gets_its_kernels_in_every_module() {
        let reg = qforge_formats::registry();
        let d = reg.iter().find(|f| f.desc().cuda.is_some()).unwrap().desc();
        let traits = d.cuda.as_ref().unwrap().traits;
        let src = module_source(d).unwrap();
        let names = gemm_kernel_names(d.name);
        assert_eq!(names.len(), FUSED_GEMM_TILES.len() * GEMM_MMA_TYPES.len());
        let host = host_source([d]);
        for t in FUSED_GEMM_TILES {
            assert!(src.contains(&format!("typedef {} qf_gemm_cfg_{};", gemm_cfg_cpp(t), t.name())));
            for m in GEMM_MMA_TYPES {
                let line = format!("QF_GEMM_KERNEL({traits}, {}, {m}, qf_mma_{m}, {})", d.name, t.name());
                assert!(src.contains(&line), "{line}");
                assert!(host.contains(&line.replace("QF_GEMM_KERNEL", "QF_HOST_GEMM")), "{line}");
                assert!(names.contains(&gemm_kernel_name(d.name, m, t)));
            }
        }
        for (i, d) in qforge_core::DType::ALL.iter().enumerate() {
            assert_eq!(UTIL_KERNELS[UTIL_REDUCE_FIRST + i], format!("qforge_reduce_splits_{d}"));
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

    /// A kernel's dynamic shared memory is declared `.extern .shared`: not an unresolved
    /// symbol; any other `.extern` (a guarded-off table) is.
    #[test]
    fn dynamic_shared_memory_is_no_unresolved_extern() {
        let ok = ".version 9.0\n.extern .shared .align 16 .b8 qf_gemms_smem[];\n.visible .entry k()\n{\n}\n";
        assert_eq!(unresolved_extern(ok), None);
        let bad = ".version 9.0\n.extern .global .align 8 .b8 qf_tab_iq2xxs_grid[2048];\n";
        assert_eq!(unresolved_extern(bad), Some(".extern .global .align 8 .b8 qf_tab_iq2xxs_grid[2048];"));
    }
}
