//! Without the `cuda` feature: nothing (the crate builds with no CUDA toolkit).
//!
//! With it: generates one `.cu` per registered format with device code (see `src/codegen.rs`),
//! compiles each to PTX with bindgen_cuda (nvcc from `.cuda/` or the user's toolkit, compute
//! capability 80 set explicitly, `-fmad=false`), compiles the same headers for the host into
//! a static library of `extern "C"` wrappers for the tests (in as many translation units as
//! cargo gives jobs, beside the PTX), and writes `modules.rs` / `host_fns.rs` into `OUT_DIR`.
//!
//! Under `cargo clippy` (`RUSTC_WORKSPACE_WRAPPER` is clippy-driver) nothing is compiled with
//! nvcc: the sources are generated, the modules are empty, and nothing links. Clippy checks
//! the Rust code, never runs or links it, and the `--features cuda` lint pass takes seconds
//! instead of nvcc's minutes. A later build (another wrapper value) runs this script again.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "cuda")]
    cuda::build();
}

#[cfg(feature = "cuda")]
#[path = "src/codegen.rs"]
#[allow(dead_code)]
mod codegen;

#[cfg(feature = "cuda")]
#[path = "src/toolkit.rs"]
#[allow(dead_code)]
mod toolkit;

#[cfg(feature = "cuda")]
mod cuda {
    use super::{codegen, toolkit};
    use qforge_core::FormatDesc;
    use std::fmt::Write as _;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    fn write_if_changed(path: &Path, text: &str) {
        if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
            std::fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        }
    }

    /// [`write_if_changed`] for a source this script generates and hands to bindgen_cuda,
    /// which asks cargo to rerun the script when such a file changes. Written during the run,
    /// it would look newer than the run, and the next build would run the whole script (nvcc,
    /// minutes) again. Its content is a function of the script's inputs, which cargo tracks
    /// already: an old modification time says "not an input". Best effort: a file system that
    /// refuses the time only costs that one rerun.
    fn write_generated_source(path: &Path, text: &str) {
        write_if_changed(path, text);
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(86_400);
        let _ = std::fs::File::options().write(true).open(path).and_then(|f| f.set_modified(old));
    }

    pub fn build() {
        let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
        let workspace = manifest.join("../..").canonicalize().expect("the workspace root exists");
        let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
        // `kernels-cuda/` in this crate is a link to the workspace's top-level folder, so that a
        // packaged crate (`cargo package` copies what the link points at) carries the templates.
        let kernels = manifest.join("kernels-cuda").canonicalize().expect("crates/qforge-cuda/kernels-cuda exists");
        for var in ["NVCC", "CUDA_HOME", "CUDA_PATH"] {
            println!("cargo:rerun-if-env-changed={var}");
        }
        println!("cargo:rerun-if-changed={}", kernels.display());
        println!("cargo:rerun-if-env-changed=RUSTC_WORKSPACE_WRAPPER");
        let lint_only = std::env::var_os("RUSTC_WORKSPACE_WRAPPER").is_some_and(|w| {
            Path::new(&w).file_stem().is_some_and(|s| s.to_string_lossy().starts_with("clippy-driver"))
        });
        let Some(tk) = toolkit::find(&workspace) else { panic!("qforge-cuda feature `cuda`: {}", toolkit::NOT_FOUND) };
        set_env(&tk);
        println!("cargo:rerun-if-changed={}", tk.nvcc.display());
        let descs: Vec<&'static FormatDesc> =
            qforge_formats::FAMILIES.iter().flat_map(|f| f.iter()).map(|f| f.desc()).collect();
        let with_code: Vec<&'static FormatDesc> = descs.iter().copied().filter(|d| d.cuda.is_some()).collect();
        for d in descs.iter().filter(|d| d.cuda.is_none()) {
            println!("cargo:warning=qforge-cuda: format {} has no CUDA device code: MISSING (no kernels)", d.name);
        }

        // The generated sources: family headers (from the registry) and one .cu per format.
        let gen_dir = out.join("gen");
        std::fs::create_dir_all(&gen_dir).expect("creating OUT_DIR/gen");
        for (file, text) in codegen::headers(with_code.iter().copied()) {
            write_if_changed(&gen_dir.join(file), text);
        }
        // The device block structs, generated from the Rust blocks (`c_block!`).
        let blocks = codegen::blocks_header(qforge_formats::FAMILIES.iter().flat_map(|f| f.iter().copied()));
        write_if_changed(&gen_dir.join(codegen::BLOCKS_HEADER), &blocks);
        let mut cu_files = Vec::new();
        for d in &with_code {
            let path = gen_dir.join(format!("{}.cu", codegen::module_stem(d.name)));
            write_generated_source(&path, &codegen::module_source(d).expect("filtered on cuda.is_some()"));
            // bindgen_cuda skips a .cu whose .ptx is newer; any rerun of this script means an
            // input changed, so every module is compiled afresh.
            let _ = std::fs::remove_file(out.join(format!("{}.ptx", codegen::module_stem(d.name))));
            cu_files.push(path);
        }
        // The module of kernels that belong to no format (the f32 → f16 cast).
        cu_files.push(kernels.join(codegen::UTIL_MODULE_FILE));
        let _ = std::fs::remove_file(out.join(Path::new(codegen::UTIL_MODULE_FILE).with_extension("ptx")));

        if lint_only {
            // Empty modules: `modules.rs` embeds them, nothing runs them.
            let stems = cu_files
                .iter()
                .map(|cu| cu.with_extension("ptx"))
                .chain([PathBuf::from(codegen::SM89_MODULE).with_extension("ptx")]);
            for ptx in stems {
                write_if_changed(&out.join(ptx.file_name().expect("a file name")), "");
            }
            let sm89 = out.join(format!("{}.ptx", codegen::SM89_MODULE));
            deflate(&sm89);
        } else {
            // The host units (the longest single step) beside the PTX modules, which
            // bindgen_cuda compiles on its own threads.
            std::thread::scope(|s| {
                let host = s.spawn(|| build_host(&tk, &kernels, &gen_dir, &out, &with_code));
                build_ptx(&tk, &kernels, &gen_dir, &out, cu_files);
                build_sm89(&tk, &kernels, &gen_dir, &out, &with_code);
                host.join().expect("the host compilation's thread");
            });
            link_host(&tk, &out);
        }
        write_tables(&out, &with_code);
        write_a8_tables(&out, &with_code);
        write_q8_tables(&out, &with_code);
        write_fp8_tables(&out, &with_code);
    }

    /// `nvcc flags -I… src -o out`, which must succeed.
    fn nvcc(tk: &toolkit::Toolkit, flags: &[&str], includes: &[&Path], src: &Path, out: &Path) {
        let status = Command::new(&tk.nvcc)
            .args(flags)
            .args(includes.iter().map(|i| format!("-I{}", i.display())))
            .arg(src)
            .arg("-o")
            .arg(out)
            .status()
            .unwrap_or_else(|e| panic!("running {}: {e}", tk.nvcc.display()));
        assert!(status.success(), "nvcc failed on {} ({status})", src.display());
    }

    /// `codegen::SM89_MODULE`: the kernels that need compute capability 8.9 (the FP8 GEMM's
    /// e4m3 tensor-core body), compiled with nvcc for `compute_89` (bindgen_cuda builds every
    /// file for one compute capability), checked for unresolved externs like the others, deflated.
    fn build_sm89(tk: &toolkit::Toolkit, kernels: &Path, gen_dir: &Path, out: &Path, formats: &[&'static FormatDesc]) {
        let src = gen_dir.join(format!("{}.cu", codegen::SM89_MODULE));
        write_if_changed(&src, &codegen::sm89_source(formats.iter().copied()));
        let ptx = out.join(format!("{}.ptx", codegen::SM89_MODULE));
        nvcc(tk, codegen::NVCC_SM89_FLAGS, &[kernels, gen_dir], &src, &ptx);
        let text = std::fs::read_to_string(&ptx).unwrap_or_else(|e| panic!("reading {}: {e}", ptx.display()));
        if let Some(line) = codegen::unresolved_extern(&text) {
            panic!("{}: unresolved `{line}`", ptx.display());
        }
        deflate(&ptx);
    }

    /// `hostfp8_fns.rs`: the host-compiled FP8 GEMM bodies (`kernels-cuda/gemm_fp8.cuh`) of
    /// every format that has them (`codegen::fp8_gemm`), the quantizer and the code helpers.
    fn write_fp8_tables(out: &Path, formats: &[&'static FormatDesc]) {
        let mut host = String::from(
            "unsafe extern \"C\" {\n    fn qf_host_quantize_fp8_1x128(x: *const f32, q: *mut u8, s: *mut f32, m: i64, k: i64);\n    \
             fn qf_host_fp8_codes(kind: i32, values: *mut f32);\n    fn qf_host_e4m3_from_f32(x: f32) -> u8;\n    fn qf_host_fp8_smem(inst: i32) -> i64;\n",
        );
        let mut table =
            String::from("/// Host-compiled FP8 GEMMs (generated by build.rs).\npub static HOST_FP8: &[Fp8Fns] = &[\n");
        for d in formats.iter().filter(|d| codegen::fp8_gemm(d).is_some()) {
            let n = d.name;
            write!(table, "    Fp8Fns {{ format: {n:?}, ").unwrap();
            for b in codegen::FP8_BODIES {
                writeln!(
                    host,
                    "    fn qf_host_gemm_{n}_fp8_{b}(xq: *const u8, xs: *const f32, w: *const u8, grid: *const u8, y: *mut core::ffi::c_void, m: i64, n: i64, k: i64, splits: i32, out: i32, inst: i32);"
                )
                .unwrap();
                write!(table, "{b}: qf_host_gemm_{n}_fp8_{b}, ").unwrap();
            }
            table += "},\n";
        }
        host += "}\n";
        table += "];\n/// The host-compiled 1 × 128 e4m3 activation quantizer.\npub const QUANTIZE_FP8_1X128: QuantizeFp8Fn = qf_host_quantize_fp8_1x128;\n\
                  const FP8_CODES: unsafe extern \"C\" fn(i32, *mut f32) = qf_host_fp8_codes;\n\
                  const E4M3_FROM_F32: unsafe extern \"C\" fn(f32) -> u8 = qf_host_e4m3_from_f32;\n\
                  const FP8_SMEM: unsafe extern \"C\" fn(i32) -> i64 = qf_host_fp8_smem;\n";
        write_if_changed(&out.join("hostfp8_fns.rs"), &format!("{host}\n{table}"));
    }

    /// `hostq8_fns.rs`: every format's `codes32` presence and the host-compiled int8 GEMMs
    /// (`kernels-cuda/gemm_q8.cuh`) of the formats that have them (`codegen::q8_gemm`).
    fn write_q8_tables(out: &Path, formats: &[&'static FormatDesc]) {
        let mut host = String::from("unsafe extern \"C\" {\n");
        let mut probe = String::from(
            "/// Every format's `codes32` presence in its header (generated by build.rs).\npub static HOST_CODES32: &[(&str, unsafe extern \"C\" fn() -> i32)] = &[\n",
        );
        let mut table =
            String::from("/// Host-compiled int8 GEMMs (generated by build.rs).\npub static HOST_Q8: &[Q8Fns] = &[\n");
        for d in formats {
            let n = d.name;
            writeln!(host, "    fn qf_host_codes32_{n}() -> i32;").unwrap();
            writeln!(probe, "    ({n:?}, qf_host_codes32_{n}),").unwrap();
            if codegen::q8_gemm(d) {
                writeln!(
                    host,
                    "    fn qf_host_quantize_act8_{n}(x: *const f32, codes: *mut i8, ds: *mut f32, k: i64, units: i64, lda: i64, m: i64);"
                )
                .unwrap();
                writeln!(host, "    fn qf_host_gemm_{n}_q8(codes: *const i8, ds: *const f32, w: *const u8, y: *mut core::ffi::c_void, m: i64, n: i64, k: i64, lda: i64, units: i64, splits: i32, out: i32, inst: i32);").unwrap();
                writeln!(
                    table,
                    "    Q8Fns {{ format: {n:?}, quantize: qf_host_quantize_act8_{n}, gemm: qf_host_gemm_{n}_q8 }},"
                )
                .unwrap();
            }
        }
        host += "}\n";
        probe += "];\n";
        table += "];\n";
        write_if_changed(&out.join("hostq8_fns.rs"), &format!("{host}\n{probe}\n{table}"));
    }

    /// `host8_fns.rs`: the host-compiled A8 GEMMs (`kernels-cuda/gemm8.cuh`) of every format
    /// that has them (`codegen::a8_gemm`), and the activation quantizer.
    fn write_a8_tables(out: &Path, formats: &[&'static FormatDesc]) {
        let mut host = String::from(
            "unsafe extern \"C\" {\n    fn qf_host_quantize_int8_dyn(x: *const f32, q: *mut i8, scale: *mut f32, zp: *mut i32, m: i64, k: i64, lda: i64);\n    fn qf_host_frag8_coords(lane: i32, rc: *mut i32);\n    fn qf_host_i8_smem(inst: i32) -> i64;\n",
        );
        let mut table =
            String::from("/// Host-compiled A8 GEMMs (generated by build.rs).\npub static HOST_A8: &[A8Fns] = &[\n");
        for d in formats.iter().filter(|d| codegen::a8_gemm(d)) {
            let n = d.name;
            writeln!(
                host,
                "    fn qf_host_gemm_{n}_a8(xq: *const i8, xs: *const f32, xz: *const i32, w: *const u8, y: *mut core::ffi::c_void, m: i64, n: i64, k: i64, lda: i64, group: i32, gbytes: i32, sdt: i32, out: i32, inst: i32);"
            )
            .unwrap();
            writeln!(table, "    A8Fns {{ format: {n:?}, gemm: qf_host_gemm_{n}_a8 }},").unwrap();
        }
        host += "}\n";
        table += "];\n/// The host-compiled int8-dyn activation quantizer.\npub const QUANTIZE_INT8_DYN: QuantizeI8Fn = qf_host_quantize_int8_dyn;\n/// The m16n8k32 fragment layouts of warp.cuh.\nconst FRAG8_COORDS: unsafe extern \"C\" fn(i32, *mut i32) = qf_host_frag8_coords;\n/// The int8 instances' shared memory as gemm8.cuh lays it out.\nconst I8_SMEM: unsafe extern \"C\" fn(i32) -> i64 = qf_host_i8_smem;\n";
        write_if_changed(&out.join("host8_fns.rs"), &format!("{host}\n{table}"));
    }

    /// bindgen_cuda runs a plain `nvcc` and reads the compute capability from the environment
    /// (else it asks nvidia-smi, which build machines lack): set both for this process.
    fn set_env(tk: &toolkit::Toolkit) {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(std::iter::once(tk.bin_dir()).chain(std::env::split_paths(&path)))
            .expect("PATH entries are joinable");
        #[allow(unsafe_code)] // `set_var` is unsafe since edition 2024
        // SAFETY: the build script is single-threaded here: `build` calls this before it starts
        // any thread (the host compilation's, bindgen_cuda's rayon pool), so no thread can read
        // the environment concurrently.
        unsafe {
            std::env::set_var("PATH", path);
            std::env::set_var("CUDA_COMPUTE_CAP", toolkit::COMPUTE_CAP.to_string());
        }
    }

    fn build_ptx(tk: &toolkit::Toolkit, kernels: &Path, gen_dir: &Path, out: &Path, cu_files: Vec<PathBuf>) {
        let ptx_files: Vec<PathBuf> =
            cu_files.iter().map(|cu| out.join(cu.with_extension("ptx").file_name().unwrap())).collect();
        let mut b = bindgen_cuda::Builder::default()
            .kernel_paths(cu_files)
            .out_dir(out)
            .compute_cap(toolkit::COMPUTE_CAP as usize)
            .arg("-fmad=false")
            .arg("-std=c++17")
            .arg(leak(format!("-I{}", kernels.display())))
            .arg(leak(format!("-I{}", gen_dir.display())));
        b.cuda_root(&tk.root);
        b.build_ptx().expect("nvcc compiled every kernel module");
        // A table a format uses but its module only declares (QF_TABLE_DECL: the family header's
        // QF_FORMAT_<name> guard misses the format) compiles to an unresolved `.extern` that
        // would only fail when the driver loads the module: refuse it here.
        for ptx in ptx_files {
            let text = std::fs::read_to_string(&ptx).unwrap_or_else(|e| panic!("reading {}: {e}", ptx.display()));
            if let Some(line) = codegen::unresolved_extern(&text) {
                panic!("{}: unresolved `{line}`: a table is guarded off for this format", ptx.display());
            }
        }
    }

    fn leak(s: String) -> &'static str {
        Box::leak(s.into_boxed_str())
    }

    /// The host units ([`codegen::host_sources`], one per job cargo gives this script, at
    /// most 8), compiled side by side into `host_check_<i>.o`.
    fn build_host(tk: &toolkit::Toolkit, kernels: &Path, gen_dir: &Path, out: &Path, formats: &[&'static FormatDesc]) {
        let jobs = std::env::var("NUM_JOBS").ok().and_then(|j| j.parse::<usize>().ok()).unwrap_or(2);
        let units = codegen::host_sources(formats.iter().copied(), jobs.clamp(2, 8));
        std::thread::scope(|s| {
            let compiles: Vec<_> = units
                .iter()
                .enumerate()
                .map(|(i, text)| {
                    let src = gen_dir.join(format!("host_check_{i}.cu"));
                    write_if_changed(&src, text);
                    let obj = out.join(format!("host_check_{i}.o"));
                    s.spawn(move || {
                        nvcc(tk, codegen::NVCC_HOST_FLAGS, &[kernels, gen_dir], &src, &obj);
                        obj
                    })
                })
                .collect();
            let objs: Vec<PathBuf> =
                compiles.into_iter().map(|c| c.join().expect("a host compilation's thread")).collect();
            let lib = out.join("libqforge_cuda_host.a");
            let _ = std::fs::remove_file(&lib);
            let status = Command::new("ar").arg("crs").arg(&lib).args(&objs).status().expect("running ar");
            assert!(status.success(), "ar failed ({status})");
        });
    }

    /// Links the host units' library and what nvcc's host objects need.
    fn link_host(tk: &toolkit::Toolkit, out: &Path) {
        println!("cargo:rustc-link-search=native={}", out.display());
        println!("cargo:rustc-link-lib=static=qforge_cuda_host");
        // nvcc's host objects register their (empty) device code with the static runtime.
        println!("cargo:rustc-link-search=native={}", tk.lib_dir().display());
        println!("cargo:rustc-link-lib=static=cudart_static");
        for l in ["dl", "rt", "pthread", "stdc++"] {
            println!("cargo:rustc-link-lib=dylib={l}");
        }
    }

    /// `x.ptx` → `x.ptx.z` (raw deflate): what the crate embeds, inflated when a module loads.
    /// PTX is repetitive text; this keeps every binary that links qforge-cuda (and the GPU
    /// kit, which carries several) a fraction of the size.
    fn deflate(ptx: &Path) {
        let text = std::fs::read(ptx).unwrap_or_else(|e| panic!("reading {}: {e}", ptx.display()));
        let z = miniz_oxide::deflate::compress_to_vec(&text, 6);
        let mut name = ptx.as_os_str().to_owned();
        name.push(".z");
        write_bytes_if_changed(Path::new(&name), &z);
    }

    fn write_bytes_if_changed(path: &Path, bytes: &[u8]) {
        if std::fs::read(path).ok().as_deref() != Some(bytes) {
            std::fs::write(path, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        }
    }

    fn write_tables(out: &Path, formats: &[&'static FormatDesc]) {
        let mut modules =
            String::from("/// Every format with device code and its PTX module, deflated (generated by build.rs).\n");
        modules += "pub static MODULES: &[(&str, &[u8])] = &[\n";
        let mut host = String::from(
            "unsafe extern \"C\" {\n    fn qf_host_quantize_q8_1(x: *const f32, out: *mut QfBlockQ8_1, k: i64, nblocks: i64, m: i64);\n",
        );
        let mut table = String::from(
            "/// Host-compiled device code of every format with a header (generated by build.rs).\npub static HOST: &[HostFns] = &[\n",
        );
        for d in formats {
            let n = d.name;
            let stem = codegen::module_stem(n);
            deflate(&out.join(format!("{stem}.ptx")));
            writeln!(modules, "    ({n:?}, include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{stem}.ptx.z\"))),").unwrap();
            for t in ["f32", "f16", "bf16"] {
                let ty = if t == "f32" { "f32" } else { "u16" };
                writeln!(
                    host,
                    "    fn qf_host_dequant_{n}_{t}(src: *const u8, grid: *const u8, dst: *mut {ty}, rows: i64, cols: i64);"
                )
                    .unwrap();
            }
            writeln!(host, "    fn qf_host_h2_mismatches_{n}(blocks: *const u8, n: i64) -> i64;").unwrap();
            writeln!(
                host,
                "    fn qf_host_matvec_{n}(w: *const u8, grid: *const u8, act: *const QfBlockQ8_1, y: *mut f32, n: i64, k: i64, m: i32);"
            )
            .unwrap();
            let mut gemm = String::from("gemm: &[");
            for (i, t) in codegen::FUSED_GEMM_TILES.iter().enumerate() {
                gemm += &format!("HostTileFns {{ tile: &crate::codegen::FUSED_GEMM_TILES[{i}], ");
                for mma in codegen::GEMM_MMA_TYPES {
                    let f = codegen::host_gemm_name(n, mma, t);
                    writeln!(
                        host,
                        "    fn {f}(x: *const f32, w: *const u8, grid: *const u8, y: *mut core::ffi::c_void, m: i64, n: i64, k: i64, splits: i32, out: i32);"
                    )
                    .unwrap();
                    write!(gemm, "{mma}: {f}, ").unwrap();
                }
                gemm += "}, ";
            }
            gemm += "], ";
            writeln!(
                table,
                "    HostFns {{ format: {n:?}, dequant_f32: qf_host_dequant_{n}_f32, dequant_f16: qf_host_dequant_{n}_f16, \
                 dequant_bf16: qf_host_dequant_{n}_bf16, h2_mismatches: qf_host_h2_mismatches_{n}, \
                 matvec: qf_host_matvec_{n}, {gemm}}},"
            )
            .unwrap();
        }
        modules += "];\n";
        let util = Path::new(codegen::UTIL_MODULE_FILE).with_extension("ptx");
        deflate(&out.join(&util));
        writeln!(
            modules,
            "/// The module of kernels that need compute capability 8.9, deflated.\npub static SM89_PTX: &[u8] = include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{}.ptx.z\"));",
            codegen::SM89_MODULE
        )
        .unwrap();
        writeln!(
            modules,
            "/// The module of kernels that belong to no format (`kernels-cuda/{}`), deflated.\npub static UTIL_PTX: &[u8] = include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{}.z\"));",
            codegen::UTIL_MODULE_FILE,
            util.display()
        )
        .unwrap();
        host += "}\n";
        table += "];\n";
        write_if_changed(&out.join("modules.rs"), &modules);
        write_if_changed(
            &out.join("host_fns.rs"),
            &format!(
                "{host}\n{table}\n/// The host-compiled activation quantizer.\npub const QUANTIZE_Q8_1: QuantizeFn = qf_host_quantize_q8_1;\n"
            ),
        );
    }
}
