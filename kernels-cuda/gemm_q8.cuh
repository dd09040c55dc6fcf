// qforge kernels-cuda/gemm_q8.cuh: the int8 tensor-core GEMM of the GGUF formats whose
// native dot is an integer dot with q8 activations (ggml's vec_dot_type q8_0 / q8_1 / q8_k):
//   y[m][n] = Σ_s ( d_w[n][s]·d_a[m][s] · Σ_{k in s} q_w[n][k]·q_a[m][k]  +  m_w[n][s]·s_a[m][s] )
// over the 32-element sub-blocks s of K (llama.cpp's MMQ does this math). The integer sums
// are exact (mma.m16n8k32 s8 × s8 → s32, one k-step = one sub-block); each step's sum is
// scaled and added to an f32 accumulator. The activations are quantized on the device by the
// activation format's own encoder, so they are the CPU's native activations bit for bit, and
// the product agrees with the CPU's `--act-quant native` mat-mul up to f32 summation order.
//
// What a weight format provides (optional; formats without it keep the f16 / bf16 GEMM):
//   static void codes32(const block* b, int sub, int8_t* q, float* d, float* m)
// — sub-block `sub` (elements [32·sub, 32·sub + 32)) of the block as int8 codes q and f32 d,
// m with w_i = d·q_i + m (up to f32 rounding of the Rust decode).
// What its activation format provides (q8_0, q8_1, q8_k):
//   static void act32(const float* x, qf_block_q8_1* out)
// — BLOCK activations (zero-padded) quantized exactly as the CPU's encode does, written as
// BLOCK / 32 units {d, s, qs[32]}: d the stored scale widened to f32, s the stored sum where
// the format has one (q8_1), else d·Σqs.
//
// Written over warp.cuh's interface: the tile loop is gemm8.cuh's qf_gemm_i8_tile.
#pragma once
#include "gemm8.cuh"

// Whether a traits struct F has the codes32 member (the instantiation static_asserts it; the
// host translation unit reports it per format so a test holds the registry's flag to it).
template <class F, class = void>
struct qf_has_codes32 {
    static constexpr bool value = false;
};
template <class F>
struct qf_has_codes32<F, decltype(F::codes32((const typename F::block*)nullptr, 0, (int8_t*)nullptr, (float*)nullptr,
                                             (float*)nullptr))> {
    static constexpr bool value = true;
};

// One activation block of the activation format A: block `blk` of row `row` (x is M × K f32,
// zeros past K) into units [blk·A::BLOCK/32, …) of the row's `units` units.
template <class A>
QF_HD void qf_quantize_act_block(const float* x, qf_block_q8_1* act, long long K, long long units, long long row,
                                 long long blk) {
    float v[A::BLOCK];
    const long long k0 = blk * A::BLOCK;
    for (int j = 0; j < A::BLOCK; ++j) v[j] = k0 + j < K ? x[row * K + k0 + j] : 0.0f;
    A::act32(v, act + row * units + blk * (A::BLOCK / 32));
}

// The policy of qf_gemm_i8_tile: act holds M rows of `units` units (the weight row's padded
// length / 32), w N rows of units·32 / F::BLOCK blocks. Side data: af = the step's d_a, s_a;
// wf = the step's d_w, m_w.
template <class F>
struct qf_q8_policy {
    const qf_block_q8_1* act;
    const uint8_t* w;
    long long units;
    template <class C>
    QF_HD void tile_row(qf_i8_side<C>&, int, long long, long long) const {}
    QF_HD uint32_t act_quad(long long gm, long long k) const {
        return qf_ld_quad(act[gm * units + k / 32].qs + k % 32);
    }
    template <class C>
    QF_HD void act_step(qf_i8_side<C>& sd, int r, long long gm, long long M, long long k0) const {
        const qf_block_q8_1* a = act + gm * units + k0 / 32;
        sd.af[0][r] = gm < M ? a->d : 0.0f;
        sd.af[1][r] = gm < M ? a->s : 0.0f;
    }
    template <class C>
    QF_HD void weight_step(qf_i8_side<C>& sd, int r, long long row, long long N, long long K, long long k0,
                           int8_t* dst) const {
        float d = 0.0f, m = 0.0f;
        if (row < N) {
            const typename F::block* b =
                reinterpret_cast<const typename F::block*>(w) + row * (units * 32 / F::BLOCK) + k0 / F::BLOCK;
            int8_t q[32];
            F::codes32(b, (int)(k0 % F::BLOCK) / 32, q, &d, &m);
            for (int j = 0; j < 32; ++j) dst[j] = k0 + j < K ? q[j] : (int8_t)0;
        } else {
            for (int j = 0; j < 32; ++j) dst[j] = 0;
        }
        sd.wf[0][r] = d;
        sd.wf[1][r] = m;
    }
    QF_HD bool fold_now(long long, long long) const { return true; }
    // (d_w·d_a)·Σ + m_w·s_a, every step (ggml's per-block formula).
    template <class C>
    QF_HD void fold(const qf_i8_side<C>& sd, bool, int r, int n, int& acc, float& f) const {
        f += sd.wf[0][n] * sd.af[0][r] * (float)acc + sd.wf[1][n] * sd.af[1][r];
        acc = 0;
    }
    QF_HD float result(float f, long long) const { return f; }
};

template <class F, class C>
QF_HD void qf_gemm_q8_tile(const qf_block_q8_1* act, const uint8_t* w, void* y, int out, long long M, long long N,
                           long long K, long long units, long long tm, long long tn, int8_t* smem, qf_i8_side<C>& sd) {
    static_assert(qf_has_codes32<F>::value, "the int8 GEMM needs the format's codes32");
    static_assert(F::BLOCK % 32 == 0, "32-element sub-blocks");
    const qf_q8_policy<F> p{act, w, units};
    qf_gemm_i8_tile<C>(p, [&](long long i, float v) { qf_gemm_store(y, out, i, v); }, M, N, K, tm, tn, smem, sd);
}

// Threads per CTA of the activation quantizer (one activation block per thread).
#define QF_ACT8_THREADS 256

#ifdef __CUDACC__
// qforge_quantize_act8 (grid-stride over M × blocks per row) and qforge_gemm_<format>_q8
// (grid (ceil(N/BN), ceil(M/BM)), out: 0 f32, 1 f16, 2 bf16), on the tile qf_gemm_cfg_a8.
#define QF_GEMM_Q8_INSTANTIATE(F, NAME, ACT)                                                             \
    extern "C" __global__ void __launch_bounds__(QF_ACT8_THREADS)                                       \
        qforge_quantize_act8(const float* x, qf_block_q8_1* act, long long K, long long units, long long M) { \
        const long long per = units * 32 / ACT::BLOCK;                                                  \
        for (long long i = (long long)blockIdx.x * QF_ACT8_THREADS + threadIdx.x; i < M * per;          \
             i += (long long)gridDim.x * QF_ACT8_THREADS)                                               \
            qf_quantize_act_block<ACT>(x, act, K, units, i / per, i % per);                             \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(qf_gemm_cfg_a8::NTH)                                   \
        qforge_gemm_##NAME##_q8(const qf_block_q8_1* act, const uint8_t* w, void* y, long long M, long long N, \
                                long long K, long long units, int out) {                                \
        __shared__ __align__(16) int8_t smem[qf_a8_cfg<qf_gemm_cfg_a8>::SMEM];                           \
        __shared__ qf_i8_side<qf_gemm_cfg_a8> sd;                                                       \
        qf_gemm_q8_tile<F, qf_gemm_cfg_a8>(act, w, y, out, M, N, K, units, blockIdx.y, blockIdx.x, smem, sd); \
    }
#endif

// Host wrappers: the quantizer's blocks and the GEMM's CTAs one after the other.
#define QF_HOST_GEMM_Q8(F, NAME, ACT)                                                                   \
    extern "C" void qf_host_quantize_act8_##NAME(const float* x, qf_block_q8_1* act, long long K,       \
                                                 long long units, long long M) {                        \
        const long long per = units * 32 / ACT::BLOCK;                                                  \
        for (long long i = 0; i < M * per; ++i) qf_quantize_act_block<ACT>(x, act, K, units, i / per, i % per); \
    }                                                                                                   \
    extern "C" void qf_host_gemm_##NAME##_q8(const qf_block_q8_1* act, const uint8_t* w, void* y, long long M, \
                                             long long N, long long K, long long units, int out) {      \
        typedef qf_gemm_cfg_a8 C;                                                                       \
        alignas(16) int8_t smem[qf_a8_cfg<C>::SMEM];                                                    \
        qf_i8_side<C> sd;                                                                               \
        for (long long tm = 0; tm < (M + C::BM - 1) / C::BM; ++tm)                                      \
            for (long long tn = 0; tn < (N + C::BN - 1) / C::BN; ++tn)                                  \
                qf_gemm_q8_tile<F, C>(act, w, y, out, M, N, K, units, tm, tn, smem, sd);                \
    }
