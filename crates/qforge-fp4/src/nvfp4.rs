//! nvfp4: NVIDIA FP4 — 64 E2M1 values in four sub-blocks of 16, each with a UE4M3 scale.

use crate::e2m1::{E2M1_X2_F32, amax, decode_group, encode_group};
use crate::scale::{UE4M3_HALF, ue4m3_from_f32, ue4m3_to_f32_half};
use crate::weighted;
use bytemuck::{Pod, Zeroable};
use qforge_core::{BlockFormat, Elem, FormatDesc, Role};
use qforge_simd::half_lut::{self, Codes32, Fifth, GroupSink, TableGroups, Tables, table};

/// Elements per nvfp4 block (ggml's `QK_NVFP4`).
pub const QK_NVFP4: usize = 64;
/// Elements per nvfp4 sub-block, one UE4M3 scale each (ggml's `QK_NVFP4_SUB`).
pub const QK_NVFP4_SUB: usize = 16;
const N_SUB: usize = QK_NVFP4 / QK_NVFP4_SUB;

qforge_core::c_block! {
    /// ggml's `block_nvfp4` (36 bytes): `d[s]` is the UE4M3 scale of sub-block `s`; bytes
    /// `qs[8s..8s + 8]` hold its 16 codes, byte `8s + j` element `16s + j` in the low nibble and
    /// element `16s + j + 8` in the high nibble.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
    pub struct BlockNvfp4 {
        /// The UE4M3 scale of each 16-element sub-block.
        pub d: [u8; N_SUB],
        /// The 64 E2M1 codes, two per byte (see above).
        pub qs: [u8; QK_NVFP4 / 2],
    }
}

/// The nvfp4 format (GGML type 40).
#[derive(Clone, Copy, Debug, Default)]
pub struct Nvfp4;

/// The real elements of sub-block `s` (empty when it is all padding).
fn sub_block(x: &[f32], s: usize) -> &[f32] {
    let lo = (s * QK_NVFP4_SUB).min(x.len());
    let hi = (lo + QK_NVFP4_SUB).min(x.len());
    &x[lo..hi]
}

/// Encodes sub-block `s` with the UE4M3 scale byte `ue`.
fn encode_sub(xs: &[f32], s: usize, ue: u8, out: &mut BlockNvfp4) {
    out.d[s] = ue;
    let half = QK_NVFP4_SUB / 2;
    encode_group(xs, ue4m3_to_f32_half(ue), &mut out.qs[s * half..(s + 1) * half]);
}

impl BlockFormat for Nvfp4 {
    type Block = BlockNvfp4;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "nvfp4",
        family: "fp4",
        ggml_type: Some(40),
        block_size: QK_NVFP4,
        block_bytes: 36,
        role: Role::Weight,
        dot_type: Some("q8_0"),
        summary: "4.5 bpw NVFP4: E2M1 values with a UE4M3 scale per 16 weights, 64 per block",
        cuda: crate::cuda::device_code("qf_nvfp4"),
    };
    /// ggml's quantizer ignores importance weights (`GGML_UNUSED(quant_weights)`).
    const GGML_USES_IMPORTANCE: bool = false;
    const DIRECT_16BIT: bool = true;

    /// ggml's `dequantize_row_nvfp4`: `x = E2M1_X2[code] · ue4m3(d[s]) / 2`.
    #[inline(always)]
    fn decode<O: Elem>(b: &BlockNvfp4, out: &mut [O]) {
        let half = QK_NVFP4_SUB / 2;
        for ((s, dst), qs) in out.chunks_mut(QK_NVFP4_SUB).enumerate().zip(b.qs.chunks_exact(half)) {
            decode_group(qs, ue4m3_to_f32_half(b.d[s]), dst);
        }
    }

    /// ggml's `quantize_row_nvfp4_ref` (which ignores importance weights): per sub-block,
    /// `d = ue4m3(amax / 6)` and each element takes the nearest E2M1 value. With weights the
    /// neighbouring scale codes are tried too, per sub-block, keeping ggml's on ties.
    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockNvfp4) {
        for s in 0..N_SUB {
            let xs = sub_block(x, s);
            let ue0 = ue4m3_from_f32(amax(xs) / 6.0);
            encode_sub(xs, s, ue0, out);
            let Some(w) = weights else { continue };
            if xs.is_empty() {
                continue;
            }
            let ws = &w[s * QK_NVFP4_SUB..s * QK_NVFP4_SUB + xs.len()];
            let err = |b: &BlockNvfp4| {
                let mut y = [0f32; QK_NVFP4_SUB];
                let half = QK_NVFP4_SUB / 2;
                decode_group(&b.qs[s * half..(s + 1) * half], ue4m3_to_f32_half(b.d[s]), &mut y);
                weighted::weighted_sse(xs, ws, &y)
            };
            // Scale codes 1..=0x7E increase with their value; 0x7F decodes to 0.
            let cands = [ue0.checked_sub(1), (ue0 < 0x7E).then_some(ue0 + 1)];
            weighted::refine(out, &cands, |ue, b| encode_sub(xs, s, ue, b), err);
        }
    }

    #[inline(always)]
    fn decode_row<O: Elem>(blocks: &[BlockNvfp4], out: &mut [O]) {
        if half_lut::decode_row::<Self, O>(blocks, out) {
            return;
        }
        for (b, dst) in blocks.iter().zip(out.chunks_mut(QK_NVFP4)) {
            Self::decode(b, dst);
        }
    }
}
/// Two groups per block, each two sub-blocks: `E2M1_X2[c]·ue4m3(d[s])/2`, `decode_group`'s product.
impl TableGroups for Nvfp4 {
    /// f32 rows by table lookup too: the own f32 decode (the per-16 `ue4m3` scale applied
    /// value by value) ran at 1.0-1.1 Gel/s on the EPYC, the lookup at 2.6-3.0 (3.4-3.5 once
    /// the scales came from `UE4M3_HALF`).
    const F32: bool = true;
    type Block = BlockNvfp4;
    const BLOCK: usize = QK_NVFP4;
    /// Half a ue4m3 scale (a multiple of 2^-10) times e2m1 values doubled (integers).
    const NEVER_SUBNORMAL: bool = true;
    #[inline(always)]
    fn groups(b: &BlockNvfp4, mut f: impl GroupSink) {
        for (g, qs) in b.qs.as_chunks::<16>().0.iter().enumerate() {
            // The table (the same bits, tested in `scale`): the decode's branches and
            // conversions, twice a group, were a third of the bf16 row's instructions.
            let [d0, d1] = [b.d[2 * g], b.d[2 * g + 1]].map(|x| UE4M3_HALF[usize::from(x)]);
            let tables = [table(&E2M1_X2_F32, |k| k * d0), table(&E2M1_X2_F32, |k| k * d1)];
            f.group(Tables::Halves(tables), Codes32::SplitHalves(qs), Fifth::None);
        }
    }
}
