// qforge kernels-cuda/gemm.cuh: the fused GEMM every format gets from its traits struct:
//   y[m][n] = Σ_k x[m][k] · W[n][k]   (x: M × K f32 activations, W: the N × K quantized weights)
// Weights are decoded from their blocks (the format's `decode`, exactly the dequant kernel's
// values) straight into shared memory as f16 or bf16, activations rounded to the same type,
// products on the tensor cores (mma.sync m16n8k16, f32 accumulators), every edge predicated
// so that any M, N, K works without a padding copy. Written over warp.cuh's interface, so
// the same body runs on the host in the tests.
#pragma once
#include "warp.cuh"

// A CTA tile: BM activation rows × BN weight rows, K in steps of BK, WM × WN warps, STAGES
// k-steps of activations in flight (cp.async). One instance per entry of qforge-tiling's
// FUSED_GEMM_TILES (qforge-cuda's codegen writes a `typedef … qf_gemm_cfg_<name>` for each).
template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_>
struct qf_gemm_cfg {
    static constexpr bool SKINNY = false;
    static constexpr int MIN_BLOCKS = 1;  // __launch_bounds__' minimum CTAs per multiprocessor
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, STAGES = STAGES_;
    static constexpr int NW = WM * WN, NTH = 32 * NW;
    static constexpr int WTM = BM / WM, WTN = BN / WN;  // one warp's tile
    static constexpr int MT = WTM / 16, NT = WTN / 8;   // its mma tiles
    static constexpr int LDS = BK + 8;                  // smem row stride (16-bit elements): no bank conflicts
    static constexpr int SMEM_A = BM * LDS, SMEM_W = BN * LDS;
    static constexpr int SMEM_X = STAGES * BM * BK;     // staged f32 activations
    static_assert(WTM % 16 == 0 && WTN % 8 == 0 && BK % 16 == 0 && STAGES >= 1, "whole mma tiles");
    static_assert(LDS % 8 == 0, "ldmatrix rows 16-byte aligned");
};

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

// The output type, an argument of the kernels (the index of DType::ALL: 0 f32, 1 f16, 2 bf16)
// rather than a template parameter: only the epilogue differs, and one kernel per type would
// triple every module's PTX.
QF_HD int qf_gemm_out_bytes(int out) { return out == 0 ? 4 : 2; }
// The 16-bit outputs' rounding is one out-of-line function on the device: inlined at each of
// an epilogue's accumulators it was most of a GEMM kernel's PTX.
static __host__ __device__ __noinline__ uint16_t qf_gemm_round16(int out, float v) {
    return out == 1 ? qf_out_f16::conv(v) : qf_out_bf16::conv(v);
}
QF_HD void qf_gemm_store(void* y, int out, long long i, float v) {
    if (out == 0) static_cast<float*>(y)[i] = qf_out_f32::conv(v);
    else static_cast<uint16_t*>(y)[i] = qf_gemm_round16(out, v);
}

// Epilogue of a CTA tile at (m0, n0) of y (elements of type `out`): every lane writes its f32
// accumulators inside M × N (the f16 / bf16 GEMM's and the FP8 GEMM's).
template <class C>
QF_HD void qf_gemm_epilogue(qf_frag_c (*acc)[C::MT][C::NT][QF_LANE_SLOTS], void* y, int out, long long M, long long N,
                            long long m0, long long n0) {
    qf_for_warps<C::NW>([&](int ws, int wid) {
        qf_for_lanes([&](int ls, int lane) {
            qf_for_acc<C>(wid, lane, [&](int i, int j, int e, int r, int c) {
                const long long m = m0 + r, n = n0 + c;
                if (m < M && n < N) qf_gemm_store(y, out, m * N + n, acc[ws][i][j][ls].r[e]);
            });
        });
    });
}

// One CTA's tile (tm, tn) of y (elements of type `out`) over the K range [kb, ke) (kb a
// multiple of C::BK). Xs / As / Ws: shared memory of C::SMEM_X f32 and C::SMEM_A / C::SMEM_W
// 16-bit slots.
//
// Pipeline: the f32 activations of k-step s are copied with cp.async into stage s % STAGES of
// Xs, STAGES - 1 steps ahead of the one being multiplied (one commit group per step, empty
// past the end, so that wait<STAGES - 1> always means "step i has landed"). Per k-step the
// CTA rounds its stage to T in As, decodes the weights straight into Ws (the decode reads
// the blocks in global memory), and the warps load their fragments with ldmatrix.
template <class F, class T, class C>
QF_HD void qf_gemm_tile_mma(const float* x, const uint8_t* w, const uint8_t* grid, void* y, int out, long long M,
                            long long N, long long K, long long kb, long long ke, long long tm, long long tn,
                            float* Xs, uint16_t* As, uint16_t* Ws) {
    typedef qf_layout<F> L;
    static_assert(C::BK % F::CHUNK == 0, "a k-step holds whole decode chunks");
    constexpr int CPK = C::BK / F::CHUNK;  // decode chunks per weight row and k-step
    const long long m0 = tm * C::BM, n0 = tn * C::BN;
    const long long nk = ke > kb ? (ke - kb + C::BK - 1) / C::BK : 0;

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

    // Activations of k-step s (BM × BK, zero outside M × K) into stage s % STAGES.
    auto issue = [&](long long s) {
        if (s >= nk) return;
        float* dst = Xs + (int)(s % C::STAGES) * (C::BM * C::BK);
        const long long k0 = kb + s * C::BK;
        qf_for_threads<C::NTH>([&](int t) {
            for (int e = t; e < C::BM * C::BK; e += C::NTH) {
                const long long gm = m0 + e / C::BK, gk = k0 + e % C::BK;
                const bool ok = gm < M && gk < K;
                qf_cp_async4(dst + e, ok ? x + gm * K + gk : x, ok);
            }
        });
    };
    for (int s = 0; s + 1 < C::STAGES; ++s) {
        issue(s);
        qf_cp_async_commit();
    }

    for (long long i = 0; i < nk; ++i) {
        issue(i + C::STAGES - 1);
        qf_cp_async_commit();
        qf_cp_async_wait<C::STAGES - 1>();
        qf_sync();
        const long long k0 = kb + i * C::BK;
        const float* xs = Xs + (int)(i % C::STAGES) * (C::BM * C::BK);
        qf_for_threads<C::NTH>([&](int t) {
            for (int e = t; e < C::BM * C::BK; e += C::NTH) As[(e / C::BK) * C::LDS + e % C::BK] = T::conv(xs[e]);
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
#pragma unroll
                for (int i = 0; i < C::MT; ++i) qf_ldsm_frag_a(a[i], As + (wm * C::WTM + i * 16) * C::LDS + ks, C::LDS);
#pragma unroll
                for (int j = 0; j < C::NT; ++j) qf_ldsm_frag_b(b[j], Ws + (wn * C::WTN + j * 8) * C::LDS + ks, C::LDS);
#pragma unroll
                for (int i = 0; i < C::MT; ++i)
#pragma unroll
                    for (int j = 0; j < C::NT; ++j) qf_mma_m16n8k16<T>(acc[ws][i][j], a[i], b[j]);
            }
        });
        qf_sync();
    }
    qf_cp_async_wait<0>();

    qf_gemm_epilogue<C>(acc, y, out, M, N, m0, n0);
}

#include "gemm_skinny.cuh"

// One CTA of instance C: the skinny body (gemm_skinny.cuh, the activations in As) or the
// tiled one above.
template <class F, class T, class C>
QF_HD void qf_gemm_tile(const float* x, const uint8_t* w, const uint8_t* grid, void* y, int out, long long M,
                        long long N, long long K, long long kb, long long ke, long long tm, long long tn, float* Xs,
                        uint16_t* As, uint16_t* Ws) {
    if constexpr (C::SKINNY) {
        qf_gemms_tile<F, T, C>(x, w, grid, y, out, M, N, K, kb, ke, tm, tn, As);
    } else {
        qf_gemm_tile_mma<F, T, C>(x, w, grid, y, out, M, N, K, kb, ke, tm, tn, Xs, As, Ws);
    }
}

#ifdef __CUDACC__
// Grid: (ceil(N / BN), ceil(M / BM), splits); block: C::NTH threads. With splits > 1, split z
// writes its partial sums to y + z·M·N (the runtime passes an f32 workspace and reduces it).
template <class F, class T, class C>
__device__ __forceinline__ void qf_gemm_kernel(const float* __restrict__ x, const uint8_t* __restrict__ w,
                                               const uint8_t* __restrict__ grid, void* __restrict__ y, long long M,
                                               long long N, long long K, int splits, int out) {
    long long kb, ke;
    qf_gemm_krange<C>(K, splits, blockIdx.z, &kb, &ke);
    char* yz = static_cast<char*>(y) + (long long)blockIdx.z * M * N * qf_gemm_out_bytes(out);
    if constexpr (C::SKINNY) {
        // C::SMEM_BYTES of dynamic shared memory (the launch asks for them; above 48 KiB the
        // runtime raises the kernel's limit first).
        extern __shared__ __align__(16) uint16_t qf_gemms_smem[];
        qf_gemms_tile<F, T, C>(x, w, grid, yz, out, M, N, K, kb, ke, blockIdx.y, blockIdx.x, qf_gemms_smem);
    } else {
        __shared__ __align__(16) float Xs[C::SMEM_X];
        __shared__ __align__(16) uint16_t As[C::SMEM_A];
        __shared__ __align__(16) uint16_t Ws[C::SMEM_W];
        qf_gemm_tile_mma<F, T, C>(x, w, grid, yz, out, M, N, K, kb, ke, blockIdx.y, blockIdx.x, Xs, As, Ws);
    }
}

// qforge_gemm_<format>_<mma>_<tile>: one kernel instance; qforge-cuda's codegen writes one
// line per (tile of FUSED_GEMM_TILES, mma) with CFG = qf_gemm_cfg_<tile>.
#define QF_GEMM_KERNEL(F, NAME, MNAME, MMA, CNAME)                                                      \
    extern "C" __global__ void __launch_bounds__(qf_gemm_cfg_##CNAME::NTH, qf_gemm_cfg_##CNAME::MIN_BLOCKS) \
        qforge_gemm_##NAME##_##MNAME##_##CNAME(const float* x, const uint8_t* w, const uint8_t* grid,    \
                                               void* y, long long M, long long N, long long K,          \
                                               int splits, int out) {                                   \
        qf_gemm_kernel<F, MMA, qf_gemm_cfg_##CNAME>(x, w, grid, y, M, N, K, splits, out);               \
    }
#endif

// Host wrapper: the CTAs one after the other (every split z too, each into y + z·M·N), in
// one "shared memory" on the heap; no cp.async may be left in flight (aborts otherwise).
#define QF_HOST_GEMM(F, NAME, MNAME, MMA, CNAME)                                                        \
    extern "C" void qf_host_gemm_##NAME##_##MNAME##_##CNAME(const float* x, const uint8_t* w,           \
                                                            const uint8_t* grid, void* y, long long M,  \
                                                            long long N, long long K, int splits,       \
                                                            int out) {                                  \
        typedef qf_gemm_cfg_##CNAME C;                                                                  \
        std::vector<float> xs(C::SMEM_X);                                                               \
        std::vector<uint16_t> as(C::SMEM_A + 8), ws(C::SMEM_W + 8);                                     \
        /* 16-byte aligned operand tiles, as the device's __align__(16) (ldmatrix checks it) */        \
        uint16_t* As = as.data() + ((16 - (reinterpret_cast<uintptr_t>(as.data()) & 15)) & 15) / 2;      \
        uint16_t* Ws = ws.data() + ((16 - (reinterpret_cast<uintptr_t>(ws.data()) & 15)) & 15) / 2;      \
        for (int z = 0; z < splits; ++z) {                                                              \
            long long kb, ke;                                                                           \
            qf_gemm_krange<C>(K, splits, z, &kb, &ke);                                                  \
            char* yz = static_cast<char*>(y) + (long long)z * M * N * qf_gemm_out_bytes(out);           \
            for (long long tm = 0; tm < (M + C::BM - 1) / C::BM; ++tm)                                  \
                for (long long tn = 0; tn < (N + C::BN - 1) / C::BN; ++tn)                              \
                    qf_gemm_tile<F, MMA, C>(x, w, grid, yz, out, M, N, K, kb, ke, tm, tn, xs.data(), As, Ws); \
        }                                                                                               \
        if (qf_cp_async_pending() != 0) {                                                               \
            fprintf(stderr, "qf_host_gemm: %zu cp.async copies never waited for\n", qf_cp_async_pending()); \
            abort();                                                                                    \
        }                                                                                               \
    }
