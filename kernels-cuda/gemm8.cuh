// qforge kernels-cuda/gemm8.cuh: the transposed int8 tensor-core tile loop of the integer-dot
// GEMMs (this file's A8W4DQ policy and gemm_q8.cuh's GGUF one), and A8W4DQ itself: the GEMM
// of formats with an integer group dot (int4g weights, `ActKind::Int8Dyn` activations):
//   y[m][n] = scale_a[m] · Σ_g s_g[n] · Σ_{k in g} (qa[m][k] − zp[m]) · qw[n][k]
// exactly the CPU's `--act-quant int8-dyn` dot (qforge-int4g's A8W4Dot): the integer sums
// are exact (mma.m16n8k32 s8 × s8 → s32, the zero point taken out with the weight codes'
// sum), each group's sum is converted to f32, multiplied by the group's scale and added in
// f32 in group order, the activation scale applied once at the end. The activations are
// quantized on the device by qf_quantize_i8dyn_row (torchao's per-token asymmetric rule,
// qforge-cpu's `int8_dyn_params`), so the whole product is the CPU's, bit for bit.
//
// What a format provides (its traits struct): `typedef … CODES;` with
//   static void codes8(const uint8_t* values, int group, int i, uint32_t* out)
// — the signed codes of elements i..i+7 (i a multiple of 8) of one group of `group`
// elements whose values start at `values`, as two packed words (byte j of out[t]: element
// i + 4t + j). The rest comes from the registry's
// `Layout::Groups` at run time: the group size (a power of two ≥ 32, so a 32-wide k-step
// never straddles two groups), the group's bytes and the scale's dtype (the scale leads the
// group), so one kernel serves every variant of the format.
//
// Written over warp.cuh's interface like gemm.cuh: the host wrappers run the same tile.
#pragma once
#include "gemm.cuh"

// The scale that leads a group, by `DType::ALL` index (0 f32, 1 f16, 2 bf16).
QF_HD float qf_group_scale(const uint8_t* g, int sdt) {
    return sdt == 0 ? qf_load_f32(g) : sdt == 1 ? qf_load_f16(g) : qf_load_bf16(g);
}
QF_HD int qf_group_scale_bytes(int sdt) { return sdt == 0 ? 4 : 2; }

QF_HD void qf_st_quad(int8_t* p, uint32_t v) {
#ifdef __CUDA_ARCH__
    *reinterpret_cast<uint32_t*>(p) = v;
#else
#pragma unroll
    for (int i = 0; i < 4; ++i) p[i] = (int8_t)(uint8_t)(v >> (8 * i));
#endif
}

// ---- per-token asymmetric int8 activations (qforge-cpu `int8_dyn_params`, `QuantAct::new`)
// One CTA of NTH threads per row: q[row·lda + k] for k < lda (0 past K; lda a multiple of
// 128, the tile loop's k-step), scale[row], zp[row].
// red: 2·NTH floats of shared memory, par: 3 floats.
template <int NTH>
QF_HD void qf_quantize_i8dyn_row(const float* x, int8_t* q, float* scale, int* zp, long long K, long long lda,
                                 long long row, float* red, float* par) {
    const float* xr = x + row * K;
    qf_for_threads<NTH>([&](int t) {
        float mn = 0.0f, mx = 0.0f;  // the range includes 0
        for (long long k = t; k < K; k += NTH) {
            mn = fminf(mn, xr[k]);
            mx = fmaxf(mx, xr[k]);
        }
        red[t] = mn;
        red[NTH + t] = mx;
    });
    qf_sync();
    qf_for_threads<NTH>([&](int t) {
        if (t != 0) return;
        float mn = 0.0f, mx = 0.0f;
        for (int i = 0; i < NTH; ++i) {
            mn = fminf(mn, red[i]);
            mx = fmaxf(mx, red[NTH + i]);
        }
        float s = (mx - mn) / 255.0f;
        s = s > 1.1920929e-7f ? s : 1.1920929e-7f;  // f32::EPSILON
        const float dmin = mn / s, dmax = mx / s;
        float z = (-128.0f + dmin) + (127.0f + dmax) > 0.0f ? -128.0f - dmin : 127.0f - dmax;
        z = rintf(fminf(fmaxf(z, -128.0f), 127.0f));
        par[0] = s;
        par[1] = 1.0f / s;
        par[2] = z;
        scale[row] = s;
        zp[row] = (int)z;
    });
    qf_sync();
    qf_for_threads<NTH>([&](int t) {
        const float inv = par[1], z = par[2];
        for (long long k = t; k < lda; k += NTH) {
            const float v = rintf(xr[k < K ? k : 0] * inv + z);
            q[row * lda + k] = k < K ? (int8_t)fminf(fmaxf(v, -128.0f), 127.0f) : (int8_t)0;
        }
    });
}

// ---- the transposed int8 tile loop ---------------------------------------------------------
// yᵀ = W·xᵀ as in gemm_fp8.cuh: a CTA holds ROWS weight rows (the mma's 16-row A tiles) × TOK
// tokens (its 8-token B columns), so at small M a CTA still covers many weight rows and every
// weight block is decoded once. K goes in k-steps of BK = 128, four 32-element sub-blocks;
// each sub-block is one mma.m16n8k32 s8 per fragment tile into s32 accumulators, then the
// policy folds those into f32 accumulators (per sub-block for q8, per group for A8W4DQ).
//
// Two streams, one barrier per k-step:
//  - the activations: int8 codes in global memory (the quantizer's m × lda rows, lda a
//    multiple of 128) and, where the policy has them (P::ACT_SIDE), each sub-block's two f32
//    (q8: scale and sum), copied with 16-byte cp.async STAGES k-steps deep;
//  - the weights: each k-step's ROWS × 4 (row, sub-block) items decoded by the policy straight
//    from their blocks into one of two shared int8 tiles with four f32 of side data per item
//    (q8: d, m or the halves' d, d, m, m; A8W4DQ: the group's scale, the sub-block's code
//    sum), every thread a few items;
//    k-step i + 1 is decoded while the warps multiply k-step i.
// Every edge is predicated (rows past N decode to zero codes, tokens past M are not copied and
// their columns not stored, sub-blocks past the range are skipped), so any M, N, K works.
//
// An instance: ROWS weight rows × TOK tokens on WR × WT warps, STAGES k-steps of activations
// in flight; qforge-tiling's I8_GEMM_TILES (codegen typedefs instance i as qf_i8_cfg_<i>).
// Shared memory is dynamic, SMEM_BYTES (qforge_tiling::i8_smem_bytes): STAGES activation slots
// (TOK rows of SEG codes, then TOK × 4 pairs of f32), then two weight tiles (ROWS rows of SEG
// codes, then ROWS × 4 pairs of f32).
template <int ROWS_, int TOK_, int WR_, int WT_, int STAGES_>
struct qf_i8_cfg {
    static constexpr int ROWS = ROWS_, TOK = TOK_, WR = WR_, WT = WT_, STAGES = STAGES_;
    static constexpr int BK = 128, SUBS = BK / 32, KSPLIT = BK;  // split-k ranges: whole k-steps
    static constexpr int NW = WR * WT, NTH = 32 * NW;
    static constexpr int WROWS = ROWS / WR, WTOK = TOK / WT;  // one warp's tile
    static constexpr int RT = WROWS / 16, MT = WTOK / 8;      // its mma tiles
    static constexpr int SEG = BK + 16;    // 16·odd bytes: 8 consecutive rows in distinct banks
    static constexpr int SIDE = SUBS * 8;    // per token: two f32 per sub-block
    static constexpr int WSIDE = SUBS * 16;  // per weight row: four f32 per sub-block
    static constexpr int SLOT = TOK * (SEG + SIDE), WBUF = ROWS * (SEG + WSIDE);
    static constexpr int SMEM_BYTES = STAGES * SLOT + 2 * WBUF;
    static constexpr int ITEMS = ROWS * SUBS / NTH;  // decoded (row, sub-block) items per thread
    static_assert(RT >= 1 && WROWS % 16 == 0 && WTOK % 8 == 0 && MT >= 1 && STAGES >= 2, "whole mma tiles");
    static_assert(ITEMS * NTH == ROWS * SUBS, "whole decode items per thread");
};

// 32 codes as eight packed words (byte j of word t: code 4t + j) to shared memory at dst
// (16-byte aligned): two 16-byte stores on the device.
QF_HD void qf_st_codes32(int8_t* dst, const uint32_t* w) {
#ifdef __CUDA_ARCH__
    reinterpret_cast<uint4*>(dst)[0] = make_uint4(w[0], w[1], w[2], w[3]);
    reinterpret_cast<uint4*>(dst)[1] = make_uint4(w[4], w[5], w[6], w[7]);
#else
    for (int i = 0; i < 32; ++i) dst[i] = (int8_t)(uint8_t)(w[i / 4] >> 8 * (i % 4));
#endif
}

// The codes of a sub-block's eight packed words from `left` on set to 0 (the codes past K:
// the block's padding, which the activations' zero codes would meet anyway, except that a
// zero-point correction or a code sum counts them).
QF_HD void qf_mask_codes32(uint32_t* q, long long left) {
    if (left >= 32) return;
    for (int t = 0; t < 8; ++t) {
        const long long n = left - 4 * t;  // codes of word t before K
        q[t] = n >= 4 ? q[t] : n <= 0 ? 0u : q[t] & ((1u << (8 * n)) - 1u);
    }
}

// One CTA: weight rows [tn·ROWS, +ROWS) × tokens [tm·TOK, +TOK) of y (elements of type `out`)
// over the K range [kb, ke) (kb a multiple of 128). The policy P provides
//   ACT_SIDE                      whether activation rows have per-sub-block side data;
//   act_codes(m, k0), act_side(m, k0)   token m's 128 codes / 4 f32 pairs from k0 (16-byte
//                                 aligned global addresses);
//   tok_const(m)                  a per-token int held in registers (A8W4DQ: the zero point);
//   HALVES                        whether a weight sub-block has a scale per 16-element half
//                                 (its halves are multiplied and folded one after the other);
//   HALF_SUMS                     whether the fold needs each token's code sum over the half;
//   decode(row, K, k, w, side)    weight row `row`'s codes k … k + 31 (0 past K) as eight
//                                 packed words and four f32 of side data;
//   fold(wside, tside, tz, k, h, hsum, acc, f)   a sub-block's (half h's) integer sums into f
//                                 (resetting acc where it folds);
//   result(f, m)                  the output value.
// smem: C::SMEM_BYTES, 16-byte aligned.
template <class P, class C>
QF_HD void qf_gemm_i8t_body(const P& p, void* y, int out, long long M, long long N, long long K, long long kb,
                            long long ke, long long tm, long long tn, uint8_t* smem) {
    const long long m0 = tm * C::TOK, n0 = tn * C::ROWS;
    const long long nk = ke > kb ? (ke - kb + C::BK - 1) / C::BK : 0;
    const int ntok = M - m0 < C::TOK ? (int)(M - m0) : C::TOK;
    uint8_t* wbuf = smem + C::STAGES * C::SLOT;

    // K-step i's activations into slot i % STAGES (rows past M are not copied: their products
    // land in columns the epilogue does not store): one cp.async group.
    auto issue = [&](long long i) {
        const long long k0 = kb + i * C::BK;
        uint8_t* xs = smem + (int)(i % C::STAGES) * C::SLOT;
        uint8_t* side = xs + C::TOK * C::SEG;
        qf_for_threads<C::NTH>([&](int t) {
            for (int e = t; e < ntok * (C::BK / 16); e += C::NTH) {
                const int r = e / (C::BK / 16), v = e % (C::BK / 16);
                qf_cp_async16(xs + r * C::SEG + 16 * v, p.act_codes(m0 + r, k0) + 16 * v, 16);
            }
            if constexpr (P::ACT_SIDE) {
                for (int e = t; e < ntok * (C::SIDE / 16); e += C::NTH) {
                    const int r = e / (C::SIDE / 16), v = e % (C::SIDE / 16);
                    qf_cp_async16(side + r * C::SIDE + 16 * v,
                                  reinterpret_cast<const uint8_t*>(p.act_side(m0 + r, k0)) + 16 * v, 16);
                }
            }
        });
        qf_cp_async_commit();
    };

    // K-step i's weights decoded into tile i & 1: thread t's items t + j·NTH, (row, sub-block)
    // = (item / 4, item % 4), so a warp reads 8 rows' consecutive sub-blocks.
    auto decode = [&](long long i) {
        const long long k0 = kb + i * C::BK;
        int8_t* ws = reinterpret_cast<int8_t*>(wbuf + (int)(i & 1) * C::WBUF);
        float* wsd = reinterpret_cast<float*>(ws + C::ROWS * C::SEG);
        qf_for_threads<C::NTH>([&](int t) {
#pragma unroll
            for (int j = 0; j < C::ITEMS; ++j) {
                const int it = t + j * C::NTH, r = it / C::SUBS, s = it % C::SUBS;
                const long long k = k0 + 32 * s;
                uint32_t q[8];
                float side[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                if (n0 + r < N && k < ke) {
                    p.decode(n0 + r, K, k, q, side);
                } else {
#pragma unroll
                    for (int u = 0; u < 8; ++u) q[u] = 0u;
                }
                qf_st_codes32(ws + r * C::SEG + 32 * s, q);
#pragma unroll
                for (int u = 0; u < 4; ++u) wsd[4 * (r * C::SUBS + s) + u] = side[u];
            }
        });
    };

    qf_frag_c32 iacc[QF_WARP_SLOTS(C::NW)][C::RT][C::MT][QF_LANE_SLOTS];
    qf_frag_c facc[QF_WARP_SLOTS(C::NW)][C::RT][C::MT][QF_LANE_SLOTS];
    qf_zero_acc<C::NW, C::RT, C::MT>(iacc);
    qf_zero_acc<C::NW, C::RT, C::MT>(facc);
    // The per-token ints of the lane's tokens (2 per 8-token tile), for the whole K range.
    int tz[QF_WARP_SLOTS(C::NW)][C::MT][2][QF_LANE_SLOTS];
    qf_for_warps<C::NW>([&](int ws, int wid) {
        qf_for_lanes([&](int ls, int lane) {
#pragma unroll
            for (int j = 0; j < C::MT; ++j)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const long long m = m0 + (wid % C::WT) * C::WTOK + 8 * j + 2 * (lane & 3) + c;
                    tz[ws][j][c][ls] = m < M ? p.tok_const(m) : 0;
                }
        });
    });

    // K-step i's products from slot i % STAGES and weight tile i & 1, sub-block by sub-block,
    // each folded by the policy.
    auto multiply = [&](long long i) {
        const long long k0 = kb + i * C::BK;
        const int8_t* xs = reinterpret_cast<const int8_t*>(smem + (int)(i % C::STAGES) * C::SLOT);
        const float* xsd = reinterpret_cast<const float*>(xs + C::TOK * C::SEG);
        const int8_t* ws = reinterpret_cast<const int8_t*>(wbuf + (int)(i & 1) * C::WBUF);
        const float* wsd = reinterpret_cast<const float*>(ws + C::ROWS * C::SEG);
        qf_for_warps<C::NW>([&](int wsl, int wid) {
            const int r0 = (wid / C::WT) * C::WROWS, c0 = (wid % C::WT) * C::WTOK;
#pragma unroll 1
            for (int s = 0; s < C::SUBS; ++s) {
                const long long k = k0 + 32 * s;
                if (k >= ke) break;  // CTA-uniform: the range's last k-step may be partial
                qf_frag_a8 a[C::RT][QF_LANE_SLOTS];
                qf_frag_b8 b[C::MT][QF_LANE_SLOTS];
                qf_for_lanes([&](int ls, int lane) {
                    const int g = lane >> 2, t = lane & 3;
#pragma unroll
                    for (int ii = 0; ii < C::RT; ++ii) {
                        const int8_t* pr = ws + (r0 + 16 * ii + g) * C::SEG + 32 * s + 4 * t;
                        a[ii][ls].r[0] = qf_ld_quad(pr);
                        a[ii][ls].r[1] = qf_ld_quad(pr + 8 * C::SEG);
                        a[ii][ls].r[2] = qf_ld_quad(pr + 16);
                        a[ii][ls].r[3] = qf_ld_quad(pr + 8 * C::SEG + 16);
                    }
#pragma unroll
                    for (int j = 0; j < C::MT; ++j) {
                        const int8_t* pb = xs + (c0 + 8 * j + g) * C::SEG + 32 * s + 4 * t;
                        b[j][ls].r[0] = qf_ld_quad(pb);
                        b[j][ls].r[1] = qf_ld_quad(pb + 16);
                    }
                });
                // The sub-block's products (HALVES: its two 16-element halves one after the other,
                // the other half's A registers zeroed: registers 0, 1 hold columns 4t … 4t + 3,
                // registers 2, 3 columns 16 + 4t …), each folded.
#pragma unroll
                for (int h = 0; h < (P::HALVES ? 2 : 1); ++h) {
                    qf_frag_a8 ah[C::RT][QF_LANE_SLOTS];
                    qf_for_lanes([&](int ls, int) {
#pragma unroll
                        for (int ii = 0; ii < C::RT; ++ii)
#pragma unroll
                            for (int q = 0; q < 4; ++q) ah[ii][ls].r[q] = !P::HALVES || q / 2 == h ? a[ii][ls].r[q] : 0u;
                    });
#pragma unroll
                    for (int ii = 0; ii < C::RT; ++ii)
#pragma unroll
                        for (int j = 0; j < C::MT; ++j) qf_mma_m16n8k32_s8(iacc[wsl][ii][j], ah[ii], b[j]);
                    // HALF_SUMS: each token's code sum over the half, from an mma with an A of ones
                    // in the half's columns (every row of C holds it; the lane's tokens 2t, 2t + 1
                    // are registers 0, 1).
                    qf_frag_c32 hs[C::MT][QF_LANE_SLOTS];
                    if constexpr (P::HALF_SUMS) {
                        qf_frag_a8 ones[QF_LANE_SLOTS];
                        qf_for_lanes([&](int ls, int) {
#pragma unroll
                            for (int q = 0; q < 4; ++q) ones[ls].r[q] = q / 2 == h ? 0x01010101u : 0u;
#pragma unroll
                            for (int j = 0; j < C::MT; ++j)
#pragma unroll
                                for (int e = 0; e < 4; ++e) hs[j][ls].r[e] = 0;
                        });
#pragma unroll
                        for (int j = 0; j < C::MT; ++j) qf_mma_m16n8k32_s8(hs[j], ones, b[j]);
                    }
                    qf_for_lanes([&](int ls, int lane) {
                        qf_for_acc_t<C::RT, C::MT>(lane, r0, c0, [&](int ii, int j, int e, int r, int c) {
                            const int hsum = P::HALF_SUMS ? hs[j][ls].r[e & 1] : 0;
                            p.fold(wsd + 4 * (r * C::SUBS + s), xsd + 2 * (c * C::SUBS + s), tz[wsl][j][e & 1][ls],
                                   k, h, hsum, iacc[wsl][ii][j][ls].r[e], facc[wsl][ii][j][ls].r[e]);
                        });
                    });
                }
            }
        });
    };

    // Prologue: k-steps 0 … STAGES − 2 in flight (a group each, empty past the range), k-step
    // 0's weights decoded.
#pragma unroll 1
    for (int i = 0; i < C::STAGES - 1; ++i) {
        if (i < nk) issue(i);
        else qf_cp_async_commit();
    }
    if (nk > 0) decode(0);
#pragma unroll 1
    for (long long i = 0; i < nk; ++i) {
        // K-step i's activations landed (at most STAGES − 2 younger groups pending) and its
        // weights decoded, visible to the CTA; every warp done with k-step i − 1's slot (which
        // k-step i + STAGES − 1 takes) and weight tile (which k-step i + 1 takes).
        qf_cp_async_wait<C::STAGES - 2>();
        qf_sync();
        if (i + C::STAGES - 1 < nk) issue(i + C::STAGES - 1);
        else qf_cp_async_commit();
        multiply(i);
        if (i + 1 < nk) decode(i + 1);
    }
    qf_cp_async_wait<0>();

    // Epilogue: every lane's folded accumulators inside M × N.
    qf_for_warps<C::NW>([&](int ws, int wid) {
        const int r0 = (wid / C::WT) * C::WROWS, c0 = (wid % C::WT) * C::WTOK;
        qf_for_lanes([&](int ls, int lane) {
            qf_for_acc_t<C::RT, C::MT>(lane, r0, c0, [&](int ii, int j, int e, int r, int c) {
                const long long n = n0 + r, m = m0 + c;
                if (m < M && n < N) qf_gemm_store(y, out, m * N + n, p.result(facc[ws][ii][j][ls].r[e], m));
            });
        });
    });
}

// One CTA of instance C, split z of `splits` (its partial sums into y + z·M·N, f32, when
// splits > 1).
template <class P, class C>
QF_HD void qf_gemm_i8t_tile(const P& p, void* y, int out, long long M, long long N, long long K, int splits, int z,
                            long long tm, long long tn, uint8_t* smem) {
    long long kb, ke;
    qf_gemm_krange<C>(K, splits, z, &kb, &ke);
    char* yz = static_cast<char*>(y) + (long long)z * M * N * qf_gemm_out_bytes(out);
    qf_gemm_i8t_body<P, C>(p, yz, out, M, N, K, kb, ke, tm, tn, smem);
}

// Host: instance C's CTAs one after the other (every split z), tile(C(), z, tm, tn, smem) each,
// in one heap "shared memory" (16-byte aligned, as the device's).
template <class C, class Fn>
void qf_host_i8t_grid(long long M, long long N, int splits, Fn&& tile) {
    std::vector<uint8_t> sm(C::SMEM_BYTES + 16);
    uint8_t* smem = sm.data() + ((16 - (reinterpret_cast<uintptr_t>(sm.data()) & 15)) & 15);
    for (int z = 0; z < splits; ++z)
        for (long long tm = 0; tm < (M + C::TOK - 1) / C::TOK; ++tm)
            for (long long tn = 0; tn < (N + C::ROWS - 1) / C::ROWS; ++tn) tile(C(), z, tm, tn, smem);
}
#define QF_HOST_I8T_CASE(I, CFG)                        \
    case I:                                             \
        qf_host_i8t_grid<CFG>(M, N, splits, tile);      \
        break;
// The int8 instances' shared memory as the kernels lay it out (gemm.cuh's QF_HOST_SMEM_CASE).
#define QF_HOST_I8_SMEM                                                 \
    extern "C" long long qf_host_i8_smem(int inst) {                    \
        switch (inst) { QF_I8_INSTANCES(QF_HOST_SMEM_CASE) }            \
        return -1;                                                      \
    }
// The end of a host wrapper: no cp.async may be left in flight (aborts otherwise).
#define QF_HOST_I8T_CHECK(WHAT)                                                                         \
    if (qf_cp_async_pending() != 0) {                                                                   \
        fprintf(stderr, WHAT ": %zu cp.async copies never waited for\n", qf_cp_async_pending());       \
        abort();                                                                                        \
    }

// ---- A8W4DQ: the policy of the integer group dot ------------------------------------------
// xq: M × lda int8 (0 past K), xs / xz: per-row scale and zero point; w: N rows of
// ceil(K / group) groups of gbytes bytes (scale of dtype sdt, then the values). Side data:
// the weight sub-block's (group scale, code sum); the token's zero point in registers.
template <class F>
struct qf_a8_policy {
    static constexpr bool ACT_SIDE = false, HALVES = false, HALF_SUMS = false;
    const int8_t* xq;
    const float* xs;
    const int* xz;
    const uint8_t* w;
    long long lda, K;
    int group, gbytes, sdt;
    QF_HD const int8_t* act_codes(long long m, long long k0) const { return xq + m * lda + k0; }
    QF_HD const float* act_side(long long, long long) const { return nullptr; }
    QF_HD int tok_const(long long m) const { return xz[m]; }
    QF_HD void decode(long long row, long long K, long long k, uint32_t* q, float* side) const {
        const long long row_bytes = (K + group - 1) / group * gbytes;
        const uint8_t* g = w + row * row_bytes + (k / group) * gbytes;
        side[0] = qf_group_scale(g, sdt);
        int s = 0;
#pragma unroll
        for (int c = 0; c < 32; c += 8) F::CODES::codes8(g + qf_group_scale_bytes(sdt), group, (int)(k % group) + c, q + c / 4);
        qf_mask_codes32(q, K - k);
#pragma unroll
        for (int t = 0; t < 8; ++t) s = qf_dp4a((int)q[t], 0x01010101, s);
        side[1] = (float)s;  // |s| ≤ 32 · 128: exact
    }
    // The zero point's share, exact in integers; at a group's end (or K's) × the group scale,
    // in f32, group after group in order.
    QF_HD void fold(const float* wsd, const float*, int zp, long long k, int, int, int& acc, float& f) const {
        acc -= zp * (int)wsd[1];
        if ((k + 32) % group == 0 || k + 32 >= K) {
            f += (float)acc * wsd[0];
            acc = 0;
        }
    }
    // The activation scale, once.
    QF_HD float result(float f, long long m) const { return f * xs[m]; }
};

template <class F, class C>
QF_HD void qf_gemm_a8_tile(const int8_t* xq, const float* xs, const int* xz, const uint8_t* w, void* y, int out,
                           long long M, long long N, long long K, long long lda, int group, int gbytes, int sdt,
                           long long tm, long long tn, uint8_t* smem) {
    const qf_a8_policy<F> p{xq, xs, xz, w, lda, K, group, gbytes, sdt};
    qf_gemm_i8t_tile<qf_a8_policy<F>, C>(p, y, out, M, N, K, 1, 0, tm, tn, smem);
}

// Threads of the activation quantizer's CTA (one row each).
#define QF_I8DYN_THREADS 256

#ifdef __CUDACC__
// qforge_gemm_<format>_a8_<instance>: instance I (qf_i8_cfg_<I>, named TNAME) on grid
// (ceil(N / ROWS), ceil(M / TOK)), block its NTH threads, its SMEM_BYTES of dynamic shared
// memory; out: 0 f32, 1 f16, 2 bf16. Never split (the result is the CPU's bit for bit).
#define QF_GEMM_A8_KERNEL(F, NAME, I, TNAME)                                                            \
    extern "C" __global__ void __launch_bounds__(qf_i8_cfg_##I::NTH)                                    \
        qforge_gemm_##NAME##_a8_##TNAME(const int8_t* xq, const float* xs, const int* xz, const uint8_t* w, \
                                        void* y, long long M, long long N, long long K, long long lda,  \
                                        int group, int gbytes, int sdt, int out) {                      \
        extern __shared__ __align__(16) uint8_t qf_i8_smem[];                                           \
        qf_gemm_a8_tile<F, qf_i8_cfg_##I>(xq, xs, xz, w, y, out, M, N, K, lda, group, gbytes, sdt,      \
                                          (long long)blockIdx.y, (long long)blockIdx.x, qf_i8_smem);    \
    }

// The activation quantizer of a module with the A8 GEMM: grid M, block QF_I8DYN_THREADS.
#define QF_QUANTIZE_I8DYN_KERNEL                                                                        \
    extern "C" __global__ void __launch_bounds__(QF_I8DYN_THREADS)                                      \
        qforge_quantize_int8_dyn(const float* x, int8_t* q, float* scale, int* zp, long long K, long long lda) { \
        __shared__ float red[2 * QF_I8DYN_THREADS], par[3];                                             \
        qf_quantize_i8dyn_row<QF_I8DYN_THREADS>(x, q, scale, zp, K, lda, blockIdx.x, red, par);         \
    }
#endif

// Host wrapper: instance `inst`'s CTAs one after the other.
#define QF_HOST_GEMM_A8(F, NAME)                                                                        \
    extern "C" void qf_host_gemm_##NAME##_a8(const int8_t* xq, const float* xs, const int* xz, const uint8_t* w, \
                                             void* y, long long M, long long N, long long K, long long lda, \
                                             int group, int gbytes, int sdt, int out, int inst) {       \
        const int splits = 1;                                                                           \
        auto tile = [&](auto cfg, int, long long tm, long long tn, uint8_t* smem) {                     \
            qf_gemm_a8_tile<F, decltype(cfg)>(xq, xs, xz, w, y, out, M, N, K, lda, group, gbytes, sdt, tm, tn, smem); \
        };                                                                                              \
        switch (inst) { QF_I8_INSTANCES(QF_HOST_I8T_CASE) }                                             \
        QF_HOST_I8T_CHECK("qf_host_gemm a8")                                                            \
    }
// Once per host translation unit (the quantizer belongs to no format).
#define QF_HOST_QUANTIZE_I8DYN                                                                          \
    extern "C" void qf_host_quantize_int8_dyn(const float* x, int8_t* q, float* scale, int* zp, long long M, \
                                              long long K, long long lda) {                             \
        float red[2 * QF_I8DYN_THREADS], par[3];                                                        \
        for (long long r = 0; r < M; ++r)                                                               \
            qf_quantize_i8dyn_row<QF_I8DYN_THREADS>(x, q, scale, zp, K, lda, r, red, par);              \
    }
