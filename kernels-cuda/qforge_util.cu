// qforge kernels-cuda/qforge_util.cu: kernels that belong to no format, one small module.
//
// qforge_cast_f32_f16 / _bf16: f32 -> f16 / bf16 bits, round to nearest even (the hardware
// cvt.rn.f16.f32 / cvt.rn.bf16.f32). Grid-stride; 4 elements per item with 16-byte loads and
// 8-byte stores when both pointers allow it (cudaMalloc'd buffers always do), a scalar tail.
// The dequant + cuBLAS GEMM casts its activations (and an f32 result cuBLAS cannot write in
// the output type) with them; the f16 one is also the detour that direct f16 dequantization
// avoids ("dequantize to f32, then cast"), kept so the GPU benchmarks can measure it.
//
// qforge_reduce_splits_<out>: the epilogue of a split-k fused GEMM (below).
#include <stdint.h>

__device__ __forceinline__ uint16_t qf_cvt_rn_f16(float f) {
    uint16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ uint16_t qf_cvt_rn_bf16(float f) {
    uint16_t h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

template <uint16_t (*CVT)(float)>
__device__ __forceinline__ void qf_cast_f32(const float* __restrict__ src, uint16_t* __restrict__ dst, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool vec = ((uintptr_t)src % 16 == 0) && ((uintptr_t)dst % 8 == 0);
    const long long n4 = vec ? n / 4 : 0;
    for (long long i = first; i < n4; i += stride) {
        const float4 v = reinterpret_cast<const float4*>(src)[i];
        const uint32_t lo = (uint32_t)CVT(v.x) | (uint32_t)CVT(v.y) << 16;
        const uint32_t hi = (uint32_t)CVT(v.z) | (uint32_t)CVT(v.w) << 16;
        reinterpret_cast<uint2*>(dst)[i] = make_uint2(lo, hi);
    }
    for (long long i = n4 * 4 + first; i < n; i += stride) dst[i] = CVT(src[i]);
}

extern "C" __global__ void qforge_cast_f32_f16(const float* __restrict__ src, uint16_t* __restrict__ dst,
                                               long long n) {
    qf_cast_f32<qf_cvt_rn_f16>(src, dst, n);
}

extern "C" __global__ void qforge_cast_f32_bf16(const float* __restrict__ src, uint16_t* __restrict__ dst,
                                                long long n) {
    qf_cast_f32<qf_cvt_rn_bf16>(src, dst, n);
}

// qforge_reduce_splits_<out>: the split-k GEMM's epilogue. part holds `splits` slices of `mn`
// f32 partial sums (split-major); y[i] = out(Σ_z part[z·mn + i]), summed from z = 0 up in f32.
template <class T, T (*CVT)(float)>
__device__ __forceinline__ void qf_reduce_splits(const float* __restrict__ part, T* __restrict__ y, long long mn,
                                                 int splits) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < mn; i += stride) {
        float v = 0.0f;
        for (int z = 0; z < splits; ++z) v += part[(long long)z * mn + i];
        y[i] = CVT(v);
    }
}

__device__ __forceinline__ float qf_same_f32(float f) { return f; }

extern "C" __global__ void qforge_reduce_splits_f32(const float* part, float* y, long long mn, int splits) {
    qf_reduce_splits<float, qf_same_f32>(part, y, mn, splits);
}
extern "C" __global__ void qforge_reduce_splits_f16(const float* part, uint16_t* y, long long mn, int splits) {
    qf_reduce_splits<uint16_t, qf_cvt_rn_f16>(part, y, mn, splits);
}
extern "C" __global__ void qforge_reduce_splits_bf16(const float* part, uint16_t* y, long long mn, int splits) {
    qf_reduce_splits<uint16_t, qf_cvt_rn_bf16>(part, y, mn, splits);
}
