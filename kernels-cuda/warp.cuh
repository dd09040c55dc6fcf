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

struct qf_mma_f16 {
    static constexpr bool BF16 = false;
    // The 16-bit pattern of an f32 value, round to nearest even.
    QF_HD static uint16_t conv(float v) { return qf_f32_to_f16_bits(v); }
    QF_HD static float widen(uint32_t h) { return qf_half_to_f32(h); }
};
struct qf_mma_bf16 {
    static constexpr bool BF16 = true;
    QF_HD static uint16_t conv(float v) { return qf_f32_to_bf16_bits(v); }
    QF_HD static float widen(uint32_t h) { return qf_bits_to_f32(h << 16); }
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
