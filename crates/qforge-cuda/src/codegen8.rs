// The 8-bit tensor-core GEMMs' part of the generator (included into `codegen.rs`): which
// formats get them, from the registry's data, and what they are called.

/// The transposed int8 GEMMs' instances (qforge-tiling's, chosen per shape by
/// `qforge_tiling::i8_tile`), shared by A8W4DQ and the GGUF formats' int8 GEMM: one kernel per
/// instance; gemm8.cuh names instance `i` `qf_i8_cfg_<i>`.
pub use qforge_tiling::I8_GEMM_TILES;
/// The int8 GEMMs' instance and split rules (for callers that time an instance directly).
#[allow(unused_imports)] // the build script includes this file and reads only the tables
pub use qforge_tiling::{i8_smem_bytes, i8_splits, i8_tile};

/// The instances as C++ types and the list `QF_I8_INSTANCES(X)` (`X(i, qf_i8_cfg_<i>)` for
/// each) the host wrappers switch over; guarded, so a unit may hold both int8 GEMMs.
fn i8_cfg_typedef() -> String {
    let mut s = String::from("#ifndef QF_I8_INSTANCES\n");
    let mut list = String::from("#define QF_I8_INSTANCES(X)");
    for (i, t) in I8_GEMM_TILES.iter().enumerate() {
        s += &format!("typedef qf_i8_cfg<{}, {}, {}, {}, {}> qf_i8_cfg_{i};\n", t.rows, t.tok, t.wr, t.wt, t.stages);
        list += &format!(" X({i}, qf_i8_cfg_{i})");
    }
    s + &list + "\n#endif\n"
}

/// One `MACRO(traits, name, i, instance name)` line per instance of [`I8_GEMM_TILES`].
fn i8_kernels(macro_name: &str, traits: &str, format: &str) -> String {
    I8_GEMM_TILES
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{macro_name}({traits}, {format}, {i}, {})\n", t.name()))
        .collect()
}

/// `qforge_gemm_<format>_<kind>_<instance>` for every instance of [`I8_GEMM_TILES`] (`kind`:
/// `a8` or `q8`).
pub fn i8_kernel_names(format: &str, kind: &str) -> Vec<String> {
    I8_GEMM_TILES.iter().map(|t| format!("qforge_gemm_{format}_{kind}_{}", t.name())).collect()
}

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
/// [`A8_QUANTIZE_KERNEL`], then `qforge_gemm_<format>_a8_<instance>` for every instance of
/// [`I8_GEMM_TILES`] (empty for a format without them; the output type is an argument).
pub fn a8_kernel_names(format: &str) -> Vec<String> {
    match qforge_formats::get(format) {
        Ok(f) if a8_gemm(f.desc()) => {
            std::iter::once(A8_QUANTIZE_KERNEL.to_string()).chain(i8_kernel_names(format, "a8")).collect()
        }
        _ => Vec::new(),
    }
}

/// The A8 part of a format's module: `gemm8.cuh`, the instances, the quantizer and a kernel
/// per instance; empty for a format without the A8 GEMM.
fn a8_instantiate(d: &FormatDesc) -> String {
    match &d.cuda {
        Some(c) if a8_gemm(d) => format!(
            "#include \"gemm8.cuh\"\n{}QF_QUANTIZE_I8DYN_KERNEL\n{}",
            i8_cfg_typedef(),
            i8_kernels("QF_GEMM_A8_KERNEL", c.traits, d.name)
        ),
        _ => String::new(),
    }
}

/// The host translation unit's part for the 8-bit GEMMs: the quantizer and the m16n8k32
/// fragment layouts (for the test that holds them to the PTX ISA) where `common` (in one unit
/// only), and every A8 format's host wrapper `qf_host_gemm_<format>_a8` (the instance an
/// argument).
fn a8_host_source<'a>(formats: impl IntoIterator<Item = &'a FormatDesc>, common: bool) -> String {
    let mut s = String::from("#include \"gemm8.cuh\"\n") + &i8_cfg_typedef();
    if common {
        s += "QF_HOST_I8_SMEM\n";
        s += "QF_HOST_QUANTIZE_I8DYN\n\
         extern \"C\" void qf_host_frag8_coords(int lane, int* rc) {\n    \
         for (int i = 0; i < 16; ++i) { rc[2 * i] = qf_frag_a8_row(lane, i); rc[2 * i + 1] = qf_frag_a8_col(lane, i); }\n    \
         for (int i = 0; i < 8; ++i) { rc[32 + 2 * i] = qf_frag_b8_row(lane, i); rc[33 + 2 * i] = qf_frag_b_col(lane); }\n}\n";
    }
    for d in formats {
        if let (Some(c), true) = (&d.cuda, a8_gemm(d)) {
            s += &format!("QF_HOST_GEMM_A8({}, {})\n", c.traits, d.name);
        }
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
