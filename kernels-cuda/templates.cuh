// qforge kernels-cuda/templates.cuh: the kernels every format gets, written once over a
// format's traits struct F (interface: kernels-cuda/README.md).
//
// Each kernel's per-thread body is a QF_HD function, so the host wrappers that qforge-cuda's
// tests call run the very code the GPU runs (the device loops over threads, the host over
// the same indices).
#pragma once

// ---- tensor layout: block formats and grid formats -------------------------------------
// A block format (the default) stores rows of whole blocks (GGUF). A grid format (traits flag
// `static constexpr bool GRID = true;`, e.g. fp8) stores rows of exactly `cols` elements of
// sizeof(block)/BLOCK bytes each (no padding) and one f32 scale per BLOCK × BLOCK cell in a
// separate grid (little-endian, row-major, ceil(rows/BLOCK) × ceil(cols/BLOCK)); its decode
// and dot_q8_1 take the block's scale as an extra argument.
//
// QF_DETECT(name, PROBE, VALUE): name<F>::value is VALUE where the expression PROBE (which
// names the traits struct F) is well-formed, false where it is not: the detection behind a
// format's optional traits members (the flags below, gemm_q8.cuh's weight views).
#define QF_DETECT(NAME, PROBE, VALUE)                      \
    template <class F, class = void>                       \
    struct NAME {                                          \
        static constexpr bool value = false;               \
    };                                                     \
    template <class F>                                     \
    struct NAME<F, decltype((void)(PROBE))> {              \
        static constexpr bool value = (VALUE);             \
    };
// qf_grid_flag<F>::value: F::GRID where the traits struct declares that optional flag.
QF_DETECT(qf_grid_flag, F::GRID, F::GRID)
// Whether F has the optional decode_h2 (F::H2 true): the chunk as f16 pairs, for the GEMM's
// f16 tensor-core inputs (kernels-cuda/README.md).
QF_DETECT(qf_h2_flag, F::H2, F::H2)

template <class F>
struct qf_layout {
    typedef typename F::block block;
    static constexpr bool GRID = qf_grid_flag<F>::value;
    static_assert(!GRID || sizeof(block) % F::BLOCK == 0, "a grid format's block is BLOCK whole elements");
    // What the registry calls block_bytes: bytes per block, or per element for a grid format
    // (whose registry block is one element).
    static constexpr int REGISTRY_BYTES = GRID ? (int)(sizeof(block) / F::BLOCK) : (int)sizeof(block);

    QF_HD static long long blocks_per_row(long long cols) { return (cols + F::BLOCK - 1) / F::BLOCK; }

    // Block b of row `row` of a rows × cols tensor, to be read at elements [lo, lo + n) only.
    // For a grid format's partial last block, those elements are copied into `tmp` with the
    // ones past the row zeroed (every grid format's zero byte pattern decodes to 0), so
    // nothing reads past the row.
    QF_HD static const block* at(const uint8_t* src, long long row, long long cols, long long b, block* tmp, int lo,
                                 int n) {
        if constexpr (GRID) {
            const long long eb = REGISTRY_BYTES, first = b * F::BLOCK;
            const uint8_t* p = src + (row * cols + first) * eb;
            if (first + F::BLOCK <= cols) return reinterpret_cast<const block*>(p);
            const long long real = (cols - first) * eb;
            uint8_t* t = reinterpret_cast<uint8_t*>(tmp);
#pragma unroll 1
            for (int i = lo * (int)eb; i < (lo + n) * (int)eb; ++i) t[i] = i < real ? p[i] : 0;
            return tmp;
        } else {
            return reinterpret_cast<const block*>(src) + row * blocks_per_row(cols) + b;
        }
    }

    // The grid scale of block b of row `row` (grid formats; 1 otherwise, unused).
    QF_HD static float scale(const uint8_t* grid, long long row, long long cols, long long b) {
        if constexpr (GRID) return qf_load_f32(grid + 4 * ((row / F::BLOCK) * blocks_per_row(cols) + b));
        else return 1.0f;
    }

    QF_HD static void decode(const block* blk, int chunk, float scale, float* out) {
        if constexpr (GRID) F::decode(blk, chunk, scale, out);
        else F::decode(blk, chunk, out);
    }

    // q8_1 activation blocks per row of k elements: whole blocks for a block format, the
    // real elements rounded up to 32 for a grid format (its zero-filled tail adds 0).
    QF_HD static long long act_blocks(long long k) {
        return GRID ? (k + 31) / 32 : blocks_per_row(k) * (F::BLOCK / 32);
    }
};

// ---- dequantize: one thread per CHUNK elements of one block ----------------------------
struct qf_out_f32 {
    typedef float T;
    QF_HD static T conv(float v) { return v; }
};
struct qf_out_f16 {
    typedef uint16_t T;
    QF_HD static T conv(float v) { return qf_f32_to_f16_bits(v); }
};
struct qf_out_bf16 {
    typedef uint16_t T;
    QF_HD static T conv(float v) { return qf_f32_to_bf16_bits(v); }
};

#include "gemm.cuh"

// q = a / d, r = a % d (a, d ≥ 0): 32-bit division where both fit, which on the device is a
// few instructions against a 64-bit division's ~70 (every dequant work item does one).
QF_HD void qf_divmod(long long a, long long d, long long& q, long long& r) {
    if (((unsigned long long)a | (unsigned long long)d) <= 0xffffffffull) {
        const uint32_t q32 = (uint32_t)a / (uint32_t)d;
        q = q32;
        r = (long long)((uint32_t)a - q32 * (uint32_t)d);
    } else {
        q = a / d;
        r = a % d;
    }
}

// Writes a decoded chunk: on the device, 16-byte stores where `dst` is 16-byte aligned and
// the chunk is whole 16-byte words (a warp's work items are consecutive chunks, so the warp's
// stores coalesce into whole sectors; element stores 2 or 4 bytes apart did not); element by
// element otherwise.
template <class T, int N>
QF_HD void qf_store_chunk(T* dst, const T (&v)[N]) {
#ifdef __CUDA_ARCH__
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "f32 or 16-bit outputs");
    constexpr int BYTES = N * (int)sizeof(T);
    if constexpr (BYTES % 16 == 0) {
        if (((uintptr_t)dst & 15u) == 0) {
            constexpr int PER_WORD = 4 / (int)sizeof(T);
            uint32_t w[BYTES / 4];
#pragma unroll
            for (int i = 0; i < BYTES / 4; ++i) {
                if constexpr (PER_WORD == 1) {
                    w[i] = qf_f32_to_bits(v[i]);
                } else {
                    w[i] = (uint32_t)v[2 * i] | (uint32_t)v[2 * i + 1] << 16;
                }
            }
            // NVVM splits a uint4 assignment into four 4-byte stores here, so the vector store
            // is written out (dst is a kernel's global output: its generic address is global).
#pragma unroll
            for (int i = 0; i < BYTES / 16; ++i)
                asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(dst + i * (16 / (int)sizeof(T))),
                             "r"(w[4 * i]), "r"(w[4 * i + 1]), "r"(w[4 * i + 2]), "r"(w[4 * i + 3])
                             : "memory");
            return;
        }
    }
#endif
#pragma unroll
    for (int j = 0; j < N; ++j) dst[j] = v[j];
}

// Work items of a rows × cols tensor (rows padded to whole blocks, as GGUF stores them).
template <class F>
QF_HD long long qf_dequant_items(long long rows, long long cols) {
    return rows * ((cols + F::BLOCK - 1) / F::BLOCK) * (F::BLOCK / F::CHUNK);
}

// Work item t: decode one chunk straight into the output type (no f32 buffer in memory) and
// write its real elements (the padded tail of a row's last block is dropped).
template <class F, class O>
QF_HD void qf_dequant_item(const uint8_t* src, const uint8_t* grid, typename O::T* dst, long long cols, long long t) {
    static_assert(F::BLOCK % F::CHUNK == 0, "CHUNK must divide BLOCK");
    typedef qf_layout<F> L;
    constexpr int CPB = F::BLOCK / F::CHUNK;
    const long long nb = L::blocks_per_row(cols);
    const long long bi = t / CPB;  // block index over the whole tensor: row·nb + block
    const int chunk = (int)(t % CPB);
    long long row, b;
    qf_divmod(bi, nb, row, b);
    const long long col0 = b * F::BLOCK + (long long)chunk * F::CHUNK;
    float v[F::CHUNK];
    typename F::block tmp;
    L::decode(L::at(src, row, cols, b, &tmp, chunk * F::CHUNK, F::CHUNK), chunk, L::scale(grid, row, cols, b), v);
    typename O::T* out = dst + row * cols + col0;
    if (col0 + F::CHUNK <= cols) {
        typename O::T o[F::CHUNK];
#pragma unroll
        for (int j = 0; j < F::CHUNK; ++j) o[j] = O::conv(v[j]);
        qf_store_chunk(out, o);
    } else {
        for (int j = 0; j < F::CHUNK && col0 + j < cols; ++j) out[j] = O::conv(v[j]);
    }
}

// ---- activations: f32 → qf_block_q8_1, one work item per 32-element block ---------------
// ggml's quantize_row_q8_1 arithmetic with f32 d and s: d = amax/127, q = round(x/d) (as
// x·(1/d)), s = d·Σq. Elements at or past k (padding) are 0. x is m × k, out m × nblocks.
QF_HD void qf_quantize_q8_1_item(const float* x, qf_block_q8_1* out, long long k, long long nblocks, long long t) {
    const long long row = t / nblocks, b = t % nblocks;
    const float* xr = x + row * k;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) {
        const long long c = b * 32 + i;
        const float v = c < k ? xr[c] : 0.0f;
        amax = fmaxf(amax, fabsf(v));
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    qf_block_q8_1* o = out + t;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
        const long long c = b * 32 + i;
        const int q = (int)roundf((c < k ? xr[c] : 0.0f) * id);
        o->qs[i] = (int8_t)q;
        sum += q;
    }
    o->d = d;
    o->s = d * (float)sum;
}

// ---- mat-vec: y[m][n] = Σ_k W[n][k]·x[m][k] ------------------------------------------------
// W is n rows of whole blocks (k padded); act is m rows of nblocks = k_padded/32 q8_1 blocks.
// acc[r] += the dots of W's row `row` with activation row r over the 32-element sub-blocks
// first, first + stride, … (a warp's lane on the device; all of them on the host).
template <class F, int UNROLL = 1>
QF_HD void qf_matvec_part(const uint8_t* w, const uint8_t* grid, const qf_block_q8_1* act, long long k, int m,
                          long long row, int first, int stride, float* acc) {
    static_assert(F::BLOCK % 32 == 0, "dot_q8_1 works on 32-element sub-blocks");
    typedef qf_layout<F> L;
    constexpr int SPB = F::BLOCK / 32;
    const long long subs = L::act_blocks(k);
    if constexpr (L::GRID) {
        typename F::block tmp;
        for (long long s = first; s < subs; s += stride) {
            const long long b = s / SPB;
            const int sub = (int)(s % SPB);
            const typename F::block* blk = L::at(w, row, k, b, &tmp, 32 * sub, 32);
            const float scale = L::scale(grid, row, k, b);
            for (int r = 0; r < m; ++r) acc[r] += F::dot_q8_1(blk, sub, scale, act + r * subs + s);
        }
    } else {
        const typename F::block* blocks = reinterpret_cast<const typename F::block*>(w) + row * L::blocks_per_row(k);
        // UNROLL > 1 (the M = 1 kernel): a lane's loads of several sub-blocks are in flight
        // together (K = 4096 is 4 sub-blocks per lane); one block at a time the loop was
        // latency-bound. Larger M has M activation rows of independent work per block (and
        // unrolling all eight kernels would add 60 % to the PTX).
#pragma unroll UNROLL
        for (long long s = first; s < subs; s += stride) {
            const typename F::block* blk = blocks + s / SPB;
            for (int r = 0; r < m; ++r) acc[r] += F::dot_q8_1(blk, (int)(s % SPB), act + r * subs + s);
        }
    }
}

#ifdef __CUDACC__
// ---- device kernels ---------------------------------------------------------------------
#define QF_GRID_STRIDE(t, total) \
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < (total); \
         t += (long long)gridDim.x * blockDim.x)

template <class F, class O>
__device__ __forceinline__ void qf_dequant_kernel(const uint8_t* __restrict__ src, const uint8_t* __restrict__ grid,
                                                  typename O::T* __restrict__ dst, long long rows, long long cols) {
    QF_GRID_STRIDE(t, qf_dequant_items<F>(rows, cols)) qf_dequant_item<F, O>(src, grid, dst, cols, t);
}

// One warp per weight row; M (1..8) activation rows at once; lane 0 writes y[r·n + row].
template <class F, int M>
__device__ __forceinline__ void qf_matvec_kernel(const uint8_t* __restrict__ w, const uint8_t* __restrict__ grid,
                                                 const qf_block_q8_1* __restrict__ act, float* __restrict__ y,
                                                 long long n, long long k) {
    const long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (row >= n) return;  // whole warps leave together (blockDim is a multiple of 32)
    float acc[M];
#pragma unroll
    for (int r = 0; r < M; ++r) acc[r] = 0.0f;
    qf_matvec_part<F, M == 1 ? 4 : 1>(w, grid, act, k, M, row, lane, 32, acc);
#pragma unroll
    for (int r = 0; r < M; ++r) {
        float v = acc[r];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) y[r * n + row] = v;
    }
}

#define QF_MATVEC_CASE(F, M) \
    case M: qf_matvec_kernel<F, M>(w, grid, act, y, n, k); break;

// The extern "C" kernels of one format module (the module source is generated per format).
// `grid` is the tensor's scale grid for a grid format and ignored (any pointer) otherwise.
#define QF_INSTANTIATE(F, NAME, BYTES)                                                              \
    static_assert(qf_layout<F>::REGISTRY_BYTES == (BYTES), "device block size differs from the Rust block"); \
    extern "C" __global__ void qforge_dequant_##NAME##_f32(const uint8_t* src, const uint8_t* grid,  \
                                                           float* dst, long long rows, long long cols) { \
        qf_dequant_kernel<F, qf_out_f32>(src, grid, dst, rows, cols);                               \
    }                                                                                               \
    extern "C" __global__ void qforge_dequant_##NAME##_f16(const uint8_t* src, const uint8_t* grid,  \
                                                           uint16_t* dst, long long rows, long long cols) { \
        qf_dequant_kernel<F, qf_out_f16>(src, grid, dst, rows, cols);                               \
    }                                                                                               \
    extern "C" __global__ void qforge_dequant_##NAME##_bf16(const uint8_t* src, const uint8_t* grid, \
                                                            uint16_t* dst, long long rows, long long cols) { \
        qf_dequant_kernel<F, qf_out_bf16>(src, grid, dst, rows, cols);                              \
    }                                                                                               \
    extern "C" __global__ void qforge_matvec_##NAME(const uint8_t* w, const uint8_t* grid,           \
                                                    const qf_block_q8_1* act, float* y, long long n, \
                                                    long long k, int m) {                           \
        switch (m) {                                                                                \
            QF_MATVEC_CASE(F, 1) QF_MATVEC_CASE(F, 2) QF_MATVEC_CASE(F, 3) QF_MATVEC_CASE(F, 4)     \
            QF_MATVEC_CASE(F, 5) QF_MATVEC_CASE(F, 6) QF_MATVEC_CASE(F, 7) QF_MATVEC_CASE(F, 8)     \
            default: break;                                                                         \
        }                                                                                           \
    }                                                                                               \
    extern "C" __global__ void qforge_matvec1_##NAME(const uint8_t* w, const uint8_t* grid,          \
                                                     const qf_block_q8_1* act, float* y, long long n, \
                                                     long long k, int) {                           \
        qf_matvec_kernel<F, 1>(w, grid, act, y, n, k);                                              \
    }                                                                                               \
    extern "C" __global__ void qforge_quantize_q8_1(const float* x, qf_block_q8_1* out, long long k, \
                                                    long long nblocks, long long m) {               \
        QF_GRID_STRIDE(t, m * nblocks) qf_quantize_q8_1_item(x, out, k, nblocks, t);                \
    }
#endif

// ---- host wrappers (qforge-cuda's tests): the same work items, looped on the CPU --------
#define QF_HOST_DEQUANT(F, NAME, SUFFIX, O)                                                         \
    extern "C" void qf_host_dequant_##NAME##_##SUFFIX(const uint8_t* src, const uint8_t* grid,       \
                                                       O::T* dst, long long rows, long long cols) { \
        for (long long t = 0; t < qf_dequant_items<F>(rows, cols); ++t)                              \
            qf_dequant_item<F, O>(src, grid, dst, cols, t);                                         \
    }
// For the host checks: how many f16 pairs of `decode_h2` over every chunk of n blocks are
// not the bits of decode's values packed for the f16 mma (a NaN matching any NaN); -1 for a
// format without decode_h2.
template <class F>
long long qf_h2_mismatches(const uint8_t* blocks, long long n) {
    if constexpr (!qf_h2_flag<F>::value) {
        return -1;
    } else {
        long long bad = 0;
        const auto nan = [](uint32_t h) { return (h & 0x7fffu) > 0x7c00u; };
        for (long long i = 0; i < n; ++i) {
            const typename F::block* b = reinterpret_cast<const typename F::block*>(blocks) + i;
            for (int c = 0; c < F::BLOCK / F::CHUNK; ++c) {
                float v[F::CHUNK];
                uint32_t h[F::CHUNK / 2];
                qf_layout<F>::decode(b, c, 1.0f, v);
                F::decode_h2(b, c, h);
                for (int k = 0; k < F::CHUNK / 2; ++k) {
                    const uint32_t want = qf_mma_f16::pack2(v[2 * k], v[2 * k + 1]);
                    for (int half = 0; half < 2; ++half) {
                        const uint32_t a = want >> 16 * half & 0xffffu, g = h[k] >> 16 * half & 0xffffu;
                        bad += a != g && !(nan(a) && nan(g));
                    }
                }
            }
        }
        return bad;
    }
}

#define QF_HOST_INSTANTIATE(F, NAME, BYTES)                                                         \
    static_assert(qf_layout<F>::REGISTRY_BYTES == (BYTES), "device block size differs from the Rust block"); \
    QF_HOST_DEQUANT(F, NAME, f32, qf_out_f32)                                                       \
    QF_HOST_DEQUANT(F, NAME, f16, qf_out_f16)                                                       \
    QF_HOST_DEQUANT(F, NAME, bf16, qf_out_bf16)                                                     \
    extern "C" long long qf_host_h2_mismatches_##NAME(const uint8_t* blocks, long long n) {            \
        return qf_h2_mismatches<F>(blocks, n);                                                      \
    }                                                                                               \
    extern "C" void qf_host_matvec_##NAME(const uint8_t* w, const uint8_t* grid, const qf_block_q8_1* act, \
                                          float* y, long long n, long long k, int m) {              \
        for (long long row = 0; row < n; ++row) {                                                   \
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                \
            qf_matvec_part<F>(w, grid, act, k, m, row, 0, 1, acc);                                  \
            for (int r = 0; r < m; ++r) y[r * n + row] = acc[r];                                    \
        }                                                                                           \
    }
