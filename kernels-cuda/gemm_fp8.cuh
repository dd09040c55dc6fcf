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
// * Two bodies of one tile loop (qf_gemm_fp8_tile), chosen by the policy P:
//   - qf_fp8p_mma (sm_89+): the fp8 codes go to shared memory as they are, products on
//     mma.sync.m16n8k32.row.col.f32.e4m3.<w>.f32 (the s8 m16n8k32 fragment layout);
//   - qf_fp8p_f16 (sm_80): both sides decoded exactly into f16 in shared memory (every e4m3 /
//     e5m2 value is an f16 value), ldmatrix + mma.sync.m16n8k16 f16 → f32.
//   Both keep one f32 partial per 128-column block and promote it at the block's last k-step.
// * The weights' value type W (qf_f8_e4m3 / qf_f8_e5m2) comes from the format's layout
//   (`Layout::Grid { elem }`, qforge-cuda's codegen), not from the format: the kernel reads
//   the N × K value bytes and the f32 scale grid of 128 × 128 tiles directly.
// Any M, N, K (predicated edges; activation rows are padded to whole 128-column groups with
// zero codes by the quantizer, the weights are read in place).
#pragma once
#include "warp.cuh"

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

// ---- the two tensor-core bodies -----------------------------------------------------------
// D = A·B + C for the warp, A e4m3 (16 × 32), B of W's encoding (32 × 8), f32 accumulators:
// the s8 m16n8k32 fragment layout (qf_frag_a8 / qf_frag_b8). sm_89+ only; the host model
// multiplies exactly and sums each lane's 32 products in k order (the device's order is
// unspecified, and its fp8 accumulation keeps fewer bits: the tests' tolerances say so).
template <class W>
QF_HD void qf_mma_m16n8k32_fp8(qf_frag_c* d, const qf_frag_a8* a, const qf_frag_b8* b) {
#ifdef __CUDA_ARCH__
#if __CUDA_ARCH__ >= 890
    if constexpr (!W::E5M2) {
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d->r[0]), "+f"(d->r[1]), "+f"(d->r[2]), "+f"(d->r[3])
            : "r"(a->r[0]), "r"(a->r[1]), "r"(a->r[2]), "r"(a->r[3]), "r"(b->r[0]), "r"(b->r[1]));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
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
            A[qf_frag_a8_row(lane, i)][qf_frag_a8_col(lane, i)] = qf_f8_e4m3::value((uint8_t)(a[lane].r[i / 4] >> (8 * (i & 3))));
        for (int i = 0; i < 8; ++i)
            B[qf_frag_b8_row(lane, i)][qf_frag_b_col(lane)] = W::value((uint8_t)(b[lane].r[i / 4] >> (8 * (i & 3))));
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

// A body: what a code becomes in shared memory (E elements, rows of LDS), the mma's k and one
// k-slice of mma for a warp's tiles.
template <class W>
struct qf_fp8p_mma {
    typedef uint8_t E;
    static constexpr int KM = 32;
    template <class C>
    static constexpr int LDS = C::BK + 16;  // 16-byte rows, spread over the banks
    QF_HD static E act(uint8_t c) { return c; }
    QF_HD static E wt(uint8_t c) { return c; }
    template <class C>
    QF_HD static void step(qf_frag_c (*acc)[C::NT][QF_LANE_SLOTS], const E* As, const E* Ws, int wid, int ks) {
        constexpr int LDS = qf_fp8p_mma::template LDS<C>;
        const int wm = wid / C::WN, wn = wid % C::WN;
        qf_frag_a8 a[C::MT][QF_LANE_SLOTS];
        qf_frag_b8 b[C::NT][QF_LANE_SLOTS];
        qf_for_lanes([&](int ls, int lane) {
#pragma unroll
            for (int i = 0; i < C::MT; ++i)
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const int r = wm * C::WTM + i * 16 + qf_frag_a8_row(lane, 4 * q);
                    a[i][ls].r[q] = qf_ld_quad((const int8_t*)As + r * LDS + ks + qf_frag_a8_col(lane, 4 * q));
                }
#pragma unroll
            for (int j = 0; j < C::NT; ++j)
#pragma unroll
                for (int q = 0; q < 2; ++q) {
                    const int n = wn * C::WTN + j * 8 + qf_frag_b_col(lane);
                    b[j][ls].r[q] = qf_ld_quad((const int8_t*)Ws + n * LDS + ks + qf_frag_b8_row(lane, 4 * q));
                }
        });
#pragma unroll
        for (int i = 0; i < C::MT; ++i)
#pragma unroll
            for (int j = 0; j < C::NT; ++j) qf_mma_m16n8k32_fp8<W>(acc[i][j], a[i], b[j]);
    }
};

template <class W>
struct qf_fp8p_f16 {
    typedef uint16_t E;
    static constexpr int KM = 16;
    template <class C>
    static constexpr int LDS = C::BK + 8;  // ldmatrix rows 16-byte aligned
    QF_HD static E act(uint8_t c) { return qf_f32_to_f16_bits(qf_f8_e4m3::value(c)); }  // exact
    QF_HD static E wt(uint8_t c) { return qf_f32_to_f16_bits(W::value(c)); }            // exact
    template <class C>
    QF_HD static void step(qf_frag_c (*acc)[C::NT][QF_LANE_SLOTS], const E* As, const E* Ws, int wid, int ks) {
        constexpr int LDS = qf_fp8p_f16::template LDS<C>;
        const int wm = wid / C::WN, wn = wid % C::WN;
        qf_frag_a a[C::MT][QF_LANE_SLOTS];
        qf_frag_b b[C::NT][QF_LANE_SLOTS];
#pragma unroll
        for (int i = 0; i < C::MT; ++i) qf_ldsm_frag_a(a[i], As + (wm * C::WTM + i * 16) * LDS + ks, LDS);
#pragma unroll
        for (int j = 0; j < C::NT; ++j) qf_ldsm_frag_b(b[j], Ws + (wn * C::WTN + j * 8) * LDS + ks, LDS);
#pragma unroll
        for (int i = 0; i < C::MT; ++i)
#pragma unroll
            for (int j = 0; j < C::NT; ++j) qf_mma_m16n8k16<qf_mma_f16>(acc[i][j], a[i], b[j]);
    }
};

// Shared memory of a body's tile: As (BM rows) then Ws (BN rows) of P::E, 16-byte aligned.
template <class P, class C>
struct qf_fp8_smem {
    static_assert(QF_FP8_GROUP % C::BK == 0 && C::BK % P::KM == 0, "k-steps tile the 128-column blocks");
    static constexpr int ELEMS = (C::BM + C::BN) * P::template LDS<C>;
};

// One CTA's tile (tm, tn) of y (elements of type `out`, gemm.cuh's index: 0 f32, 1 f16,
// 2 bf16). xq / xs: the quantizer's codes and scales; w: N × K value bytes; grid: the f32
// scale grid (ceil(N/128) × ceil(K/128)); smem: qf_fp8_smem<P, C>::ELEMS elements (16-byte
// aligned); sa / sw: BM and BN floats (the current block's scales).
template <class P, class W, class C>
QF_HD void qf_gemm_fp8_tile(const uint8_t* xq, const float* xs, const uint8_t* w, const uint8_t* grid, void* y,
                            int out, long long M, long long N, long long K, long long tm, long long tn,
                            typename P::E* smem, float* sa, float* sw) {
    typedef typename P::E E;
    constexpr int LDS = P::template LDS<C>;
    E* As = smem;
    E* Ws = smem + C::BM * LDS;
    const long long m0 = tm * C::BM, n0 = tn * C::BN;
    const long long groups = qf_fp8_act_groups(K), lda = groups * QF_FP8_GROUP;

    // pacc: the current 128-column block's partial sums; facc: the promoted accumulators.
    qf_frag_c pacc[QF_WARP_SLOTS(C::NW)][C::MT][C::NT][QF_LANE_SLOTS];
    qf_frag_c facc[QF_WARP_SLOTS(C::NW)][C::MT][C::NT][QF_LANE_SLOTS];
    qf_for_warps<C::NW>([&](int s, int wid) {
        qf_for_lanes([&](int ls, int lane) {
            qf_for_acc<C>(wid, lane, [&](int i, int j, int e, int, int) {
                pacc[s][i][j][ls].r[e] = 0.0f;
                facc[s][i][j][ls].r[e] = 0.0f;
            });
        });
    });

    for (long long k0 = 0; k0 < K; k0 += C::BK) {
        const long long kb = k0 / QF_FP8_GROUP;
        qf_for_threads<C::NTH>([&](int t) {
            // Activations: the quantizer zeroed [K, lda); rows past M are 0.
            for (int e = t; e < C::BM * C::BK; e += C::NTH) {
                const int r = e / C::BK, c = e % C::BK;
                const long long gm = m0 + r;
                As[r * LDS + c] = P::act(gm < M ? xq[gm * lda + k0 + c] : (uint8_t)0);
            }
            // Weights in place: 0 past N and K.
            for (int e = t; e < C::BN * C::BK; e += C::NTH) {
                const int r = e / C::BK, c = e % C::BK;
                const long long row = n0 + r, k = k0 + c;
                Ws[r * LDS + c] = P::wt(row < N && k < K ? w[row * K + k] : (uint8_t)0);
            }
            // The block's scales, at its first k-step.
            if (k0 % QF_FP8_GROUP == 0) {
                for (int r = t; r < C::BM; r += C::NTH) sa[r] = m0 + r < M ? xs[(m0 + r) * groups + kb] : 0.0f;
                for (int r = t; r < C::BN; r += C::NTH)
                    sw[r] = n0 + r < N ? qf_load_f32(grid + 4 * (((n0 + r) / QF_FP8_GROUP) * groups + kb)) : 0.0f;
            }
        });
        qf_sync();
        const bool block_end = (k0 + C::BK) % QF_FP8_GROUP == 0 || k0 + C::BK >= K;
        qf_for_warps<C::NW>([&](int s, int wid) {
#pragma unroll
            for (int ks = 0; ks < C::BK; ks += P::KM) P::template step<C>(pacc[s], As, Ws, wid, ks);
            if (block_end) {
                // DeepGEMM's promotion: acc += (partial · s_w) · s_a, as qforge-fp8's dot_row.
                qf_for_lanes([&](int ls, int lane) {
                    qf_for_acc<C>(wid, lane, [&](int i, int j, int e, int r, int n) {
                        float& p = pacc[s][i][j][ls].r[e];
                        facc[s][i][j][ls].r[e] += p * sw[n] * sa[r];
                        p = 0.0f;
                    });
                });
            }
        });
        qf_sync();
    }

    qf_gemm_epilogue<C>(facc, y, out, M, N, m0, n0);
}

#ifdef __CUDACC__
template <class P, class W, class C>
__device__ __forceinline__ void qf_gemm_fp8_kernel(const uint8_t* xq, const float* xs, const uint8_t* w,
                                                   const uint8_t* grid, void* y, long long M, long long N,
                                                   long long K, int out) {
    __shared__ __align__(16) typename P::E smem[qf_fp8_smem<P, C>::ELEMS];
    __shared__ float sa[C::BM], sw[C::BN];
    qf_gemm_fp8_tile<P, W, C>(xq, xs, w, grid, y, out, M, N, K, blockIdx.y, blockIdx.x, smem, sa, sw);
}

// The activation quantizer: grid M · ceil(K / 128) (CTA i: row i / groups, group i % groups),
// block QF_FP8_ACT_THREADS.
#define QF_QUANTIZE_FP8_1X128_KERNEL                                                                   \
    extern "C" __global__ void __launch_bounds__(QF_FP8_ACT_THREADS)                                   \
        qforge_quantize_fp8_1x128(const float* x, uint8_t* q, float* s, long long K) {                 \
        __shared__ float red[QF_FP8_ACT_THREADS], par[1];                                              \
        const long long groups = qf_fp8_act_groups(K);                                                 \
        qf_quantize_fp8_1x128_group(x, q, s, K, blockIdx.x / groups, blockIdx.x % groups, red, par);   \
    }
// qforge_gemm_<format>_fp8_<body>: grid (ceil(N / BN), ceil(M / BM)), block C::NTH.
#define QF_GEMM_FP8_KERNEL(NAME, BODY, W)                                                              \
    extern "C" __global__ void __launch_bounds__(qf_gemm_cfg_fp8::NTH) qforge_gemm_##NAME##_fp8_##BODY( \
        const uint8_t* xq, const float* xs, const uint8_t* w, const uint8_t* grid, void* y, long long M, \
        long long N, long long K, int out) {                                                           \
        qf_gemm_fp8_kernel<qf_fp8p_##BODY<W>, W, qf_gemm_cfg_fp8>(xq, xs, w, grid, y, M, N, K, out);    \
    }
#endif

// Host wrappers: the CTAs one after the other.
#define QF_HOST_GEMM_FP8(NAME, BODY, W)                                                                \
    extern "C" void qf_host_gemm_##NAME##_fp8_##BODY(const uint8_t* xq, const float* xs, const uint8_t* w, \
                                                      const uint8_t* grid, void* y, long long M, long long N, \
                                                      long long K, int out) {                          \
        typedef qf_gemm_cfg_fp8 C;                                                                     \
        typedef qf_fp8p_##BODY<W> P;                                                                   \
        std::vector<P::E> sm(qf_fp8_smem<P, C>::ELEMS + 16);                                           \
        P::E* smem = sm.data() + ((16 - (reinterpret_cast<uintptr_t>(sm.data()) & 15)) & 15) / sizeof(P::E); \
        float sa[C::BM], sw[C::BN];                                                                    \
        for (long long tm = 0; tm < (M + C::BM - 1) / C::BM; ++tm)                                     \
            for (long long tn = 0; tn < (N + C::BN - 1) / C::BN; ++tn)                                 \
                qf_gemm_fp8_tile<P, W, C>(xq, xs, w, grid, y, out, M, N, K, tm, tn, smem, sa, sw);      \
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
