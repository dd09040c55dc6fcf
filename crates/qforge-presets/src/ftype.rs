//! llama-quantize's presets: the names it accepts, the `general.file_type` it writes
//! (`enum llama_ftype`) and the default tensor type of each (`llama_ftype_get_default_type`).

/// One `enum llama_ftype` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ftype {
    AllF32,
    F16,
    Bf16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q1_0,
    Q2_0,
    Q2K,
    Q2KS,
    Q3KS,
    Q3KM,
    Q3KL,
    Q4KS,
    Q4KM,
    Q5KS,
    Q5KM,
    Q6K,
    Iq2Xxs,
    Iq2Xs,
    Iq2S,
    Iq2M,
    Iq3Xxs,
    Iq3Xs,
    Iq3S,
    Iq3M,
    Iq1S,
    Iq1M,
    Iq4Nl,
    Iq4Xs,
    Tq1_0,
    Tq2_0,
    Mxfp4Moe,
}

/// A preset name as llama-quantize accepts it (upper case; aliases included).
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub name: &'static str,
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
