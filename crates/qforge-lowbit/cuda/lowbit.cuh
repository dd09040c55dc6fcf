// qforge-lowbit CUDA device code: q1_0 (128 sign bits) and q2_0 (64 2-bit codes), each with
// one f16 scale and 16 code bytes. Included after kernels-cuda/common.cuh; interface in
// kernels-cuda/README.md.
//
// Both formats pack a code c per element LSB first (element j: bits BITS·j mod 8 of byte
// BITS·j / 8) and decode x = (float)(STEP·c − 1)·d: q1_0 (STEP 2) gives ±d, q2_0 (STEP 1)
// gives −d, 0, d, 2d. So decode and the dp4a dot product are written once, in qf_lowbit<>.
#pragma once

template <class B, int QK, int BITS, int STEP>
struct qf_lowbit {
    typedef B block;  // generated from the Rust block (qf_blocks.cuh)
    static constexpr int BLOCK = QK;
    static constexpr int CHUNK = 8;

    QF_HD static int code(const block* b, int j) {
        const int bit = j * BITS;
        return b->qs[bit >> 3] >> (bit & 7) & ((1 << BITS) - 1);
    }

    // x = (float)(STEP·c − 1)·d, as the Rust reference (codec::decode).
    QF_HD static void decode(const block* b, int chunk, float* out) {
        const float d = qf_load_f16(b->d);
        for (int i = 0; i < CHUNK; ++i) out[i] = (float)(STEP * code(b, chunk * CHUNK + i) - 1) * d;
    }

    // d·a.d·Σ (STEP·c − 1)·qs = d·a.d·(STEP·Σ c·qs − Σ qs): the codes are dp4a operands as
    // they are.
    QF_HD static float dot_q8_1(const block* b, int sub, const qf_block_q8_1* a) {
        int sumi = 0;
        for (int i = 0; i < 8; ++i) {
            uint32_t w = 0;
            for (int k = 0; k < 4; ++k) w |= (uint32_t)code(b, 32 * sub + 4 * i + k) << 8 * k;
            sumi = qf_dp4a((int)w, qf_load_i8x4(a->qs + 4 * i), sumi);
        }
        sumi = STEP * sumi - qf_q8_1_sum(a, 0, 32);
        return qf_load_f16(b->d) * (a->d * (float)sumi);
    }

    // The int8 GEMM's view (gemm_q8.cuh): the values STEP·c − 1 of sub-block `sub`, d, no offset.
    QF_HD static void codes32(const block* b, int sub, uint32_t* q, float* d, float* m) {
        for (int t = 0; t < 8; ++t) {
            // The four codes of elements 32·sub + 4t … as bytes (BITS·4 bits of the packing).
            const int e = 32 * sub + 4 * t;
            const uint32_t bits = (uint32_t)b->qs[e * BITS / 8] >> (e * BITS % 8);
            uint32_t c;
            if constexpr (BITS == 1) c = (uint32_t)qf_spread_bits4(bits);
            else c = (bits & 3u) | (bits >> 2 & 3u) << 8 | (bits >> 4 & 3u) << 16 | (bits >> 6 & 3u) << 24;
            q[t] = qf_bytes_minus(c * STEP, 1);  // STEP·c − 1 per byte (STEP·c < 128)
        }
        *d = qf_load_f16(b->d);
        *m = 0.0f;
    }
};

struct qf_q1_0 : qf_lowbit<qf_q1_0_block, 128, 1, 2> {};
struct qf_q2_0 : qf_lowbit<qf_q2_0_block, 64, 2, 1> {};
