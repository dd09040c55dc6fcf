// qforge-fp4 CUDA device code: mxfp4 nvfp4 (E2M1 values with block scales).
// Included after kernels-cuda/common.cuh; interface in kernels-cuda/README.md.
//
// The E2M1 table `qf_fp4_e2m1_x2` (ggml's kvalues_mxfp4: the E2M1 values doubled, as int8)
// is prepended to this file at compile time by qforge-fp4 (src/cuda.rs) from the Rust
// constant `e2m1::E2M1_X2`, so the device code and the Rust reference share one table.
//
// Both formats are groups of G codes under one scale: byte j of a group's G/2 bytes holds
// element j in its low nibble and element j + G/2 in its high nibble, and x = E2M1_X2[code] ·
// half_scale, where the scale decoders return half the scale because the table is doubled
// (exactly as the Rust reference, crate::scale). Every E2M1_X2 value is a small integer, so
// the dot product is an integer dp4a sum per group times a.d times the half scale.
#pragma once

// ggml's ggml_e8m0_to_fp32_half: 2^(e - 128), exact (2^-128 and 2^-127 are subnormal).
QF_HD float qf_fp4_e8m0_half(uint32_t e) {
    return qf_bits_to_f32(e < 2 ? 0x00200000u << e : (e - 1) << 23);
}

// ggml's ggml_ue4m3_to_fp32, halved: the top bit is ignored; 0x00 and 0x7F decode to 0.
// Every operation is exact (as in the Rust reference).
QF_HD float qf_fp4_ue4m3_half(uint32_t x) {
    if (x == 0 || x == 0x7F) return 0.0f;
    const int exp = (int)(x >> 3 & 15);
    const float man = (float)(x & 7);
    const float raw = exp == 0 ? man * qf_bits_to_f32((uint32_t)(-9 + 127) << 23)
                               : (1.0f + man / 8.0f) * qf_bits_to_f32((uint32_t)(exp - 7 + 127) << 23);
    return raw * 0.5f;
}

// Four codes (the nibbles at `shift` of q[0..4]) as their int8 E2M1_X2 values, packed for dp4a.
QF_HD int qf_fp4_word(const uint8_t* q, int shift) {
    uint32_t w = 0;
    for (int k = 0; k < 4; ++k) w |= (uint32_t)(uint8_t)QF_TAB(qf_fp4_e2m1_x2)[q[k] >> shift & 15] << 8 * k;
    return (int)w;
}

// The traits struct of an fp4 format: G elements per scale; S::half(b, group) is the group's
// half scale; S::block holds the scale bytes and `qs`, G/2 bytes per group.
template <class S, int BLK, int G>
struct qf_fp4 {
    typedef typename S::block block;
    static constexpr int BLOCK = BLK;
    static constexpr int CHUNK = 8;  // divides G/2: a chunk is all low or all high nibbles
    static_assert(G % 16 == 0 && BLK % G == 0 && BLK % 32 == 0, "fp4 group layout");

    // x = E2M1_X2[code] · half_scale in f32 (the Rust decode_group).
    QF_HD static void decode(const block* b, int chunk, float* out) {
        const int e0 = chunk * CHUNK, g = e0 / G, j0 = e0 % G;
        const float d = S::half(b, g);
        const uint8_t* q = b->qs + g * (G / 2) + j0 % (G / 2);
        const int shift = j0 < G / 2 ? 0 : 4;
        for (int j = 0; j < CHUNK; ++j) out[j] = (float)QF_TAB(qf_fp4_e2m1_x2)[q[j] >> shift & 15] * d;
    }

    // Σ per group of (a.d · Σ E2M1_X2[code]·qs) · half_scale. The half scale goes last: it is
    // a power of two (mxfp4) or a 4-bit-mantissa value, so tiny scales do not lose bits to an
    // intermediate subnormal product.
    QF_HD static float dot_q8_1(const block* b, int sub, const qf_block_q8_1* a) {
        float r = 0.0f;
        for (int e0 = 0; e0 < 32; e0 += G < 32 ? G : 32) {
            const int g = (sub * 32 + e0) / G;
            const uint8_t* q = b->qs + g * (G / 2);
            int sumi = 0;
            for (int i = 0; i < G / 8; ++i) {
                sumi = qf_dp4a(qf_fp4_word(q + 4 * i, 0), qf_load_i8x4(a->qs + e0 + 4 * i), sumi);
                sumi = qf_dp4a(qf_fp4_word(q + 4 * i, 4), qf_load_i8x4(a->qs + e0 + G / 2 + 4 * i), sumi);
            }
            r += a->d * (float)sumi * S::half(b, g);
        }
        return r;
    }
};

// mxfp4: 32 codes and one E8M0 exponent byte.
struct qf_fp4_mx_scale {
    typedef qf_mxfp4_block block;
    QF_HD static float half(const block* b, int) { return qf_fp4_e8m0_half(b->e); }
};
// nvfp4: four sub-blocks of 16 codes, one UE4M3 scale byte each.
struct qf_fp4_nv_scale {
    typedef qf_nvfp4_block block;
    QF_HD static float half(const block* b, int g) { return qf_fp4_ue4m3_half(b->d[g]); }
};

// The int8 GEMM's view (gemm_q8.cuh) of a format with one scale per 32 codes: the E2M1_X2
// values and the half scale, no offset.
template <class S>
struct qf_fp4_codes32 {
    QF_HD static void codes32(const typename S::block* b, int sub, uint32_t* q, float* d, float* m) {
        const uint8_t* qs = b->qs + 16 * sub;
        for (int i = 0; i < 4; ++i) {
            q[i] = (uint32_t)qf_fp4_word(qs + 4 * i, 0);
            q[i + 4] = (uint32_t)qf_fp4_word(qs + 4 * i, 4);
        }
        *d = S::half(b, sub);
        *m = 0.0f;
    }
};

// The int8 GEMM's view of nvfp4 (16 codes per scale): sub-block `sub` is groups 2·sub and
// 2·sub + 1, each byte j holding element j (low nibble) and j + 8 (high); the halves' half
// scales, no offset.
template <class S>
struct qf_fp4_codes32_s16 {
    QF_HD static void codes32_s16(const typename S::block* b, int sub, uint32_t* q, float* d) {
        for (int h = 0; h < 2; ++h) {
            const uint8_t* qs = b->qs + 8 * (2 * sub + h);
            for (int i = 0; i < 2; ++i) {
                q[4 * h + i] = (uint32_t)qf_fp4_word(qs + 4 * i, 0);
                q[4 * h + 2 + i] = (uint32_t)qf_fp4_word(qs + 4 * i, 4);
            }
            d[h] = S::half(b, 2 * sub + h);
        }
    }
};

struct qf_mxfp4 : qf_fp4<qf_fp4_mx_scale, 32, 32>, qf_fp4_codes32<qf_fp4_mx_scale> {};
struct qf_nvfp4 : qf_fp4<qf_fp4_nv_scale, 64, 16>, qf_fp4_codes32_s16<qf_fp4_nv_scale> {};
