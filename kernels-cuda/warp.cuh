// qforge kernels-cuda/warp.cuh: the warp-level primitives of the GEMM behind one small
// interface, with a device implementation (PTX) and a host implementation that follows the
// PTX ISA's documented fragment layouts exactly, so that the whole GEMM body compiles for
// the host and is checked there against the CPU reference.
//
// Execution model. Kernel code is written per thread block (CTA) in phases separated by
// qf_sync(). Inside a phase, work is expressed as
//   qf_for_threads<NTH>(fn(t))          every thread t of the CTA,
//   qf_for_warps<NW>(fn(slot, w))       every warp w,
//   qf_for_lanes(fn(slot, lane))        every lane of the current warp.
// On the device each call runs once, for the calling thread (slot 0). On the host one CPU
// thread plays the whole CTA: the loops run over every thread / warp / lane in turn, and a
// barrier is the end of a loop. State that lives across phases in registers on the device
// is declared with QF_WARP_SLOTS(NW) × QF_LANE_SLOTS entries and indexed by the slots
// (1 × 1 on the device: plain registers; NW × 32 on the host: every warp's registers).
#pragma once

#ifdef __CUDA_ARCH__
#define QF_LANE_SLOTS 1
#define QF_WARP_SLOTS(NW) 1
#else
#define QF_LANE_SLOTS 32
#define QF_WARP_SLOTS(NW) (NW)
#endif

template <int NTH, class Fn>
QF_HD void qf_for_threads(Fn&& fn) {
#ifdef __CUDA_ARCH__
    fn((int)threadIdx.x);
#else
    for (int t = 0; t < NTH; ++t) fn(t);
#endif
}

template <int NW, class Fn>
QF_HD void qf_for_warps(Fn&& fn) {
#ifdef __CUDA_ARCH__
    fn(0, (int)(threadIdx.x / 32));
#else
    for (int w = 0; w < NW; ++w) fn(w, w);
#endif
}

template <class Fn>
QF_HD void qf_for_lanes(Fn&& fn) {
#ifdef __CUDA_ARCH__
    fn(0, (int)(threadIdx.x % 32));
#else
    for (int l = 0; l < 32; ++l) fn(l, l);
#endif
}

// A CTA-wide barrier between phases (on the host, phases already run one after the other).
QF_HD void qf_sync() {
#ifdef __CUDA_ARCH__
    __syncthreads();
#endif
}

// Two 16-bit values at p (4-byte aligned) as one 32-bit register, p[0] in the low half.
QF_HD uint32_t qf_ld_pair(const uint16_t* p) {
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const uint32_t*>(p);
#else
    return (uint32_t)p[0] | (uint32_t)p[1] << 16;
#endif
}

// Stores v as two 16-bit values at p (4-byte aligned), the low half at p[0].
QF_HD void qf_st_pair(uint16_t* p, uint32_t v) {
#ifdef __CUDA_ARCH__
    *reinterpret_cast<uint32_t*>(p) = v;
#else
    p[0] = (uint16_t)v;
    p[1] = (uint16_t)(v >> 16);
#endif
}

// ---- mma.sync m16n8k16, f16 / bf16 inputs, f32 accumulators ------------------------------
// One lane's fragments: A (16×16, row-major) four .b32 registers of two 16-bit values each,
// B (16×8, "col": k contiguous per n) two registers, C / D (16×8) four f32.
struct qf_frag_a {
    uint32_t r[4];
};
struct qf_frag_b {
    uint32_t r[2];
};
struct qf_frag_c {
    float r[4];
};

// The PTX ISA's fragment layouts for mma.m16n8k16 with .f16 / .bf16 inputs (section "Matrix
// Fragments for mma.m16n8k16 with floating point type"), with g = laneid >> 2 and
// t = laneid % 4. Element i of a lane's A fragment (register i / 2, low half first):
//   row = g for i in {0, 1, 4, 5}, g + 8 otherwise;  col = 2t + (i & 1) (+ 8 for i >= 4).
// Element i of B: row (k) = 2t + (i & 1) (+ 8 for i >= 2), col (n) = g.
// Element i of C / D: row = g (+ 8 for i >= 2), col = 2t + (i & 1).
QF_HD int qf_frag_a_row(int lane, int i) { return (lane >> 2) + ((i & 2) ? 8 : 0); }
QF_HD int qf_frag_a_col(int lane, int i) { return 2 * (lane & 3) + (i & 1) + (i >= 4 ? 8 : 0); }
QF_HD int qf_frag_b_row(int lane, int i) { return 2 * (lane & 3) + (i & 1) + (i >= 2 ? 8 : 0); }
QF_HD int qf_frag_b_col(int lane) { return lane >> 2; }
QF_HD int qf_frag_c_row(int lane, int i) { return (lane >> 2) + (i >= 2 ? 8 : 0); }
QF_HD int qf_frag_c_col(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

// Every accumulator element one lane of warp `wid` holds in a CTA tile of config C (C::WN
// warps across, each warp C::MT × C::NT m16n8 tiles of C::WTM × C::WTN): f(i, j, e, r, c),
// tile (i, j), register e, at row r and column c of the CTA tile. The GEMMs' epilogues and
// per-element accumulator updates walk their fragments with it.
template <class C, class Fn>
QF_HD void qf_for_acc(int wid, int lane, Fn&& f) {
    const int wm = wid / C::WN, wn = wid % C::WN;
#pragma unroll
    for (int i = 0; i < C::MT; ++i)
#pragma unroll
        for (int j = 0; j < C::NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                f(i, j, e, wm * C::WTM + i * 16 + qf_frag_c_row(lane, e), wn * C::WTN + j * 8 + qf_frag_c_col(lane, e));
}

// Every lane's accumulators of an A × B tile of fragments (qf_frag_c, qf_frag_c32) of each of
// NW warps set to zero: the GEMMs' first step.
template <int NW, int A, int B, class Frag>
QF_HD void qf_zero_acc(Frag (*acc)[A][B][QF_LANE_SLOTS]) {
    qf_for_warps<NW>([&](int ws, int) {
        qf_for_lanes([&](int ls, int) {
#pragma unroll
            for (int i = 0; i < A; ++i)
#pragma unroll
                for (int j = 0; j < B; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[ws][i][j][ls].r[e] = 0;
        });
    });
}

// pack2(lo, hi): the two values rounded as conv does, lo in the low half: one `cvt.rn.*x2.f32`
// on the device, where a NaN becomes the canonical NaN (what the mma makes of a NaN does not
// depend on its payload, so fragments need no more than that).
struct qf_mma_f16 {
    static constexpr bool BF16 = false;
    // The 16-bit pattern of an f32 value, round to nearest even.
    QF_HD static uint16_t conv(float v) { return qf_f32_to_f16_bits(v); }
    QF_HD static float widen(uint32_t h) { return qf_half_to_f32(h); }
    QF_HD static uint32_t pack2(float lo, float hi) {
#ifdef __CUDA_ARCH__
        uint32_t r;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
#else
        return (uint32_t)conv(lo) | (uint32_t)conv(hi) << 16;
#endif
    }
};
struct qf_mma_bf16 {
    static constexpr bool BF16 = true;
    QF_HD static uint16_t conv(float v) { return qf_f32_to_bf16_bits(v); }
    QF_HD static float widen(uint32_t h) { return qf_bits_to_f32(h << 16); }
    QF_HD static uint32_t pack2(float lo, float hi) {
#ifdef __CUDA_ARCH__
        uint32_t r;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
#else
        return (uint32_t)conv(lo) | (uint32_t)conv(hi) << 16;
#endif
    }
};

// D = A·B + C for the warp: d, a, b each hold QF_LANE_SLOTS lanes' fragments (the calling
// lane's on the device, all 32 on the host).
template <class T>
QF_HD void qf_mma_m16n8k16(qf_frag_c* d, const qf_frag_a* a, const qf_frag_b* b) {
#ifdef __CUDA_ARCH__
    if constexpr (!T::BF16) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d->r[0]), "+f"(d->r[1]), "+f"(d->r[2]), "+f"(d->r[3])
            : "r"(a->r[0]), "r"(a->r[1]), "r"(a->r[2]), "r"(a->r[3]), "r"(b->r[0]), "r"(b->r[1]));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d->r[0]), "+f"(d->r[1]), "+f"(d->r[2]), "+f"(d->r[3])
            : "r"(a->r[0]), "r"(a->r[1]), "r"(a->r[2]), "r"(a->r[3]), "r"(b->r[0]), "r"(b->r[1]));
    }
#else
    // Gather the three matrices from the 32 lanes' fragments, multiply, scatter D back.
    float A[16][16], B[16][8], C[16][8];
    for (int lane = 0; lane < 32; ++lane) {
        for (int i = 0; i < 8; ++i) {
            const uint32_t h = (a[lane].r[i / 2] >> (16 * (i & 1))) & 0xffffu;
            A[qf_frag_a_row(lane, i)][qf_frag_a_col(lane, i)] = T::widen(h);
        }
        for (int i = 0; i < 4; ++i) {
            const uint32_t h = (b[lane].r[i / 2] >> (16 * (i & 1))) & 0xffffu;
            B[qf_frag_b_row(lane, i)][qf_frag_b_col(lane)] = T::widen(h);
        }
        for (int i = 0; i < 4; ++i) C[qf_frag_c_row(lane, i)][qf_frag_c_col(lane, i)] = d[lane].r[i];
    }
    for (int lane = 0; lane < 32; ++lane) {
        for (int i = 0; i < 4; ++i) {
            const int r = qf_frag_c_row(lane, i), c = qf_frag_c_col(lane, i);
            // f16 × f16 and bf16 × bf16 products are exact in f32; their sum is rounded once
            // per k16 step here (the tensor core's internal order is unspecified: the tests'
            // tolerance covers any order).
            float s = 0.0f;
            for (int k = 0; k < 16; ++k) s += A[r][k] * B[k][c];
            d[lane].r[i] = C[r][c] + s;
        }
    }
#endif
}

// ---- mma.sync m16n8k32, 8-bit inputs (s8 × s8 → s32) --------------------------------------
// One lane's fragments: A (16×32, row-major) four .b32 registers of four 8-bit values each
// (byte 0 first), B (32×8, "col": k contiguous per n) two registers, C / D (16×8) four s32.
struct qf_frag_a8 {
    uint32_t r[4];
};
struct qf_frag_b8 {
    uint32_t r[2];
};
struct qf_frag_c32 {
    int r[4];
};

// The PTX ISA's fragment layouts for mma.m16n8k32 with .s8 / .u8 (and .e4m3 / .e5m2) inputs
// (section "Matrix Fragments for mma.m16n8k32"), g = laneid >> 2, t = laneid % 4. Element i
// of a lane's A fragment (register i / 4, byte i % 4):
//   row = g for i in 0..4 and 8..12, g + 8 otherwise;  col = 4t + (i & 3) (+ 16 for i >= 8).
// Element i of B: row (k) = 4t + (i & 3) (+ 16 for i >= 4), col (n) = g.
// C / D: the m16n8k16 layout (qf_frag_c_row / qf_frag_c_col).
QF_HD int qf_frag_a8_row(int lane, int i) { return (lane >> 2) + ((i & 4) ? 8 : 0); }
QF_HD int qf_frag_a8_col(int lane, int i) { return 4 * (lane & 3) + (i & 3) + (i >= 8 ? 16 : 0); }
QF_HD int qf_frag_b8_row(int lane, int i) { return 4 * (lane & 3) + (i & 3) + (i >= 4 ? 16 : 0); }

// Four 8-bit values at p (4-byte aligned) as one 32-bit register, p[0] in the low byte.
QF_HD uint32_t qf_ld_quad(const int8_t* p) {
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const uint32_t*>(p);
#else
    return (uint32_t)(uint8_t)p[0] | (uint32_t)(uint8_t)p[1] << 8 | (uint32_t)(uint8_t)p[2] << 16 |
           (uint32_t)(uint8_t)p[3] << 24;
#endif
}

// D = A·B + C for the warp, s8 inputs, s32 accumulators (exact: the ISA's integer mma
// wraps only past 2^31, which the A8 GEMM never reaches: |Σ| ≤ 32·128·128 per step).
QF_HD void qf_mma_m16n8k32_s8(qf_frag_c32* d, const qf_frag_a8* a, const qf_frag_b8* b) {
#ifdef __CUDA_ARCH__
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(d->r[0]), "+r"(d->r[1]), "+r"(d->r[2]), "+r"(d->r[3])
        : "r"(a->r[0]), "r"(a->r[1]), "r"(a->r[2]), "r"(a->r[3]), "r"(b->r[0]), "r"(b->r[1]));
#else
    int A[16][32], B[32][8], C[16][8];
    for (int lane = 0; lane < 32; ++lane) {
        for (int i = 0; i < 16; ++i)
            A[qf_frag_a8_row(lane, i)][qf_frag_a8_col(lane, i)] = (int8_t)(a[lane].r[i / 4] >> (8 * (i & 3)));
        for (int i = 0; i < 8; ++i)
            B[qf_frag_b8_row(lane, i)][qf_frag_b_col(lane)] = (int8_t)(b[lane].r[i / 4] >> (8 * (i & 3)));
        for (int i = 0; i < 4; ++i) C[qf_frag_c_row(lane, i)][qf_frag_c_col(lane, i)] = d[lane].r[i];
    }
    for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 4; ++i) {
            const int r = qf_frag_c_row(lane, i), c = qf_frag_c_col(lane, i);
            int s = C[r][c];
            for (int k = 0; k < 32; ++k) s += A[r][k] * B[k][c];
            d[lane].r[i] = s;
        }
#endif
}

// ==== Pipelining and matrix loads: cp.async, commit / wait groups, ldmatrix ===============
// (A section of its own: the 8-bit fragments live above with the other mma fragments.)
//
// cp.async: an asynchronous 4-byte global → shared copy issued by one thread (zero-filled
// when `valid` is false: nothing is read). qf_cp_async_commit() closes the thread's current
// group of copies; qf_cp_async_wait<N>() returns once all but the N most recently committed
// groups have landed. Both are called at CTA level (outside the qf_for_* loops): on the
// device every thread commits and waits for its own copies, and a qf_sync() after the wait
// makes all of them visible to the CTA.
//
// Host model: a copy lands only at the wait that covers its group (never earlier), and its
// destination holds a poison pattern (0xFFFFFFFF, an f32 NaN) from the issue until then, so a
// missing or too shallow wait reads NaN and fails the checks. qf_cp_async_pending() counts
// the copies issued and not landed (the GEMM ends with none).
// (Host-only functions, declared in both compilation passes: host wrappers call them.)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
struct qf_host_async_copy {
    uint32_t* dst;
    uint32_t value;
};
struct qf_host_async {
    std::vector<qf_host_async_copy> copies;  // issued, in order; [done, size) not landed
    std::vector<size_t> group_end;           // copies.size() at each commit not yet waited for
    size_t done = 0;
};
inline qf_host_async& qf_host_async_state() {
    static thread_local qf_host_async s;
    return s;
}
// Copies issued on this thread and not landed yet.
inline size_t qf_cp_async_pending() { return qf_host_async_state().copies.size() - qf_host_async_state().done; }

QF_HD void qf_cp_async4(void* smem_dst, const void* gsrc, bool valid) {
#ifdef __CUDA_ARCH__
    const unsigned dst = (unsigned)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gsrc), "r"(valid ? 4 : 0));
#else
    uint32_t v = 0;
    if (valid) memcpy(&v, gsrc, 4);
    uint32_t* d = static_cast<uint32_t*>(smem_dst);
    *d = 0xffffffffu;
    qf_host_async_state().copies.push_back({d, v});
#endif
}

// The 16-byte copy (both addresses 16-byte aligned): `bytes` (0..16) read from gsrc, the
// rest of the 16 zero-filled.
QF_HD void qf_cp_async16(void* smem_dst, const void* gsrc, int bytes) {
#ifdef __CUDA_ARCH__
    const unsigned dst = (unsigned)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gsrc), "r"(bytes));
#else
    // (The source's alignment is the caller's offset from the device allocation, which a host
    // buffer's address does not show.)
    if ((reinterpret_cast<uintptr_t>(smem_dst) & 15) != 0) {
        fprintf(stderr, "qf_cp_async16: destination %p is not 16-byte aligned\n", smem_dst);
        abort();
    }
    uint8_t v[16] = {0};
    memcpy(v, gsrc, bytes < 0 ? 0 : bytes > 16 ? 16 : bytes);
    uint32_t* d = static_cast<uint32_t*>(smem_dst);
    for (int i = 0; i < 4; ++i) {
        uint32_t word;
        memcpy(&word, v + 4 * i, 4);
        d[i] = 0xffffffffu;
        qf_host_async_state().copies.push_back({d + i, word});
    }
#endif
}

QF_HD void qf_cp_async_commit() {
#ifdef __CUDA_ARCH__
    asm volatile("cp.async.commit_group;\n" ::);
#else
    qf_host_async& s = qf_host_async_state();
    s.group_end.push_back(s.copies.size());
#endif
}

template <int N>
QF_HD void qf_cp_async_wait() {
#ifdef __CUDA_ARCH__
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#else
    qf_host_async& s = qf_host_async_state();
    while (s.group_end.size() > (size_t)N) {
        for (; s.done < s.group_end.front(); ++s.done) *s.copies[s.done].dst = s.copies[s.done].value;
        s.group_end.erase(s.group_end.begin());
    }
    if (s.done == s.copies.size()) {
        s.copies.clear();
        s.done = 0;
        for (size_t& e : s.group_end) e = 0;
    }
#endif
}

// ldmatrix.sync.aligned.m8n8.x{2,4}.shared.b16 (PTX ISA, "Warp-level matrix load
// instruction: ldmatrix"): N 8 × 8 matrices of 16-bit elements. Lane l supplies the address
// of row l % 8 of matrix l / 8 (16-byte aligned); register i of lane l receives row l / 4,
// elements 2·(l % 4) and 2·(l % 4) + 1 of matrix i (the lower one in the low half).
// `rows` holds QF_LANE_SLOTS lanes' row addresses, `regs` their N registers each.
template <int N>
QF_HD void qf_ldmatrix(uint32_t* regs, const uint16_t* const* rows) {
    static_assert(N == 2 || N == 4, "x2 or x4");
#ifdef __CUDA_ARCH__
    const unsigned a = (unsigned)__cvta_generic_to_shared(rows[0]);
    if constexpr (N == 4) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
                     : "r"(a));
    } else {
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(regs[0]), "=r"(regs[1]) : "r"(a));
    }
#else
    for (int l = 0; l < 8 * N; ++l)
        if ((reinterpret_cast<uintptr_t>(rows[l]) & 15) != 0) {
            fprintf(stderr, "qf_ldmatrix: lane %d's row address %p is not 16-byte aligned\n", l, (const void*)rows[l]);
            abort();
        }
    for (int l = 0; l < 32; ++l)
        for (int i = 0; i < N; ++i) {
            const uint16_t* p = rows[8 * i + (l >> 2)] + 2 * (l & 3);
            regs[l * N + i] = (uint32_t)p[0] | (uint32_t)p[1] << 16;
        }
#endif
}

// The row addresses the GEMM gives ldmatrix, relative to a fragment's origin in a row-major
// tile (row stride any multiple of 8 elements):
// A (16 × 16, x4): lane l points at row 8·((l / 8) & 1) + l % 8, column 8·(l / 16), so that
//   matrices 0..3 are A's quarters in the order of the mma's A registers (rows 0–7 / 8–15,
//   then columns 8–15);
// B (x2, W stored n-major: row n, k contiguous): lane l points at n = l % 8, k = 8·((l / 8) & 1),
//   so that matrix 0 is k 0–7 and matrix 1 k 8–15 (lanes 16–31 point at valid rows, unused).
QF_HD int qf_ldsm_a_row(int lane) { return 8 * ((lane >> 3) & 1) + (lane & 7); }
QF_HD int qf_ldsm_a_col(int lane) { return 8 * (lane >> 4); }
QF_HD int qf_ldsm_b_row(int lane) { return lane & 7; }
QF_HD int qf_ldsm_b_col(int lane) { return 8 * ((lane >> 3) & 1); }

// One 16 × 16 A fragment / one 16 × 8 B fragment from a row-major tile at `base` (row
// stride `ld` elements), for QF_LANE_SLOTS lanes, with ldmatrix.
QF_HD void qf_ldsm_frag_a(qf_frag_a* a, const uint16_t* base, int ld) {
    const uint16_t* rows[QF_LANE_SLOTS];
    qf_for_lanes([&](int ls, int lane) { rows[ls] = base + qf_ldsm_a_row(lane) * ld + qf_ldsm_a_col(lane); });
    qf_ldmatrix<4>(a[0].r, rows);
}
QF_HD void qf_ldsm_frag_b(qf_frag_b* b, const uint16_t* base, int ld) {
    const uint16_t* rows[QF_LANE_SLOTS];
    qf_for_lanes([&](int ls, int lane) { rows[ls] = base + qf_ldsm_b_row(lane) * ld + qf_ldsm_b_col(lane); });
    qf_ldmatrix<2>(b[0].r, rows);
}
