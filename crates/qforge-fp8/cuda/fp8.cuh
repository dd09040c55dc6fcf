// qforge-fp8 CUDA device code: fp8_e4m3 / fp8_e5m2 with one f32 scale per 128×128 block.
// Included after kernels-cuda/common.cuh; interface in kernels-cuda/README.md (grid formats).
//
// A grid format: a row is `cols` code bytes (no padding), a block is 128 consecutive codes of
// a row, and its scale s = grid[row/128][col/128] is passed in by the templates. The code
// values come from the tables qf_fp8_e4m3_bits / qf_fp8_e5m2_bits, rendered from the Rust
// codec by build.rs (prepended to this file): exact, NaN / ±Inf / -0 included.
// x = value(q) · s in f32, as the Rust reference (crates/qforge-fp8/src/lib.rs).
#pragma once

template <class K>
struct qf_fp8 {
    struct block {
        uint8_t q[128];
    };
    static constexpr bool GRID = true;
    static constexpr int BLOCK = 128;
    static constexpr int CHUNK = 8;

    // A code's value without the table (which stays the reference and answers the special
    // codes): the magnitude bits shifted into an f32's exponent and mantissa fields are the
    // value times 2^-UNIT_LOG2 (subnormal codes become subnormal f32s, exactly), and one
    // exact multiply by 2^UNIT_LOG2 puts it back.
    QF_HD static float value(uint32_t c) {
        if (K::special(c)) return K::value((uint8_t)c);
        return qf_bits_to_f32((c & 0x80u) << 24 | (c & 0x7fu) << K::SHIFT) * K::UNIT;
    }

    QF_HD static void decode(const block* b, int chunk, float scale, float* out) {
        for (int i = 0; i < CHUNK / 4; ++i) {
            const uint32_t w = qf_load_u32(b->q + chunk * CHUNK + 4 * i);
            for (int j = 0; j < 4; ++j) out[4 * i + j] = value(w >> 8 * j & 0xffu) * scale;
        }
    }

    // (Σ value(q_i)·a.qs[i])·a.d·scale over elements [32·sub, 32·sub + 32). Each product is
    // exact in f32 (≤ 4 + 8 significant bits); the sum rounds like any f32 dot.
    QF_HD static float dot_q8_1(const block* b, int sub, float scale, const qf_block_q8_1* a) {
        float s = 0.0f;
        for (int i = 0; i < 32; ++i) s += value(b->q[32 * sub + i]) * (float)a->qs[i];
        return s * a->d * scale;
    }
};

// SHIFT puts the code's exponent field on an f32's (bits 23…); UNIT = 2^(127 - bias).
// special: the codes the shift does not give (e4m3's NaN; e5m2's Inf and NaN).
struct qf_fp8_e4m3_codes {
    static constexpr int SHIFT = 20;
    static constexpr float UNIT = 0x1p120f;
    QF_HD static bool special(uint32_t c) { return (c & 0x7fu) == 0x7fu; }
    QF_HD static float value(uint8_t c) { return qf_bits_to_f32(QF_TAB(qf_fp8_e4m3_bits)[c]); }
};
struct qf_fp8_e5m2_codes {
    static constexpr int SHIFT = 21;
    static constexpr float UNIT = 0x1p112f;
    QF_HD static bool special(uint32_t c) { return (c & 0x7cu) == 0x7cu; }
    QF_HD static float value(uint8_t c) { return qf_bits_to_f32(QF_TAB(qf_fp8_e5m2_bits)[c]); }
};

struct qf_fp8_e4m3 : qf_fp8<qf_fp8_e4m3_codes> {};
struct qf_fp8_e5m2 : qf_fp8<qf_fp8_e5m2_codes> {};
