// The int8 GEMM of the GGUF formats with an integer dot (included into `codegen.rs`): which
// formats get it, from the registry's data, and what its kernels are called.

/// The activation quantizer of a module with the int8 GEMM (`kernels-cuda/gemm_q8.cuh`): the
/// format's native activations (q8_0 / q8_1 / q8_k) by the activation format's own encoder,
/// as codes (rows padded to whole 128-column k-steps) and each 32-element unit's f32 (d, s).
pub const Q8_QUANTIZE_KERNEL: &str = "qforge_quantize_act8";

/// The activation format `d`'s int8 GEMM quantizes with (its native activations, ggml's
/// `vec_dot_type`), if `d` has the int8 GEMM: a registered format with device code whose
/// CUDA traits provide `codes32` ([`qforge_core::BlockFormat::CUDA_CODES32`]), whose native
/// activations are a block format with device code and whose block is a multiple of 32.
/// Read from the registry, never from a name list.
pub fn q8_act(d: &FormatDesc) -> Option<&'static dyn Format> {
    let f = qforge_formats::get(d.name).ok()?;
    let qforge_core::ActKind::Blocks(act) = f.native_act() else { return None };
    let a = qforge_formats::get(act).ok()?;
    (d.cuda.is_some() && f.cuda_codes32() && a.desc().cuda.is_some() && a.desc().block_size % 32 == 0).then_some(a)
}

/// Whether `d`'s module gets the int8 GEMM ([`q8_act`]).
pub fn q8_gemm(d: &FormatDesc) -> bool {
    q8_act(d).is_some()
}

/// The int8 GEMM's kernels of a format's module, in the order the runtime loads them:
/// [`Q8_QUANTIZE_KERNEL`], then `qforge_gemm_<format>_q8_<instance>` for every instance of
/// [`I8_GEMM_TILES`] (empty for a format without them; the output type is an argument: 0 f32,
/// 1 f16, 2 bf16).
pub fn q8_kernel_names(format: &str) -> Vec<String> {
    match qforge_formats::get(format) {
        Ok(f) if q8_gemm(f.desc()) => {
            std::iter::once(Q8_QUANTIZE_KERNEL.to_string()).chain(i8_kernel_names(format, "q8")).collect()
        }
        _ => Vec::new(),
    }
}

/// The activation format's header, `gemm_q8.cuh`, the instances, and `MACRO(…)` lines for a
/// format with the int8 GEMM: the module's (`device`: the quantizer and a kernel per
/// instance) or the host unit's (the wrappers); empty otherwise.
fn q8_instantiate(d: &FormatDesc, device: bool) -> String {
    match (q8_act(d), &d.cuda) {
        (Some(a), Some(c)) => {
            let ac = a.desc().cuda.as_ref().map_or("", |ac| ac.traits);
            let header = a.desc().cuda.as_ref().map_or("", |ac| ac.header_file);
            let body = if device {
                format!("QF_QUANTIZE_ACT8_KERNEL({ac})\n{}", i8_kernels("QF_GEMM_Q8_KERNEL", c.traits, d.name))
            } else {
                format!("QF_HOST_GEMM_Q8({}, {}, {ac})\n", c.traits, d.name)
            };
            format!("#include \"{header}\"\n#include \"gemm_q8.cuh\"\n{}{body}", i8_cfg_typedef())
        }
        _ => String::new(),
    }
}

/// The host translation unit's part for the int8 GEMM: every format's `codes32` presence
/// (`qf_host_codes32_<format>`, for the test that holds the registry's flag to the headers)
/// and the wrappers of every format that has it.
fn q8_host_source<'a>(formats: impl IntoIterator<Item = &'a FormatDesc>) -> String {
    let mut s = String::from("#include \"gemm_q8.cuh\"\n");
    for d in formats {
        if let Some(c) = &d.cuda {
            s += &format!(
                "extern \"C\" int qf_host_codes32_{}(void) {{ return qf_has_codes32<{}>::value; }}\n",
                d.name, c.traits
            );
            s += &q8_instantiate(d, false);
        }
    }
    s
}

/// The int8 GEMM's activation units per row for weights `f` with `k` columns: the weight
/// row's padded length / 32 (the CPU quantizes the activations to that padded length). The
/// padded length must be whole blocks of the activation format.
pub fn q8_units(f: &dyn Format, k: usize) -> Result<usize, qforge_core::QuantError> {
    let unsupported = |reason: String| qforge_core::QuantError::Unsupported { format: f.desc().name, reason };
    let Some(a) = qforge_formats::get(f.desc().name).ok().and_then(|r| q8_act(r.desc())) else {
        return Err(unsupported("no int8 tensor-core GEMM: the format's device code has no codes32".into()));
    };
    if !matches!(f.layout(), qforge_core::Layout::Blocks { .. }) {
        return Err(unsupported(format!("the int8 tensor-core GEMM takes row blocks, not {:?}", f.layout())));
    }
    let padded = f.desc().padded_cols(k)?;
    if padded % a.desc().block_size != 0 {
        return Err(unsupported(format!("a row of {padded} is not whole {} blocks", a.desc().name)));
    }
    Ok(padded / 32)
}
