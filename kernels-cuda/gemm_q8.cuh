// qforge kernels-cuda/gemm_q8.cuh: the int8 tensor-core GEMM of the GGUF formats whose
// native dot is an integer dot with q8 activations (ggml's vec_dot_type q8_0 / q8_1 / q8_k):
//   y[m][n] = Σ_s ( d_w[n][s]·d_a[m][s] · Σ_{k in s} q_w[n][k]·q_a[m][k]  +  m_w[n][s]·s_a[m][s] )
// over the 32-element sub-blocks s of K (llama.cpp's MMQ does this math). The integer sums
// are exact (mma.m16n8k32 s8 × s8 → s32, one k-step = one sub-block); each step's sum is
// scaled and added to an f32 accumulator. The activations are quantized on the device by the
// activation format's own encoder, so they are the CPU's native activations bit for bit, and
// the product agrees with the CPU's `--act-quant native` mat-mul up to f32 summation order.
//
// What a weight format provides (optional; formats without it keep the f16 / bf16 GEMM), one
// of:
//   static void codes32(const block* b, int sub, uint32_t* w, float* d, float* m)
// — sub-block `sub` (elements [32·sub, 32·sub + 32)) of the block as int8 codes q_i, packed in
// eight words (byte j of w[t]: q_{4t+j}; common.cuh's qf_bytes_minus / qf_bytes_add do the
// byte arithmetic), and f32 d, m with w_i = d·q_i + m (up to f32 rounding of the Rust decode);
//   static void codes32_s16(const block* b, int sub, uint32_t* w, float* d)
// — the same for a format with a scale per 16 elements and no offset: w_i = d[i / 16]·q_i
// (each half's integer sum is folded with its own scale);
//   static void codes32_s16m(const block* b, int sub, uint32_t* w, float* d, float* m)
// — with an offset per 16 elements too: w_i = d[i / 16]·q_i + m[i / 16] (the offset meets each
// token's code sum over the half, which the tile loop takes from one more mma).
// What its activation format provides (q8_0, q8_1, q8_k):
//   static void act32(const float* x, qf_block_q8_1* out)
// — BLOCK activations (zero-padded) quantized exactly as the CPU's encode does, written as
// BLOCK / 32 units {d, s, qs[32]}: d the stored scale widened to f32, s the stored sum where
// the format has one (q8_1), else d·Σqs. The GEMM reads them as two arrays: the codes (M rows
// of lda, a multiple of 128) and each unit's (d, s) (M rows of lda / 32 pairs).
//
// Written over warp.cuh's interface: the tile loop is gemm8.cuh's transposed qf_gemm_i8t_body,
// split-k where the tiler asks (the f32 partial sums of each K range added up afterwards).
#pragma once
#include "gemm8.cuh"
#include "templates.cuh"  // QF_DETECT

// Whether a traits struct F has one of the views codes32 / codes32_s16 / codes32_s16m (the
// instantiation static_asserts it; the host translation unit reports it per format so a test
// holds the registry's flag to it).
// (templates.cuh's QF_DETECT: whether F declares the static member function.)
QF_DETECT(qf_has_codes32_full, &F::codes32, true)
QF_DETECT(qf_has_codes32_s16, &F::codes32_s16, true)
QF_DETECT(qf_has_codes32_s16m, &F::codes32_s16m, true)
template <class F>
struct qf_has_codes32 {
    static constexpr bool value =
        qf_has_codes32_full<F>::value || qf_has_codes32_s16<F>::value || qf_has_codes32_s16m<F>::value;
};

// One activation block of the activation format A: block `blk` of row `row` (x is M × K f32,
// zeros past K) into the row's codes (lda per row) and (d, s) pairs (lda / 32 per row); the
// row's last block also zeroes the row's tail past `units` units.
template <class A>
QF_HD void qf_quantize_act_block(const float* x, int8_t* codes, float* ds, long long K, long long units, long long lda,
                                 long long row, long long blk) {
    float v[A::BLOCK];
    qf_block_q8_1 u[A::BLOCK / 32];
    const long long k0 = blk * A::BLOCK;
    for (int j = 0; j < A::BLOCK; ++j) v[j] = k0 + j < K ? x[row * K + k0 + j] : 0.0f;
    A::act32(v, u);
    int8_t* c = codes + row * lda;
    float* d = ds + row * (lda / 32) * 2;
    for (int i = 0; i < A::BLOCK / 32; ++i) {
        for (int j = 0; j < 32; ++j) c[k0 + 32 * i + j] = u[i].qs[j];
        d[2 * (k0 / 32 + i)] = u[i].d;
        d[2 * (k0 / 32 + i) + 1] = u[i].s;
    }
    if (k0 + A::BLOCK == units * 32) {
        for (long long k = units * 32; k < lda; ++k) c[k] = 0;
        for (long long i = units; i < lda / 32; ++i) d[2 * i] = d[2 * i + 1] = 0.0f;
    }
}

// The policy of qf_gemm_i8t_body: codes / ds as above (lda per row), w N rows of
// units·32 / F::BLOCK blocks. Side data: the weight sub-block's (d_w, m_w) (halves: d_lo, d_hi,
// m_lo, m_hi), the activation unit's (d_a, s_a).
template <class F>
struct qf_q8_policy {
    static constexpr bool ACT_SIDE = true, HALVES = !qf_has_codes32_full<F>::value;
    static constexpr bool HALF_SUMS = qf_has_codes32_s16m<F>::value;
    const int8_t* codes;
    const float* ds;
    const uint8_t* w;
    long long lda, units;
    QF_HD const int8_t* act_codes(long long m, long long k0) const { return codes + m * lda + k0; }
    QF_HD const float* act_side(long long m, long long k0) const { return ds + 2 * (m * (lda / 32) + k0 / 32); }
    QF_HD int tok_const(long long) const { return 0; }
    QF_HD void decode(long long row, long long K, long long k, uint32_t* q, float* side) const {
        const typename F::block* b =
            reinterpret_cast<const typename F::block*>(w) + row * (units * 32 / F::BLOCK) + k / F::BLOCK;
        const int sub = (int)(k % F::BLOCK) / 32;
        if constexpr (HALF_SUMS) F::codes32_s16m(b, sub, q, side, side + 2);
        else if constexpr (HALVES) F::codes32_s16(b, sub, q, side);
        else F::codes32(b, sub, q, side, side + 1);
        qf_mask_codes32(q, K - k);
    }
    // (d_w·d_a)·Σ + m_w·s_a, every sub-block (ggml's per-block formula); per half
    // (d_h·d_a)·Σ_h (+ m_h·(d_a·Σ_h q_a)).
    QF_HD void fold(const float* wsd, const float* asd, int, long long, int h, int hsum, int& acc, float& f) const {
        if constexpr (HALF_SUMS) f += wsd[h] * asd[0] * (float)acc + wsd[2 + h] * (asd[0] * (float)hsum);
        else if constexpr (HALVES) f += wsd[h] * asd[0] * (float)acc;
        else f += wsd[0] * asd[0] * (float)acc + wsd[1] * asd[1];
        acc = 0;
    }
    QF_HD float result(float f, long long) const { return f; }
};

template <class F, class C>
QF_HD void qf_gemm_q8_tile(const int8_t* codes, const float* ds, const uint8_t* w, void* y, int out, long long M,
                           long long N, long long K, long long lda, long long units, int splits, int z, long long tm,
                           long long tn, uint8_t* smem) {
    static_assert(qf_has_codes32<F>::value, "the int8 GEMM needs the format's codes32 or codes32_s16");
    static_assert(F::BLOCK % 32 == 0, "32-element sub-blocks");
    const qf_q8_policy<F> p{codes, ds, w, lda, units};
    qf_gemm_i8t_tile<qf_q8_policy<F>, C>(p, y, out, M, N, K, splits, z, tm, tn, smem);
}

// Threads per CTA of the activation quantizer (one activation block per thread).
#define QF_ACT8_THREADS 256

#ifdef __CUDACC__
// qforge_quantize_act8: grid-stride over M × blocks per row.
#define QF_QUANTIZE_ACT8_KERNEL(ACT)                                                                    \
    extern "C" __global__ void __launch_bounds__(QF_ACT8_THREADS)                                       \
        qforge_quantize_act8(const float* x, int8_t* codes, float* ds, long long K, long long units, long long lda, \
                             long long M) {                                                             \
        const long long per = units * 32 / ACT::BLOCK;                                                  \
        for (long long i = (long long)blockIdx.x * QF_ACT8_THREADS + threadIdx.x; i < M * per;          \
             i += (long long)gridDim.x * QF_ACT8_THREADS)                                               \
            qf_quantize_act_block<ACT>(x, codes, ds, K, units, lda, i / per, i % per);                  \
    }
// qforge_gemm_<format>_q8_<instance>: instance I (qf_i8_cfg_<I>, named TNAME) on grid
// (ceil(N / ROWS), ceil(M / TOK), splits), block its NTH threads, its SMEM_BYTES of dynamic
// shared memory; out: 0 f32, 1 f16, 2 bf16. With splits > 1, split z writes f32 partial sums
// to y + z·M·N.
#define QF_GEMM_Q8_KERNEL(F, NAME, I, TNAME)                                                            \
    extern "C" __global__ void __launch_bounds__(qf_i8_cfg_##I::NTH)                                    \
        qforge_gemm_##NAME##_q8_##TNAME(const int8_t* codes, const float* ds, const uint8_t* w, void* y, \
                                        long long M, long long N, long long K, long long lda, long long units, \
                                        int splits, int out) {                                          \
        extern __shared__ __align__(16) uint8_t qf_i8_smem[];                                           \
        qf_gemm_q8_tile<F, qf_i8_cfg_##I>(codes, ds, w, y, out, M, N, K, lda, units, splits, (int)blockIdx.z, \
                                          (long long)blockIdx.y, (long long)blockIdx.x, qf_i8_smem);    \
    }
#endif

// Host wrappers: the quantizer's blocks, and instance `inst`'s CTAs (every split z into
// y + z·M·N, f32 partial sums where splits > 1) one after the other.
#define QF_HOST_GEMM_Q8(F, NAME, ACT)                                                                   \
    extern "C" void qf_host_quantize_act8_##NAME(const float* x, int8_t* codes, float* ds, long long K, \
                                                 long long units, long long lda, long long M) {         \
        const long long per = units * 32 / ACT::BLOCK;                                                  \
        for (long long i = 0; i < M * per; ++i)                                                         \
            qf_quantize_act_block<ACT>(x, codes, ds, K, units, lda, i / per, i % per);                  \
    }                                                                                                   \
    extern "C" void qf_host_gemm_##NAME##_q8(const int8_t* codes, const float* ds, const uint8_t* w, void* y, \
                                             long long M, long long N, long long K, long long lda,      \
                                             long long units, int splits, int out, int inst) {          \
        auto tile = [&](auto cfg, int z, long long tm, long long tn, uint8_t* smem) {                   \
            qf_gemm_q8_tile<F, decltype(cfg)>(codes, ds, w, y, out, M, N, K, lda, units, splits, z, tm, tn, smem); \
        };                                                                                              \
        switch (inst) { QF_I8_INSTANCES(QF_HOST_I8T_CASE) }                                             \
        QF_HOST_I8T_CHECK("qf_host_gemm q8")                                                            \
    }
