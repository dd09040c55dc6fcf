// The 8-bit tensor-core GEMMs' part of the generator (included into `codegen.rs`): which
// formats get them, from the registry's data, and what they are called.

/// The CTA tile of the 8-bit GEMMs (A8W4DQ, the int8 GEMM of the GGUF formats, FP8):
/// qforge-tiling's [`EIGHT_BIT_TILE`](qforge_tiling::EIGHT_BIT_TILE), 64 × 64, k-step 32 on
/// 2 × 2 warps, static shared memory (`qf_gemm_cfg` in gemm.cuh, [`gemm8_cfg_cpp`]).
/// gemm8.cuh names it `qf_gemm_cfg_a8`.
pub const A8_TILE: FusedTile = qforge_tiling::EIGHT_BIT_TILE;

fn a8_cfg_typedef() -> String {
    format!("typedef {} qf_gemm_cfg_a8;\n", gemm8_cfg_cpp(&A8_TILE))
}

/// The output types of the A8 GEMM, one kernel each (`QF_GEMM_A8_INSTANTIATE` in
/// gemm8.cuh; the f16 / bf16 GEMM takes its output type as an argument instead).
pub const A8_OUT_TYPES: [&str; 3] = ["f32", "f16", "bf16"];

/// The A8 GEMM's activation quantizer in a module that has the A8 GEMM
/// (`kernels-cuda/gemm8.cuh`): per-token asymmetric int8, one CTA per row.
pub const A8_QUANTIZE_KERNEL: &str = "qforge_quantize_int8_dyn";

/// Whether `d`'s module gets the A8 GEMM (`kernels-cuda/gemm8.cuh`): a registered format with
/// device code whose native activations are per-token int8 (`ActKind::Int8Dyn`) and whose
/// layout is groups (one scale, then the values), i.e. an integer group dot. Read from the
/// registry, never from a name list.
pub fn a8_gemm(d: &FormatDesc) -> bool {
    d.cuda.is_some()
        && qforge_formats::get(d.name).is_ok_and(|f| {
            f.native_act() == qforge_core::ActKind::Int8Dyn && matches!(f.layout(), qforge_core::Layout::Groups { .. })
        })
}

/// The A8 kernels of a format's module, in the order the runtime loads them:
/// [`A8_QUANTIZE_KERNEL`], then `qforge_gemm_<format>_a8_<out>` for every output type of
/// [`A8_OUT_TYPES`] (empty for a format without them).
pub fn a8_kernel_names(format: &str) -> Vec<String> {
    match qforge_formats::get(format) {
        Ok(f) if a8_gemm(f.desc()) => std::iter::once(A8_QUANTIZE_KERNEL.to_string())
            .chain(A8_OUT_TYPES.iter().map(|o| format!("qforge_gemm_{format}_a8_{o}")))
            .collect(),
        _ => Vec::new(),
    }
}

/// `#include "gemm8.cuh"` and `MACRO(traits, name)` for a format with the A8 GEMM; empty
/// otherwise.
fn a8_instantiate(d: &FormatDesc, macro_name: &str) -> String {
    match &d.cuda {
        Some(c) if a8_gemm(d) => {
            format!("#include \"gemm8.cuh\"\n{}{macro_name}({}, {})\n", a8_cfg_typedef(), c.traits, d.name)
        }
        _ => String::new(),
    }
}

/// The host translation unit's part for the 8-bit GEMMs: the quantizer and the m16n8k32
/// fragment layouts (for the test that holds them to the PTX ISA) where `common` (in one unit
/// only), and every A8 format's host wrappers `qf_host_gemm_<format>_a8_<out>`.
fn a8_host_source<'a>(formats: impl IntoIterator<Item = &'a FormatDesc>, common: bool) -> String {
    let mut s = String::from("#include \"gemm8.cuh\"\n") + &a8_cfg_typedef();
    if common {
        s += "QF_HOST_QUANTIZE_I8DYN\n\
         extern \"C\" void qf_host_frag8_coords(int lane, int* rc) {\n    \
         for (int i = 0; i < 16; ++i) { rc[2 * i] = qf_frag_a8_row(lane, i); rc[2 * i + 1] = qf_frag_a8_col(lane, i); }\n    \
         for (int i = 0; i < 8; ++i) { rc[32 + 2 * i] = qf_frag_b8_row(lane, i); rc[33 + 2 * i] = qf_frag_b_col(lane); }\n}\n";
    }
    for d in formats {
        s += &a8_instantiate(d, "QF_HOST_GEMM_A8_INSTANTIATE").replace("#include \"gemm8.cuh\"\n", "").replace(&a8_cfg_typedef(), "");
    }
    s
}

/// The A8 GEMM's run-time layout arguments for weights of `f` (a variant of a format with
/// [`a8_gemm`]): `(group size, group bytes, scale dtype index in DType::ALL)`, from its
/// `Layout::Groups`. The kernels need a group of at least 32 elements that is a multiple of 32
/// (a k-step never straddles two groups).
pub fn a8_group_args(f: &dyn Format) -> Result<(i32, i32, i32), qforge_core::QuantError> {
    let unsupported = |reason: String| qforge_core::QuantError::Unsupported { format: f.desc().name, reason };
    if !qforge_formats::get(f.desc().name).is_ok_and(|r| a8_gemm(r.desc())) {
        return Err(unsupported("no int8 tensor-core GEMM: the format has no integer group dot".into()));
    }
    match f.layout() {
        qforge_core::Layout::Groups { group_size, group_bytes, scale_dtype, .. }
            if group_size >= 32 && group_size % 32 == 0 =>
        {
            let sdt = qforge_core::DType::ALL.iter().position(|d| *d == scale_dtype).unwrap_or(0);
            let g = i32::try_from(group_size).map_err(|_| unsupported(format!("group size {group_size}")))?;
            let b = i32::try_from(group_bytes).map_err(|_| unsupported(format!("group bytes {group_bytes}")))?;
            Ok((g, b, sdt as i32))
        }
        l => Err(unsupported(format!("the int8 tensor-core GEMM takes groups of a multiple of 32 elements, not {l:?}"))),
    }
}
