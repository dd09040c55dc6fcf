// qforge-k CUDA device code: q2_k q3_k q4_k q5_k q6_k q8_k (256-element super-blocks).
// Included after kernels-cuda/common.cuh; interface in kernels-cuda/README.md.
//
// Element i of a block lies in 16-element sub-block i/16 and 32-element sub-block s = i/32.
// decode works on 16-element chunks (one scale each); dot_q8_1 on the 32 elements of s,
// building their codes as packed bytes (w[t] = elements 4t..4t+3 of s) for qf_dp4a.
#pragma once

// q4_k / q5_k: the 6-bit (scale, min) of 32-element sub-block j (ggml's get_scale_min_k4).
QF_HD void qf_k_scale_min(int j, const uint8_t* q, int* sc, int* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xf) | (q[j - 4] >> 6) << 4;
        *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}
// q3_k: the biased 6-bit scale of 16-element sub-block j.
QF_HD int qf_k_scale_q3(int j, const uint8_t* q) {
    const int low = j < 8 ? q[j] & 0xf : q[j - 8] >> 4;
    return low | ((q[8 + j % 4] >> (2 * (j / 4))) & 3) << 4;
}
// Packed bytes (v >> shift) & mask of the 8 words at p (p[0..32)).
QF_HD void qf_k_words(const uint8_t* p, int shift, uint32_t mask, int w[8]) {
    uint32_t v[8];
    qf_load_u32xn<8>(p, v);
    for (int t = 0; t < 8; ++t) w[t] = (int)(v[t] >> shift & mask);
}
// Bytes p[0..16) as (p[i] >> shift) & mask, element by element, from four word loads
// (decode's codes of one 16-element chunk).
QF_HD void qf_k_bytes16(const uint8_t* p, int shift, uint32_t mask, int c[16]) {
    for (int t = 0; t < 4; ++t) {
        const uint32_t v = qf_load_u32(p + 4 * t) >> shift;
        for (int j = 0; j < 4; ++j) c[4 * t + j] = (int)(v >> 8 * j & mask);
    }
}
// The codes of 32-element sub-block s as packed words (byte j of w[t]: element 4t + j): low
// bits (v >> lshift) & lmask of the 32 bytes at lo, OR-ed with the high bits
// ((v >> hshift) & hmask) << hpos of the 32 bytes at hi where there are any. Each format's
// dot_q8_1 and its int8 GEMM view build their codes with it.
QF_HD void qf_k_code_words(const uint8_t* lo, int lshift, uint32_t lmask, const uint8_t* hi, int hshift,
                           uint32_t hmask, int hpos, int w[8]) {
    qf_k_words(lo, lshift, lmask, w);
    if (hi != nullptr) {
        int hw[8];
        qf_k_words(hi, hshift, hmask, hw);
        for (int t = 0; t < 8; ++t) w[t] |= hw[t] << hpos;
    }
}
// The int8 GEMM's codes (gemm_q8.cuh): code words minus the format's bias, byte by byte.
QF_HD void qf_k_view_codes(const int w[8], uint32_t bias, uint32_t* q) {
    for (int t = 0; t < 8; ++t) q[t] = qf_bytes_minus((uint32_t)w[t], bias);
}
// Σ code·q and Σ q over the two 16-element halves of an activation block.
struct qf_k_sums {
    int dot[2], sum[2];
};
QF_HD qf_k_sums qf_k_halves(const int w[8], const qf_block_q8_1* a) {
    qf_k_sums r;
    for (int h = 0; h < 2; ++h) {
        r.dot[h] = qf_dot_codes(w + 4 * h, a, 16 * h, 16);
        r.sum[h] = qf_q8_1_sum(a, 16 * h, 16);
    }
    return r;
}

// x = d·(sc & 15)·code - dmin·(sc >> 4), 2-bit codes in four planes per 128 elements.
struct qf_q2_k {
    typedef qf_q2_k_block block;
    static constexpr int BLOCK = 256;
    static constexpr int CHUNK = 16;
    QF_HD static void decode(const block* b, int chunk, float* out) {
        const int sc = b->scales[chunk];
        const float dl = qf_load_f16(b->d) * (float)(sc & 0xf);
        const float ml = qf_load_f16(b->dmin) * (float)(sc >> 4);
        const int h = chunk / 8, k = chunk % 8 / 2, l0 = chunk % 2 * 16;
        int c[16];
        qf_k_bytes16(b->qs + 32 * h + l0, 2 * k, 3u, c);
        for (int j = 0; j < 16; ++j) out[j] = dl * qf_small_int_to_f32(c[j]) - ml;
    }
    // Sub-block s's 2-bit codes.
    QF_HD static void code_words(const block* b, int s, int w[8]) {
        qf_k_code_words(b->qs + 32 * (s / 4), 2 * (s % 4), 0x03030303u, nullptr, 0, 0u, 0, w);
    }
    QF_HD static float dot_q8_1(const block* b, int s, const qf_block_q8_1* a) {
        int w[8];
        code_words(b, s, w);
        const qf_k_sums r = qf_k_halves(w, a);
        const float d = qf_load_f16(b->d), dmin = qf_load_f16(b->dmin);
        float acc = 0.0f;
        for (int h = 0; h < 2; ++h) {
            const int sc = b->scales[2 * s + h];
            acc += d * (float)(sc & 0xf) * (float)r.dot[h] - dmin * (float)(sc >> 4) * (float)r.sum[h];
        }
        return a->d * acc;
    }
    // The int8 GEMM's view (gemm_q8.cuh): sub-block s as its 2-bit codes, the halves' d·scale
    // and -dmin·min.
    QF_HD static void codes32_s16m(const block* b, int s, uint32_t* q, float* d, float* m) {
        int w[8];
        code_words(b, s, w);
        qf_k_view_codes(w, 0, q);
        for (int h = 0; h < 2; ++h) {
            const int sc = b->scales[2 * s + h];
            d[h] = qf_load_f16(b->d) * (float)(sc & 0xf);
            m[h] = -(qf_load_f16(b->dmin) * (float)(sc >> 4));
        }
    }
};

// x = d·(scale - 32)·(low + 4·high - 4), low 2 bits as q2_k, high bit in hmask.
struct qf_q3_k {
    typedef qf_q3_k_block block;
    static constexpr int BLOCK = 256;
    static constexpr int CHUNK = 16;
    QF_HD static void decode(const block* b, int chunk, float* out) {
        const float dl = qf_load_f16(b->d) * (float)(qf_k_scale_q3(chunk, b->scales) - 32);
        const int h = chunk / 8, k = chunk % 8 / 2, l0 = chunk % 2 * 16, hk = chunk / 2;
        int low[16], high[16];
        qf_k_bytes16(b->qs + 32 * h + l0, 2 * k, 3u, low);
        qf_k_bytes16(b->hmask + l0, hk, 1u, high);
        for (int j = 0; j < 16; ++j) out[j] = dl * qf_small_int_to_f32(low[j] - 4 + 4 * high[j]);
    }
    // Sub-block s's codes 0..7 (= value + 4): 2 low bits as q2_k, the high bit from hmask.
    QF_HD static void code_words(const block* b, int s, int w[8]) {
        qf_k_code_words(b->qs + 32 * (s / 4), 2 * (s % 4), 0x03030303u, b->hmask, s, 0x01010101u, 2, w);
    }
    QF_HD static float dot_q8_1(const block* b, int s, const qf_block_q8_1* a) {
        int w[8];
        code_words(b, s, w);
        const qf_k_sums r = qf_k_halves(w, a);
        const float d = qf_load_f16(b->d);
        float acc = 0.0f;
        for (int h = 0; h < 2; ++h) {
            acc += d * (float)(qf_k_scale_q3(2 * s + h, b->scales) - 32) * (float)(r.dot[h] - 4 * r.sum[h]);
        }
        return a->d * acc;
    }
    // The int8 GEMM's view (gemm_q8.cuh): sub-block s as its codes (value, -4 … 3) and the
    // halves' d·(scale - 32).
    QF_HD static void codes32_s16(const block* b, int s, uint32_t* q, float* d) {
        int w[8];
        code_words(b, s, w);
        qf_k_view_codes(w, 4, q);
        for (int h = 0; h < 2; ++h) d[h] = qf_load_f16(b->d) * (float)(qf_k_scale_q3(2 * s + h, b->scales) - 32);
    }
};

// q4_k (HIGH = false) and q5_k (HIGH = true, fifth code bit in qh):
// x = d·sc·code - dmin·m per 32-element sub-block, 4-bit codes two planes per 64 elements.
typedef qf_q4_k_block qf_k_b4;  // generated from the Rust blocks (qf_blocks.cuh)
typedef qf_q5_k_block qf_k_b5;
template <class B, bool HIGH>
struct qf_k_4bit {
    typedef B block;
    static constexpr int BLOCK = 256;
    static constexpr int CHUNK = 16;
    QF_HD static int high(const B* b, int l, int s) {
        if constexpr (HIGH) return (b->qh[l] >> s & 1) << 4;
        else return 0;
    }
    QF_HD static void decode(const B* b, int chunk, float* out) {
        const int s = chunk / 2, p = s / 2, shift = 4 * (s % 2), l0 = chunk % 2 * 16;
        int sc, m;
        qf_k_scale_min(s, b->scales, &sc, &m);
        const float dl = qf_load_f16(b->d) * (float)sc, ml = qf_load_f16(b->dmin) * (float)m;
        int c[16];
        qf_k_bytes16(b->qs + 32 * p + l0, shift, 0xfu, c);
        if constexpr (HIGH) {
            int hi[16];
            qf_k_bytes16(b->qh + l0, s, 1u, hi);
            for (int j = 0; j < 16; ++j) c[j] |= hi[j] << 4;
        }
        for (int j = 0; j < 16; ++j) out[j] = dl * qf_small_int_to_f32(c[j]) - ml;
    }
    // Sub-block s's codes: 4 bits in two planes per 64 elements (q5_k: the fifth from qh).
    QF_HD static void code_words(const B* b, int s, int w[8]) {
        const uint8_t* hi = nullptr;
        if constexpr (HIGH) hi = b->qh;
        qf_k_code_words(b->qs + 32 * (s / 2), 4 * (s % 2), 0x0f0f0f0fu, hi, s, 0x01010101u, 4, w);
    }
    QF_HD static float dot_q8_1(const B* b, int s, const qf_block_q8_1* a) {
        int w[8];
        code_words(b, s, w);
        int sc, m;
        qf_k_scale_min(s, b->scales, &sc, &m);
        const int dot = qf_dot_codes(w, a, 0, 32), sum = qf_q8_1_sum(a, 0, 32);
        const float dl = qf_load_f16(b->d) * (float)sc, ml = qf_load_f16(b->dmin) * (float)m;
        return a->d * (dl * (float)dot - ml * (float)sum);
    }
    // The int8 GEMM's view (gemm_q8.cuh): sub-block s as its codes, d·sc and -dmin·m.
    QF_HD static void codes32(const B* b, int s, uint32_t* q, float* d, float* m) {
        int sc, mn;
        qf_k_scale_min(s, b->scales, &sc, &mn);
        int w[8];
        code_words(b, s, w);
        qf_k_view_codes(w, 0, q);
        *d = qf_load_f16(b->d) * (float)sc;
        *m = -(qf_load_f16(b->dmin) * (float)mn);
    }
};
struct qf_q4_k : qf_k_4bit<qf_k_b4, false> {};
struct qf_q5_k : qf_k_4bit<qf_k_b5, true> {};

// x = d·scale·(code - 32), 6-bit codes: low 4 bits in ql, high 2 in qh.
struct qf_q6_k {
    typedef qf_q6_k_block block;
    static constexpr int BLOCK = 256;
    static constexpr int CHUNK = 16;
    QF_HD static void decode(const block* b, int chunk, float* out) {
        const float dl = qf_load_f16(b->d) * (float)b->scales[chunk];
        const int h = chunk / 8, k = chunk % 8 / 2, l0 = chunk % 2 * 16;
        int lo[16], hi[16];
        qf_k_bytes16(b->ql + 64 * h + 32 * (k % 2) + l0, 4 * (k / 2), 0xfu, lo);
        qf_k_bytes16(b->qh + 32 * h + l0, 2 * k, 3u, hi);
        for (int j = 0; j < 16; ++j) out[j] = dl * qf_small_int_to_f32((lo[j] | hi[j] << 4) - 32);
    }
    // Sub-block s's codes 0..63 (= value + 32): 4 low bits from ql, 2 high from qh.
    QF_HD static void code_words(const block* b, int s, int w[8]) {
        const int h = s / 4, k = s % 4;
        qf_k_code_words(b->ql + 64 * h + 32 * (k % 2), 4 * (k / 2), 0x0f0f0f0fu, b->qh + 32 * h, 2 * k, 0x03030303u,
                        4, w);
    }
    QF_HD static float dot_q8_1(const block* b, int s, const qf_block_q8_1* a) {
        int w[8];
        code_words(b, s, w);
        const qf_k_sums r = qf_k_halves(w, a);
        const float d = qf_load_f16(b->d);
        float acc = 0.0f;
        for (int i = 0; i < 2; ++i) acc += d * (float)b->scales[2 * s + i] * (float)(r.dot[i] - 32 * r.sum[i]);
        return a->d * acc;
    }
    // The int8 GEMM's view (gemm_q8.cuh): sub-block s as its codes (value, -32 … 31) and the
    // halves' d·scale.
    QF_HD static void codes32_s16(const block* b, int s, uint32_t* q, float* d) {
        int w[8];
        code_words(b, s, w);
        qf_k_view_codes(w, 32, q);
        for (int i = 0; i < 2; ++i) d[i] = qf_load_f16(b->d) * (float)b->scales[2 * s + i];
    }
};

// x = d·q with an f32 d (the block's bsums are not needed).
struct qf_q8_k {
    typedef qf_q8_k_block block;
    static constexpr int BLOCK = 256;
    static constexpr int CHUNK = 16;
    QF_HD static void decode(const block* b, int chunk, float* out) {
        const float d = qf_load_f32(b->d);
        for (int t = 0; t < 4; ++t) {
            const uint32_t v = qf_load_u32((const uint8_t*)b->qs + 16 * chunk + 4 * t);
            for (int j = 0; j < 4; ++j) out[4 * t + j] = d * qf_small_int_to_f32((int8_t)(v >> 8 * j));
        }
    }
    QF_HD static float dot_q8_1(const block* b, int s, const qf_block_q8_1* a) {
        int w[8];
        for (int t = 0; t < 8; ++t) w[t] = qf_load_i8x4(b->qs + 32 * s + 4 * t);
        return qf_load_f32(b->d) * a->d * (float)qf_dot_codes(w, a, 0, 32);
    }
    // As activations (gemm_q8.cuh's act32): ggml's quantize_row_q8_K_ref as qforge-k encodes
    // it: max = the first element of largest magnitude, iscale = -127/max, q = min(127,
    // nearest_int(iscale·x)), d = 1/iscale (f32); all zero for an all-zero block.
    QF_HD static void act32(const float* x, qf_block_q8_1* out) {
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < 256; ++i)
            if (fabsf(x[i]) > amax) {
                amax = fabsf(x[i]);
                max = x[i];
            }
        const float iscale = amax == 0.0f ? 0.0f : -127.0f / max;
        const float d = amax == 0.0f ? 0.0f : 1.0f / iscale;
        for (int u = 0; u < 8; ++u) {
            int sum = 0;
            for (int i = 0; i < 32; ++i) {
                const int v = (int)(qf_f32_to_bits(iscale * x[32 * u + i] + 12582912.0f) & 0x007fffffu) - 0x00400000;
                out[u].qs[i] = (int8_t)(v < 127 ? v : 127);
                sum += out[u].qs[i];
            }
            out[u].d = d;
            out[u].s = d * (float)sum;
        }
    }
};
