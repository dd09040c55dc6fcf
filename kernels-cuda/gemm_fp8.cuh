// qforge kernels-cuda/gemm_fp8.cuh: the FP8 block-scaled GEMM (DeepSeek-V3 / DeepGEMM
// semantics), the CPU's `--act-quant fp8-1x128` mat-mul of a grid format with fp8 values:
//   y[m][n] = Σ_kb ((Σ_{k in kb} e4m3(a[m][k]) · w8(W[n][k])) · s_w[n / 128][kb]) · s_a[m][kb]
// in f32: each 128-column block's partial sum (exact products) is promoted into an f32
// accumulator with both scales, in block order, as qforge-fp8's `dot_row` does.
//
// * Activations, on the device: qf_quantize_fp8_1x128_group, per row and 128 columns
//   s = amax / 448 (1 for an all-zero group, the smallest positive f32 where it underflows),
//   q = e4m3(x / s), saturating round-to-nearest-even: qforge-fp8's `quantize_aux` /
//   `quantize_row_at` of its 1 × 128 activation format, bit for bit.
// * One tile loop (qf_gemm_fp8_tile: the product transposed, codes staged with 16-byte
//   cp.async, a k-step per 128-column block, split-k) with two bodies, the policy P:
//   - qf_fp8p_mma (sm_89+): mma.sync.m16n8k32.row.col.f32.<w>.e4m3.f32 on the staged codes
//     (the s8 m16n8k32 fragment layout);
//   - qf_fp8p_f16 (sm_80): the staged codes converted exactly to f16 by table (every e4m3 /
//     e5m2 value is an f16 value), mma.sync.m16n8k16 f16 → f32.
//   Both keep one f32 partial per 128-column block and promote it at the block's end.
// * The weights' value type W (qf_f8_e4m3 / qf_f8_e5m2) comes from the format's layout
//   (`Layout::Grid { elem }`, qforge-cuda's codegen), not from the format: the kernel reads
//   the N × K value bytes and the f32 scale grid of 128 × 128 tiles directly.
// Any M, N, K (predicated edges; activation rows are padded to whole 128-column groups with
// zero codes by the quantizer, the weights are read in place).
#pragma once
#include "gemm.cuh"

#define QF_FP8_GROUP 128
// Threads of the activation quantizer's CTA: one per column of a 128-column group.
#define QF_FP8_ACT_THREADS 128

// 2^p as an f32, for -126 <= p <= 127.
QF_HD float qf_pow2f(int p) { return qf_bits_to_f32((uint32_t)(p + 127) << 23); }

// An OCP fp8 encoding: E exponent bits, M mantissa bits; IEEE: e5m2 (Inf / NaN at the top
// exponent), else e4m3fn (no Inf, NaN = S.1111.111, max 448).
template <int E, int M, bool IEEE>
struct qf_f8 {
    static constexpr int BIAS = (1 << (E - 1)) - 1;
    static constexpr bool E5M2 = IEEE;
    // The value of code c, exact in f32 (and in f16).
    QF_HD static float value(uint8_t c) {
        const uint32_t sign = (uint32_t)(c & 0x80u) << 24;
        const int ex = (c >> M) & ((1 << E) - 1), man = c & ((1 << M) - 1);
        float mag;
        if (IEEE && ex == (1 << E) - 1) mag = qf_bits_to_f32(man ? 0x7fc00000u : 0x7f800000u);
        else if (!IEEE && (c & 0x7fu) == 0x7fu) mag = qf_bits_to_f32(0x7fc00000u);
        else if (ex == 0) mag = (float)man * qf_pow2f(1 - BIAS - M);
        else mag = (float)((1 << M) + man) * qf_pow2f(ex - BIAS - M);
        return qf_bits_to_f32(qf_f32_to_bits(mag) | sign);
    }
};
typedef qf_f8<4, 3, false> qf_f8_e4m3;
typedef qf_f8<5, 2, true> qf_f8_e5m2;

// f32 → e4m3fn code, saturating (±448 past the range, NaN → S.1111.111), round to nearest
// even, subnormals included: x / quantum rounded with the default (RNE) rounding, where the
// quantum of |x|'s binade is exact as a power of two.
QF_HD uint8_t qf_e4m3_from_f32(float x) {
    const uint32_t sign = (qf_f32_to_bits(x) >> 24) & 0x80u;
    const float a = fabsf(x);
    if (a != a) return (uint8_t)(sign | 0x7fu);
    if (a >= 448.0f) return (uint8_t)(sign | 0x7eu);
    int e = (int)(qf_f32_to_bits(a) >> 23) - 127 + 7;  // e4m3's biased exponent, at least 1
    e = e < 1 ? 1 : e;
    const float n = a * qf_pow2f(7 + 3 - e);  // exact: a power-of-two scaling
    uint32_t code = ((uint32_t)(e - 1) << 3) + (uint32_t)rintf(n);
    code = code < 0x7eu ? code : 0x7eu;
    return (uint8_t)(sign | code);
}

// The activation group's scale from its largest magnitude (qforge-fp8 `grid::scale_for`).
QF_HD float qf_fp8_scale_for(float amax) {
    if (amax == 0.0f) return 1.0f;
    const float s = amax / 448.0f;
    const float tiny = qf_bits_to_f32(1u);
    return s > tiny ? s : tiny;
}

// Activation row strides: codes padded to whole groups, one scale per group.
QF_HD long long qf_fp8_act_groups(long long K) { return (K + QF_FP8_GROUP - 1) / QF_FP8_GROUP; }

// ---- 1 × 128 e4m3 activations: one CTA of QF_FP8_ACT_THREADS per (row, group) ------------
// q: M × (groups · 128) codes (0 past K), s: M × groups scales. red: QF_FP8_ACT_THREADS
// floats of shared memory, par: 1.
QF_HD void qf_quantize_fp8_1x128_group(const float* x, uint8_t* q, float* s, long long K, long long row, long long g,
                                       float* red, float* par) {
    const long long groups = qf_fp8_act_groups(K), k0 = g * QF_FP8_GROUP;
    const float* xr = x + row * K;
    qf_for_threads<QF_FP8_ACT_THREADS>([&](int t) {
        const long long k = k0 + t;
        red[t] = k < K ? fabsf(xr[k]) : 0.0f;
    });
    qf_sync();
    qf_for_threads<QF_FP8_ACT_THREADS>([&](int t) {
        if (t != 0) return;
        float amax = 0.0f;  // max is exact: any order gives the CPU's value
        for (int i = 0; i < QF_FP8_ACT_THREADS; ++i) amax = fmaxf(amax, red[i]);
        par[0] = qf_fp8_scale_for(amax);
        s[row * groups + g] = par[0];
    });
    qf_sync();
    qf_for_threads<QF_FP8_ACT_THREADS>([&](int t) {
        const long long k = k0 + t;
        q[row * groups * QF_FP8_GROUP + k] = k < K ? qf_e4m3_from_f32(xr[k] / par[0]) : (uint8_t)0;
    });
}

// ---- the tile: the product transposed, weights the mma's A ---------------------------------
// yᵀ = W·xᵀ: a CTA holds ROWS weight rows (the mma's 16-row A tiles) × TOK tokens (its 8-token
// B columns), so a CTA at small M still covers many weight rows and every weight byte is read
// once. K goes in k-steps of one 128-column scale block: each k-step's partial sums are promoted
// at its end (DeepGEMM's rule) and no k-step straddles two blocks, whatever K.
//
// Both operands are fp8 codes in global memory (the quantizer's m × lda activations, 16-byte
// aligned rows; the weights' N × K values in place), so a k-step is pure 16-byte cp.async:
// STAGES k-steps in flight, one barrier per k-step, nothing decoded into shared memory. A
// weight row's 128 bytes lie in the 16-byte windows around them (gemm_skinny.cuh's staging,
// alignment-free whatever K): at byte o_r = (n·K) & 15 of its SEG-byte slot, the same for every
// k-step of the row.
//
// An instance: ROWS weight rows × TOK tokens per CTA on WR × WT warps (each ROWS / WR rows ×
// TOK / WT tokens), STAGES k-steps in flight. Shared memory is dynamic: STAGES slots of
// (ROWS + TOK) rows of SEG bytes, then the f16 body's two 256-entry code tables.
template <int ROWS_, int TOK_, int WR_, int WT_, int STAGES_>
struct qf_fp8_cfg {
    static constexpr int ROWS = ROWS_, TOK = TOK_, WR = WR_, WT = WT_, STAGES = STAGES_;
    static constexpr int BK = QF_FP8_GROUP, KSPLIT = BK;  // split-k ranges are whole blocks
    static constexpr int NW = WR * WT, NTH = 32 * NW;
    static constexpr int WROWS = ROWS / WR, WTOK = TOK / WT;  // one warp's tile
    static constexpr int RT = WROWS / 16, MT = WTOK / 8;      // its mma tiles
    static constexpr int SEG = BK + 16;  // 9 windows; 16·odd: 8 rows start in distinct banks
    static constexpr int SLOT = (ROWS + TOK) * SEG;
    static constexpr int SMEM_BYTES = STAGES * SLOT + 2 * 256 * 2;
    static_assert(RT >= 1 && WROWS % 16 == 0 && WTOK % 8 == 0 && MT >= 1 && STAGES >= 2, "whole mma tiles");
    static_assert(QF_FP8_GROUP % ROWS == 0, "a CTA's weight rows lie in one 128-row scale band");
};

// Four codes at p as one register, byte 0 first: warp.cuh's qf_ld_quad where p is 4-byte
// aligned (ALIGNED), else common.cuh's qf_load_u32 (two aligned loads and a funnel shift).
template <bool ALIGNED>
QF_HD uint32_t qf_ld_quad_at(const uint8_t* p) {
    if constexpr (ALIGNED) return qf_ld_quad(reinterpret_cast<const int8_t*>(p));
    else return qf_load_u32(p);
}

// D = A·B + C for the warp, A 16 × 32 weight codes of WA, B 32 × 8 e4m3 activation codes, f32
// accumulators, the s8 m16n8k32 fragment layout. sm_89+ only; the host model multiplies exactly
// and sums each output's 32 products in k order (the device's order is unspecified, and its fp8
// accumulation keeps fewer bits: the tests' tolerances say so).
template <class WA>
QF_HD void qf_mma_m16n8k32_f8(qf_frag_c* d, const qf_frag_a8* a, const qf_frag_b8* b) {
#ifdef __CUDA_ARCH__
#if __CUDA_ARCH__ >= 890
    if constexpr (!WA::E5M2) {
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d->r[0]), "+f"(d->r[1]), "+f"(d->r[2]), "+f"(d->r[3])
            : "r"(a->r[0]), "r"(a->r[1]), "r"(a->r[2]), "r"(a->r[3]), "r"(b->r[0]), "r"(b->r[1]));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d->r[0]), "+f"(d->r[1]), "+f"(d->r[2]), "+f"(d->r[3])
            : "r"(a->r[0]), "r"(a->r[1]), "r"(a->r[2]), "r"(a->r[3]), "r"(b->r[0]), "r"(b->r[1]));
    }
#else
    __trap();  // an fp8 mma in a module below sm_89: the runtime never launches one
#endif
#else
    float A[16][32], B[32][8], C[16][8];
    for (int lane = 0; lane < 32; ++lane) {
        for (int i = 0; i < 16; ++i)
            A[qf_frag_a8_row(lane, i)][qf_frag_a8_col(lane, i)] = WA::value((uint8_t)(a[lane].r[i / 4] >> (8 * (i & 3))));
        for (int i = 0; i < 8; ++i)
            B[qf_frag_b8_row(lane, i)][qf_frag_b_col(lane)] =
                qf_f8_e4m3::value((uint8_t)(b[lane].r[i / 4] >> (8 * (i & 3))));
        for (int i = 0; i < 4; ++i) C[qf_frag_c_row(lane, i)][qf_frag_c_col(lane, i)] = d[lane].r[i];
    }
    for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 4; ++i) {
            const int r = qf_frag_c_row(lane, i), c = qf_frag_c_col(lane, i);
            float s = 0.0f;
            for (int k = 0; k < 32; ++k) s += A[r][k] * B[k][c];
            d[lane].r[i] = C[r][c] + s;
        }
#endif
}

// The two bodies: how a warp multiplies one k-step's staged codes. `quad(row, kq)` gives the
// four codes of weight row `row` (of the warp's tiles, masked past K) at byte kq of the k-step;
// activation codes are read directly (their rows are aligned: byte kq of token slot c).
//
// mma (sm_89+): per 32 K, A's registers are the quads of rows g / g + 8 at 4t and 16 + 4t, B's
// the token's quads at 4t and 16 + 4t (the s8 m16n8k32 layout): one load per register.
template <class W>
struct qf_fp8p_mma {
    static constexpr bool TABLES = false;
    template <class C, class Q>
    QF_HD static void step(qf_frag_c (*acc)[C::MT][QF_LANE_SLOTS], Q&& quad, const uint8_t* xs, int wt, const uint16_t*) {
#pragma unroll 1
        for (int ks = 0; ks < C::BK; ks += 32) {
            qf_frag_a8 a[C::RT][QF_LANE_SLOTS];
            qf_frag_b8 b[C::MT][QF_LANE_SLOTS];
            qf_for_lanes([&](int ls, int lane) {
                const int g = lane >> 2, t = lane & 3;
#pragma unroll
                for (int i = 0; i < C::RT; ++i) {
                    a[i][ls].r[0] = quad(ls, i, 0, ks + 4 * t);
                    a[i][ls].r[1] = quad(ls, i, 1, ks + 4 * t);
                    a[i][ls].r[2] = quad(ls, i, 0, ks + 16 + 4 * t);
                    a[i][ls].r[3] = quad(ls, i, 1, ks + 16 + 4 * t);
                }
#pragma unroll
                for (int j = 0; j < C::MT; ++j) {
                    const uint8_t* p = xs + (wt * C::WTOK + 8 * j + g) * C::SEG + ks + 4 * t;
                    b[j][ls].r[0] = qf_ld_quad_at<true>(p);
                    b[j][ls].r[1] = qf_ld_quad_at<true>(p + 16);
                }
            });
#pragma unroll
            for (int i = 0; i < C::RT; ++i)
#pragma unroll
                for (int j = 0; j < C::MT; ++j) qf_mma_m16n8k32_f8<W>(acc[i][j], a[i], b[j]);
        }
    }
};

// Two codes (bytes 0, 1 of v) as an f16 pair, low first, from a code → f16 table.
QF_HD uint32_t qf_f8_pair(const uint16_t* tab, uint32_t v) {
    return (uint32_t)tab[v & 0xffu] | (uint32_t)tab[(v >> 8) & 0xffu] << 16;
}

// f16 (sm_80): mma.m16n8k16 on codes converted exactly to f16 by table (every e4m3 / e5m2 value
// is an f16 value). K is permuted inside each 16 (a dot product does not care about order, both
// operands follow it): fragment columns 2t, 2t + 1, 2t + 8, 2t + 9 of lane (g, t) are bytes
// 4t … 4t + 3, so each register pair comes from one quad.
template <class W>
struct qf_fp8p_f16 {
    static constexpr bool TABLES = true;
    template <class C, class Q>
    QF_HD static void step(qf_frag_c (*acc)[C::MT][QF_LANE_SLOTS], Q&& quad, const uint8_t* xs, int wt,
                           const uint16_t* tabs) {
        const uint16_t* tw = tabs;
        const uint16_t* ta = tabs + 256;
#pragma unroll
        for (int ks = 0; ks < C::BK; ks += 16) {
            qf_frag_a a[C::RT][QF_LANE_SLOTS];
            qf_frag_b b[C::MT][QF_LANE_SLOTS];
            qf_for_lanes([&](int ls, int lane) {
                const int g = lane >> 2, t = lane & 3;
#pragma unroll
                for (int i = 0; i < C::RT; ++i) {
                    const uint32_t lo = quad(ls, i, 0, ks + 4 * t), hi = quad(ls, i, 1, ks + 4 * t);
                    a[i][ls].r[0] = qf_f8_pair(tw, lo);
                    a[i][ls].r[1] = qf_f8_pair(tw, hi);
                    a[i][ls].r[2] = qf_f8_pair(tw, lo >> 16);
                    a[i][ls].r[3] = qf_f8_pair(tw, hi >> 16);
                }
#pragma unroll
                for (int j = 0; j < C::MT; ++j) {
                    const uint32_t v = qf_ld_quad_at<true>(xs + (wt * C::WTOK + 8 * j + g) * C::SEG + ks + 4 * t);
                    b[j][ls].r[0] = qf_f8_pair(ta, v);
                    b[j][ls].r[1] = qf_f8_pair(ta, v >> 16);
                }
            });
#pragma unroll
            for (int i = 0; i < C::RT; ++i)
#pragma unroll
                for (int j = 0; j < C::MT; ++j) qf_mma_m16n8k16<qf_mma_f16>(acc[i][j], a[i], b[j]);
        }
    }
};

// A k-step's windows of the weight rows: their stride (K bytes) and the step's length.
struct qf_fp8_span {
    long long stride, len;
};

// One CTA: weight rows [tn·ROWS, +ROWS) × tokens [tm·TOK, +TOK) of y (elements of type `out`)
// over the K range [kb, ke) (kb a multiple of 128). xq / xs: the quantizer's codes (m × lda)
// and scales (m × groups); w: N × K value bytes; grid: the f32 scale grid (ceil(N/128) ×
// groups); smem: C::SMEM_BYTES, 16-byte aligned.
template <class P, class W, class C, bool ALIGNED>
QF_HD void qf_gemm_fp8_body(const uint8_t* xq, const float* xsc, const uint8_t* w, const uint8_t* grid, void* y,
                            int out, long long M, long long N, long long K, long long kb, long long ke, long long tm,
                            long long tn, uint8_t* smem) {
    const long long m0 = tm * C::TOK, n0 = tn * C::ROWS;
    const long long groups = qf_fp8_act_groups(K), lda = groups * QF_FP8_GROUP;
    const long long nk = ke > kb ? (ke - kb + C::BK - 1) / C::BK : 0;
    const int nrows = N - n0 < C::ROWS ? (int)(N - n0) : C::ROWS;
    const int ntok = M - m0 < C::TOK ? (int)(M - m0) : C::TOK;
    uint16_t* tabs = reinterpret_cast<uint16_t*>(smem + C::STAGES * C::SLOT);
    if constexpr (P::TABLES) {
        // The f16 body's code tables (W's codes, then e4m3's), visible after the loop's first
        // barrier.
        qf_for_threads<C::NTH>([&](int t) {
            for (int c = t; c < 256; c += C::NTH) {
                tabs[c] = qf_f32_to_f16_bits(W::value((uint8_t)c));
                tabs[256 + c] = qf_f32_to_f16_bits(qf_f8_e4m3::value((uint8_t)c));
            }
        });
    }

    // K-step i into slot i % STAGES: the activations' 128 codes of each token (rows past M are
    // not copied: their products land in columns the epilogue does not store), then the weight
    // rows' windows; one cp.async group.
    auto issue = [&](long long i) {
        const long long k0 = kb + i * C::BK, k1 = ke < k0 + C::BK ? ke : k0 + C::BK;
        uint8_t* slot = smem + (int)(i % C::STAGES) * C::SLOT;
        uint8_t* xs = slot + C::ROWS * C::SEG;
        qf_for_threads<C::NTH>([&](int t) {
            for (int e = t; e < ntok * (C::BK / 16); e += C::NTH) {
                const int r = e / (C::BK / 16), v = e % (C::BK / 16);
                qf_cp_async16(xs + r * C::SEG + 16 * v, xq + (m0 + r) * lda + k0 + 16 * v, 16);
            }
        });
        const qf_fp8_span sp{K, k1 - k0};
        qf_gemm_stage_rows<C::NTH, C::SEG>(slot, w, N * K, sp, n0 * K + k0, nrows);
    };

    qf_frag_c pacc[QF_WARP_SLOTS(C::NW)][C::RT][C::MT][QF_LANE_SLOTS];
    qf_frag_c facc[QF_WARP_SLOTS(C::NW)][C::RT][C::MT][QF_LANE_SLOTS];
    qf_zero_acc<C::NW, C::RT, C::MT>(pacc);
    qf_zero_acc<C::NW, C::RT, C::MT>(facc);

    // Prologue: k-steps 0 … STAGES − 2 in flight (a group each, empty past the range).
#pragma unroll 1
    for (int i = 0; i < C::STAGES - 1; ++i) {
        if (i < nk) issue(i);
        else qf_cp_async_commit();
    }
#pragma unroll 1
    for (long long i = 0; i < nk; ++i) {
        // K-step i landed (at most STAGES − 2 younger groups pending), visible to the CTA, and
        // every warp done with slot (i − 1) % STAGES, which k-step i + STAGES − 1 takes.
        qf_cp_async_wait<C::STAGES - 2>();
        qf_sync();
        if (i + C::STAGES - 1 < nk) issue(i + C::STAGES - 1);
        else qf_cp_async_commit();
        const long long k0 = kb + i * C::BK, kg = k0 / QF_FP8_GROUP;
        const int rem = (int)((ke < k0 + C::BK ? ke : k0 + C::BK) - k0);  // codes of the step
        const uint8_t* slot = smem + (int)(i % C::STAGES) * C::SLOT;
        const uint8_t* xs = slot + C::ROWS * C::SEG;
        qf_for_warps<C::NW>([&](int ws, int wid) {
            const int wr = wid / C::WT, wt = wid % C::WT;
            // Each of the lane's 2·RT weight rows: its codes in the slot (a row past N reads row
            // 0's: only its own output row sees them, and the epilogue does not store it).
            const uint8_t* pr[C::RT][2][QF_LANE_SLOTS];
            qf_for_lanes([&](int ls, int lane) {
#pragma unroll
                for (int ii = 0; ii < C::RT; ++ii)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int r = wr * C::WROWS + 16 * ii + 8 * h + (lane >> 2);
                        const int rr = r < nrows ? r : 0;
                        pr[ii][h][ls] = slot + rr * C::SEG + (int)(((n0 + rr) * K) & 15);
                    }
            });
            // A quad of weight codes: bytes kq … kq + 3 of the step, those at or past the step's
            // end (K's end) zeroed — the bytes there are the next row's or stale, and a NaN code
            // times a zero activation would be NaN.
            auto quad = [&](int ls, int ii, int h, int kq) -> uint32_t {
                const uint32_t v = qf_ld_quad_at<ALIGNED>(pr[ii][h][ls] + kq);
                if (rem >= C::BK) return v;
                const int left = rem - kq;
                return left >= 4 ? v : left <= 0 ? 0u : v & ((1u << (8 * left)) - 1u);
            };
            // The block's scales: the weights' one (the CTA's rows lie in one 128-row band) and
            // the lane's tokens', loaded before the products.
            const float sw = qf_load_f32(grid + 4 * ((n0 / QF_FP8_GROUP) * groups + kg));
            float sav[C::MT][2][QF_LANE_SLOTS];
            qf_for_lanes([&](int ls, int lane) {
#pragma unroll
                for (int j = 0; j < C::MT; ++j)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const long long m = m0 + wt * C::WTOK + 8 * j + 2 * (lane & 3) + c;
                        sav[j][c][ls] = m < M ? xsc[m * groups + kg] : 0.0f;
                    }
            });
            P::template step<C>(pacc[ws], quad, xs, wt, tabs);
            // Promotion (DeepGEMM's, qforge-fp8's dot_row): acc += (partial · s_w) · s_a.
            qf_for_lanes([&](int ls, int lane) {
                qf_for_acc_t<C::RT, C::MT>(lane, 0, 0, [&](int ii, int j, int e, int, int) {
                    float& p = pacc[ws][ii][j][ls].r[e];
                    facc[ws][ii][j][ls].r[e] += p * sw * sav[j][e & 1][ls];
                    p = 0.0f;
                });
            });
        });
    }
    qf_cp_async_wait<0>();

    // Epilogue: every lane's promoted accumulators inside M × N.
    qf_for_warps<C::NW>([&](int ws, int wid) {
        const int r0 = (wid / C::WT) * C::WROWS, c0 = (wid % C::WT) * C::WTOK;
        qf_for_lanes([&](int ls, int lane) {
            qf_for_acc_t<C::RT, C::MT>(lane, r0, c0, [&](int ii, int j, int e, int r, int c) {
                const long long n = n0 + r, m = m0 + c;
                if (m < M && n < N) qf_gemm_store(y, out, m * N + n, facc[ws][ii][j][ls].r[e]);
            });
        });
    });
}

// One CTA of instance C, split z of `splits` (its partial sums into y + z·M·N, f32, when
// splits > 1): aligned quads where every weight row starts 4-byte aligned (K a multiple of 4).
template <class P, class W, class C>
QF_HD void qf_gemm_fp8_tile(const uint8_t* xq, const float* xs, const uint8_t* w, const uint8_t* grid, void* y,
                            int out, long long M, long long N, long long K, int splits, int z, long long tm,
                            long long tn, uint8_t* smem) {
    long long kb, ke;
    qf_gemm_krange<C>(K, splits, z, &kb, &ke);
    char* yz = static_cast<char*>(y) + (long long)z * M * N * qf_gemm_out_bytes(out);
    if ((K & 3) == 0) qf_gemm_fp8_body<P, W, C, true>(xq, xs, w, grid, yz, out, M, N, K, kb, ke, tm, tn, smem);
    else qf_gemm_fp8_body<P, W, C, false>(xq, xs, w, grid, yz, out, M, N, K, kb, ke, tm, tn, smem);
}

#ifdef __CUDACC__
// The activation quantizer: grid M · ceil(K / 128) (CTA i: row i / groups, group i % groups),
// block QF_FP8_ACT_THREADS.
#define QF_QUANTIZE_FP8_1X128_KERNEL                                                                   \
    extern "C" __global__ void __launch_bounds__(QF_FP8_ACT_THREADS)                                   \
        qforge_quantize_fp8_1x128(const float* x, uint8_t* q, float* s, long long K) {                 \
        __shared__ float red[QF_FP8_ACT_THREADS], par[1];                                              \
        const long long groups = qf_fp8_act_groups(K);                                                 \
        qf_quantize_fp8_1x128_group(x, q, s, K, blockIdx.x / groups, blockIdx.x % groups, red, par);   \
    }
// qforge_gemm_<format>_fp8_<body>_<instance>: instance I of qforge-tiling's FP8_GEMM_TILES
// (codegen typedefs it as qf_fp8_cfg_<I>), named TNAME, on grid (ceil(N / ROWS), ceil(M / TOK),
// splits), block its NTH threads, its SMEM_BYTES of dynamic shared memory. With splits > 1,
// split z writes f32 partial sums to y + z·M·N.
#define QF_GEMM_FP8_KERNEL(NAME, BODY, W_, I, TNAME)                                                   \
    extern "C" __global__ void __launch_bounds__(qf_fp8_cfg_##I::NTH)                                  \
        qforge_gemm_##NAME##_fp8_##BODY##_##TNAME(const uint8_t* xq, const float* xs, const uint8_t* w, \
                                                   const uint8_t* grid, void* y, long long M, long long N, \
                                                   long long K, int splits, int out) {                 \
        extern __shared__ __align__(16) uint8_t qf_fp8_smem[];                                         \
        qf_gemm_fp8_tile<qf_fp8p_##BODY<W_>, W_, qf_fp8_cfg_##I>(xq, xs, w, grid, y, out, M, N, K, splits, \
                                                                 (int)blockIdx.z, (long long)blockIdx.y, \
                                                                 (long long)blockIdx.x, qf_fp8_smem);   \
    }
#endif

// Host wrappers: the CTAs of instance `inst` one after the other, every split z into
// y + z·M·N (f32 partial sums where splits > 1), in one heap "shared memory"; no cp.async may
// be left in flight (aborts otherwise).
#define QF_HOST_FP8_CASE(I, CFG)                                                                        \
    case I: {                                                                                           \
        typedef CFG C;                                                                                  \
        std::vector<uint8_t> sm(C::SMEM_BYTES + 16);                                                    \
        uint8_t* smem = sm.data() + ((16 - (reinterpret_cast<uintptr_t>(sm.data()) & 15)) & 15);         \
        for (int z = 0; z < splits; ++z)                                                                \
            for (long long tm = 0; tm < (M + C::TOK - 1) / C::TOK; ++tm)                                \
                for (long long tn = 0; tn < (N + C::ROWS - 1) / C::ROWS; ++tn)                          \
                    qf_gemm_fp8_tile<P, W, C>(xq, xs, w, grid, y, out, M, N, K, splits, z, tm, tn, smem); \
        break;                                                                                          \
    }
#define QF_HOST_GEMM_FP8(NAME, BODY, W_)                                                               \
    extern "C" void qf_host_gemm_##NAME##_fp8_##BODY(const uint8_t* xq, const float* xs, const uint8_t* w, \
                                                      const uint8_t* grid, void* y, long long M, long long N, \
                                                      long long K, int splits, int out, int inst) {    \
        typedef W_ W;                                                                                  \
        typedef qf_fp8p_##BODY<W> P;                                                                   \
        switch (inst) { QF_FP8_INSTANCES(QF_HOST_FP8_CASE) }                                            \
        if (qf_cp_async_pending() != 0) {                                                              \
            fprintf(stderr, "qf_host_gemm fp8: %zu cp.async copies never waited for\n", qf_cp_async_pending()); \
            abort();                                                                                   \
        }                                                                                              \
    }
#define QF_HOST_QUANTIZE_FP8_1X128                                                                     \
    extern "C" void qf_host_quantize_fp8_1x128(const float* x, uint8_t* q, float* s, long long M, long long K) { \
        float red[QF_FP8_ACT_THREADS], par[1];                                                         \
        for (long long r = 0; r < M; ++r)                                                              \
            for (long long g = 0; g < qf_fp8_act_groups(K); ++g)                                       \
                qf_quantize_fp8_1x128_group(x, q, s, K, r, g, red, par);                               \
    }                                                                                                  \
    extern "C" void qf_host_fp8_codes(int kind, float* values) {                                       \
        for (int c = 0; c < 256; ++c)                                                                  \
            values[c] = kind == 0 ? qf_f8_e4m3::value((uint8_t)c) : qf_f8_e5m2::value((uint8_t)c);      \
    }                                                                                                  \
    extern "C" uint8_t qf_host_e4m3_from_f32(float x) { return qf_e4m3_from_f32(x); }
