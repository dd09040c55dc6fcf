// qforge kernels-cuda/gemm.cuh: the fused GEMM every format gets from its traits struct:
//   y[m][n] = Σ_k x[m][k] · W[n][k]   (x: M × K f32 activations, W: the N × K quantized weights)
// Weights are decoded from their blocks (the format's `decode`, exactly the dequant kernel's
// values) as f16 or bf16, activations rounded to the same type, products on the tensor cores
// (mma.sync m16n8k16, f32 accumulators), every edge predicated so that any M, N, K works
// without a padding copy. Two bodies: the skinny instances (gemm_skinny.cuh, small M) and
// the tiled ones (gemm_tiled.cuh). This file holds what they share (split-k ranges, the
// epilogue, the transposed accumulator walk the 8-bit GEMMs share), their kernels and host
// wrappers. Written over warp.cuh's interface, so the same bodies run on the host in the tests.
#pragma once
#include "warp.cuh"

// Every accumulator element one lane holds in a transposed warp tile (weights the mma's A,
// tokens its B: gemm_skinny.cuh, gemm_fp8.cuh): RT 16-row × MT 8-token mma tiles from weight
// row r0 and token c0; f(i, j, e, row, token) for tile (i, j), register e, at weight row
// r0 + 16i + g (+ 8 for e ≥ 2) and token c0 + 8j + 2t + (e & 1) (lane = 4g + t).
template <int RT, int MT, class Fn>
QF_HD void qf_for_acc_t(int lane, int r0, int c0, Fn&& f) {
#pragma unroll
    for (int i = 0; i < RT; ++i)
#pragma unroll
        for (int j = 0; j < MT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                f(i, j, e, r0 + 16 * i + qf_frag_c_row(lane, e), c0 + 8 * j + qf_frag_c_col(lane, e));
}

// Split-k: the K range [*kb, *ke) of split z of `splits`, whole C::KSPLIT steps (an instance's
// k-step, or the tiled instances' phase), as even as possible (a split past the last step gets
// an empty range and writes zeros).
template <class C>
QF_HD void qf_gemm_krange(long long K, int splits, int z, long long* kb, long long* ke) {
    const long long steps = (K + C::KSPLIT - 1) / C::KSPLIT;
    const long long per = (steps + splits - 1) / splits;
    const long long b = (long long)z * per * C::KSPLIT, e = b + per * C::KSPLIT;
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

#include "gemm_skinny.cuh"
#include "gemm_tiled.cuh"

// One CTA of instance C: the skinny body (gemm_skinny.cuh) or the tiled one
// (gemm_tiled.cuh), in C::SMEM_BYTES of shared memory at `smem` (16-byte aligned).
template <class F, class T, class C>
QF_HD void qf_gemm_tile(const float* x, const uint8_t* w, const uint8_t* grid, void* y, int out, long long M,
                        long long N, long long K, long long kb, long long ke, long long tm, long long tn,
                        uint8_t* smem) {
    if constexpr (C::SKINNY) {
        qf_gemms_tile<F, T, C>(x, w, grid, y, out, M, N, K, kb, ke, tm, tn, reinterpret_cast<uint16_t*>(smem));
    } else {
        qf_gemmt_tile<F, T, C>(x, w, grid, y, out, M, N, K, kb, ke, tm, tn, smem);
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
    // C::SMEM_BYTES of dynamic shared memory (the launch asks for them; above 48 KiB the
    // runtime raises the kernel's limit first).
    extern __shared__ __align__(16) uint16_t qf_gemms_smem[];
    qf_gemm_tile<F, T, C>(x, w, grid, yz, out, M, N, K, kb, ke, blockIdx.y, blockIdx.x,
                          reinterpret_cast<uint8_t*>(qf_gemms_smem));
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

// An instance's shared memory as its kernel lays it out, for the host tests that hold the
// runtime's launch size (qforge_tiling::i8_smem_bytes / fp8_smem_bytes) to it: one case of
// a switch over an instance list (QF_I8_INSTANCES, QF_FP8_INSTANCES).
#define QF_HOST_SMEM_CASE(I, CFG) \
    case I:                       \
        return CFG::SMEM_BYTES;

// Host wrapper: the CTAs one after the other (every split z too, each into y + z·M·N), in
// one "shared memory" on the heap; no cp.async may be left in flight (aborts otherwise).
#define QF_HOST_GEMM(F, NAME, MNAME, MMA, CNAME)                                                        \
    extern "C" void qf_host_gemm_##NAME##_##MNAME##_##CNAME(const float* x, const uint8_t* w,           \
                                                            const uint8_t* grid, void* y, long long M,  \
                                                            long long N, long long K, int splits,       \
                                                            int out) {                                  \
        typedef qf_gemm_cfg_##CNAME C;                                                                  \
        std::vector<uint8_t> sm(C::SMEM_BYTES + 16);                                                    \
        /* 16-byte aligned, as the device's __align__(16) (ldmatrix and cp.async check it) */         \
        uint8_t* smem = sm.data() + ((16 - (reinterpret_cast<uintptr_t>(sm.data()) & 15)) & 15);         \
        for (int z = 0; z < splits; ++z) {                                                              \
            long long kb, ke;                                                                           \
            qf_gemm_krange<C>(K, splits, z, &kb, &ke);                                                  \
            char* yz = static_cast<char*>(y) + (long long)z * M * N * qf_gemm_out_bytes(out);           \
            for (long long tm = 0; tm < (M + C::BM - 1) / C::BM; ++tm)                                  \
                for (long long tn = 0; tn < (N + C::BN - 1) / C::BN; ++tn)                              \
                    qf_gemm_tile<F, MMA, C>(x, w, grid, yz, out, M, N, K, kb, ke, tm, tn, smem);          \
        }                                                                                               \
        if (qf_cp_async_pending() != 0) {                                                               \
            fprintf(stderr, "qf_host_gemm: %zu cp.async copies never waited for\n", qf_cp_async_pending()); \
            abort();                                                                                    \
        }                                                                                               \
    }
