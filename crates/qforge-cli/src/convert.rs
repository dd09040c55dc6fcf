//! `qforge convert IN OUT [--format F | --dtype D | --preset NAME] [--group-size G] [--imatrix FILE]
//! [--output-tensor-type T] [--token-embedding-type T] [--tensor-type PATTERN=T]… [--pure]
//! [--leave-output-tensor] [--allow-requantize] [--threads N]`: GGUF ⇄ safetensors (by
//! extension), dequantizing with --dtype, quantizing every tensor to one format with --format,
//! or choosing each tensor's type as llama-quantize does with --preset (see `preset.rs`).
//!
//! Tensor by tensor: the output header is written first (every size follows from type and
//! shape), then each tensor is converted and written before the next is read, so memory is
//! bounded by the largest tensor. Output goes to a temporary file beside OUT, renamed into
//! place on success; IN == OUT is refused.

use crate::exit::{Classify, CliError, CliResult, Kind, bad_input};
use crate::files;
use crate::inspect;
use qforge_core::DType;
use qforge_io::{
    Container, GgufWriter, IoError, ModelFile, Plain, StWriteTensor, TensorType, TensorView, Value, grid, imatrix,
    st_dtype, write_safetensors,
};
use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, IsTerminal};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub struct ConvertArgs<'a> {
    pub input: &'a Path,
    pub output: &'a Path,
    pub format: Option<&'a str>,
    pub dtype: Option<&'a str>,
    pub preset: Option<&'a str>,
    pub group_size: Option<usize>,
    pub imatrix: Option<&'a Path>,
    pub tensor_options: crate::preset::TensorOptions<'a>,
    pub allow_requantize: bool,
    pub threads: Option<usize>,
    /// One line per tensor on stderr.
    pub verbose: bool,
}

/// What happens to the tensors.
#[derive(Clone, Copy)]
enum Mode {
    Keep,
    Dtype(DType),
    Quantize(TensorType),
    Preset(qforge_presets::Ftype),
}

fn io_error(e: IoError) -> CliError {
    let kind = match &e {
        IoError::Io { op: "write", .. } => Kind::Failed,
        _ => Kind::Input,
    };
    CliError { kind, err: e.into() }
}

pub fn convert(a: ConvertArgs<'_>) -> CliResult<()> {
    let out_kind = Container::from_path(a.output).ok_or_else(|| {
        bad_input(format!("output {}: unknown extension (expected .gguf or .safetensors)", a.output.display()))
    })?;
    let mode = match (a.format, a.dtype, a.preset) {
        (Some(f), None, None) => Mode::Quantize(match a.group_size {
            Some(g) => TensorType::Quant(crate::commands::format_by_name(f, Some(g))?),
            None => TensorType::by_name(f).input()?,
        }),
        (None, Some(d), None) => Mode::Dtype(d.parse().map_err(|e| bad_input(format!("--dtype: {e}")))?),
        (None, None, Some(p)) => {
            Mode::Preset(qforge_presets::preset(p).map_err(|e| bad_input(format!("--preset: {e}")))?)
        }
        (None, None, None) => Mode::Keep,
        _ => return Err(bad_input("--format, --dtype and --preset exclude each other")),
    };
    if let (Some(g), Mode::Dtype(_) | Mode::Keep | Mode::Preset(_)) = (a.group_size, mode) {
        return Err(bad_input(format!(
            "--group-size {g}: no --format given; only group-wise formats take a group size"
        )));
    }
    if a.imatrix.is_some() && !matches!(mode, Mode::Quantize(TensorType::Quant(_)) | Mode::Preset(_)) {
        return Err(bad_input("--imatrix is only used when quantizing (--format F or --preset NAME)"));
    }
    if a.tensor_options.any() && !matches!(mode, Mode::Preset(_)) {
        return Err(bad_input(
            "--output-tensor-type, --token-embedding-type, --tensor-type, --pure and --leave-output-tensor \
             refine a --preset; give one (e.g. --preset Q4_K_M)",
        ));
    }
    if let Mode::Preset(_) = mode
        && out_kind != Container::Gguf
    {
        return Err(bad_input("--preset writes llama.cpp's types: the output must be a .gguf file"));
    }
    if let Some(n) = a.threads {
        if n == 0 {
            return Err(bad_input("--threads must be at least 1"));
        }
        // The first pool built wins; convert runs once per process, so this one does.
        let _ = rayon::ThreadPoolBuilder::new().num_threads(n).build_global();
    }
    if a.input == a.output {
        return Err(bad_input(format!("output {} is also an input; refusing to overwrite it", a.output.display())));
    }
    // Every file read (each shard of a checkpoint, the imatrix) must differ from the output.
    let src = inspect::open(a.input)?;
    let mut inputs: Vec<&Path> = src.files.iter().map(PathBuf::as_path).collect();
    inputs.extend(a.imatrix);
    files::check_distinct(a.output, &inputs)?;
    let (im, im_meta) = match a.imatrix {
        Some(p) => {
            let map = qforge_io::MappedFile::open(p).input()?;
            let (m, info) =
                imatrix::parse_with_info(map.bytes()).map_err(|e| bad_input(format!("{}: {e}", p.display())))?;
            let meta = imatrix_metadata(&p.to_string_lossy(), m.len(), &info);
            (Some(m), meta)
        }
        None => (None, Vec::new()),
    };
    let model = inspect::parse(&src, a.input)?;
    let (plan, order, file_type) = match mode {
        Mode::Preset(p) => {
            let pp = crate::preset::plan(&model, p, &a.tensor_options, im.is_some(), a.allow_requantize)?;
            (pp.types, pp.order, Some(pp.file_type))
        }
        _ => (plan(&model, mode, out_kind)?, (0..model.tensors.len()).collect(), None),
    };
    // --preset emulates llama-quantize: a format whose ggml quantizer ignores the importance
    // matrix (its descriptor says so) is quantized without it, as ggml does.
    let ggml = matches!(mode, Mode::Preset(_));
    let mut out = TempOut::create(a.output)?;
    let progress = Progress::new(model.tensors.iter().map(|t| t.size() as u64).sum(), a.verbose, model.tensors.len());
    match out_kind {
        Container::Gguf => {
            let mut w = gguf_header(&model, &plan, &order, mode, file_type)?;
            for (k, v) in im_meta {
                w.set(k, v).input()?;
            }
            let mut s = w.start(out.writer()?).map_err(io_error)?;
            for &i in &order {
                let (t, target) = (&model.tensors[i], &plan[i]);
                let started = Instant::now();
                let data = encode(t, *target, im.as_ref(), ggml)?;
                s.write_tensor(&data).map_err(io_error)?;
                src.release(t);
                progress.done(t, *target, data.len(), started);
            }
            s.finish().map_err(io_error)?;
        }
        Container::Safetensors => {
            let (meta, specs) = st_header(&model, &plan)?;
            let mut s = write_safetensors(out.writer()?, &meta, &specs).map_err(io_error)?;
            for (t, target) in model.tensors.iter().zip(&plan) {
                let started = Instant::now();
                let data = encode(t, *target, im.as_ref(), ggml)?;
                match target {
                    TensorType::Quant(f) if grid::is_grid(*f) => {
                        let (n, k) = grid::rows_cols(&t.dims).unwrap_or((1, 1));
                        let (values, scales) = grid::split(*f, &data, n, k).map_err(io_error)?;
                        s.write_tensor(values).map_err(io_error)?;
                        s.write_tensor(scales).map_err(io_error)?;
                    }
                    _ => s.write_tensor(&data).map_err(io_error)?,
                }
                src.release(t);
                progress.done(t, *target, data.len(), started);
            }
            s.finish().map_err(io_error)?;
        }
    }
    progress.finish();
    out.commit()
}

/// Encode `t` as `target` with its importance weights from `im`, if any; with `ggml`, only for
/// formats whose ggml quantizer uses them (`Format::ggml_uses_importance`).
fn encode<'a>(
    t: &TensorView<'a>,
    target: TensorType,
    im: Option<&imatrix::Imatrix>,
    ggml: bool,
) -> CliResult<Cow<'a, [u8]>> {
    let weights = match target {
        TensorType::Quant(f) if !ggml || f.ggml_uses_importance() => {
            im.and_then(|m| m.get(&t.name)).map(|v| v.as_slice())
        }
        _ => None,
    };
    qforge_io::encode(t, target, weights).map_err(|e| bad_input(format!("tensor '{}': {e}", t.name)))
}

/// The output type of every tensor, with llama.cpp's rules when quantizing: 1-D tensors
/// stay f32, integer tensors are copied, and a row length that does not fit the format's
/// block falls back to one that does (reported on stderr, one line per tensor).
fn plan(model: &ModelFile<'_>, mode: Mode, out: Container) -> CliResult<Vec<TensorType>> {
    let mut plan = Vec::with_capacity(model.tensors.len());
    for t in &model.tensors {
        let target = match mode {
            Mode::Keep | Mode::Preset(_) => t.ty,
            _ if !t.ty.is_float() => t.ty,
            Mode::Dtype(d) => TensorType::Plain(Plain::from_dtype(d)),
            Mode::Quantize(_) if t.dims.len() < 2 => TensorType::Plain(Plain::F32),
            Mode::Quantize(want) => {
                let cols = *t.dims.last().unwrap_or(&1);
                let got = fallback(want, cols, &t.name)?;
                if got != want {
                    eprintln!(
                        "qforge: {}: row length {cols} is not a multiple of {}'s block size {}; using {}",
                        t.name,
                        want.name(),
                        want.block_size(),
                        got.name()
                    );
                }
                got
            }
        };
        let fits = match (out, target) {
            (Container::Gguf, t) => t.ggml_type().is_some(),
            (Container::Safetensors, TensorType::Plain(_)) => true,
            (Container::Safetensors, TensorType::Quant(f)) => grid::is_grid(f),
        };
        if !fits {
            let other_fits = match target {
                TensorType::Quant(f) => match out {
                    Container::Gguf => grid::is_grid(f),
                    Container::Safetensors => f.desc().ggml_type.is_some(),
                },
                TensorType::Plain(_) => true,
            };
            let hint = match (other_fits, out) {
                (true, Container::Gguf) => "write a .safetensors file",
                (true, Container::Safetensors) => "write a .gguf file or pass --dtype",
                (false, _) => "neither GGUF nor safetensors defines it; use `qforge quantize` for raw files",
            };
            return Err(bad_input(format!(
                "tensor '{}': {} cannot hold {} tensors; {hint}",
                t.name,
                out.name(),
                target.name()
            )));
        }
        plan.push(target);
    }
    Ok(plan)
}

/// What llama-quantize records of the importance matrix it used: the file as given and the
/// first dataset (each cut to 127 bytes, as its fixed buffers do), the entry count and, when
/// the file says, the chunk count.
fn imatrix_metadata(path: &str, entries: usize, info: &imatrix::ImatrixInfo) -> Vec<(&'static str, Value<'static>)> {
    let cut = |s: &str| -> String {
        let mut end = s.len().min(127);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s[..end].to_string()
    };
    let mut v = vec![("quantize.imatrix.file", Value::String(cut(path).into()))];
    if let Some(d) = info.datasets.first() {
        v.push(("quantize.imatrix.dataset", Value::String(cut(d).into())));
    }
    v.push(("quantize.imatrix.entries_count", Value::U32(u32::try_from(entries).unwrap_or(u32::MAX))));
    if info.chunk_count > 0 {
        v.push(("quantize.imatrix.chunks_count", Value::U32(info.chunk_count)));
    }
    v
}

/// llama.cpp's fallback for rows that are not whole blocks of `want` (qforge-presets), for
/// every format: a format whose rows are not padded (a row unit of one element: grid
/// layouts such as fp8) fits any row; a format llama.cpp has no fallback for becomes f16.
fn fallback(want: TensorType, cols: usize, tensor: &str) -> CliResult<TensorType> {
    if matches!(want, TensorType::Quant(f) if f.layout().row_unit().0 == 1) {
        return Ok(want);
    }
    let block = |n: &str| TensorType::by_name(n).ok().map(|t| t.block_size());
    match qforge_presets::fallback(want.name(), cols, &block) {
        Ok(None) => Ok(want),
        Ok(Some(other)) => TensorType::by_name(&other).map_err(|e| bad_input(format!("tensor '{tensor}': {e}"))),
        Err(_) => Ok(TensorType::Plain(Plain::F16)),
    }
}

fn gguf_header(
    model: &ModelFile<'_>,
    plan: &[TensorType],
    order: &[usize],
    mode: Mode,
    file_type: Option<u32>,
) -> CliResult<GgufWriter> {
    let mut w = GgufWriter::new();
    // As ggml's gguf_set_val does (what llama-quantize calls), the two keys set below move to
    // the end: quantization_version, then file_type.
    for (k, v) in model.metadata.iter().filter(|(k, _)| k != "general.quantization_version" && k != "general.file_type")
    {
        w.set(k, v.clone()).input()?;
    }
    let main = match mode {
        Mode::Quantize(t) => t,
        Mode::Preset(_) => TensorType::Plain(Plain::F32), // file_type is the preset's own
        Mode::Dtype(d) => TensorType::Plain(Plain::from_dtype(d)),
        Mode::Keep => {
            // The type of most 2-D+ weights decides general.file_type.
            let mut counts: Vec<(TensorType, usize)> = Vec::new();
            for (t, ty) in model.tensors.iter().zip(plan).filter(|(t, _)| t.dims.len() >= 2) {
                match counts.iter_mut().find(|(c, _)| c == ty) {
                    Some((_, n)) => *n += t.numel(),
                    None => counts.push((*ty, t.numel())),
                }
            }
            counts.into_iter().max_by_key(|(_, n)| *n).map_or(TensorType::Plain(Plain::F32), |(t, _)| t)
        }
    };
    w.set("general.quantization_version", Value::U32(2)).input()?;
    w.set("general.file_type", Value::U32(file_type.unwrap_or_else(|| main.llama_ftype()))).input()?;
    for &i in order {
        w.add_tensor(&model.tensors[i].name, plan[i], &model.tensors[i].dims).input()?;
    }
    Ok(w)
}

/// safetensors `__metadata__` (string pairs) and the tensor specs of the output.
type StHeader = (Vec<(String, String)>, Vec<StWriteTensor>);

fn st_header(model: &ModelFile<'_>, plan: &[TensorType]) -> CliResult<StHeader> {
    let meta = model
        .metadata
        .iter()
        .map(|(k, v)| {
            let s = match v {
                Value::String(s) => s.to_string(),
                v => v.to_json(usize::MAX).to_string(),
            };
            (k.to_string(), s)
        })
        .collect();
    let mut specs = Vec::new();
    for (t, ty) in model.tensors.iter().zip(plan) {
        match ty {
            TensorType::Plain(p) => {
                specs.push(StWriteTensor { name: t.name.clone(), dtype: st_dtype(*p), shape: t.dims.clone() })
            }
            TensorType::Quant(f) => {
                // `plan` lets only grid formats reach a safetensors output.
                let (Some((values, scales)), Some(dims)) =
                    (grid::st_dtypes(*f), grid::rows_cols(&t.dims).and_then(|(n, k)| grid::grid_dims(*f, n, k)))
                else {
                    return Err(bad_input(format!("tensor '{}': safetensors cannot hold {}", t.name, f.desc().name)));
                };
                specs.push(StWriteTensor { name: t.name.clone(), dtype: values, shape: t.dims.clone() });
                specs.push(StWriteTensor { name: grid::companion_name(&t.name), dtype: scales, shape: dims.to_vec() });
            }
        }
    }
    Ok((meta, specs))
}

/// The output file: a temporary file beside the destination, renamed into place by
/// `commit`; removed if the conversion fails.
struct TempOut {
    tmp: PathBuf,
    dest: PathBuf,
    file: Option<BufWriter<File>>,
}

impl TempOut {
    fn create(dest: &Path) -> CliResult<Self> {
        let dir = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name =
            dest.file_name().ok_or_else(|| bad_input(format!("output {} is not a file path", dest.display())))?;
        let tmp = dir.join(format!(".{}.qforge-tmp-{}", name.to_string_lossy(), std::process::id()));
        let f = File::create(&tmp).map_err(|e| crate::exit::failed(format!("cannot create {}: {e}", tmp.display())))?;
        Ok(TempOut { tmp, dest: dest.to_path_buf(), file: Some(BufWriter::with_capacity(1 << 20, f)) })
    }

    fn writer(&mut self) -> CliResult<&mut BufWriter<File>> {
        self.file.as_mut().ok_or_else(|| crate::exit::failed("output already closed"))
    }

    fn commit(mut self) -> CliResult<()> {
        let f = self.file.take().ok_or_else(|| crate::exit::failed("output already closed"))?;
        let f = f
            .into_inner()
            .map_err(|e| crate::exit::failed(format!("cannot write {}: {}", self.tmp.display(), e.error())))?;
        f.sync_all().ok();
        std::fs::rename(&self.tmp, &self.dest)
            .map_err(|e| crate::exit::failed(format!("cannot move output into place at {}: {e}", self.dest.display())))
    }
}

impl Drop for TempOut {
    fn drop(&mut self) {
        if self.file.is_some() {
            self.file = None;
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// An indicatif bar over input bytes, shown only when stderr is a terminal; with
/// `--verbose`, one line per tensor as well.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    verbose: bool,
    total: usize,
    seen: std::cell::Cell<usize>,
}

impl Progress {
    fn new(bytes: u64, verbose: bool, total: usize) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(bytes);
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            {
                bar.set_style(style);
            }
            bar
        });
        Progress { bar, verbose, total, seen: std::cell::Cell::new(0) }
    }

    /// Tensor `t` was written as `target` in `out_bytes` bytes, starting at `started`.
    fn done(&self, t: &TensorView<'_>, target: TensorType, out_bytes: usize, started: Instant) {
        self.seen.set(self.seen.get() + 1);
        if self.verbose {
            let mib = |b: usize| b as f64 / (1 << 20) as f64;
            let line = format!(
                "[{:>w$}/{}] {:<40} {:>8} -> {:<8} {:?} {:.2} -> {:.2} MiB, {:.1} ms",
                self.seen.get(),
                self.total,
                t.name,
                t.ty.name(),
                target.name(),
                t.dims,
                mib(t.size()),
                mib(out_bytes),
                started.elapsed().as_secs_f64() * 1e3,
                w = self.total.to_string().len()
            );
            match &self.bar {
                Some(b) => b.println(line),
                None => eprintln!("{line}"),
            }
        }
        if let Some(b) = &self.bar {
            b.inc(t.size() as u64);
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
