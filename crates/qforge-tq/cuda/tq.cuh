// qforge-tq CUDA device code: tq1_0 tq2_0 (ternary, 256-element blocks, one f16 scale).
// Included after kernels-cuda/common.cuh; interface in kernels-cuda/README.md.
//
// Both formats store a code t per element and decode x = ((float)t - 1)·d (t ∈ {0, 1, 2};
// tq2_0's 2-bit field also allows t = 3, x = 2d). They differ only in where the codes are.
// A layout gives the codes of four consecutive elements 4i..4i+3 as the bytes of one word
// (four consecutive elements always share one code position of four consecutive bytes in
// both packings), so decode and the dp4a dot product are written once, in qf_tq<>.
#pragma once

// tq1_0 (54 bytes): 48 + 4 bytes of base-3 codes, then d. Code n of byte m of a group
// (first byte, bytes N, first element E) is element E + m + N·n, extracted as ggml does:
// q = byte·3^n mod 256, t = (3q) >> 8.
struct qf_tq1_layout {
    typedef qf_tq1_0_block block;
    QF_HD static int word(const block* b, int e) {  // e = 4i
        int first, n;
        if (e < 160) first = e % 32, n = e / 32;
        else if (e < 240) first = 32 + (e - 160) % 16, n = (e - 160) / 16;
        else first = 48 + (e - 240) % 4, n = (e - 240) / 4;
        const uint32_t pow3 = n == 0 ? 1u : n == 1 ? 3u : n == 2 ? 9u : n == 3 ? 27u : 81u;
        const uint8_t* q = (const uint8_t*)b + first;  // bytes 48..51 are qh
        uint32_t w = 0;
        for (int k = 0; k < 4; ++k) w |= ((q[k] * pow3 & 0xffu) * 3u >> 8) << 8 * k;
        return (int)w;
    }
};

// tq2_0 (66 bytes): 64 code bytes, then d. Bits 2l..2l+2 of byte 32h + m hold the code of
// element 128h + 32l + m.
struct qf_tq2_layout {
    typedef qf_tq2_0_block block;
    QF_HD static int word(const block* b, int e) {  // e = 4i
        const int byte = 32 * (e / 128) + e % 32, shift = 2 * (e % 128 / 32);
        return (int)(qf_load_u32(b->qs + byte) >> shift & 0x03030303u);
    }
};

template <class L>
struct qf_tq {
    typedef typename L::block block;
    static constexpr int BLOCK = 256;
    static constexpr int CHUNK = 16;

    // x = ((float)t - 1.0f)·d, as the Rust reference (Levels::get).
    QF_HD static void decode(const block* b, int chunk, float* out) {
        const float d = qf_load_f16(b->d);
        for (int i = 0; i < CHUNK / 4; ++i) {
            const uint32_t w = (uint32_t)L::word(b, chunk * CHUNK + 4 * i);
            for (int k = 0; k < 4; ++k) out[4 * i + k] = ((float)(w >> 8 * k & 0xffu) - 1.0f) * d;
        }
    }

    // d·a.d·(Σ t·qs - Σ qs): the codes 0..3 are dp4a operands as they are.
    QF_HD static float dot_q8_1(const block* b, int sub, const qf_block_q8_1* a) {
        int sumi = 0;
        for (int i = 0; i < 8; ++i) sumi = qf_dp4a(L::word(b, 32 * sub + 4 * i), qf_load_i8x4(a->qs + 4 * i), sumi);
        sumi -= qf_q8_1_sum(a, 0, 32);
        return qf_load_f16(b->d) * (a->d * (float)sumi);
    }

    // The int8 GEMM's view (gemm_q8.cuh): the codes t - 1 of sub-block `sub`, d, no offset.
    QF_HD static void codes32(const block* b, int sub, uint32_t* q, float* d, float* m) {
        for (int i = 0; i < 8; ++i) q[i] = qf_bytes_minus((uint32_t)L::word(b, 32 * sub + 4 * i), 1);
        *d = qf_load_f16(b->d);
        *m = 0.0f;
    }
};

struct qf_tq1_0 : qf_tq<qf_tq1_layout> {};
struct qf_tq2_0 : qf_tq<qf_tq2_layout> {};
