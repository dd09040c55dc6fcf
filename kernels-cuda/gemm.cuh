// qforge kernels-cuda/gemm.cuh: the fused GEMM every format gets from its traits struct:
//   y[m][n] = Σ_k x[m][k] · W[n][k]   (x: M × K f32 activations, W: the N × K quantized weights)
// Weights are decoded from their blocks (the format's `decode`, exactly the dequant kernel's
// values) straight into shared memory as f16 or bf16, activations rounded to the same type,
// products on the tensor cores (mma.sync m16n8k16, f32 accumulators), every edge predicated
// so that any M, N, K works without a padding copy. Written over warp.cuh's interface, so
// the same body runs on the host in the tests.
#pragma once
#include "warp.cuh"

// A CTA tile: BM activation rows × BN weight rows, K in steps of BK, WM × WN warps.
template <int BM_, int BN_, int BK_, int WM_, int WN_>
struct qf_gemm_cfg {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_;
    static constexpr int NW = WM * WN, NTH = 32 * NW;
    static constexpr int WTM = BM / WM, WTN = BN / WN;  // one warp's tile
    static constexpr int MT = WTM / 16, NT = WTN / 8;   // its mma tiles
    static constexpr int LDS = BK + 8;                  // smem row stride (16-bit elements): no bank conflicts
    static constexpr int SMEM_A = BM * LDS, SMEM_W = BN * LDS;
    static_assert(WTM % 16 == 0 && WTN % 8 == 0 && BK % 16 == 0, "whole mma tiles");
};

// The tile of this translation unit's kernels: `#define QF_GEMM_CFG qf_gemm_cfg<…>` before
// including the templates (qforge-cuda's codegen writes it from `codegen::GEMM_TILE`, the
// one place the launch code reads it from too).
#ifndef QF_GEMM_CFG
#error "define QF_GEMM_CFG (qforge-cuda's codegen does) before including the templates"
#endif
typedef QF_GEMM_CFG qf_gemm_cfg_default;

// Split-k: the K range [*kb, *ke) of split z of `splits`, whole BK steps, as even as possible
// (a split past the last step gets an empty range and writes zeros).
template <class C>
QF_HD void qf_gemm_krange(long long K, int splits, int z, long long* kb, long long* ke) {
    const long long steps = (K + C::BK - 1) / C::BK;
    const long long per = (steps + splits - 1) / splits;
    const long long b = (long long)z * per * C::BK, e = b + per * C::BK;
    *kb = b < K ? b : K;
    *ke = e < K ? e : K;
}

// One CTA's tile (tm, tn) of y over the K range [kb, ke) (kb a multiple of C::BK). As / Ws:
// shared memory of C::SMEM_A / C::SMEM_W 16-bit slots.
template <class F, class T, class O, class C>
QF_HD void qf_gemm_tile(const float* x, const uint8_t* w, const uint8_t* grid, typename O::T* y, long long M,
                        long long N, long long K, long long kb, long long ke, long long tm, long long tn,
                        uint16_t* As, uint16_t* Ws) {
    typedef qf_layout<F> L;
    static_assert(C::BK % F::CHUNK == 0, "a k-step holds whole decode chunks");
    constexpr int CPK = C::BK / F::CHUNK;  // decode chunks per weight row and k-step
    const long long m0 = tm * C::BM, n0 = tn * C::BN;

    qf_frag_c acc[QF_WARP_SLOTS(C::NW)][C::MT][C::NT][QF_LANE_SLOTS];
    qf_for_warps<C::NW>([&](int ws, int) {
        qf_for_lanes([&](int ls, int) {
#pragma unroll
            for (int i = 0; i < C::MT; ++i)
#pragma unroll
                for (int j = 0; j < C::NT; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[ws][i][j][ls].r[e] = 0.0f;
        });
    });

    for (long long k0 = kb; k0 < ke; k0 += C::BK) {
        // Activations: BM × BK values, 0 outside M × K.
        qf_for_threads<C::NTH>([&](int t) {
            for (int e = t; e < C::BM * C::BK; e += C::NTH) {
                const int r = e / C::BK, c = e % C::BK;
                const long long gm = m0 + r, gk = k0 + c;
                As[r * C::LDS + c] = T::conv(gm < M && gk < K ? x[gm * K + gk] : 0.0f);
            }
        });
        // Weights: BN rows × CPK chunks, decoded; 0 outside N × K (a block's padding too).
        qf_for_threads<C::NTH>([&](int t) {
            for (int it = t; it < C::BN * CPK; it += C::NTH) {
                const int r = it / CPK, c = it % CPK;
                const long long row = n0 + r, kk = k0 + (long long)c * F::CHUNK;
                float v[F::CHUNK];
                if (row < N && kk < K) {
                    const long long b = kk / F::BLOCK;
                    const int chunk = (int)(kk % F::BLOCK) / F::CHUNK;
                    typename F::block tmp;
                    L::decode(L::at(w, row, K, b, &tmp, chunk * F::CHUNK, F::CHUNK), chunk, L::scale(grid, row, K, b),
                              v);
                } else {
#pragma unroll
                    for (int j = 0; j < F::CHUNK; ++j) v[j] = 0.0f;
                }
                uint16_t* dst = Ws + r * C::LDS + c * F::CHUNK;
#pragma unroll
                for (int j = 0; j < F::CHUNK; ++j) dst[j] = T::conv(kk + j < K ? v[j] : 0.0f);
            }
        });
        qf_sync();
        qf_for_warps<C::NW>([&](int ws, int wid) {
            const int wm = wid / C::WN, wn = wid % C::WN;
#pragma unroll
            for (int ks = 0; ks < C::BK; ks += 16) {
                qf_frag_a a[C::MT][QF_LANE_SLOTS];
                qf_frag_b b[C::NT][QF_LANE_SLOTS];
                qf_for_lanes([&](int ls, int lane) {
#pragma unroll
                    for (int i = 0; i < C::MT; ++i)
#pragma unroll
                        for (int q = 0; q < 4; ++q) {
                            const int r = wm * C::WTM + i * 16 + qf_frag_a_row(lane, 2 * q);
                            a[i][ls].r[q] = qf_ld_pair(As + r * C::LDS + ks + qf_frag_a_col(lane, 2 * q));
                        }
#pragma unroll
                    for (int j = 0; j < C::NT; ++j)
#pragma unroll
                        for (int q = 0; q < 2; ++q) {
                            const int n = wn * C::WTN + j * 8 + qf_frag_b_col(lane);
                            b[j][ls].r[q] = qf_ld_pair(Ws + n * C::LDS + ks + qf_frag_b_row(lane, 2 * q));
                        }
                });
#pragma unroll
                for (int i = 0; i < C::MT; ++i)
#pragma unroll
                    for (int j = 0; j < C::NT; ++j) qf_mma_m16n8k16<T>(acc[ws][i][j], a[i], b[j]);
            }
        });
        qf_sync();
    }

    // Epilogue: every lane writes its accumulators inside M × N.
    qf_for_warps<C::NW>([&](int ws, int wid) {
        const int wm = wid / C::WN, wn = wid % C::WN;
        qf_for_lanes([&](int ls, int lane) {
#pragma unroll
            for (int i = 0; i < C::MT; ++i)
#pragma unroll
                for (int j = 0; j < C::NT; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const long long m = m0 + wm * C::WTM + i * 16 + qf_frag_c_row(lane, e);
                        const long long n = n0 + wn * C::WTN + j * 8 + qf_frag_c_col(lane, e);
                        if (m < M && n < N) y[m * N + n] = O::conv(acc[ws][i][j][ls].r[e]);
                    }
        });
    });
}

#ifdef __CUDACC__
// Grid: (ceil(N / BN), ceil(M / BM), splits); block: C::NTH threads. With splits > 1, split z
// writes its partial sums to y + z·M·N (the runtime passes an f32 workspace and reduces it).
template <class F, class T, class O, class C>
__device__ __forceinline__ void qf_gemm_kernel(const float* __restrict__ x, const uint8_t* __restrict__ w,
                                               const uint8_t* __restrict__ grid, typename O::T* __restrict__ y,
                                               long long M, long long N, long long K, int splits) {
    __shared__ __align__(16) uint16_t As[C::SMEM_A];
    __shared__ __align__(16) uint16_t Ws[C::SMEM_W];
    long long kb, ke;
    qf_gemm_krange<C>(K, splits, blockIdx.z, &kb, &ke);
    qf_gemm_tile<F, T, O, C>(x, w, grid, y + (long long)blockIdx.z * M * N, M, N, K, kb, ke, blockIdx.y, blockIdx.x,
                             As, Ws);
}

#define QF_GEMM_KERNEL(F, NAME, MNAME, MMA, ONAME, OUT)                                                \
    extern "C" __global__ void __launch_bounds__(qf_gemm_cfg_default::NTH)                             \
        qforge_gemm_##NAME##_##MNAME##_##ONAME(const float* x, const uint8_t* w, const uint8_t* grid,   \
                                               OUT::T* y, long long M, long long N, long long K,        \
                                               int splits) {                                            \
        qf_gemm_kernel<F, MMA, OUT, qf_gemm_cfg_default>(x, w, grid, y, M, N, K, splits);              \
    }
#endif

// Host wrapper: the CTAs one after the other (every split z too, each into y + z·M·N), in
// one "shared memory" on this thread's stack.
#define QF_HOST_GEMM(F, NAME, MNAME, MMA, ONAME, OUT)                                                  \
    extern "C" void qf_host_gemm_##NAME##_##MNAME##_##ONAME(const float* x, const uint8_t* w,          \
                                                            const uint8_t* grid, OUT::T* y, long long M, \
                                                            long long N, long long K, int splits) {    \
        typedef qf_gemm_cfg_default C;                                                                 \
        uint16_t As[C::SMEM_A], Ws[C::SMEM_W];                                                         \
        for (int z = 0; z < splits; ++z) {                                                             \
            long long kb, ke;                                                                          \
            qf_gemm_krange<C>(K, splits, z, &kb, &ke);                                                 \
            for (long long tm = 0; tm < (M + C::BM - 1) / C::BM; ++tm)                                 \
                for (long long tn = 0; tn < (N + C::BN - 1) / C::BN; ++tn)                             \
                    qf_gemm_tile<F, MMA, OUT, C>(x, w, grid, y + (long long)z * M * N, M, N, K, kb, ke, tm, tn, \
                                                 As, Ws);                                              \
        }                                                                                              \
    }

// Every (mma input type, output type) pair of one format.
#define QF_GEMM_ALL(MACRO, F, NAME)                                                                    \
    MACRO(F, NAME, f16, qf_mma_f16, f32, qf_out_f32)                                                   \
    MACRO(F, NAME, f16, qf_mma_f16, f16, qf_out_f16)                                                   \
    MACRO(F, NAME, f16, qf_mma_f16, bf16, qf_out_bf16)                                                 \
    MACRO(F, NAME, bf16, qf_mma_bf16, f32, qf_out_f32)                                                 \
    MACRO(F, NAME, bf16, qf_mma_bf16, f16, qf_out_f16)                                                 \
    MACRO(F, NAME, bf16, qf_mma_bf16, bf16, qf_out_bf16)
