// qforge kernels-cuda/gemm_tiled.cuh: the fused GEMM's tiled instances (M above the skinny
// ones'), over the same traits struct and the same `decode` as gemm_skinny.cuh.
//
// At large M the GEMM is bound by the tensor cores, so what costs is everything around the
// mma: a weight decoded once per CTA serves BM activation rows, and every global read must be
// in flight while the tensor cores work. Three streams, one barrier per k-step of BK:
//  - the weights' raw blocks, a phase of KP = 256 K elements of BN rows at a time, copied
//    into shared memory with 16-byte cp.async (gemm_skinny.cuh's windows and span), two
//    phases deep: phase q + 1 lands while phase q is decoded;
//  - the f32 activations of k-step i + 2 loaded into registers (16-byte loads where K and the
//    pointer allow) while k-step i is multiplied;
//  - k-step i + 1 produced (activations rounded to T, weights decoded from the staged bytes,
//    both into the other of two shared-memory buffers) while the warps' ldmatrix / mma work
//    on k-step i's buffer.
// Every edge is predicated (rows past M or N, K past the split's range: zeros), so any M, N, K
// works without a padding copy. Written over warp.cuh's interface, so the same body runs on
// the host in the tests.
#pragma once

// A tiled instance: BM activation rows × BN weight rows per CTA, k-steps of BK, WM × WN warps,
// STAGES (2: the body's slots are q & 1) phases of raw weight bytes in flight, SEG bytes of
// shared memory per weight row and phase (qforge-tiling's SKINNY_ROW_BYTES).
// Shared memory is dynamic: SMEM_BYTES = STAGES phases of raw rows and two k-steps of T operand
// tiles (rows padded by 8 elements: ldmatrix rows 16-byte aligned, 8 rows in distinct banks),
// FusedTile::smem_bytes on the Rust side.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_, int SEG_>
struct qf_gemmt_cfg {
    static constexpr bool SKINNY = false;
    static constexpr int MIN_BLOCKS = 1;
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, STAGES = STAGES_, SEG = SEG_;
    static_assert(STAGES == 2, "the body keeps two raw phases, in slots q & 1");
    static constexpr int KP = 256;         // K elements per staged phase (a K-quant block)
    static constexpr int SPP = KP / BK;    // k-steps per phase
    static constexpr int KSPLIT = KP;      // split-k ranges are whole phases
    static constexpr int NW = WM * WN, NTH = 32 * NW;
    static constexpr int WTM = BM / WM, WTN = BN / WN;  // one warp's tile
    static constexpr int MT = WTM / 16, NT = WTN / 8;   // its mma tiles
    static constexpr int LDS = BK + 8;                  // operand row stride (16-bit elements)
    static constexpr int AV = BM * BK / 4 / NTH;        // 4-float activation loads per thread and k-step
    static constexpr int RAW_BYTES = STAGES * BN * SEG, OPS_BYTES = 2 * (BM + BN) * LDS * 2;
    static constexpr int SMEM_BYTES = RAW_BYTES + OPS_BYTES;
    static_assert(WTM % 16 == 0 && WTN % 8 == 0 && BK % 16 == 0 && KP % BK == 0, "whole mma tiles and k-steps");
    static_assert(AV * 4 * NTH == BM * BK && AV >= 1, "whole 4-float loads per thread");
    static_assert(SEG % 16 == 0 && RAW_BYTES % 16 == 0, "16-byte copies and operand tiles");
};

// Per-thread state held across phases (on the device, the thread's registers; on the host,
// every thread's).
#ifdef __CUDA_ARCH__
#define QF_THREAD_SLOTS(NTH) 1
#define QF_THREAD_SLOT(t) 0
#else
#define QF_THREAD_SLOTS(NTH) (NTH)
#define QF_THREAD_SLOT(t) (t)
#endif

// Four 32-bit words to shared memory at p (16-byte aligned): one 16-byte store on the device.
QF_HD void qf_st_shared16(uint16_t* p, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
#ifdef __CUDA_ARCH__
    *reinterpret_cast<uint4*>(p) = make_uint4(a, b, c, d);
#else
    qf_st_pair(p, a);
    qf_st_pair(p + 2, b);
    qf_st_pair(p + 4, c);
    qf_st_pair(p + 6, d);
#endif
}

// Four f32 at p (16-byte aligned on the device).
QF_HD void qf_ld_f32x4(const float* p, float* v) {
#ifdef __CUDA_ARCH__
    const float4 q = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
#else
    for (int u = 0; u < 4; ++u) v[u] = p[u];
#endif
}

// One CTA's tile (tm, tn) of y (elements of type `out`) over the K range [kb, ke) (kb a
// multiple of KP from the row's start). smem: C::SMEM_BYTES, 16-byte aligned.
template <class F, class T, class C>
QF_HD void qf_gemmt_tile(const float* x, const uint8_t* w, const uint8_t* grid, void* y, int out, long long M,
                         long long N, long long K, long long kb, long long ke, long long tm, long long tn,
                         uint8_t* smem) {
    typedef qf_gemms_span<F> S;
    constexpr int CH = F::CHUNK, CPK = C::BK / CH, BK = C::BK, NTH = C::NTH;
    static_assert(C::BK % CH == 0 && CH % 8 == 0, "a k-step holds whole chunks of 16-byte stores");
    static_assert(S::max_bytes(C::KP) + 15 <= C::SEG, "a phase's bytes of a row fit its SEG");
    static_assert(C::BN * CPK % NTH == 0, "whole chunks per thread");
    uint8_t* Raw = smem;
    uint16_t* As = reinterpret_cast<uint16_t*>(smem + C::RAW_BYTES);
    uint16_t* Ws = As + 2 * C::BM * C::LDS;
    const long long m0 = tm * C::BM, n0 = tn * C::BN;
    const long long nk = ke > kb ? (ke - kb + BK - 1) / BK : 0;
    const long long nph = ke > kb ? (ke - kb + C::KP - 1) / C::KP : 0;
    const long long total = N * S(K, 0, K).stride;  // bytes of the tensor's values
    const int nrows = N - n0 < C::BN ? (int)(N - n0) : C::BN;
    // 16-byte activation loads: rows of whole 4-float groups from a 16-byte aligned start.
    const bool vec = (K & 3) == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0;

    qf_frag_c acc[QF_WARP_SLOTS(C::NW)][C::MT][C::NT][QF_LANE_SLOTS];
    qf_zero_acc<C::NW, C::MT, C::NT>(acc);

    // Phase q's raw bytes of the CTA's rows into its slot (q & 1): one cp.async group.
    auto issue_raw = [&](long long q) {
        const long long pk0 = kb + q * C::KP, pk1 = ke < pk0 + C::KP ? ke : pk0 + C::KP;
        const S sp(K, pk0, pk1);
        const long long lo0 = n0 * sp.stride + sp.first;
        qf_gemm_stage_rows<NTH, C::SEG>(Raw + (int)(q & 1) * (C::BN * C::SEG), w, total, sp, lo0, nrows);
    };

    // K-step i's activations (BM × BK, 0 outside M × [kb, ke)) into each thread's registers:
    // thread t's j-th 4-float group is e = t + j·NTH of the step, row e / (BK / 4).
    float xv[QF_THREAD_SLOTS(NTH)][C::AV][4];
    auto load_act = [&](long long i) {
        const long long k0 = kb + i * BK;
        qf_for_threads<NTH>([&](int t) {
            float(*v)[4] = xv[QF_THREAD_SLOT(t)];
#pragma unroll
            for (int j = 0; j < C::AV; ++j) {
                const int e = t + j * NTH, r = e / (BK / 4), c = 4 * (e % (BK / 4));
                const long long gm = m0 + r, gk = k0 + c;
                const float* p = x + gm * K + gk;
                if (vec && gm < M && gk + 4 <= ke) {
                    qf_ld_f32x4(p, v[j]);
                } else {
#pragma unroll
                    for (int u = 0; u < 4; ++u) v[j][u] = gm < M && gk + u < ke ? p[u] : 0.0f;
                }
            }
        });
    };

    // The span of the phase `produce` is in (CTA-uniform): its index, the rows' byte stride,
    // its first element e0, row 0's first byte, and its elements from e0 to its end / its start.
    struct {
        long long q, stride, e0, lo0;
        int span, lead;
    } ph = {-1, 0, 0, 0, 0, 0};
    // K-step i's operands into buffer i & 1: the activations from the registers rounded to T,
    // the weights decoded from phase i / SPP's staged bytes (0 past the phase's end: a block's
    // padding, the split's end; rows past N decode row 0's bytes, whose products land in
    // columns the epilogue does not store).
    auto produce = [&](long long i) {
        uint16_t* as = As + (int)(i & 1) * (C::BM * C::LDS);
        uint16_t* wsm = Ws + (int)(i & 1) * (C::BN * C::LDS);
        qf_for_threads<NTH>([&](int t) {
            const float(*v)[4] = xv[QF_THREAD_SLOT(t)];
#pragma unroll
            for (int j = 0; j < C::AV; ++j) {
                const int e = t + j * NTH, r = e / (BK / 4), c = 4 * (e % (BK / 4));
                qf_st_pair(as + r * C::LDS + c, T::pack2(v[j][0], v[j][1]));
                qf_st_pair(as + r * C::LDS + c + 2, T::pack2(v[j][2], v[j][3]));
            }
        });
        const long long q = i / C::SPP;
        const int s = (int)(i % C::SPP);
        if (q != ph.q) {
            // The phase's span, once per phase (SPP k-steps): the same for the whole CTA.
            const long long pk0 = kb + q * C::KP, pk1 = ke < pk0 + C::KP ? ke : pk0 + C::KP;
            const S sp(K, pk0, pk1);
            ph = {q, sp.stride, sp.e0, n0 * sp.stride + sp.first, (int)(pk1 - sp.e0), (int)(pk0 - sp.e0)};
        }
        const long long lo0 = ph.lo0;
        const int span = ph.span, lead = ph.lead;
        const uint8_t* raw = Raw + (int)(q & 1) * (C::BN * C::SEG);
        qf_for_threads<NTH>([&](int t) {
#pragma unroll
            for (int j = 0; j < C::BN * CPK / NTH; ++j) {
                const int it = t + j * NTH, r = it / CPK, c = it % CPK;
                const int rr = r < nrows ? r : 0;
                const int rel = lead + s * BK + c * CH, rem = span - rel;
                uint32_t pk[CH / 2];
                if (rem > 0) {
                    qf_gemms_pairs<F, T>(raw + rr * C::SEG + (int)((lo0 + rr * ph.stride) & 15), ph.e0,
                                         (unsigned)rel, rem < CH, rem, grid, n0 + rr, K, pk);
                } else {
#pragma unroll
                    for (int u = 0; u < CH / 2; ++u) pk[u] = 0u;
                }
                uint16_t* dst = wsm + r * C::LDS + c * CH;
#pragma unroll
                for (int u = 0; u < CH / 8; ++u)
                    qf_st_shared16(dst + 8 * u, pk[4 * u], pk[4 * u + 1], pk[4 * u + 2], pk[4 * u + 3]);
            }
        });
    };

    // K-step i's products from buffer i & 1.
    auto multiply = [&](long long i) {
        const uint16_t* as = As + (int)(i & 1) * (C::BM * C::LDS);
        const uint16_t* wsm = Ws + (int)(i & 1) * (C::BN * C::LDS);
        qf_for_warps<C::NW>([&](int ws, int wid) {
            const int wm = wid / C::WN, wn = wid % C::WN;
#pragma unroll
            for (int ks = 0; ks < BK; ks += 16) {
                qf_frag_a a[C::MT][QF_LANE_SLOTS];
                qf_frag_b b[C::NT][QF_LANE_SLOTS];
#pragma unroll
                for (int i2 = 0; i2 < C::MT; ++i2)
                    qf_ldsm_frag_a(a[i2], as + (wm * C::WTM + i2 * 16) * C::LDS + ks, C::LDS);
#pragma unroll
                for (int j = 0; j < C::NT; ++j) qf_ldsm_frag_b(b[j], wsm + (wn * C::WTN + j * 8) * C::LDS + ks, C::LDS);
#pragma unroll
                for (int i2 = 0; i2 < C::MT; ++i2)
#pragma unroll
                    for (int j = 0; j < C::NT; ++j) qf_mma_m16n8k16<T>(acc[ws][i2][j], a[i2], b[j]);
            }
        });
    };

    // Prologue: phases 0 and 1 in flight, phase 0 landed, k-step 0 produced, k-step 1's
    // activations loading.
    if (nk > 0) {
        issue_raw(0);
        if (nph > 1) {
            issue_raw(1);
            qf_cp_async_wait<1>();
        } else {
            qf_cp_async_wait<0>();
        }
        load_act(0);
        qf_sync();
        produce(0);
        if (nk > 1) load_act(1);
    }
    // Iteration i: one barrier (k-step i's operands visible; every warp done with buffer
    // (i + 1) & 1 and, when k-step i + 1 opens a phase, with the slot phase i / SPP + 2 takes),
    // then k-step i multiplied while k-step i + 1 is produced and k-step i + 2's activations
    // load. A phase's raw bytes are waited for just before the barrier in front of its first
    // k-step's production: they had a whole phase to land.
    for (long long i = 0; i < nk; ++i) {
        const bool opens = (i + 1) % C::SPP == 0 && i + 1 < nk;
        if (opens) qf_cp_async_wait<0>();
        qf_sync();
        if (opens && (i + 1) / C::SPP + 1 < nph) issue_raw((i + 1) / C::SPP + 1);
        multiply(i);
        if (i + 1 < nk) {
            produce(i + 1);
            if (i + 2 < nk) load_act(i + 2);
        }
    }
    qf_cp_async_wait<0>();

    qf_gemm_epilogue<C>(acc, y, out, M, N, m0, n0);
}
