// qforge-iq CUDA device code: iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m iq4_nl iq4_xs.
// Included after kernels-cuda/common.cuh; interface in kernels-cuda/README.md.
//
// The tables (qf_iq2xxs_grid, qf_iq2xs_grid, qf_iq2s_grid, qf_iq3xxs_grid, qf_iq3s_grid,
// qf_iq1s_grid, qf_ksigns_iq2xs, qf_kvalues_iq4nl) are not in this file: build.rs renders
// them from tables/*.txt — the very values of the Rust reference's constants — and
// src/lib.rs prepends them to this text (FAMILY_CUH), so there is one table, not two.
//
// Two shapes cover the family:
// * grid formats (iq2_*, iq3_*, iq1_*): each group of 8 elements is 8 small integers v (a
//   grid point, with signs for iq2/iq3) times a float scale dl, plus for iq1 a per-group
//   shift of ±1/8: x = dl·v (iq2, iq3) or dl·(v ± 1/8) (iq1). A layout struct says where a
//   group's scale, values and shift are; qf_iq_grid<> does decode and the dp4a dot once.
// * non-linear 4-bit formats (iq4_nl, iq4_xs): x = dl·kvalues_iq4nl[nibble] per 32
//   elements, in qf_iq4<>.
// Decode reproduces the Rust reference's f32 expressions operation for operation.
#pragma once

// ---- grid formats -----------------------------------------------------------------------

// Per-byte negation of the grid bytes of `grid` whose sign bit is set in `signs` (bit j for
// byte j): the 8 signed values as two dp4a words. SWAR, no carry between bytes.
QF_HD void qf_iq_signed(uint64_t grid, uint32_t signs, int w[2]) {
    for (int h = 0; h < 2; ++h) {
        const uint32_t m = (uint32_t)qf_spread_bits4(signs >> 4 * h) * 0xffu;  // 0xff where negative
        const uint32_t x = (uint32_t)(grid >> 32 * h) ^ m;
        w[h] = (int)(((x & 0x7f7f7f7fu) + (m & 0x01010101u)) ^ (x & 0x80808080u));
    }
}

// The 4-bit sub-scale nibble of a 16-element half (l = group in its 32) of iq2_xs / iq2_s.
QF_HD uint32_t qf_iq_nibble16(uint8_t sc, int l) { return l < 2 ? sc & 15u : (uint32_t)sc >> 4; }

// The int8 GEMM's view (kernels-cuda/gemm_q8.cuh) of a grid format: the 32 integers of
// sub-block `sub` with one scale per 32 (codes32) or per 16 (codes32_s16). iq1's shift goes
// into the codes: dl·(v ± 1/8) = (dl/8)·(8v ± 1), codes -9 … 9, scale dl/8 (exact: a power of
// two), so no format needs an offset.
template <class L>
QF_HD void qf_iq_codes(const typename L::block* b, int sub, uint32_t* q) {
    for (int k = 0; k < 4; ++k) {
        int w[2];
        L::values(b, 4 * sub + k, w);
        for (int h = 0; h < 2; ++h) {
            if constexpr (L::SHIFTED) {
                // 8v per byte (v ∈ {-1, 0, 1}: the bits shifted into the next byte masked off),
                // then ± 1 per byte.
                const uint32_t v8 = (uint32_t)w[h] << 3 & 0xf8f8f8f8u;
                q[2 * k + h] = qf_bytes_add(v8, L::shift(b, 4 * sub + k) > 0 ? 0x01010101u : 0xffffffffu);
            } else {
                q[2 * k + h] = (uint32_t)w[h];
            }
        }
    }
}
template <class L>
QF_HD float qf_iq_code_scale(const typename L::block* b, int g) {
    return L::SHIFTED ? L::scale(b, g) * 0.125f : L::scale(b, g);
}
template <class L, int G = L::SCALE_GROUPS>
struct qf_iq_int8_view {
    QF_HD static void codes32(const typename L::block* b, int sub, uint32_t* q, float* d, float* m) {
        qf_iq_codes<L>(b, sub, q);
        *d = qf_iq_code_scale<L>(b, 4 * sub);
        *m = 0.0f;
    }
};
template <class L>
struct qf_iq_int8_view<L, 2> {
    QF_HD static void codes32_s16(const typename L::block* b, int sub, uint32_t* q, float* d) {
        qf_iq_codes<L>(b, sub, q);
        d[0] = qf_iq_code_scale<L>(b, 4 * sub);
        d[1] = qf_iq_code_scale<L>(b, 4 * sub + 2);
    }
};

// A layout L gives, for group g (elements 8g..8g+8 of the 256):
//   L::scale(b, g)  the float scale dl (the Rust reference's expression);
//   L::values(b, g, w)  the 8 integers v as two packed int8 words;
//   L::shift(b, g)  ±1 (the shift is shift/8), only if L::SHIFTED.
// L::SCALE_GROUPS groups (4 or 2) share one scale, aligned.
template <class L>
struct qf_iq_grid : qf_iq_int8_view<L> {
    typedef typename L::block block;
    static constexpr int BLOCK = 256;
    static constexpr int CHUNK = 8;

    QF_HD static void decode(const block* b, int chunk, float* out) {
        const float dl = L::scale(b, chunk);
        int w[2];
        L::values(b, chunk, w);
        const float delta = L::SHIFTED ? (float)L::shift(b, chunk) * 0.125f : 0.0f;
        for (int j = 0; j < 8; ++j) {
            const float v = (float)(int8_t)(w[j / 4] >> 8 * (j % 4));
            out[j] = L::SHIFTED ? dl * (v + delta) : dl * v;
        }
    }

    // Σ over scale groups of dl·(a.d·Σ(8v ± 1)·qs / 8): integer sums, three float products.
    QF_HD static float dot_q8_1(const block* b, int sub, const qf_block_q8_1* a) {
        float r = 0.0f;
        for (int k0 = 0; k0 < 4; k0 += L::SCALE_GROUPS) {
            int tot = 0;
            for (int k = k0; k < k0 + L::SCALE_GROUPS; ++k) {
                const int g = 4 * sub + k;
                int w[2];
                L::values(b, g, w);
                int s = qf_dp4a(w[0], qf_load_i8x4(a->qs + 8 * k), 0);
                s = qf_dp4a(w[1], qf_load_i8x4(a->qs + 8 * k + 4), s);
                if (L::SHIFTED) s = 8 * s + L::shift(b, g) * qf_q8_1_sum(a, 8 * k, 8);
                tot += s;
            }
            const float sa = L::SHIFTED ? a->d * (float)tot * 0.125f : a->d * (float)tot;
            r += L::scale(b, 4 * sub + k0) * sa;
        }
        return r;
    }
};

// iq2_xxs (66 bytes): per 32 elements two LE u32: four 8-bit grid indices; four 7-bit sign
// indices (bits 0..28) and the 4-bit scale (bits 28..32).
struct qf_iq2_xxs_layout {
    typedef qf_iq2_xxs_block block;
    static constexpr int SCALE_GROUPS = 4;
    static constexpr bool SHIFTED = false;
    QF_HD static float scale(const block* b, int g) {
        const uint32_t aux1 = qf_load_u32(b->qs + 8 * (g / 4) + 4);
        return qf_load_f16(b->d) * (0.5f + (float)(aux1 >> 28)) * 0.25f;
    }
    QF_HD static void values(const block* b, int g, int w[2]) {
        const int ib = g / 4, l = g % 4;
        const uint32_t aux0 = qf_load_u32(b->qs + 8 * ib), aux1 = qf_load_u32(b->qs + 8 * ib + 4);
        qf_iq_signed(QF_TAB(qf_iq2xxs_grid)[aux0 >> 8 * l & 255], QF_TAB(qf_ksigns_iq2xs)[aux1 >> 7 * l & 127], w);
    }
    QF_HD static int shift(const block*, int) { return 0; }
};

// iq2_xs (74 bytes): per 8 elements a LE u16 (9-bit grid index, 7-bit sign index); 4-bit
// scales per 16.
struct qf_iq2_xs_layout {
    typedef qf_iq2_xs_block block;
    static constexpr int SCALE_GROUPS = 2;
    static constexpr bool SHIFTED = false;
    QF_HD static float scale(const block* b, int g) {
        return qf_load_f16(b->d) * (0.5f + (float)qf_iq_nibble16(b->scales[g / 4], g % 4)) * 0.25f;
    }
    QF_HD static void values(const block* b, int g, int w[2]) {
        const uint32_t q = qf_load_u16(b->qs + 2 * g);
        qf_iq_signed(QF_TAB(qf_iq2xs_grid)[q & 511], QF_TAB(qf_ksigns_iq2xs)[q >> 9], w);
    }
    QF_HD static int shift(const block*, int) { return 0; }
};

// iq2_s (82 bytes): 10-bit grid indices (low bytes in qs[0..32], high bits in qh), one
// sign byte per 8 elements (qs[32..64]), 4-bit scales per 16.
struct qf_iq2_s_layout {
    typedef qf_iq2_s_block block;
    static constexpr int SCALE_GROUPS = 2;
    static constexpr bool SHIFTED = false;
    QF_HD static float scale(const block* b, int g) {
        return qf_load_f16(b->d) * (0.5f + (float)qf_iq_nibble16(b->scales[g / 4], g % 4)) * 0.25f;
    }
    QF_HD static void values(const block* b, int g, int w[2]) {
        const uint32_t idx = b->qs[g] | ((uint32_t)b->qh[g / 4] << (8 - 2 * (g % 4)) & 0x300u);
        qf_iq_signed(QF_TAB(qf_iq2s_grid)[idx], b->qs[32 + g], w);
    }
    QF_HD static int shift(const block*, int) { return 0; }
};

// iq3_xxs (98 bytes): 64 8-bit indices of 4-value grid points, then per 32 elements a LE
// u32 of four 7-bit sign indices and the 4-bit scale.
struct qf_iq3_xxs_layout {
    typedef qf_iq3_xxs_block block;
    static constexpr int SCALE_GROUPS = 4;
    static constexpr bool SHIFTED = false;
    QF_HD static float scale(const block* b, int g) {
        const uint32_t aux = qf_load_u32(b->qs + 64 + 4 * (g / 4));
        return qf_load_f16(b->d) * (0.5f + (float)(aux >> 28)) * 0.5f;
    }
    QF_HD static void values(const block* b, int g, int w[2]) {
        const uint32_t aux = qf_load_u32(b->qs + 64 + 4 * (g / 4));
        const uint64_t grid = QF_TAB(qf_iq3xxs_grid)[b->qs[2 * g]] |
                              (uint64_t)QF_TAB(qf_iq3xxs_grid)[b->qs[2 * g + 1]] << 32;
        qf_iq_signed(grid, QF_TAB(qf_ksigns_iq2xs)[aux >> 7 * (g % 4) & 127], w);
    }
    QF_HD static int shift(const block*, int) { return 0; }
};

// iq3_s (110 bytes): 9-bit indices of 4-value grid points (low bytes in qs, ninth bits in
// qh), one sign byte per 8 elements, odd 4-bit scales (1 + 2·nibble) per 32.
struct qf_iq3_s_layout {
    typedef qf_iq3_s_block block;
    static constexpr int SCALE_GROUPS = 4;
    static constexpr bool SHIFTED = false;
    QF_HD static float scale(const block* b, int g) {
        const int ib = g / 4;
        const int nib = b->scales[ib / 2] >> 4 * (ib % 2) & 15;
        return qf_load_f16(b->d) * (float)(1 + 2 * nib);
    }
    QF_HD static void values(const block* b, int g, int w[2]) {
        const int l = g % 4;
        const uint32_t qh = b->qh[g / 4];
        const uint32_t i1 = b->qs[2 * g] | (qh << (8 - 2 * l) & 256u);
        const uint32_t i2 = b->qs[2 * g + 1] | (qh << (7 - 2 * l) & 256u);
        const uint64_t grid = QF_TAB(qf_iq3s_grid)[i1] | (uint64_t)QF_TAB(qf_iq3s_grid)[i2] << 32;
        qf_iq_signed(grid, b->signs[g], w);
    }
    QF_HD static int shift(const block*, int) { return 0; }
};

// iq1_s / iq1_m: 11-bit indices into the {-1, 0, 1} grid (stored as int8 bytes: the grid
// word is the two dp4a words as it is).
QF_HD void qf_iq1_values(uint32_t idx, int w[2]) {
    const uint64_t grid = QF_TAB(qf_iq1s_grid)[idx & 2047];
    w[0] = (int)(uint32_t)grid;
    w[1] = (int)(uint32_t)(grid >> 32);
}

// iq1_s (50 bytes): low index bytes in qs; per 32 elements a LE u16 of the four 3-bit high
// index parts (bits 0..12), the 3-bit odd scale (bits 12..15) and the shift's sign (bit 15).
struct qf_iq1_s_layout {
    typedef qf_iq1_s_block block;
    static constexpr int SCALE_GROUPS = 4;
    static constexpr bool SHIFTED = true;
    QF_HD static uint32_t qh(const block* b, int g) { return qf_load_u16(b->qh + 2 * (g / 4)); }
    QF_HD static float scale(const block* b, int g) {
        return qf_load_f16(b->d) * (float)(2 * (qh(b, g) >> 12 & 7) + 1);
    }
    QF_HD static void values(const block* b, int g, int w[2]) {
        qf_iq1_values(b->qs[g] | (qh(b, g) >> 3 * (g % 4) & 7) << 8, w);
    }
    QF_HD static int shift(const block* b, int g) { return qh(b, g) & 0x8000u ? -1 : 1; }
};

// iq1_m (56 bytes): low index bytes in qs; per 8 elements a nibble of qh (3 high index
// bits, bit 3 the shift's sign); four LE u16 of 3-bit odd scales per 16 (bits 0..12) whose
// top nibbles together are the f16 block scale.
struct qf_iq1_m_layout {
    typedef qf_iq1_m_block block;
    static constexpr int SCALE_GROUPS = 2;
    static constexpr bool SHIFTED = true;
    QF_HD static float scale(const block* b, int g) {
        const uint32_t s0 = qf_load_u16(b->scales), s1 = qf_load_u16(b->scales + 2);
        const uint32_t s2 = qf_load_u16(b->scales + 4), s3 = qf_load_u16(b->scales + 6);
        const float d = qf_half_to_f32(s0 >> 12 | (s1 >> 8 & 0x00f0u) | (s2 >> 4 & 0x0f00u) | (s3 & 0xf000u));
        const int ib = g / 4, l = g % 4;
        const uint32_t s = qf_load_u16(b->scales + 2 * (ib / 2));
        return d * (float)(2 * (s >> (6 * (ib % 2) + 3 * (l / 2)) & 7) + 1);
    }
    QF_HD static uint32_t nib(const block* b, int g) { return (uint32_t)b->qh[g / 2] >> 4 * (g % 2) & 15; }
    QF_HD static void values(const block* b, int g, int w[2]) { qf_iq1_values(b->qs[g] | (nib(b, g) & 7) << 8, w); }
    QF_HD static int shift(const block* b, int g) { return nib(b, g) & 8 ? -1 : 1; }
};

struct qf_iq2_xxs : qf_iq_grid<qf_iq2_xxs_layout> {};
struct qf_iq2_xs : qf_iq_grid<qf_iq2_xs_layout> {};
struct qf_iq2_s : qf_iq_grid<qf_iq2_s_layout> {};
struct qf_iq3_xxs : qf_iq_grid<qf_iq3_xxs_layout> {};
struct qf_iq3_s : qf_iq_grid<qf_iq3_s_layout> {};
struct qf_iq1_s : qf_iq_grid<qf_iq1_s_layout> {};
struct qf_iq1_m : qf_iq_grid<qf_iq1_m_layout> {};

// ---- non-linear 4-bit formats -----------------------------------------------------------

// Four nibbles (at `shift` of q[0..4]) as their int8 kvalues_iq4nl entries, packed for dp4a.
QF_HD int qf_iq4_word(const uint8_t* q, int shift) {
    uint32_t w = 0;
    for (int k = 0; k < 4; ++k) w |= (uint32_t)(uint8_t)QF_TAB(qf_kvalues_iq4nl)[q[k] >> shift & 15] << 8 * k;
    return (int)w;
}

// A layout L gives the scale dl and the 16 nibble bytes of each 32 elements (byte j: element
// j low, element j + 16 high): x = dl · kvalues_iq4nl[nibble].
template <class L, int BLK>
struct qf_iq4 {
    typedef typename L::block block;
    static constexpr int BLOCK = BLK;
    static constexpr int CHUNK = 8;

    QF_HD static void decode(const block* b, int chunk, float* out) {
        const int sub = chunk / 4, j0 = chunk % 4 * 8;
        const float dl = L::scale(b, sub);
        const uint8_t* q = L::nibbles(b, sub) + j0 % 16;
        const int shift = j0 < 16 ? 0 : 4;
        for (int j = 0; j < 8; ++j) out[j] = dl * (float)QF_TAB(qf_kvalues_iq4nl)[q[j] >> shift & 15];
    }

    QF_HD static float dot_q8_1(const block* b, int sub, const qf_block_q8_1* a) {
        const uint8_t* q = L::nibbles(b, sub);
        int sumi = 0;
        for (int i = 0; i < 4; ++i) {
            sumi = qf_dp4a(qf_iq4_word(q + 4 * i, 0), qf_load_i8x4(a->qs + 4 * i), sumi);
            sumi = qf_dp4a(qf_iq4_word(q + 4 * i, 4), qf_load_i8x4(a->qs + 16 + 4 * i), sumi);
        }
        return L::scale(b, sub) * (a->d * (float)sumi);
    }

    // The int8 GEMM's view (gemm_q8.cuh): the kvalues of the 32 nibbles, dl, no offset.
    QF_HD static void codes32(const block* b, int sub, uint32_t* q, float* d, float* m) {
        const uint8_t* nb = L::nibbles(b, sub);
        for (int i = 0; i < 4; ++i) {
            q[i] = (uint32_t)qf_iq4_word(nb + 4 * i, 0);
            q[i + 4] = (uint32_t)qf_iq4_word(nb + 4 * i, 4);
        }
        *d = L::scale(b, sub);
        *m = 0.0f;
    }
};

// iq4_nl (18 bytes): one f16 scale per 32.
struct qf_iq4_nl_layout {
    typedef qf_iq4_nl_block block;
    QF_HD static float scale(const block* b, int) { return qf_load_f16(b->d); }
    QF_HD static const uint8_t* nibbles(const block* b, int) { return b->qs; }
};

// iq4_xs (136 bytes): f16 d, then 6-bit scales (biased by 32) per 32: high 2 bits in the LE
// u16 scales_h, low 4 bits in scales_l; dl = d·(ls - 32).
struct qf_iq4_xs_layout {
    typedef qf_iq4_xs_block block;
    QF_HD static float scale(const block* b, int ib) {
        const int sh = (int)qf_load_u16(b->scales_h);
        const int ls = (b->scales_l[ib / 2] >> 4 * (ib % 2) & 15) | (sh >> 2 * ib & 3) << 4;
        return qf_load_f16(b->d) * (float)(ls - 32);
    }
    QF_HD static const uint8_t* nibbles(const block* b, int ib) { return b->qs + 16 * ib; }
};

struct qf_iq4_nl : qf_iq4<qf_iq4_nl_layout, 32> {};
struct qf_iq4_xs : qf_iq4<qf_iq4_xs_layout, 256> {};
