// qforge-legacy CUDA device code: q4_0 q4_1 q5_0 q5_1 q8_0 q8_1 (32-element blocks).
// Included after kernels-cuda/common.cuh; interface in kernels-cuda/README.md.
//
// Every legacy format is a code per element plus a scale d (and an offset m for the affine
// ones): x = (code - OFFSET)·d, or code·d + m. A code layout (4-bit, 5-bit, 8-bit) over a
// block struct says where the codes are; qf_legacy<> turns it into the traits struct.
#pragma once

// Codes of the 4-bit layout as packed bytes: elements 0..15 are the low nibbles of qs,
// 16..31 the high ones. w[i] holds elements 4i..4i+3.
QF_HD void qf_legacy_nibbles(const uint8_t* qs, int w[8]) {
    uint32_t v[4];
    qf_load_u32xn<4>(qs, v);
    for (int i = 0; i < 4; ++i) {
        w[i] = (int)(v[i] & 0x0f0f0f0fu);
        w[i + 4] = (int)(v[i] >> 4 & 0x0f0f0f0fu);
    }
}
QF_HD int qf_legacy_nibble(const uint8_t* qs, int i) { return i < 16 ? qs[i] & 15 : qs[i - 16] >> 4; }
// Codes first..first + 7 of the 4-bit layout (first a multiple of 8): two word loads.
QF_HD void qf_legacy_nibbles8(const uint8_t* qs, int first, int c[8]) {
    const int sh = first & 16 ? 4 : 0;
    for (int i = 0; i < 2; ++i) {
        const uint32_t v = qf_load_u32(qs + (first & 15) + 4 * i) >> sh;
        for (int j = 0; j < 4; ++j) c[4 * i + j] = (int)(v >> 8 * j & 15u);
    }
}
// The same codes as 16-bit pairs: p[k] = code(first + 2k) | code(first + 2k + 1) << 16.
QF_HD void qf_legacy_nibble_pairs8(const uint8_t* qs, int first, uint32_t p[4]) {
    const int sh = first & 16 ? 4 : 0;
    for (int i = 0; i < 2; ++i) {
        const uint32_t v = qf_load_u32(qs + (first & 15) + 4 * i) >> sh;
        p[2 * i] = qf_byte_perm(v, 0, 0x4140u) & 0x000f000fu;
        p[2 * i + 1] = qf_byte_perm(v, 0, 0x4342u) & 0x000f000fu;
    }
}
// Bit i of the little-endian qh word is bit 4 of element i's code.
QF_HD void qf_legacy_high(const uint8_t* qh, int w[8]) {
    const uint32_t h = qf_load_u32(qh);
    for (int i = 0; i < 8; ++i) w[i] |= qf_spread_bits4(h >> 4 * i) << 4;
}

// The three code layouts, for a block type B with fields d, qs (and qh).
template <class B, int OFF>
struct qf_legacy_4bit {
    typedef B block;
    static constexpr int OFFSET = OFF;
    QF_HD static int code(const B* b, int i) { return qf_legacy_nibble(b->qs, i); }
    QF_HD static void codes(const B* b, int w[8]) { qf_legacy_nibbles(b->qs, w); }
    QF_HD static void codes8(const B* b, int first, int c[8]) { qf_legacy_nibbles8(b->qs, first, c); }
    static constexpr int BIAS = 0;
    QF_HD static void pairs8(const B* b, int first, uint32_t p[4]) { qf_legacy_nibble_pairs8(b->qs, first, p); }
};
template <class B, int OFF>
struct qf_legacy_5bit {
    typedef B block;
    static constexpr int OFFSET = OFF;
    QF_HD static int code(const B* b, int i) {
        return qf_legacy_nibble(b->qs, i) | (int)(qf_load_u32(b->qh) >> i & 1) << 4;
    }
    QF_HD static void codes(const B* b, int w[8]) { qf_legacy_nibbles(b->qs, w); qf_legacy_high(b->qh, w); }
    QF_HD static void codes8(const B* b, int first, int c[8]) {
        qf_legacy_nibbles8(b->qs, first, c);
        const uint32_t h = qf_load_u32(b->qh) >> first;
        for (int j = 0; j < 8; ++j) c[j] |= (int)(h >> j & 1u) << 4;
    }
    static constexpr int BIAS = 0;
    QF_HD static void pairs8(const B* b, int first, uint32_t p[4]) {
        qf_legacy_nibble_pairs8(b->qs, first, p);
        const uint32_t h = qf_load_u32(b->qh) >> first;
        for (int k = 0; k < 4; ++k) p[k] |= (h >> 2 * k & 1u) << 4 | (h >> (2 * k + 1) & 1u) << 20;
    }
};
template <class B>
struct qf_legacy_8bit {
    typedef B block;
    static constexpr int OFFSET = 0;
    QF_HD static int code(const B* b, int i) { return b->qs[i]; }
    QF_HD static void codes(const B* b, int w[8]) {
        uint32_t v[8];
        qf_load_u32xn<8>((const uint8_t*)b->qs, v);
        for (int i = 0; i < 8; ++i) w[i] = (int)v[i];
    }
    QF_HD static void codes8(const B* b, int first, int c[8]) {
        for (int i = 0; i < 2; ++i) {
            const uint32_t v = qf_load_u32((const uint8_t*)b->qs + first + 4 * i);
            for (int j = 0; j < 4; ++j) c[4 * i + j] = (int)(int8_t)(v >> 8 * j);
        }
    }
    static constexpr int BIAS = 128;  // pairs8's codes: q + 128, 0..255
    QF_HD static void pairs8(const B* b, int first, uint32_t p[4]) {
        for (int i = 0; i < 2; ++i) {
            const uint32_t v = qf_load_u32((const uint8_t*)b->qs + first + 4 * i);
            p[2 * i] = qf_byte_perm(v, 0, 0x4140u) ^ 0x00800080u;
            p[2 * i + 1] = qf_byte_perm(v, 0, 0x4342u) ^ 0x00800080u;
        }
    }
};

// The block structs are generated from the Rust ones (qf_blocks.cuh, qforge-cuda's build).
typedef qf_q4_0_block qf_legacy_b4_0;
typedef qf_q4_1_block qf_legacy_b4_1;
typedef qf_q5_0_block qf_legacy_b5_0;
typedef qf_q5_1_block qf_legacy_b5_1;
typedef qf_q8_0_block qf_legacy_b8_0;
// q8_1's stored s = d·Σq is needed neither to decode nor to dot.
typedef qf_q8_1_block qf_legacy_b8_1;

// The traits struct of a legacy format with code layout L; AFFINE: x = code·d + m.
template <class L, bool AFFINE>
struct qf_legacy {
    typedef typename L::block block;
    static constexpr int BLOCK = 32;
    static constexpr int CHUNK = 8;

    QF_HD static float offset(const block* b) {
        if constexpr (AFFINE) return qf_load_f16(b->m);
        else return 0.0f;
    }

    // x = (code - OFFSET)·d  or  code·d + m, as the Rust reference (q as f32 * d [+ m]): the
    // chunk's codes from whole words, each made a float without the conversion unit.
    QF_HD static void decode(const block* b, int chunk, float* out) {
        const float d = qf_load_f16(b->d);
        const float m = offset(b);
        int c[CHUNK];
        L::codes8(b, chunk * CHUNK, c);
        for (int j = 0; j < CHUNK; ++j) {
            const float v = qf_small_int_to_f32(c[j] - L::OFFSET) * d;
            out[j] = AFFINE ? v + m : v;
        }
    }

    // The optional f16 entry point of the GEMM (kernels-cuda/README.md, decode_h2): the
    // chunk's CHUNK / 2 pairs of f16 values, each the same bits as decode's value rounded to
    // f16 — (code - OFFSET)·d is one rounding of an exact product either way. Each code u
    // (< 1024) is placed in the mantissa of 1024 (f16 bits 0x6400 | u), the bias subtracted
    // exactly, d multiplied in: four instructions per pair instead of conversions per value.
    // The affine formats round twice in f32 (q·d, then + m), so they keep decode.
    static constexpr bool H2 = !AFFINE;
    QF_HD static void decode_h2(const block* b, int chunk, uint32_t* h) {
        const uint32_t d = qf_load_u16(b->d), d2 = d | d << 16;
        constexpr uint32_t bias = 0x6400u + L::OFFSET + L::BIAS, bias2 = bias | bias << 16;
        uint32_t p[CHUNK / 2];
        L::pairs8(b, chunk * CHUNK, p);
        for (int k = 0; k < CHUNK / 2; ++k) h[k] = qf_h2_mul(qf_h2_sub(p[k] | 0x64006400u, bias2), d2);
    }

    // d·a.d·Σ(code - OFFSET)·q  (+ m·a.s for the affine formats).
    QF_HD static float dot_q8_1(const block* b, int, const qf_block_q8_1* a) {
        int w[8];
        L::codes(b, w);
        int sumi = qf_dot_codes(w, a, 0, 32);
        if (L::OFFSET != 0) sumi -= L::OFFSET * qf_q8_1_sum(a, 0, 32);
        const float r = qf_load_f16(b->d) * a->d * (float)sumi;
        return AFFINE ? r + offset(b) * a->s : r;
    }
};

// The int8 GEMM's view of a weight format (kernels-cuda/gemm_q8.cuh): the block's codes
// (code - OFFSET) with d and the offset m.
template <class L, bool AFFINE>
struct qf_legacy_w8 : qf_legacy<L, AFFINE> {
    typedef qf_legacy<L, AFFINE> T;
    QF_HD static void codes32(const typename T::block* b, int, uint32_t* w, float* d, float* m) {
        int c[8];
        L::codes(b, c);  // unsigned codes < 32, or q8's signed ones (OFFSET 0)
        for (int t = 0; t < 8; ++t) w[t] = L::OFFSET ? qf_bytes_minus((uint32_t)c[t], L::OFFSET) : (uint32_t)c[t];
        *d = qf_load_f16(b->d);
        *m = T::offset(b);
    }
};

// q8_0 / q8_1 as activations (gemm_q8.cuh's act32): ggml's quantize_row_q8_0_ref / q8_1_ref
// as qforge-legacy encodes them: d = amax/127, q = roundf(x·(1/d)), d stored as f16; q8_1
// also stores s = f16(Σq · d) with the f32 d.
template <bool SUM>
struct qf_legacy_act {
    QF_HD static void act32(const float* x, qf_block_q8_1* out) {
        float amax = 0.0f;
        for (int i = 0; i < 32; ++i) amax = fmaxf(amax, fabsf(x[i]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int i = 0; i < 32; ++i) {
            out->qs[i] = (int8_t)roundf(x[i] * id);
            sum += out->qs[i];
        }
        out->d = qf_half_to_f32(qf_f32_to_f16_bits(d));
        out->s = SUM ? qf_half_to_f32(qf_f32_to_f16_bits((float)sum * d)) : out->d * (float)sum;
    }
};

struct qf_q4_0 : qf_legacy_w8<qf_legacy_4bit<qf_legacy_b4_0, 8>, false> {};
struct qf_q4_1 : qf_legacy_w8<qf_legacy_4bit<qf_legacy_b4_1, 0>, true> {};
struct qf_q5_0 : qf_legacy_w8<qf_legacy_5bit<qf_legacy_b5_0, 16>, false> {};
struct qf_q5_1 : qf_legacy_w8<qf_legacy_5bit<qf_legacy_b5_1, 0>, true> {};
struct qf_q8_0 : qf_legacy_w8<qf_legacy_8bit<qf_legacy_b8_0>, false>, qf_legacy_act<false> {};
struct qf_q8_1 : qf_legacy<qf_legacy_8bit<qf_legacy_b8_1>, false>, qf_legacy_act<true> {};
