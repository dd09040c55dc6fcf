// qforge kernels-cuda/common.cuh: what every format header and template may use.
//
// Compiled twice from the same source: for the device (nvcc -ptx, -fmad=false) and for the
// host (nvcc -c, -ffp-contract=off) where qforge-cuda's tests check it against the Rust
// reference. Everything here therefore gives the same bits on both sides: conversions are
// integer code, not __half intrinsics or F16C.
#pragma once
#include <math.h>
#include <stdint.h>

#define QF_HD __host__ __device__ __forceinline__

// Tables (grids, value maps) of a format: global memory of the module on the device, a plain
// array on the host. Define with QF_TABLE(type, name, {…}); read with QF_TAB(name)[i].
#define QF_TABLE(T, name, ...) \
    __device__ const T name##_qf_dev[] = __VA_ARGS__; \
    static const T name##_qf_host[] = __VA_ARGS__
// A table this translation unit does not instantiate (see QF_FORMAT_<name> in
// kernels-cuda/README.md): declared, so that code naming it compiles, but not defined, so
// that the module does not carry it. Using it from an instantiated format fails to link.
#define QF_TABLE_DECL(T, name) \
    extern __device__ const T name##_qf_dev[]; \
    extern const T name##_qf_host[]
#ifdef __CUDA_ARCH__
#define QF_TAB(name) name##_qf_dev
#else
#define QF_TAB(name) name##_qf_host
#endif

// ---- little-endian loads at any alignment (blocks are byte arrays, alignment 1) ----------
// On the device a load reads the one or two aligned 32-bit words that hold its bytes (never a
// byte beyond them) and shifts them into place: a 4-byte value of an 18-byte q4_0 block is
// one or two word loads instead of four byte loads, which bound the mat-vec and dequant
// kernels on an H200 (first GPU run, 2026-11-26). Same bits as the byte-wise host path.
#ifdef __CUDA_ARCH__
__device__ __forceinline__ uint32_t qf_load_u32(const uint8_t* p) {
    const uint32_t off = (uint32_t)(uintptr_t)p & 3u;
    const uint32_t* a = reinterpret_cast<const uint32_t*>(p - off);
    const uint32_t lo = a[0];
    return off == 0 ? lo : __funnelshift_r(lo, a[1], 8 * off);
}
__device__ __forceinline__ uint32_t qf_load_u16(const uint8_t* p) {
    const uint32_t off = (uint32_t)(uintptr_t)p & 3u;
    const uint32_t* a = reinterpret_cast<const uint32_t*>(p - off);
    const uint32_t lo = a[0];
    return (off < 3 ? lo >> 8 * off : __funnelshift_r(lo, a[1], 24)) & 0xffffu;
}
#else
inline uint32_t qf_load_u16(const uint8_t* p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
inline uint32_t qf_load_u32(const uint8_t* p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
#endif
// N consecutive little-endian u32 from p (any alignment): on the device N + 1 aligned word
// loads and a funnel shift each, rather than two loads per word.
template <int N>
QF_HD void qf_load_u32xn(const uint8_t* p, uint32_t* w) {
#ifdef __CUDA_ARCH__
    const uint32_t off = (uint32_t)(uintptr_t)p & 3u;
    const uint32_t* a = reinterpret_cast<const uint32_t*>(p - off);
    uint32_t v[N + 1];
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = a[i];
    v[N] = off == 0 ? 0u : a[N];  // past the last byte only where p is unaligned
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = __funnelshift_r(v[i], v[i + 1], 8 * off);
#else
    for (int i = 0; i < N; ++i) w[i] = qf_load_u32(p + 4 * i);
#endif
}
QF_HD int32_t qf_load_i16(const uint8_t* p) { return (int32_t)(int16_t)qf_load_u16(p); }
QF_HD int32_t qf_load_i32(const uint8_t* p) { return (int32_t)qf_load_u32(p); }
// Four int8 values as the packed operand of qf_dp4a.
QF_HD int32_t qf_load_i8x4(const int8_t* p) { return qf_load_i32((const uint8_t*)p); }

QF_HD float qf_bits_to_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    union { uint32_t u; float f; } c;
    c.u = u;
    return c.f;
#endif
}
QF_HD uint32_t qf_f32_to_bits(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    union { uint32_t u; float f; } c;
    c.f = f;
    return c.u;
#endif
}

// IEEE half -> f32, exact (subnormals, ±Inf; NaN stays NaN, payload kept). On the device
// every finite or infinite value takes the hardware conversion (exact: f32 holds every f16);
// NaN takes the integer bits, which keep the payload as the host does.
QF_HD float qf_half_to_f32(uint32_t h) {
#ifdef __CUDA_ARCH__
    // Without a branch: the hardware's value, or NaN's bits built by integer code (a select).
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)h));
    const uint32_t nan = (h & 0x8000u) << 16 | 0x7f800000u | (h & 0x3ffu) << 13;
    return (h & 0x7fffu) > 0x7c00u ? __uint_as_float(nan) : f;
#endif
    const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
    if (exp == 0x1f) return qf_bits_to_f32(sign | 0x7f800000u | man << 13);
    if (exp == 0) {
        // man · 2^-24, exact in f32; the sign is applied by bits so that -0 stays -0.
        const float v = (float)man * 5.9604644775390625e-8f;
        return qf_bits_to_f32(qf_f32_to_bits(v) | sign);
    }
    return qf_bits_to_f32(sign | (exp + 112) << 23 | man << 13);
}
// (float)v for |v| < 2^22, exactly, with one integer add and one float subtract: v added to
// the bits of 1.5·2^23 (whose unit in the last place is 1) is 1.5·2^23 + v. The device's
// int-to-float conversion runs on a unit a quarter as fast as the adders; kernels that turn
// every weight code into a float use this instead.
QF_HD float qf_small_int_to_f32(int v) {
    return qf_bits_to_f32(0x4b400000u + (uint32_t)v) - 12582912.0f;
}
QF_HD float qf_load_f16(const uint8_t* p) { return qf_half_to_f32(qf_load_u16(p)); }
QF_HD float qf_load_bf16(const uint8_t* p) { return qf_bits_to_f32(qf_load_u16(p) << 16); }
QF_HD float qf_load_f32(const uint8_t* p) { return qf_bits_to_f32(qf_load_u32(p)); }

// f32 -> f16 / bf16 bits, round to nearest even, exactly as Rust's `half` (2.x) converts.
// On the device every non-NaN value takes the hardware conversion (cvt.rn: round to nearest
// even, overflow to ±Inf, subnormals kept, the same rule); NaN keeps the integer path, whose
// payload the hardware's canonical NaN would not.
QF_HD uint16_t qf_f32_to_f16_bits(float f) {
#ifdef __CUDA_ARCH__
    if (f == f) {
        unsigned short h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
        return h;
    }
#endif
    const uint32_t x = qf_f32_to_bits(f);
    const uint32_t sign = x & 0x80000000u, exp = x & 0x7f800000u, man = x & 0x007fffffu;
    const uint32_t hsign = sign >> 16;
    if (exp == 0x7f800000u) return (uint16_t)(hsign | 0x7c00u | (man ? 0x0200u : 0u) | man >> 13);
    const int hexp = (int)(exp >> 23) - 127 + 15;
    if (hexp >= 0x1f) return (uint16_t)(hsign | 0x7c00u);
    if (hexp <= 0) {
        if (14 - hexp > 24) return (uint16_t)hsign;
        const uint32_t m = man | 0x00800000u;
        uint32_t hman = m >> (14 - hexp);
        const uint32_t round = 1u << (13 - hexp);
        if ((m & round) && (m & (3 * round - 1))) hman += 1;
        return (uint16_t)(hsign | hman);
    }
    const uint32_t h = hsign | (uint32_t)hexp << 10 | man >> 13;
    const uint32_t round = 0x1000u;
    return (uint16_t)((man & round) && (man & (3 * round - 1)) ? h + 1 : h);
}
QF_HD uint16_t qf_f32_to_bf16_bits(float f) {
    const uint32_t x = qf_f32_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u);
    const uint32_t round = 0x8000u;
    return (uint16_t)((x & round) && (x & (3 * round - 1)) ? (x >> 16) + 1 : x >> 16);
}

// ---- f16 pairs (a format's optional decode_h2) ------------------------------------------
// Two f16 values in one word, the first in the low half. On the device one f16x2 instruction
// each; on the host each half is widened to f32, the operation done in f32 and rounded to f16
// once, which is the same bits wherever the f32 result is exact: always for a product of two
// halves (22 significant bits), and for the differences of small integers the decoders form.
#ifndef __CUDA_ARCH__
// The host model of one f16x2 instruction: op on each half in f32, rounded to f16 once.
template <class Op>
inline uint32_t qf_h2_host(uint32_t a, uint32_t b, Op op) {
    uint32_t r = 0;
    for (int h = 0; h < 2; ++h) {
        const float x = qf_half_to_f32(a >> 16 * h & 0xffffu), y = qf_half_to_f32(b >> 16 * h & 0xffffu);
        r |= (uint32_t)qf_f32_to_f16_bits(op(x, y)) << 16 * h;
    }
    return r;
}
#endif
// NAME(a, b): the PTX instruction OP on both halves, or the host model of `x EXPR y`.
#ifdef __CUDA_ARCH__
#define QF_H2_OP(NAME, OP, EXPR)                                                 \
    QF_HD uint32_t NAME(uint32_t a, uint32_t b) {                                \
        uint32_t r;                                                              \
        asm(OP " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));                       \
        return r;                                                                \
    }
#else
#define QF_H2_OP(NAME, OP, EXPR)                                                 \
    QF_HD uint32_t NAME(uint32_t a, uint32_t b) {                                \
        return qf_h2_host(a, b, [](float x, float y) { return x EXPR y; });      \
    }
#endif
QF_H2_OP(qf_h2_sub, "sub.rn.f16x2", -)
QF_H2_OP(qf_h2_mul, "mul.rn.f16x2", *)
#undef QF_H2_OP
// Byte n of the result is byte (s >> 4n) & 7 of the eight bytes b:a (a's the low four).
QF_HD uint32_t qf_byte_perm(uint32_t a, uint32_t b, uint32_t s) {
#ifdef __CUDA_ARCH__
    return __byte_perm(a, b, s);
#else
    const uint64_t v = (uint64_t)b << 32 | a;
    uint32_t r = 0;
    for (int n = 0; n < 4; ++n) r |= (uint32_t)(v >> 8 * (s >> 4 * n & 7) & 0xffu) << 8 * n;
    return r;
#endif
}

// ---- integer dot products ---------------------------------------------------------------
// c + Σ_{j<4} a.i8[j] · b.i8[j] (signed bytes): __dp4a on the device, the same sum on the host.
QF_HD int qf_dp4a(int a, int b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int j = 0; j < 4; ++j) c += (int)(int8_t)(a >> 8 * j) * (int)(int8_t)(b >> 8 * j);
    return c;
#endif
}

// Four bits (b0..b3 of x) spread to the low bit of four bytes.
QF_HD int qf_spread_bits4(uint32_t x) {
    return (int)((x & 1u) | (x & 2u) << 7 | (x & 4u) << 14 | (x & 8u) << 21);
}

// Byte-wise SWAR on four packed int8 codes (the int8 GEMM's views, gemm_q8.cuh):
// each byte v − bias, for bytes v < 128 and bias ≤ 128 (no borrow crosses a byte: every byte
// is at least 128 before the subtraction);
QF_HD uint32_t qf_bytes_minus(uint32_t v, uint32_t bias) {
    return ((v | 0x80808080u) - bias * 0x01010101u) ^ 0x80808080u;
}
// each byte x + y modulo 256, any bytes (the carries out of bit 7 are dropped).
QF_HD uint32_t qf_bytes_add(uint32_t x, uint32_t y) {
    return ((x & 0x7f7f7f7fu) + (y & 0x7f7f7f7fu)) ^ ((x ^ y) & 0x80808080u);
}

// ---- activations ------------------------------------------------------------------------
// The activation block of the mat-vec: q8_1's meaning (x ≈ d·qs[i], s = d·Σqs) with f32 d
// and s, so nothing is lost to f16 rounding. Produced on the GPU by qforge_quantize_q8_1.
struct qf_block_q8_1 {
    float d;
    float s;
    int8_t qs[32];
};

// Σ_{i<n} qs[i] of an activation block, n a multiple of 4 (integer, exact).
QF_HD int qf_q8_1_sum(const qf_block_q8_1* a, int first, int n) {
    int s = 0;
    for (int i = first; i < first + n; i += 4) s = qf_dp4a(0x01010101, qf_load_i8x4(a->qs + i), s);
    return s;
}

// Σ_{i<n} codes·qs over 32 bits-packed code words `w` (n/4 words) against qs[first..first+n].
QF_HD int qf_dot_codes(const int* w, const qf_block_q8_1* a, int first, int n) {
    int s = 0;
    for (int i = 0; i < n / 4; ++i) s = qf_dp4a(w[i], qf_load_i8x4(a->qs + first + 4 * i), s);
    return s;
}
