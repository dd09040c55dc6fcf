// qforge-int4g CUDA device code: symmetric group-wise int4 (torchao 8da4w semantics).
// Included after kernels-cuda/common.cuh; interface in kernels-cuda/README.md.
//
// A block is one group of G weights: [scale, S::BYTES little-endian][G/2 nibble bytes], byte
// j holding element j (low nibble) and element j + G/2 (high nibble), each nibble q + 8.
// x = (float)q · scale in f32, as the Rust reference (crates/qforge-int4g/src/block.rs).
// qf_int4g_t<S, G> covers every variant (G a power of two 32..4096, scale f16 / bf16 / f32);
// the registry has one, `int4g` (G = 128, f16), instantiated below as qf_int4g.
#pragma once

// The scale dtypes: bytes and an exact widening load.
struct qf_int4g_f16 {
    static constexpr int BYTES = 2;
    QF_HD static float load(const uint8_t* p) { return qf_load_f16(p); }
};
struct qf_int4g_bf16 {
    static constexpr int BYTES = 2;
    QF_HD static float load(const uint8_t* p) { return qf_load_bf16(p); }
};
struct qf_int4g_f32 {
    static constexpr int BYTES = 4;
    QF_HD static float load(const uint8_t* p) { return qf_load_f32(p); }
};

// The integer interface of the 8-bit tensor-core GEMM (kernels-cuda/gemm8.cuh): the signed
// codes q of elements i..i+7 (i a multiple of 8) of a group of `group` elements whose nibble
// bytes start at `qs`, as two packed words (byte j of out[t]: element i + 4t + j). The group
// size is a run-time value, so one GEMM serves every variant; the 8 elements lie in one half
// (group ≥ 32), the low or the high nibbles of 8 consecutive bytes.
struct qf_int4g_codes {
    QF_HD static void codes8(const uint8_t* qs, int group, int i, uint32_t* out) {
        const int h = group / 2, sh = i < h ? 0 : 4;
        const uint8_t* p = qs + (i < h ? i : i - h);
        for (int t = 0; t < 2; ++t) out[t] = qf_bytes_minus(qf_load_u32(p + 4 * t) >> sh & 0x0f0f0f0fu, 8);
    }
};

template <class S, int G>
struct qf_int4g_t {
    typedef qf_int4g_codes CODES;
    static_assert(G >= 32 && G <= 4096 && (G & (G - 1)) == 0, "int4g groups are powers of two 32..4096");
    static constexpr int H = G / 2;  // nibble bytes; element i is in byte i % H
    struct block {
        uint8_t d[S::BYTES];
        uint8_t qs[H];
    };
    static constexpr int BLOCK = G;
    static constexpr int CHUNK = 8;  // 8 consecutive elements never straddle the two halves

    // Packed stored codes (q + 8) of elements i..i+3 (i a multiple of 4, all in one half).
    QF_HD static int codes4(const block* b, int i) {
        const uint32_t v = qf_load_u32(b->qs + i % H);
        return (int)((i < H ? v : v >> 4) & 0x0f0f0f0fu);
    }

    // x = (float)(code - 8) · scale, one f32 multiply.
    QF_HD static void decode(const block* b, int chunk, float* out) {
        const float s = S::load(b->d);
        const int i0 = chunk * CHUNK;
        for (int j = 0; j < CHUNK; ++j) {
            const int i = i0 + j;
            const int c = i < H ? b->qs[i] & 15 : b->qs[i - H] >> 4;
            out[j] = (float)(c - 8) * s;
        }
    }

    // scale·a.d·Σ(code - 8)·q over elements [32·sub, 32·sub + 32).
    QF_HD static float dot_q8_1(const block* b, int sub, const qf_block_q8_1* a) {
        int sumi = 0;
        for (int t = 0; t < 8; ++t) sumi = qf_dp4a(codes4(b, 32 * sub + 4 * t), qf_load_i8x4(a->qs + 4 * t), sumi);
        sumi -= 8 * qf_q8_1_sum(a, 0, 32);
        return S::load(b->d) * a->d * (float)sumi;
    }
};

// The registered format: group 128, f16 scale (66-byte blocks).
struct qf_int4g : qf_int4g_t<qf_int4g_f16, 128> {};
