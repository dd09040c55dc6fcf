// qforge kernels-cuda/gemm_skinny.cuh: the fused GEMM for small M (qforge-tiling's skinny
// instances, M ≤ SKINNY_MAX_M), over the same traits struct and the same `decode` as gemm.cuh.
//
// At small M the GEMM is bound by the bytes of the weights, so every weight byte must be read
// once and go straight to the tensor cores. The product is computed transposed, yᵀ = W·xᵀ:
// the weights are the mma's A operand (16 weight rows × 16 k) and the activations its B
// (16 k × 8 tokens), so a CTA of 8 warps covers 256 weight rows with only 8·MT tokens.
//
// The weights' raw blocks of a phase (BK = KC elements of K, 256 rows) are copied into shared
// memory with 16-byte cp.async (whole 16-byte windows around each row's bytes: coalesced,
// alignment-free), and lane (g, t) of a warp (g = lane / 4, t = lane % 4) decodes the
// format's chunk t (elements t·CHUNK …) of a slab of 4·CHUNK K elements from there, for
// weight rows g and g + 8 of each of its 16-row tiles, into its A fragments directly (no
// decoded copy anywhere). Decoding straight from global memory read each byte of a row with
// its own load, eight rows per warp instruction: on an H200 that kernel was bound by L1
// wavefronts (86 % L1/TEX throughput, 4 % DRAM). Which K element sits in which fragment column is free (a dot
// product does not care about order) as long as the activations follow the same permutation:
// mma step s (of CHUNK / 4) takes the lane's chunk elements 4s, 4s+1 as fragment columns
// 2t, 2t+1 and 4s+2, 4s+3 as 2t+8, 2t+9. B's lane (g, t) then needs token g's same four
// elements, which the CTA stores in shared memory in exactly that order (fragment order: a
// lane's CHUNK activations of a slab are contiguous, and the warp's 32 lanes read 32
// consecutive pieces: no bank conflicts). The activations of BK = KC elements of K are
// converted to T once per CTA and shared by its 8 warps; K is split over the grid's z.
#pragma once

// A skinny instance: TOK activation rows (tokens, a multiple of 8) and ROWS weight rows per
// CTA, KC K elements per phase (one activation tile in shared memory), NW warps of
// ROWS / NW weight rows. The members the kernel and its host wrapper share with qf_gemm_cfg
// (BK, NW, NTH, SMEM_X / SMEM_A / SMEM_W) keep their meaning; SKINNY routes qf_gemm_tile here.
// SEG bytes of shared memory per weight row hold a phase's raw bytes of that row (a multiple
// of 16; 16·odd so that the 8 rows a warp instruction reads start in different banks).
// Shared memory is dynamic: SMEM_BYTES = the activation tile (TOK·BK 16-bit values) and the
// rows (ROWS·SEG), FusedTile::smem_bytes on the Rust side.
template <int TOK_, int ROWS_, int KC_, int NW_, int SEG_>
struct qf_gemms_cfg {
    static constexpr bool SKINNY = true;
    static constexpr int TOK = TOK_, ROWS = ROWS_, BK = KC_, NW = NW_, NTH = 32 * NW, SEG = SEG_;
    static constexpr int BM = TOK, BN = ROWS;    // the CTA's tile of y (grid x over N, y over M)
    static constexpr int MT = TOK / 8;           // 8-token mma columns
    static constexpr int RT = ROWS / (16 * NW);  // 16-row mma tiles per warp
    static constexpr int MIN_BLOCKS = 2;         // two CTAs per multiprocessor (registers ≤ 128)
    static constexpr int XA_BYTES = TOK * BK * 2, SMEM_BYTES = XA_BYTES + ROWS * SEG;
    // The host wrapper's buffers (qf_gemm_cfg's names): everything in the 16-bit one.
    static constexpr int SMEM_X = 1, SMEM_A = SMEM_BYTES / 2, SMEM_W = 8;
    static_assert(TOK % 8 == 0 && ROWS % (16 * NW) == 0 && BK % 64 == 0, "whole mma tiles and slabs");
    static_assert(SEG % 16 == 0 && XA_BYTES % 16 == 0, "16-byte copies");
};

// Where a phase's bytes of one weight row lie: blocks [b0, b1) (a grid format: elements
// [k0, k1), `b0` = k0), bytes [lo, hi) of the tensor's values.
template <class F>
struct qf_gemms_span {
    long long b0, lo, hi;
    QF_HD qf_gemms_span(long long row, long long K, long long k0, long long k1) {
        typedef qf_layout<F> L;
        if constexpr (L::GRID) {
            b0 = k0;
            lo = (row * K + k0) * L::REGISTRY_BYTES;
            hi = (row * K + k1) * L::REGISTRY_BYTES;
        } else {
            const long long bpr = L::blocks_per_row(K), bb = (long long)sizeof(typename F::block);
            b0 = k0 / F::BLOCK;
            lo = (row * bpr + b0) * bb;
            hi = (row * bpr + (k1 - 1) / F::BLOCK + 1) * bb;
        }
    }
    // The most bytes a phase of BK elements spans (whole blocks), what SEG must hold beside
    // the up to 15 bytes in front of a row's first byte in its 16-byte window.
    __host__ __device__ static constexpr long long max_bytes(int BK) {
        return qf_layout<F>::GRID ? (long long)BK * qf_layout<F>::REGISTRY_BYTES
                                  : (long long)(BK / F::BLOCK + (BK % F::BLOCK ? 2 : 0)) * sizeof(typename F::block);
    }
};

// Elements [kk, kk + CHUNK) of weight row `row` (0 outside N × K; a block's padding too),
// decoded from the row's staged bytes `srow` (its first block b0 of the phase, a grid
// format's element b0, at srow).
template <class F>
QF_HD void qf_gemms_decode(const uint8_t* srow, long long b0, const uint8_t* grid, long long row, long long N,
                           long long K, long long kk, float* v) {
    typedef qf_layout<F> L;
    if (row < N && kk < K) {
        const long long b = kk / F::BLOCK;
        const int chunk = (int)(kk % F::BLOCK) / F::CHUNK;
        const long long at = L::GRID ? (b * F::BLOCK - b0) * L::REGISTRY_BYTES : (b - b0) * (long long)sizeof(typename F::block);
        L::decode(reinterpret_cast<const typename F::block*>(srow + at), chunk, L::scale(grid, row, K, b), v);
        if (kk + F::CHUNK > K) {  // the row's last chunk: its padding is 0
#pragma unroll
            for (int j = 0; j < F::CHUNK; ++j)
                if (kk + j >= K) v[j] = 0.0f;
        }
    } else {
#pragma unroll
        for (int j = 0; j < F::CHUNK; ++j) v[j] = 0.0f;
    }
}

// One CTA: weight rows [tn·ROWS, +ROWS) × tokens [tm·TOK, +TOK) of y over K range [kb, ke)
// (kb a multiple of BK). Xa: C::SMEM_BYTES of shared memory, 16-byte aligned: the activation
// tile, then the staged rows.
template <class F, class T, class C>
QF_HD void qf_gemms_tile(const float* x, const uint8_t* w, const uint8_t* grid, void* y, int out, long long M,
                         long long N, long long K, long long kb, long long ke, long long tm, long long tn,
                         uint16_t* Xa) {
    typedef qf_gemms_span<F> S;
    constexpr int CH = F::CHUNK, SLAB = 4 * CH, NSLAB = C::BK / SLAB, ST = CH / 4, VPR = C::SEG / 16;
    static_assert(CH % 4 == 0 && C::BK % SLAB == 0, "a phase holds whole slabs");
    static_assert(S::max_bytes(C::BK) + 15 <= C::SEG, "a phase's bytes of a row fit its SEG");
    const long long m0 = tm * C::TOK, n0 = tn * C::ROWS;
    uint8_t* Wst = reinterpret_cast<uint8_t*>(Xa) + C::XA_BYTES;
    const long long total = S(N, K, 0, K).lo;  // bytes of the tensor's values

    qf_frag_c acc[QF_WARP_SLOTS(C::NW)][C::RT][C::MT][QF_LANE_SLOTS];
    qf_for_warps<C::NW>([&](int ws, int) {
        qf_for_lanes([&](int ls, int) {
#pragma unroll
            for (int i = 0; i < C::RT; ++i)
#pragma unroll
                for (int j = 0; j < C::MT; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[ws][i][j][ls].r[e] = 0.0f;
        });
    });

    for (long long k0 = kb; k0 < ke; k0 += C::BK) {
        const long long kend = ke < k0 + C::BK ? ke : k0 + C::BK;
        qf_sync();  // the previous phase's fragment loads are done with Xa and Wst
        // The rows' raw bytes of [k0, kend): row r's 16-byte windows into Wst + r·SEG (bytes
        // past the tensor's values zero-filled), as one cp.async group.
        qf_for_threads<C::NTH>([&](int t) {
            for (int e = t; e < C::ROWS * VPR; e += C::NTH) {
                const int r = e / VPR, v = e % VPR;
                if (n0 + r >= N) continue;
                const S sp(n0 + r, K, k0, kend);
                const long long a = (sp.lo & ~15ll) + 16ll * v;
                if (a >= sp.hi) continue;
                qf_cp_async16(Wst + r * C::SEG + 16 * v, w + a, total - a >= 16 ? 16 : (int)(total - a));
            }
        });
        qf_cp_async_commit();
        // Activations [m0, m0 + TOK) × [k0, k0 + BK) as T, 0 outside M × [k0, kend), each at
        // its fragment-order slot: token r = 8·mt + g, element c = SLAB·s + CH·t + j →
        // ((mt·NSLAB + s)·32 + 4g + t)·CH + j. Consecutive threads read consecutive pairs of k.
        qf_for_threads<C::NTH>([&](int t) {
#pragma unroll 4
            for (int e = t; e < C::TOK * C::BK / 2; e += C::NTH) {
                const int r = e / (C::BK / 2), c = 2 * (e % (C::BK / 2));
                const long long gm = m0 + r, gk = k0 + c;
                const float* xr = x + gm * K + gk;
                const float v0 = gm < M && gk < kend ? xr[0] : 0.0f;
                const float v1 = gm < M && gk + 1 < kend ? xr[1] : 0.0f;
                const int s = c / SLAB, lt = (c % SLAB) / CH, j = c % CH;
                qf_st_pair(Xa + (((r / 8) * NSLAB + s) * 32 + 4 * (r % 8) + lt) * CH + j, T::pack2(v0, v1));
            }
        });
        qf_cp_async_wait<0>();
        qf_sync();
        qf_for_warps<C::NW>([&](int ws, int wid) {
            const long long r0 = n0 + (long long)wid * 16 * C::RT;
            // One slab at a time (unrolled, the module's PTX grew by half for every format):
            // its 2·RT row decodes are independent, so their loads are in flight together.
#pragma unroll 1
            for (int s = 0; s < NSLAB; ++s) {
                if (k0 + (long long)s * SLAB >= kend) break;  // the same for the whole warp
                qf_frag_a a[C::RT][ST][QF_LANE_SLOTS];
                qf_frag_b b[C::MT][ST][QF_LANE_SLOTS];
                qf_for_lanes([&](int ls, int lane) {
                    const int g = lane >> 2, t = lane & 3;
                    const long long kk = k0 + (long long)s * SLAB + t * CH;
#pragma unroll
                    for (int i = 0; i < C::RT; ++i) {
                        float lo[CH], hi[CH];
                        const long long ra = r0 + 16 * i + g, rb = ra + 8;
                        const S sa(ra, K, k0, kend), sb(rb, K, k0, kend);
                        const uint8_t* pa = Wst + (ra - n0) * C::SEG + (sa.lo & 15);
                        const uint8_t* pb = Wst + (rb - n0) * C::SEG + (sb.lo & 15);
                        qf_gemms_decode<F>(pa, sa.b0, grid, ra, N, K, kk, lo);
                        qf_gemms_decode<F>(pb, sb.b0, grid, rb, N, K, kk, hi);
#pragma unroll
                        for (int q = 0; q < ST; ++q) {
                            a[i][q][ls].r[0] = T::pack2(lo[4 * q], lo[4 * q + 1]);
                            a[i][q][ls].r[1] = T::pack2(hi[4 * q], hi[4 * q + 1]);
                            a[i][q][ls].r[2] = T::pack2(lo[4 * q + 2], lo[4 * q + 3]);
                            a[i][q][ls].r[3] = T::pack2(hi[4 * q + 2], hi[4 * q + 3]);
                        }
                    }
#pragma unroll
                    for (int j = 0; j < C::MT; ++j) {
                        const uint16_t* p = Xa + ((j * NSLAB + s) * 32 + lane) * CH;
#pragma unroll
                        for (int q = 0; q < ST; ++q) {
                            b[j][q][ls].r[0] = qf_ld_pair(p + 4 * q);
                            b[j][q][ls].r[1] = qf_ld_pair(p + 4 * q + 2);
                        }
                    }
                });
#pragma unroll
                for (int q = 0; q < ST; ++q)
#pragma unroll
                    for (int i = 0; i < C::RT; ++i)
#pragma unroll
                        for (int j = 0; j < C::MT; ++j) qf_mma_m16n8k16<T>(acc[ws][i][j], a[i][q], b[j][q]);
            }
        });
    }

    // Epilogue: accumulator (i, j, e) of lane (g, t) is weight row 16i + g (+ 8 for e ≥ 2)
    // of the warp's rows and token 8j + 2t + (e & 1).
    qf_for_warps<C::NW>([&](int ws, int wid) {
        qf_for_lanes([&](int ls, int lane) {
#pragma unroll
            for (int i = 0; i < C::RT; ++i)
#pragma unroll
                for (int j = 0; j < C::MT; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const long long n = n0 + (long long)wid * 16 * C::RT + 16 * i + qf_frag_c_row(lane, e);
                        const long long m = m0 + 8 * j + qf_frag_c_col(lane, e);
                        if (m < M && n < N) qf_gemm_store(y, out, m * N + n, acc[ws][i][j][ls].r[e]);
                    }
        });
    });
}
