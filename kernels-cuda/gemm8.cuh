// qforge kernels-cuda/gemm8.cuh: the 8-bit tensor-core GEMM of formats with an integer
// group dot (A8W4DQ: int4g weights, `ActKind::Int8Dyn` activations):
//   y[m][n] = scale_a[m] · Σ_g s_g[n] · Σ_{k in g} (qa[m][k] − zp[m]) · qw[n][k]
// exactly the CPU's `--act-quant int8-dyn` dot (qforge-int4g's A8W4Dot): the integer sums
// are exact (mma.m16n8k32 s8 × s8 → s32, the zero point taken out with the weight codes'
// sum), each group's sum is converted to f32, multiplied by the group's scale and added in
// f32 in group order, the activation scale applied once at the end. The activations are
// quantized on the device by qf_quantize_i8dyn_row (torchao's per-token asymmetric rule,
// qforge-cpu's `int8_dyn_params`), so the whole product is the CPU's, bit for bit.
//
// What a format provides (its traits struct): `typedef … CODES;` with
//   static void codes8(const uint8_t* values, int group, int i, int8_t* out)
// — the signed codes of elements i..i+7 (i a multiple of 8) of one group of `group`
// elements whose values start at `values`. The rest comes from the registry's
// `Layout::Groups` at run time: the group size (a power of two ≥ 32, so a 32-wide k-step
// never straddles two groups), the group's bytes and the scale's dtype (the scale leads the
// group), so one kernel serves every variant of the format.
//
// Written over warp.cuh's interface like gemm.cuh: the host wrappers run the same tile.
#pragma once
#include "warp.cuh"

// Row stride (bytes) of the int8 tiles in shared memory: BK + 16 keeps the rows 16-byte
// aligned and spreads the fragment loads over the banks.
template <class C>
struct qf_a8_cfg {
    static_assert(C::BK == 32, "the A8 GEMM runs one m16n8k32 per k-step");
    static constexpr int LDS = C::BK + 16;
    static constexpr int SMEM = (C::BM + C::BN) * LDS;  // As then Ws, bytes
};

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
// One CTA of NTH threads per row: q[row·lda + k] for k < lda (0 past K), scale[row], zp[row].
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

// ---- the generic 8-bit tile loop ---------------------------------------------------------
// Side data of one tile in shared memory: per activation row (BM) and per weight row (BN) of
// the current k-step an int and two floats; each policy uses what it needs.
template <class C>
struct qf_i8_side {
    int ai[C::BM];
    float af[2][C::BM];
    int wi[C::BN];
    float wf[2][C::BN];
};

// One CTA's tile (tm, tn) of an M × N product over K in k-steps of 32: per step the policy P
// stages the activation codes (P::act_quad, 4 codes at row gm, column k; only for gm < M) and
// per-row data (P::act_step), decodes each weight row's 32 codes into shared memory with its
// per-row data (P::weight_step, zeros past N and K), the warps run mma.m16n8k32 s8 into s32
// accumulators, and P::fold moves them into the f32 accumulators (when P::fold_now says so);
// the epilogue stores P::result(f32 accumulator, m) through store(index, value).
// smem: qf_a8_cfg<C>::SMEM bytes (16-byte aligned).
template <class C, class P, class St>
QF_HD void qf_gemm_i8_tile(const P& p, St&& store, long long M, long long N, long long K, long long tm, long long tn,
                           int8_t* smem, qf_i8_side<C>& sd) {
    typedef qf_a8_cfg<C> A;
    int8_t* As = smem;
    int8_t* Ws = smem + C::BM * A::LDS;
    const long long m0 = tm * C::BM, n0 = tn * C::BN;

    qf_frag_c32 iacc[QF_WARP_SLOTS(C::NW)][C::MT][C::NT][QF_LANE_SLOTS];
    qf_frag_c facc[QF_WARP_SLOTS(C::NW)][C::MT][C::NT][QF_LANE_SLOTS];
    qf_zero_acc<C::NW, C::MT, C::NT>(iacc);
    qf_zero_acc<C::NW, C::MT, C::NT>(facc);
    qf_for_threads<C::NTH>([&](int t) {
        for (int r = t; r < C::BM; r += C::NTH) p.tile_row(sd, r, m0 + r, M);
    });

    for (long long k0 = 0; k0 < K; k0 += C::BK) {
        // Activations: BM rows × BK codes (0 past M), and their per-row data.
        qf_for_threads<C::NTH>([&](int t) {
            for (int e = t; e < C::BM * (C::BK / 4); e += C::NTH) {
                const int r = e / (C::BK / 4), c = 4 * (e % (C::BK / 4));
                const long long gm = m0 + r;
                qf_st_quad(As + r * A::LDS + c, gm < M ? p.act_quad(gm, k0 + c) : 0u);
            }
            for (int r = t; r < C::BM; r += C::NTH) p.act_step(sd, r, m0 + r, M, k0);
        });
        // Weights: one thread per row decodes its BK codes and per-row data.
        qf_for_threads<C::NTH>([&](int t) {
            for (int r = t; r < C::BN; r += C::NTH) p.weight_step(sd, r, n0 + r, N, K, k0, Ws + r * A::LDS);
        });
        qf_sync();
        const bool fold = p.fold_now(k0, K);
        qf_for_warps<C::NW>([&](int s, int wid) {
            const int wm = wid / C::WN, wn = wid % C::WN;
            qf_frag_a8 a[C::MT][QF_LANE_SLOTS];
            qf_frag_b8 b[C::NT][QF_LANE_SLOTS];
            qf_for_lanes([&](int ls, int lane) {
#pragma unroll
                for (int i = 0; i < C::MT; ++i)
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        const int r = wm * C::WTM + i * 16 + qf_frag_a8_row(lane, 4 * q);
                        a[i][ls].r[q] = qf_ld_quad(As + r * A::LDS + qf_frag_a8_col(lane, 4 * q));
                    }
#pragma unroll
                for (int j = 0; j < C::NT; ++j)
#pragma unroll
                    for (int q = 0; q < 2; ++q) {
                        const int n = wn * C::WTN + j * 8 + qf_frag_b_col(lane);
                        b[j][ls].r[q] = qf_ld_quad(Ws + n * A::LDS + qf_frag_b8_row(lane, 4 * q));
                    }
            });
#pragma unroll
            for (int i = 0; i < C::MT; ++i)
#pragma unroll
                for (int j = 0; j < C::NT; ++j) qf_mma_m16n8k32_s8(iacc[s][i][j], a[i], b[j]);
            qf_for_lanes([&](int ls, int lane) {
                qf_for_acc<C>(wid, lane, [&](int i, int j, int e, int r, int n) {
                    p.fold(sd, fold, r, n, iacc[s][i][j][ls].r[e], facc[s][i][j][ls].r[e]);
                });
            });
        });
        qf_sync();
    }

    qf_for_warps<C::NW>([&](int s, int wid) {
        qf_for_lanes([&](int ls, int lane) {
            qf_for_acc<C>(wid, lane, [&](int i, int j, int e, int r, int c) {
                const long long m = m0 + r, n = n0 + c;
                if (m < M && n < N) store(m * N + n, p.result(facc[s][i][j][ls].r[e], m));
            });
        });
    });
}

// ---- A8W4DQ: the policy of the integer group dot ------------------------------------------
// xq: M × lda int8 (0 past K), xs / xz: per-row scale and zero point; w: N rows of
// ceil(K / group) groups of gbytes bytes (scale of dtype sdt, then the values). Side data:
// ai = the row's zero point, wi = the step's code sum, wf[0] = the group's scale.
template <class F>
struct qf_a8_policy {
    const int8_t* xq;
    const float* xs;
    const int* xz;
    const uint8_t* w;
    long long lda;
    int group, gbytes, sdt;
    template <class C>
    QF_HD void tile_row(qf_i8_side<C>& sd, int r, long long gm, long long M) const {
        sd.ai[r] = gm < M ? xz[gm] : 0;
    }
    QF_HD uint32_t act_quad(long long gm, long long k) const { return qf_ld_quad(xq + gm * lda + k); }
    template <class C>
    QF_HD void act_step(qf_i8_side<C>&, int, long long, long long, long long) const {}
    template <class C>
    QF_HD void weight_step(qf_i8_side<C>& sd, int r, long long row, long long N, long long K, long long k0,
                           int8_t* dst) const {
        int sum = 0;
        float sc = 0.0f;
        if (row < N) {
            const long long row_bytes = (K + group - 1) / group * gbytes;
            const uint8_t* g = w + row * row_bytes + (k0 / group) * gbytes;
            sc = qf_group_scale(g, sdt);
#pragma unroll
            for (int c = 0; c < 32; c += 8) {
                int8_t v[8];
                F::CODES::codes8(g + qf_group_scale_bytes(sdt), group, (int)(k0 % group) + c, v);
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    dst[c + j] = k0 + c + j < K ? v[j] : (int8_t)0;
                    sum += dst[c + j];
                }
            }
        } else {
            for (int c = 0; c < 32; ++c) dst[c] = 0;
        }
        sd.wi[r] = sum;
        sd.wf[0][r] = sc;
    }
    // The group's last k-step folds its integer sums into the f32 accumulators.
    QF_HD bool fold_now(long long k0, long long K) const { return (k0 + 32) % group == 0 || k0 + 32 >= K; }
    // The zero point's share, exact in integers; at a group's end × the group scale, in f32.
    template <class C>
    QF_HD void fold(const qf_i8_side<C>& sd, bool now, int r, int n, int& acc, float& f) const {
        acc -= sd.ai[r] * sd.wi[n];
        if (now) {
            f += (float)acc * sd.wf[0][n];
            acc = 0;
        }
    }
    // The activation scale, once.
    QF_HD float result(float f, long long m) const { return f * xs[m]; }
};

template <class F, class O, class C>
QF_HD void qf_gemm_a8_tile(const int8_t* xq, const float* xs, const int* xz, const uint8_t* w, typename O::T* y,
                           long long M, long long N, long long K, long long lda, int group, int gbytes, int sdt,
                           long long tm, long long tn, int8_t* smem, qf_i8_side<C>& sd) {
    const qf_a8_policy<F> p{xq, xs, xz, w, lda, group, gbytes, sdt};
    qf_gemm_i8_tile<C>(p, [&](long long i, float v) { y[i] = O::conv(v); }, M, N, K, tm, tn, smem, sd);
}

// Threads of the activation quantizer's CTA (one row each).
#define QF_I8DYN_THREADS 256

#ifdef __CUDACC__
template <class F, class O, class C>
__device__ __forceinline__ void qf_gemm_a8_kernel(const int8_t* xq, const float* xs, const int* xz, const uint8_t* w,
                                                  typename O::T* y, long long M, long long N, long long K,
                                                  long long lda, int group, int gbytes, int sdt) {
    __shared__ __align__(16) int8_t smem[qf_a8_cfg<C>::SMEM];
    __shared__ qf_i8_side<C> sd;
    qf_gemm_a8_tile<F, O, C>(xq, xs, xz, w, y, M, N, K, lda, group, gbytes, sdt, blockIdx.y, blockIdx.x, smem, sd);
}

#define QF_GEMM_A8_KERNEL(F, NAME, ONAME, OUT)                                                          \
    extern "C" __global__ void __launch_bounds__(qf_gemm_cfg_a8::NTH)                              \
        qforge_gemm_##NAME##_a8_##ONAME(const int8_t* xq, const float* xs, const int* xz, const uint8_t* w, \
                                        OUT::T* y, long long M, long long N, long long K, long long lda,   \
                                        int group, int gbytes, int sdt) {                                \
        qf_gemm_a8_kernel<F, OUT, qf_gemm_cfg_a8>(xq, xs, xz, w, y, M, N, K, lda, group, gbytes, sdt); \
    }

// The module of a format with the integer group dot: the activation quantizer (grid M, block
// QF_I8DYN_THREADS) and the GEMM for each output type (grid (ceil(N/BN), ceil(M/BM))).
#define QF_GEMM_A8_INSTANTIATE(F, NAME)                                                                 \
    extern "C" __global__ void __launch_bounds__(QF_I8DYN_THREADS)                                      \
        qforge_quantize_int8_dyn(const float* x, int8_t* q, float* scale, int* zp, long long K, long long lda) { \
        __shared__ float red[2 * QF_I8DYN_THREADS], par[3];                                             \
        qf_quantize_i8dyn_row<QF_I8DYN_THREADS>(x, q, scale, zp, K, lda, blockIdx.x, red, par);         \
    }                                                                                                   \
    QF_GEMM_A8_KERNEL(F, NAME, f32, qf_out_f32)                                                         \
    QF_GEMM_A8_KERNEL(F, NAME, f16, qf_out_f16)                                                         \
    QF_GEMM_A8_KERNEL(F, NAME, bf16, qf_out_bf16)
#endif

// Host wrappers: the CTAs one after the other.
#define QF_HOST_GEMM_A8(F, NAME, ONAME, OUT)                                                            \
    extern "C" void qf_host_gemm_##NAME##_a8_##ONAME(const int8_t* xq, const float* xs, const int* xz,  \
                                                     const uint8_t* w, OUT::T* y, long long M, long long N, \
                                                     long long K, long long lda, int group, int gbytes, int sdt) { \
        typedef qf_gemm_cfg_a8 C;                                                                  \
        alignas(16) int8_t smem[qf_a8_cfg<C>::SMEM];                                                    \
        qf_i8_side<C> sd;                                                                               \
        for (long long tm = 0; tm < (M + C::BM - 1) / C::BM; ++tm)                                      \
            for (long long tn = 0; tn < (N + C::BN - 1) / C::BN; ++tn)                                  \
                qf_gemm_a8_tile<F, OUT, C>(xq, xs, xz, w, y, M, N, K, lda, group, gbytes, sdt, tm, tn, smem, sd); \
    }
#define QF_HOST_GEMM_A8_INSTANTIATE(F, NAME)                                                            \
    QF_HOST_GEMM_A8(F, NAME, f32, qf_out_f32)                                                           \
    QF_HOST_GEMM_A8(F, NAME, f16, qf_out_f16)                                                           \
    QF_HOST_GEMM_A8(F, NAME, bf16, qf_out_bf16)
// Once per host translation unit (the quantizer belongs to no format).
#define QF_HOST_QUANTIZE_I8DYN                                                                          \
    extern "C" void qf_host_quantize_int8_dyn(const float* x, int8_t* q, float* scale, int* zp, long long M, \
                                              long long K, long long lda) {                             \
        float red[2 * QF_I8DYN_THREADS], par[3];                                                        \
        for (long long r = 0; r < M; ++r)                                                               \
            qf_quantize_i8dyn_row<QF_I8DYN_THREADS>(x, q, scale, zp, K, lda, r, red, par);              \
    }
