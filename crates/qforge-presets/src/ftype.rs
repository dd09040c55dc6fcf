//! llama-quantize's presets: the names it accepts, the `general.file_type` it writes
//! (`enum llama_ftype`) and the default tensor type of each (`llama_ftype_get_default_type`).

/// One `enum llama_ftype` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ftype {
    /// `F32`: `LLAMA_FTYPE_ALL_F32` = 0, every tensor kept or made f32.
    AllF32,
    /// `F16`: `LLAMA_FTYPE_MOSTLY_F16` = 1, mostly f16.
    F16,
    /// `BF16`: `LLAMA_FTYPE_MOSTLY_BF16` = 32, mostly bf16.
    Bf16,
    /// `Q4_0`: `LLAMA_FTYPE_MOSTLY_Q4_0` = 2, mostly q4_0.
    Q4_0,
    /// `Q4_1`: `LLAMA_FTYPE_MOSTLY_Q4_1` = 3, mostly q4_1.
    Q4_1,
    /// `Q5_0`: `LLAMA_FTYPE_MOSTLY_Q5_0` = 8, mostly q5_0.
    Q5_0,
    /// `Q5_1`: `LLAMA_FTYPE_MOSTLY_Q5_1` = 9, mostly q5_1.
    Q5_1,
    /// `Q8_0`: `LLAMA_FTYPE_MOSTLY_Q8_0` = 7, mostly q8_0.
    Q8_0,
    /// `Q1_0`: `LLAMA_FTYPE_MOSTLY_Q1_0` = 40, mostly q1_0.
    Q1_0,
    /// `Q2_0`: `LLAMA_FTYPE_MOSTLY_Q2_0` = 41, mostly q2_0.
    Q2_0,
    /// `Q2_K`: `LLAMA_FTYPE_MOSTLY_Q2_K` = 10, mostly q2_k.
    Q2K,
    /// `Q2_K_S`: `LLAMA_FTYPE_MOSTLY_Q2_K_S` = 21, mostly q2_k.
    Q2KS,
    /// `Q3_K_S`: `LLAMA_FTYPE_MOSTLY_Q3_K_S` = 11, mostly q3_k.
    Q3KS,
    /// `Q3_K_M` (alias `Q3_K`): `LLAMA_FTYPE_MOSTLY_Q3_K_M` = 12, mostly q3_k.
    Q3KM,
    /// `Q3_K_L`: `LLAMA_FTYPE_MOSTLY_Q3_K_L` = 13, mostly q3_k.
    Q3KL,
    /// `Q4_K_S`: `LLAMA_FTYPE_MOSTLY_Q4_K_S` = 14, mostly q4_k.
    Q4KS,
    /// `Q4_K_M` (alias `Q4_K`): `LLAMA_FTYPE_MOSTLY_Q4_K_M` = 15, mostly q4_k.
    Q4KM,
    /// `Q5_K_S`: `LLAMA_FTYPE_MOSTLY_Q5_K_S` = 16, mostly q5_k.
    Q5KS,
    /// `Q5_K_M` (alias `Q5_K`): `LLAMA_FTYPE_MOSTLY_Q5_K_M` = 17, mostly q5_k.
    Q5KM,
    /// `Q6_K`: `LLAMA_FTYPE_MOSTLY_Q6_K` = 18, mostly q6_k.
    Q6K,
    /// `IQ2_XXS`: `LLAMA_FTYPE_MOSTLY_IQ2_XXS` = 19, mostly iq2_xxs.
    Iq2Xxs,
    /// `IQ2_XS`: `LLAMA_FTYPE_MOSTLY_IQ2_XS` = 20, mostly iq2_xs.
    Iq2Xs,
    /// `IQ2_S`: `LLAMA_FTYPE_MOSTLY_IQ2_S` = 28, mostly iq2_xs.
    Iq2S,
    /// `IQ2_M`: `LLAMA_FTYPE_MOSTLY_IQ2_M` = 29, mostly iq2_s.
    Iq2M,
    /// `IQ3_XXS`: `LLAMA_FTYPE_MOSTLY_IQ3_XXS` = 23, mostly iq3_xxs.
    Iq3Xxs,
    /// `IQ3_XS`: `LLAMA_FTYPE_MOSTLY_IQ3_XS` = 22, mostly iq3_s.
    Iq3Xs,
    /// `IQ3_S`: `LLAMA_FTYPE_MOSTLY_IQ3_S` = 26, mostly iq3_s.
    Iq3S,
    /// `IQ3_M`: `LLAMA_FTYPE_MOSTLY_IQ3_M` = 27, mostly iq3_s.
    Iq3M,
    /// `IQ1_S`: `LLAMA_FTYPE_MOSTLY_IQ1_S` = 24, mostly iq1_s.
    Iq1S,
    /// `IQ1_M`: `LLAMA_FTYPE_MOSTLY_IQ1_M` = 31, mostly iq1_m.
    Iq1M,
    /// `IQ4_NL`: `LLAMA_FTYPE_MOSTLY_IQ4_NL` = 25, mostly iq4_nl.
    Iq4Nl,
    /// `IQ4_XS`: `LLAMA_FTYPE_MOSTLY_IQ4_XS` = 30, mostly iq4_xs.
    Iq4Xs,
    /// `TQ1_0`: `LLAMA_FTYPE_MOSTLY_TQ1_0` = 36, mostly tq1_0.
    Tq1_0,
    /// `TQ2_0`: `LLAMA_FTYPE_MOSTLY_TQ2_0` = 37, mostly tq2_0.
    Tq2_0,
    /// `MXFP4_MOE`: `LLAMA_FTYPE_MOSTLY_MXFP4_MOE` = 38, mxfp4 for the expert
    /// tensors (3-D, more than one expert), q8_0 for the rest.
    Mxfp4Moe,
}

/// A preset name as llama-quantize accepts it (upper case; aliases included).
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    /// The name as typed on llama-quantize's command line (upper case, e.g. `Q4_K_M`).
    pub name: &'static str,
    /// The `llama_ftype` it selects (aliases share one).
    pub ftype: Ftype,
    /// What llama-quantize's help says of it.
    pub about: &'static str,
}

/// Every preset llama-quantize lists, in its order (`COPY` excepted: that is `--allow-requantize`
/// without quantizing, not a preset).
pub const PRESETS: &[Preset] = &[
    Preset { name: "Q1_0", ftype: Ftype::Q1_0, about: "1.125 bpw quantization" },
    Preset { name: "Q2_0", ftype: Ftype::Q2_0, about: "2.25 bpw quantization (group 64)" },
    Preset { name: "Q4_0", ftype: Ftype::Q4_0, about: "4.34G, +0.4685 ppl @ Llama-3-8B" },
    Preset { name: "Q4_1", ftype: Ftype::Q4_1, about: "4.78G, +0.4511 ppl @ Llama-3-8B" },
    Preset { name: "MXFP4_MOE", ftype: Ftype::Mxfp4Moe, about: "MXFP4 MoE" },
    Preset { name: "Q5_0", ftype: Ftype::Q5_0, about: "5.21G, +0.1316 ppl @ Llama-3-8B" },
    Preset { name: "Q5_1", ftype: Ftype::Q5_1, about: "5.65G, +0.1062 ppl @ Llama-3-8B" },
    Preset { name: "IQ2_XXS", ftype: Ftype::Iq2Xxs, about: "2.06 bpw quantization" },
    Preset { name: "IQ2_XS", ftype: Ftype::Iq2Xs, about: "2.31 bpw quantization" },
    Preset { name: "IQ2_S", ftype: Ftype::Iq2S, about: "2.5  bpw quantization" },
    Preset { name: "IQ2_M", ftype: Ftype::Iq2M, about: "2.7  bpw quantization" },
    Preset { name: "IQ1_S", ftype: Ftype::Iq1S, about: "1.56 bpw quantization" },
    Preset { name: "IQ1_M", ftype: Ftype::Iq1M, about: "1.75 bpw quantization" },
    Preset { name: "TQ1_0", ftype: Ftype::Tq1_0, about: "1.69 bpw ternarization" },
    Preset { name: "TQ2_0", ftype: Ftype::Tq2_0, about: "2.06 bpw ternarization" },
    Preset { name: "Q2_K", ftype: Ftype::Q2K, about: "2.96G, +3.5199 ppl @ Llama-3-8B" },
    Preset { name: "Q2_K_S", ftype: Ftype::Q2KS, about: "2.96G, +3.1836 ppl @ Llama-3-8B" },
    Preset { name: "IQ3_XXS", ftype: Ftype::Iq3Xxs, about: "3.06 bpw quantization" },
    Preset { name: "IQ3_S", ftype: Ftype::Iq3S, about: "3.44 bpw quantization" },
    Preset { name: "IQ3_M", ftype: Ftype::Iq3M, about: "3.66 bpw quantization mix" },
    Preset { name: "Q3_K", ftype: Ftype::Q3KM, about: "alias for Q3_K_M" },
    Preset { name: "IQ3_XS", ftype: Ftype::Iq3Xs, about: "3.3 bpw quantization" },
    Preset { name: "Q3_K_S", ftype: Ftype::Q3KS, about: "3.41G, +1.6321 ppl @ Llama-3-8B" },
    Preset { name: "Q3_K_M", ftype: Ftype::Q3KM, about: "3.74G, +0.6569 ppl @ Llama-3-8B" },
    Preset { name: "Q3_K_L", ftype: Ftype::Q3KL, about: "4.03G, +0.5562 ppl @ Llama-3-8B" },
    Preset { name: "IQ4_NL", ftype: Ftype::Iq4Nl, about: "4.50 bpw non-linear quantization" },
    Preset { name: "IQ4_XS", ftype: Ftype::Iq4Xs, about: "4.25 bpw non-linear quantization" },
    Preset { name: "Q4_K", ftype: Ftype::Q4KM, about: "alias for Q4_K_M" },
    Preset { name: "Q4_K_S", ftype: Ftype::Q4KS, about: "4.37G, +0.2689 ppl @ Llama-3-8B" },
    Preset { name: "Q4_K_M", ftype: Ftype::Q4KM, about: "4.58G, +0.1754 ppl @ Llama-3-8B" },
    Preset { name: "Q5_K", ftype: Ftype::Q5KM, about: "alias for Q5_K_M" },
    Preset { name: "Q5_K_S", ftype: Ftype::Q5KS, about: "5.21G, +0.1049 ppl @ Llama-3-8B" },
    Preset { name: "Q5_K_M", ftype: Ftype::Q5KM, about: "5.33G, +0.0569 ppl @ Llama-3-8B" },
    Preset { name: "Q6_K", ftype: Ftype::Q6K, about: "6.14G, +0.0217 ppl @ Llama-3-8B" },
    Preset { name: "Q8_0", ftype: Ftype::Q8_0, about: "7.96G, +0.0026 ppl @ Llama-3-8B" },
    Preset { name: "F16", ftype: Ftype::F16, about: "14.00G, +0.0020 ppl @ Mistral-7B" },
    Preset { name: "BF16", ftype: Ftype::Bf16, about: "14.00G, -0.0050 ppl @ Mistral-7B" },
    Preset { name: "F32", ftype: Ftype::AllF32, about: "26.00G @ 7B" },
];

impl Ftype {
    /// The preset named `name` (case-insensitive, llama-quantize's spellings and aliases).
    pub fn by_name(name: &str) -> Option<Ftype> {
        PRESETS.iter().find(|p| p.name.eq_ignore_ascii_case(name.trim())).map(|p| p.ftype)
    }

    /// The canonical preset name (`Q4_K_M` for the alias `Q4_K`).
    pub fn name(self) -> &'static str {
        match self {
            Ftype::Q3KM => "Q3_K_M",
            Ftype::Q4KM => "Q4_K_M",
            Ftype::Q5KM => "Q5_K_M",
            f => PRESETS.iter().find(|p| p.ftype == f).map_or("?", |p| p.name),
        }
    }

    /// `general.file_type` as llama-quantize writes it (`enum llama_ftype`).
    pub fn id(self) -> u32 {
        match self {
            Ftype::AllF32 => 0,
            Ftype::F16 => 1,
            Ftype::Q4_0 => 2,
            Ftype::Q4_1 => 3,
            Ftype::Q8_0 => 7,
            Ftype::Q5_0 => 8,
            Ftype::Q5_1 => 9,
            Ftype::Q2K => 10,
            Ftype::Q3KS => 11,
            Ftype::Q3KM => 12,
            Ftype::Q3KL => 13,
            Ftype::Q4KS => 14,
            Ftype::Q4KM => 15,
            Ftype::Q5KS => 16,
            Ftype::Q5KM => 17,
            Ftype::Q6K => 18,
            Ftype::Iq2Xxs => 19,
            Ftype::Iq2Xs => 20,
            Ftype::Q2KS => 21,
            Ftype::Iq3Xs => 22,
            Ftype::Iq3Xxs => 23,
            Ftype::Iq1S => 24,
            Ftype::Iq4Nl => 25,
            Ftype::Iq3S => 26,
            Ftype::Iq3M => 27,
            Ftype::Iq2S => 28,
            Ftype::Iq2M => 29,
            Ftype::Iq4Xs => 30,
            Ftype::Iq1M => 31,
            Ftype::Bf16 => 32,
            Ftype::Tq1_0 => 36,
            Ftype::Tq2_0 => 37,
            Ftype::Mxfp4Moe => 38,
            Ftype::Q1_0 => 40,
            Ftype::Q2_0 => 41,
        }
    }

    /// The type most tensors get (lower-case type name).
    pub fn default_type(self) -> &'static str {
        match self {
            Ftype::AllF32 => "f32",
            Ftype::F16 => "f16",
            Ftype::Bf16 => "bf16",
            Ftype::Q4_0 => "q4_0",
            Ftype::Q4_1 => "q4_1",
            Ftype::Q5_0 => "q5_0",
            Ftype::Q5_1 => "q5_1",
            Ftype::Q8_0 => "q8_0",
            Ftype::Q1_0 => "q1_0",
            Ftype::Q2_0 => "q2_0",
            Ftype::Mxfp4Moe => "mxfp4",
            Ftype::Q2K | Ftype::Q2KS => "q2_k",
            Ftype::Iq3Xs => "iq3_s",
            Ftype::Q3KS | Ftype::Q3KM | Ftype::Q3KL => "q3_k",
            Ftype::Q4KS | Ftype::Q4KM => "q4_k",
            Ftype::Q5KS | Ftype::Q5KM => "q5_k",
            Ftype::Q6K => "q6_k",
            Ftype::Tq1_0 => "tq1_0",
            Ftype::Tq2_0 => "tq2_0",
            Ftype::Iq2Xxs => "iq2_xxs",
            Ftype::Iq2Xs | Ftype::Iq2S => "iq2_xs",
            Ftype::Iq2M => "iq2_s",
            Ftype::Iq3Xxs => "iq3_xxs",
            Ftype::Iq1S => "iq1_s",
            Ftype::Iq1M => "iq1_m",
            Ftype::Iq4Nl => "iq4_nl",
            Ftype::Iq4Xs => "iq4_xs",
            Ftype::Iq3S | Ftype::Iq3M => "iq3_s",
        }
    }

    /// The very-low-bit presets whose attention / feed-forward rules differ (IQ1 / IQ2 family).
    pub(crate) fn is_iq1_iq2(self) -> bool {
        matches!(self, Ftype::Iq2Xxs | Ftype::Iq2Xs | Ftype::Iq1S | Ftype::Iq2S | Ftype::Iq2M | Ftype::Iq1M)
    }
}

/// llama.cpp's `general.file_type` (`enum llama_ftype`) for a file whose weights are mostly of
/// one tensor type (lower-case name) when no preset made it: the `LLAMA_FTYPE_MOSTLY_*` (or
/// `ALL_F32`) named after the type — the `_S` mix for the K-quants, `MXFP4_MOE` for mxfp4.
/// llama.cpp's own data, kept here with the presets so that the file writers name no format.
pub const MOSTLY: &[(&str, u32)] = &[
    ("f32", 0),
    ("f16", 1),
    ("q4_0", 2),
    ("q4_1", 3),
    ("q8_0", 7),
    ("q5_0", 8),
    ("q5_1", 9),
    ("q2_k", 10),
    ("q3_k", 11),
    ("q4_k", 14),
    ("q5_k", 16),
    ("q6_k", 18),
    ("iq2_xxs", 19),
    ("iq2_xs", 20),
    ("iq3_xxs", 23),
    ("iq1_s", 24),
    ("iq4_nl", 25),
    ("iq3_s", 26),
    ("iq2_s", 28),
    ("iq4_xs", 30),
    ("iq1_m", 31),
    ("bf16", 32),
    ("tq1_0", 36),
    ("tq2_0", 37),
    ("mxfp4", 38),
    ("nvfp4", 39),
    ("q1_0", 40),
    ("q2_0", 41),
];

/// [`MOSTLY`]'s file type for tensor type `name` (case-insensitive); `None` where llama.cpp
/// has none (int4g, fp8, q8_1, q8_k).
pub fn mostly(name: &str) -> Option<u32> {
    MOSTLY.iter().find(|(t, _)| t.eq_ignore_ascii_case(name)).map(|&(_, id)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each `MOSTLY` id is the id of the preset named after the type (`Q4_K_S` for q4_k), except
    /// nvfp4's, which llama-quantize has no preset for.
    #[test]
    fn mostly_names_the_preset_of_its_type() {
        for &(ty, id) in MOSTLY {
            let named = PRESETS.iter().find(|p| p.ftype.id() == id && p.ftype.name().starts_with(&ty.to_uppercase()));
            assert!(named.is_some() || ty == "nvfp4", "{ty}: file type {id} is no preset named after it");
        }
        assert_eq!((mostly("Q4_K"), mostly("int4g")), (Some(14), None));
    }
}
