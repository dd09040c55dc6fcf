// The FP8 block-scaled GEMM's part of the generator (included into `codegen.rs`): which
// formats get it, from the registry's data, what its kernels are called and which module
// holds them (`kernels-cuda/gemm_fp8.cuh`).

/// The FP8 GEMM's instances (qforge-tiling's, chosen per shape by `qforge_tiling::fp8_tile`):
/// one kernel per instance and body; gemm_fp8.cuh names instance `i` `qf_fp8_cfg_<i>`.
pub use qforge_tiling::FP8_GEMM_TILES;
/// The FP8 GEMM's instance and split rules (for callers that time an instance directly).
#[allow(unused_imports)] // the build script includes this file and reads only the tables
pub use qforge_tiling::{fp8_splits, fp8_tile};

/// The FP8 GEMM's activation quantizer (1 × 128 e4m3, `ActKind::Fp8x128`), in every module
/// that has an FP8 GEMM.
pub const FP8_QUANTIZE_KERNEL: &str = "qforge_quantize_fp8_1x128";

/// The two bodies of the FP8 GEMM: `mma` (e4m3 `mma.m16n8k32`, sm_89+, in [`SM89_MODULE`]) and
/// `f16` (exact f16 decode, `mma.m16n8k16`, sm_80, in the format's own module).
pub const FP8_BODIES: [&str; 2] = ["mma", "f16"];

/// The module of kernels that need compute capability 8.9 (the e4m3 tensor cores): compiled
/// for `compute_89`, loaded only on such devices.
pub const SM89_MODULE: &str = "qforge_sm89";

/// The nvcc flags of [`SM89_MODULE`]: [`NVCC_PTX_FLAGS`] with `sm_89`.
pub const NVCC_SM89_FLAGS: &[&str] = &["--gpu-architecture=sm_89", "--ptx", "-fmad=false", "-std=c++17"];

/// The device value type (`qf_f8_e4m3` / `qf_f8_e5m2` in gemm_fp8.cuh) of `d`'s weights if `d`
/// gets the FP8 GEMM: a format with device code whose native activations are 1 × 128 fp8 and
/// whose layout is a grid of 8-bit float values with f32 scales in 128 × 128 tiles. Read from
/// the registry, never from a name list.
pub fn fp8_gemm(d: &FormatDesc) -> Option<&'static str> {
    use qforge_core::{ActKind, DType, ElemType, Layout};
    d.cuda.as_ref()?;
    let f = qforge_formats::get(d.name).ok()?;
    if f.native_act() != ActKind::Fp8x128 {
        return None;
    }
    match f.layout() {
        Layout::Grid { elem, tile_rows: 128, tile_cols: 128, scale_dtype: DType::F32 } => Some(match elem {
            ElemType::F8E4M3 => "qf_f8_e4m3",
            ElemType::F8E5M2 => "qf_f8_e5m2",
        }),
        _ => None,
    }
}

/// `qforge_gemm_<format>_fp8_<body>_<instance>` (`body` one of [`FP8_BODIES`], `instance` an
/// [`FP8_GEMM_TILES`] entry's name).
pub fn fp8_kernel_name(format: &str, body: &str, tile: &qforge_tiling::Fp8Tile) -> String {
    format!("qforge_gemm_{format}_fp8_{body}_{}", tile.name())
}

/// `body`'s kernels of `format`, one per instance in [`FP8_GEMM_TILES`] order.
pub fn fp8_body_kernel_names(format: &str, body: &str) -> Vec<String> {
    FP8_GEMM_TILES.iter().map(|t| fp8_kernel_name(format, body, t)).collect()
}

/// The FP8 kernels of a format's own module: [`FP8_QUANTIZE_KERNEL`], then the f16 body's
/// instances (empty for a format without the FP8 GEMM).
pub fn fp8_kernel_names(format: &str) -> Vec<String> {
    match qforge_formats::get(format) {
        Ok(f) if fp8_gemm(f.desc()).is_some() => {
            std::iter::once(FP8_QUANTIZE_KERNEL.to_string()).chain(fp8_body_kernel_names(format, "f16")).collect()
        }
        _ => Vec::new(),
    }
}

/// Every kernel of [`SM89_MODULE`]: the quantizer, then the mma body's instances of every
/// format with the FP8 GEMM, in registry order.
pub fn sm89_kernel_names() -> Vec<String> {
    std::iter::once(FP8_QUANTIZE_KERNEL.to_string())
        .chain(
            qforge_formats::registry()
                .iter()
                .filter(|f| fp8_gemm(f.desc()).is_some())
                .flat_map(|f| fp8_body_kernel_names(f.desc().name, "mma")),
        )
        .collect()
}

/// The instances as C++ types and the list `QF_FP8_INSTANCES(X)` (`X(i, qf_fp8_cfg_<i>)` for
/// each) the host wrappers switch over.
fn fp8_cfg_typedef() -> String {
    let mut s = String::new();
    let mut list = String::from("#define QF_FP8_INSTANCES(X)");
    for (i, t) in FP8_GEMM_TILES.iter().enumerate() {
        s += &format!("typedef qf_fp8_cfg<{}, {}, {}, {}, {}> qf_fp8_cfg_{i};\n", t.rows, t.tok, t.wr, t.wt, t.stages);
        list += &format!(" X({i}, qf_fp8_cfg_{i})");
    }
    s + &list + "\n"
}

/// One `QF_GEMM_FP8_KERNEL` line per instance: `body`'s kernels of `format` (values `w`).
fn fp8_kernels(format: &str, body: &str, w: &str) -> String {
    FP8_GEMM_TILES
        .iter()
        .enumerate()
        .map(|(i, t)| format!("QF_GEMM_FP8_KERNEL({format}, {body}, {w}, {i}, {})\n", t.name()))
        .collect()
}

/// The FP8 part of a format's own module: the quantizer and the f16 body; empty otherwise.
fn fp8_instantiate(d: &FormatDesc) -> String {
    match fp8_gemm(d) {
        Some(w) => format!(
            "#include \"gemm_fp8.cuh\"\n{}QF_QUANTIZE_FP8_1X128_KERNEL\n{}",
            fp8_cfg_typedef(),
            fp8_kernels(d.name, "f16", w)
        ),
        None => String::new(),
    }
}

/// The generated `.cu` of [`SM89_MODULE`]: the quantizer and the mma body of every format
/// with the FP8 GEMM (no format header: the kernel reads the values and the grid directly).
pub fn sm89_source<'a>(formats: impl IntoIterator<Item = &'a FormatDesc>) -> String {
    let mut s = String::from(
        "// Generated by qforge-cuda from the registry; do not edit.\n#include \"common.cuh\"\n#include \"templates.cuh\"\n\
         #include \"gemm_fp8.cuh\"\n",
    );
    s += &fp8_cfg_typedef();
    s += "QF_QUANTIZE_FP8_1X128_KERNEL\n";
    for d in formats {
        if let Some(w) = fp8_gemm(d) {
            s += &fp8_kernels(d.name, "mma", w);
        }
    }
    s
}

/// The host translation unit's part for the FP8 GEMM: the quantizer and the code tables where
/// `common` (in one unit only), both bodies of every format with it
/// (`qf_host_gemm_<format>_fp8_<body>`).
fn fp8_host_source<'a>(formats: impl IntoIterator<Item = &'a FormatDesc>, common: bool) -> String {
    let mut s = String::from("#include \"gemm_fp8.cuh\"\n") + &fp8_cfg_typedef();
    if common {
        s += "QF_HOST_QUANTIZE_FP8_1X128\n";
        s += "extern \"C\" long long qf_host_fp8_smem(int inst) {\n    switch (inst) { QF_FP8_INSTANCES(QF_HOST_SMEM_CASE) }\n    return -1;\n}\n";
    }
    for d in formats {
        if let Some(w) = fp8_gemm(d) {
            for b in FP8_BODIES {
                s += &format!("QF_HOST_GEMM_FP8({}, {b}, {w})\n", d.name);
            }
        }
    }
    s
}
