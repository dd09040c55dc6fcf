//! The rules themselves, in llama-quant.cpp's order: which tensors may be quantized, each
//! tensor's category, the preset's per-category rules with their running counters, the
//! user's overrides and the fallback for rows that are not whole blocks.

use crate::{Choice, Ftype, ModelInfo, Options, PresetError, TensorInfo, is_quantized};

/// A tensor's broad role, from its name alone (llama.cpp's `tensor_category`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    /// Token embeddings: `token_embd.weight`, `per_layer_token_embd.weight`.
    TokenEmbd,
    /// Attention query projection (`attn_q.weight`).
    AttnQ,
    /// Attention value projection (`attn_v.weight`).
    AttnV,
    /// Attention key projection (`attn_k.weight`).
    AttnK,
    /// Fused query/key/value projection (`attn_qkv.weight`).
    AttnQkv,
    /// MLA's key/value up-projection (`attn_kv_b.weight`, DeepSeek).
    AttnKvB,
    /// Attention output projection (`attn_output.weight`).
    AttnOutput,
    /// Feed-forward up projection (names containing `ffn_up`, experts included).
    FfnUp,
    /// Feed-forward gate projection (names containing `ffn_gate`, experts included).
    FfnGate,
    /// Feed-forward down projection (names containing `ffn_down`, experts included).
    FfnDown,
    /// The output (LM head) matrix, `output.weight`.
    Output,
    /// Anything else (the preset's default type applies).
    Other,
}

fn is_token_embd(name: &str) -> bool {
    name == "token_embd.weight" || name == "per_layer_token_embd.weight"
}

/// The category of a tensor name; the first matching test wins, as in llama.cpp.
pub fn category(name: &str) -> Category {
    let has = |s: &str| name.contains(s);
    if name == "output.weight" {
        Category::Output
    } else if is_token_embd(name) {
        Category::TokenEmbd
    } else if has("attn_qkv.weight") {
        Category::AttnQkv
    } else if has("attn_kv_b.weight") {
        Category::AttnKvB
    } else if has("attn_v.weight") {
        Category::AttnV
    } else if has("attn_k.weight") {
        Category::AttnK
    } else if has("attn_q.weight") {
        Category::AttnQ
    } else if has("attn_output.weight") {
        Category::AttnOutput
    } else if has("ffn_up") {
        Category::FfnUp
    } else if has("ffn_gate") {
        Category::FfnGate
    } else if has("ffn_down") {
        Category::FfnDown
    } else {
        Category::Other
    }
}

/// Attention-v-like tensors (the ones the rules give more bits).
fn is_attn_v(c: Category) -> bool {
    matches!(c, Category::AttnV | Category::AttnQkv | Category::AttnKvB)
}

/// ggml's `ggml_n_dims`: dimensions up to the last one larger than 1 (at least 1).
fn n_dims(dims: &[usize]) -> usize {
    // dims are outermost first; ggml's ne[0] is the last.
    dims.iter().position(|&d| d > 1).map_or(1, |i| dims.len() - i)
}

/// Substrings of tensor names llama.cpp never quantizes (small or structural tensors).
const NEVER: &[&str] = &[
    "_norm.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    "time_mix_first.weight",
    "time_mix_w0.weight",
    "time_mix_w1.weight",
    "time_mix_w2.weight",
    "time_mix_v0.weight",
    "time_mix_v1.weight",
    "time_mix_v2.weight",
    "time_mix_a0.weight",
    "time_mix_a1.weight",
    "time_mix_a2.weight",
    "time_mix_g1.weight",
    "time_mix_g2.weight",
    "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight",
    "attn_rel_b.weight",
    ".position_embd",
    "sam.pos_embd",
    "sam.neck.",
    "sam.net_",
    ".rel_pos",
    ".patch_embd",
    ".patch_merger",
    "a.rvq.codebook",
    "mm.a.code_embd",
];

/// More of them, for glm5-next only.
const NEVER_GLM5_NEXT: &[&str] = &[
    "hc_",
    "indexer.attn_q_b",
    "indexer.attn_k",
    "indexer.proj",
    "indexer_compressor_gate",
    "indexer_compressor_ape",
    "ssm_f_a.weight",
    "ssm_f_b.weight",
    "ssm_g_a.weight",
    "ssm_g_b.weight",
    "ssm_beta.weight",
    "attn_kv_a_mqa.weight",
    "attn_k_b.weight",
    "attn_v_b.weight",
];

/// Whether llama.cpp may quantize this tensor at all (`tensor_allows_quantization`).
fn allows_quantization(opts: &Options, arch: &str, t: &TensorInfo<'_>) -> bool {
    let name = t.name;
    n_dims(t.dims) >= 2
        && name.ends_with("weight")
        && !(opts.leave_output_tensor && name == "output.weight")
        && name != "position_embd.weight"
        && name != "token_types.weight"
        && !NEVER.iter().any(|s| name.contains(s))
        && !(arch == "glm5-next" && NEVER_GLM5_NEXT.iter().any(|s| name.contains(s)))
}

/// llama.cpp's `tensor_requires_imatrix`.
fn requires_imatrix(name: &str, ty: &str, ftype: Ftype) -> bool {
    if is_token_embd(name) || name == "output.weight" {
        return false;
    }
    match ty {
        "iq3_xxs" | "iq2_xxs" | "iq2_xs" | "iq2_s" | "iq1_m" | "iq1_s" => true,
        "q2_k" => ftype == Ftype::Q2KS,
        _ => false,
    }
}

/// The running state of one planning pass (llama.cpp's `quantize_state_impl`).
struct State<'a> {
    ftype: Ftype,
    model: &'a ModelInfo,
    opts: &'a Options,
    block_size: &'a dyn Fn(&str) -> Option<usize>,
    n_attention_wv: i64,
    i_attention_wv: i64,
    n_layer: i64,
    i_ffn_down: i64,
    i_ffn_gate: i64,
    i_ffn_up: i64,
    has_tied_embeddings: bool,
}

fn use_more_bits(i: i64, n: i64) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

impl State<'_> {
    fn block(&self, ty: &str) -> Result<usize, PresetError> {
        (self.block_size)(ty).ok_or_else(|| PresetError::UnknownType(ty.to_string()))
    }

    /// (layer, layers) of a feed-forward tensor: the counter, or for MoE models the layer
    /// number in the name (experts are not stored in layer order).
    fn layer_info(&self, counter: i64, name: &str) -> Result<(i64, i64), PresetError> {
        let n = self.n_layer;
        if self.model.n_expert <= 1 {
            return Ok((counter, n));
        }
        let err = |why: String| PresetError::Tensor { tensor: name.to_string(), why };
        let digits: String = name.strip_prefix("blk.").unwrap_or("").chars().take_while(char::is_ascii_digit).collect();
        let i: i64 = digits.parse().map_err(|_| err("cannot determine its layer (no blk.N. prefix)".into()))?;
        if i >= n {
            return Err(err(format!("layer {i} outside [0, {n})")));
        }
        Ok((i, n))
    }

    /// `llama_tensor_get_type_impl`: the preset's rules for one tensor.
    fn rules(&mut self, mut ty: &'static str, t: &TensorInfo<'_>, cat: Category) -> Result<String, PresetError> {
        use Ftype as F;
        let f = self.ftype;
        let m = self.model;
        let arch = m.arch.as_str();
        let (gqa, n_expert) = (m.n_gqa(), m.n_expert);
        let name = t.name;
        if arch == "glm5-next" && ["attn_q_a", "attn_q_b", "nextn.eh_proj"].iter().any(|s| name.contains(s)) {
            return Ok(if matches!(ty, "f32" | "bf16" | "f16") { ty } else { "q8_0" }.into());
        }
        if cat == Category::Output || (self.has_tied_embeddings && cat == Category::TokenEmbd) {
            if let Some(o) = &self.opts.output_tensor_type {
                return Ok(o.clone());
            }
            let nx = t.dims.last().copied().unwrap_or(1);
            ty = if f == F::Mxfp4Moe || arch == "falcon" || !nx.is_multiple_of(self.block(ty)?) {
                "q8_0"
            } else if matches!(f, F::Iq2Xxs | F::Iq2Xs | F::Iq3Xxs | F::Iq1S | F::Iq2S | F::Iq2M | F::Iq1M) {
                "q5_k"
            } else if ty != "q8_0" {
                "q6_k"
            } else {
                ty
            };
        } else if f == F::Mxfp4Moe {
            let bailing_expert =
                arch == "bailingmoe3" && matches!(cat, Category::FfnUp | Category::FfnGate | Category::FfnDown);
            let experts = t.dims.len() >= 3 && t.dims[t.dims.len() - 3] > 1;
            ty = if experts && (arch != "bailingmoe3" || bailing_expert) { "mxfp4" } else { "q8_0" };
        } else if cat == Category::TokenEmbd {
            if let Some(o) = &self.opts.token_embedding_type {
                return Ok(o.clone());
            }
            ty = match f {
                F::Iq2Xxs | F::Iq2Xs | F::Iq1S | F::Iq1M => "q2_k",
                F::Iq2S | F::Iq2M | F::Iq3Xxs => "iq3_s",
                F::Tq1_0 | F::Tq2_0 | F::Q2_0 => "q4_k",
                _ => ty,
            };
        } else if f.is_iq1_iq2() {
            let s_or_m = matches!(f, F::Iq2S | F::Iq2M);
            if is_attn_v(cat) {
                ty = if gqa >= 4 || n_expert >= 4 {
                    "q4_k"
                } else if s_or_m {
                    "iq3_s"
                } else {
                    "q2_k"
                };
                self.i_attention_wv += 1;
            } else if n_expert == 8 && cat == Category::AttnK {
                ty = "q4_k";
            } else if cat == Category::FfnDown {
                if self.i_ffn_down < self.n_layer / 8 {
                    ty = if s_or_m { "iq3_s" } else { "q2_k" };
                }
                self.i_ffn_down += 1;
            } else if cat == Category::AttnOutput {
                if n_expert == 8 {
                    ty = "q5_k";
                } else if matches!(f, F::Iq1S | F::Iq1M) {
                    ty = "iq2_xxs";
                } else if s_or_m {
                    ty = "iq3_s";
                }
            }
        } else if is_attn_v(cat) {
            let (i, n) = (self.i_attention_wv, self.n_attention_wv);
            match f {
                F::Q2K => ty = if gqa >= 4 { "q4_k" } else { "q3_k" },
                F::Q2KS if gqa >= 4 => ty = "q4_k",
                F::Iq3Xxs => {
                    ty = if gqa >= 4 {
                        "q4_k"
                    } else if !self.opts.has_imatrix {
                        "iq3_s"
                    } else {
                        "iq3_xxs"
                    }
                }
                F::Iq3Xs | F::Iq3S if gqa >= 4 => ty = "q4_k",
                F::Iq3M => ty = "q4_k",
                F::Q3KM => ty = if i < 2 { "q5_k" } else { "q4_k" },
                F::Q3KL => ty = "q5_k",
                F::Iq4Nl | F::Iq4Xs if gqa >= 4 => ty = "q5_k",
                F::Q4KM | F::Q5KM if use_more_bits(i, n) => ty = "q6_k",
                F::Q4KS if i < 4 => ty = "q5_k",
                _ => {}
            }
            if m.is_70b() && matches!(ty, "q3_k" | "q4_k") {
                ty = "q5_k";
            }
            if n_expert == 8 {
                ty = "q8_0";
            }
            self.i_attention_wv += 1;
        } else if cat == Category::AttnK {
            if n_expert == 8 {
                ty = "q8_0";
            } else if f == F::Iq3Xs {
                ty = "iq3_xxs";
            } else if f == F::Iq3Xxs {
                ty = "iq2_s";
            }
        } else if cat == Category::AttnQ {
            if f == F::Iq3Xs {
                ty = "iq3_xxs";
            } else if f == F::Iq3Xxs {
                ty = "iq2_s";
            }
        } else if cat == Category::FfnDown {
            let (i, n) = self.layer_info(self.i_ffn_down, name)?;
            let falcon = arch == "falcon";
            let im = self.opts.has_imatrix;
            match f {
                F::Q2K => ty = "q3_k",
                F::Q2KS if i < n / 8 => ty = "q4_k",
                F::Iq3Xxs if !im => ty = if i < n / 8 { "q4_k" } else { "q3_k" },
                F::Q3KM => {
                    ty = if i < n / 16 {
                        "q5_k"
                    } else if !falcon || use_more_bits(i, n) {
                        "q4_k"
                    } else {
                        "q3_k"
                    }
                }
                F::Iq3M if i < n / 8 || (n_expert == 8 && use_more_bits(i, n)) => ty = "q4_k",
                F::Q3KL => ty = if falcon { "q4_k" } else { "q5_k" },
                F::Q4KM => {
                    if falcon {
                        ty = if i < n / 16 {
                            "q6_k"
                        } else if use_more_bits(i, n) {
                            "q5_k"
                        } else {
                            "q4_k"
                        };
                    } else if use_more_bits(i, n) {
                        ty = "q6_k";
                    }
                }
                F::Iq4Nl | F::Iq4Xs if i < n / 8 && !im => ty = "q5_k",
                F::Q5KM if use_more_bits(i, n) => ty = "q6_k",
                F::Q4KS if !falcon && i < n / 8 => ty = "q5_k",
                F::Q4_0 | F::Q5_0 if im && i < n / 8 => ty = if f == F::Q4_0 { "q4_1" } else { "q5_1" },
                _ => {}
            }
            self.i_ffn_down += 1;
        } else if cat == Category::AttnOutput {
            if arch != "falcon" {
                if n_expert == 8 {
                    if matches!(
                        f,
                        F::Q2K
                            | F::Iq3Xs
                            | F::Iq3Xxs
                            | F::Q3KS
                            | F::Q3KM
                            | F::Iq4Nl
                            | F::Q4KS
                            | F::Q4KM
                            | F::Iq3S
                            | F::Iq3M
                            | F::Iq4Xs
                    ) {
                        ty = "q5_k";
                    }
                } else {
                    match f {
                        F::Q2K => ty = "q3_k",
                        F::Iq3Xxs => ty = "iq3_s",
                        F::Q3KM | F::Iq3M => ty = "q4_k",
                        F::Q3KL => ty = "q5_k",
                        _ => {}
                    }
                }
            } else if f == F::Q3KL {
                ty = "q4_k";
            }
        } else if cat == Category::AttnQkv {
            match f {
                F::Q3KM | F::Q3KL | F::Iq3M => ty = "q4_k",
                F::Q4KM => ty = "q5_k",
                F::Q5KM => ty = "q6_k",
                _ => {}
            }
        } else if cat == Category::FfnGate || cat == Category::FfnUp {
            let counter = if cat == Category::FfnGate { self.i_ffn_gate } else { self.i_ffn_up };
            let (i, n) = self.layer_info(counter, name)?;
            if f == F::Iq3Xs && i >= n / 8 && i < 7 * n / 8 {
                ty = "iq3_xxs";
            }
            if cat == Category::FfnGate {
                self.i_ffn_gate += 1;
            } else {
                self.i_ffn_up += 1;
            }
        }
        Ok(ty.to_string())
    }

    fn fallback(&self, t: &TensorInfo<'_>, want: String) -> Result<(String, Option<String>), PresetError> {
        let ncols = t.dims.last().copied().unwrap_or(1);
        self.block(&want)?;
        match fallback(&want, ncols, self.block_size) {
            Ok(None) => Ok((want, None)),
            Ok(Some(got)) => Ok((got, Some(want))),
            Err(why) => Err(PresetError::Tensor { tensor: t.name.to_string(), why }),
        }
    }

    /// `llama_tensor_get_type` for a quantizable tensor.
    fn choose(&mut self, t: &TensorInfo<'_>, cat: Category) -> Result<(String, Option<String>), PresetError> {
        let opts = self.opts;
        if let (Some(o), Category::TokenEmbd) = (&opts.token_embedding_type, cat) {
            let named =
                t.name == "per_layer_token_embd.weight" && opts.tensor_types.iter().any(|(re, _)| re.is_match(t.name));
            if !named {
                return Ok((o.clone(), None));
            }
        }
        if let (Some(o), Category::Output) = (&opts.output_tensor_type, cat) {
            return Ok((o.clone(), None));
        }
        let default = self.ftype.default_type();
        if !is_quantized(default) {
            return Ok((default.to_string(), None));
        }
        let manual = opts.tensor_types.iter().find(|(re, _)| re.is_match(t.name)).map(|(_, ty)| ty.clone());
        let ty = match manual {
            Some(ty) => ty,
            None if opts.pure => default.to_string(),
            None => self.rules(default, t, cat)?,
        };
        self.fallback(t, ty)
    }
}

/// llama.cpp's `tensor_type_fallback`: `None` when rows of `ncols` are whole blocks of `want`,
/// else the type to use instead (`iq*` → iq4_nl, `q2_k` / `q3_k` / `tq*` → q4_0, `q4_k` → q5_0,
/// `q5_k` → q5_1, `q6_k` → q8_0, a 32-element type stays, then f16 if that still does not
/// fit), or why there is none (a type of larger blocks llama.cpp has no fallback for).
pub fn fallback(
    want: &str,
    ncols: usize,
    block_size: &dyn Fn(&str) -> Option<usize>,
) -> Result<Option<String>, String> {
    let block = |ty: &str| block_size(ty).ok_or_else(|| format!("type {ty:?} is not known here (no block size)"));
    let qk = block(want)?;
    if ncols.is_multiple_of(qk) {
        return Ok(None);
    }
    let next = match want {
        "iq1_s" | "iq1_m" | "iq2_xxs" | "iq2_xs" | "iq2_s" | "iq3_xxs" | "iq3_s" | "iq4_xs" => "iq4_nl",
        "q2_0" | "q2_k" | "q3_k" | "tq1_0" | "tq2_0" => "q4_0",
        "q4_k" => "q5_0",
        "q5_k" => "q5_1",
        "q6_k" => "q8_0",
        _ if qk <= 32 => want,
        _ => {
            return Err(format!(
                "row length {ncols} is not a multiple of {want}'s block {qk}, and llama.cpp defines no fallback for {want}"
            ));
        }
    };
    Ok(Some(if ncols.is_multiple_of(block(next)?) { next.to_string() } else { "f16".to_string() }))
}

/// The type of every tensor of a model (`tensors` in file order; the result in the same
/// order) under preset `ftype`. `block_size` gives a type's elements per block (1 for plain
/// types, `None` for a type unknown to the caller).
///
/// # Errors
/// [`PresetError::UnknownType`] for a type `block_size` does not know (the preset's, an
/// override's, a fallback's); [`PresetError::Tensor`] for a MoE tensor without its layer in
/// its name, or a row no fallback fits where llama.cpp defines none.
pub fn plan(
    ftype: Ftype,
    model: &ModelInfo,
    opts: &Options,
    tensors: &[TensorInfo<'_>],
    block_size: &dyn Fn(&str) -> Option<usize>,
) -> Result<Vec<Choice>, PresetError> {
    let cats: Vec<Category> = tensors.iter().map(|t| category(t.name)).collect();
    let mut st = State {
        ftype,
        model,
        opts,
        block_size,
        n_attention_wv: cats.iter().filter(|c| is_attn_v(**c)).count() as i64,
        i_attention_wv: 0,
        n_layer: i64::from(model.n_layer),
        i_ffn_down: 0,
        i_ffn_gate: 0,
        i_ffn_up: 0,
        has_tied_embeddings: !cats.contains(&Category::Output),
    };
    let names: Vec<&str> = tensors.iter().map(|t| t.name).collect();
    let mut out: Vec<Option<Choice>> = vec![None; tensors.len()];
    for i in crate::llama_order(&names) {
        let t = &tensors[i];
        let quantizable = allows_quantization(opts, &model.arch, t);
        let (ty, fallback_from) = if quantizable { st.choose(t, cats[i])? } else { (t.ty.to_string(), None) };
        let requires_imatrix = quantizable && requires_imatrix(t.name, &ty, ftype);
        out[i] = Some(Choice { ty, quantizable, fallback_from, requires_imatrix });
    }
    Ok(out.into_iter().flatten().collect())
}
