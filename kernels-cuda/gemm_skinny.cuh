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
// ROWS / NW weight rows. The members the kernel and its host wrapper share with the tiled
// instances (BM, BN, NW, NTH, KSPLIT, SMEM_BYTES) keep their meaning; SKINNY routes
// qf_gemm_tile here.
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
    static constexpr int KSPLIT = BK;            // split-k ranges are whole phases
    static constexpr int XA_BYTES = TOK * BK * 2, SMEM_BYTES = XA_BYTES + ROWS * SEG;
    static_assert(TOK % 8 == 0 && ROWS % (16 * NW) == 0 && BK % 64 == 0, "whole mma tiles and slabs");
    static_assert(SEG % 16 == 0 && XA_BYTES % 16 == 0, "16-byte copies");
};

// Where a phase's bytes lie, for every weight row alike: row r's bytes of elements [k0, k1)
// are [r·stride + first, + len) of the tensor's values; they start at element `e0` (k0 rounded
// down to a block, k0 itself for a grid format, whose registry block is one element).
template <class F>
struct qf_gemms_span {
    long long stride, first, len, e0;
    QF_HD qf_gemms_span(long long K, long long k0, long long k1) {
        typedef qf_layout<F> L;
        if constexpr (L::GRID) {
            stride = K * L::REGISTRY_BYTES;
            first = k0 * L::REGISTRY_BYTES;
            len = (k1 - k0) * L::REGISTRY_BYTES;
            e0 = k0;
        } else {
            const long long bb = (long long)sizeof(typename F::block), b0 = k0 / F::BLOCK;
            stride = L::blocks_per_row(K) * bb;
            first = b0 * bb;
            len = ((k1 - 1) / F::BLOCK + 1 - b0) * bb;
            e0 = b0 * F::BLOCK;
        }
    }
    // The most bytes a phase of BK elements spans (whole blocks), what SEG must hold beside
    // the up to 15 bytes in front of a row's first byte in its 16-byte window.
    __host__ __device__ static constexpr long long max_bytes(int BK) {
        return qf_layout<F>::GRID ? (long long)BK * qf_layout<F>::REGISTRY_BYTES
                                  : (long long)(BK / F::BLOCK + (BK % F::BLOCK ? 2 : 0)) * sizeof(typename F::block);
    }
};

// A phase's raw bytes of `nrows` weight rows into shared memory: row r's bytes (span `sp`, the
// first at byte lo0 + r·sp.stride of the tensor's `total` bytes) as the 16-byte windows around
// them at dst + r·SEG, bytes past the tensor zero-filled; one cp.async group. Coalesced and
// alignment-free whatever a block's size (both GEMM bodies stage their weights with it).
template <int NTH, int SEG, class S>
QF_HD void qf_gemm_stage_rows(uint8_t* dst, const uint8_t* w, long long total, const S& sp, long long lo0,
                              int nrows) {
    constexpr int VPR = SEG / 16;
    qf_for_threads<NTH>([&](int t) {
        for (int e = t; e < nrows * VPR; e += NTH) {
            const int r = e / VPR, v = e % VPR;
            const long long lo = lo0 + r * sp.stride;
            const long long a = (lo & ~15ll) + 16 * v;
            if (a >= lo + sp.len) continue;
            qf_cp_async16(dst + r * SEG + 16 * v, w + a, total - a >= 16 ? 16 : (int)(total - a));
        }
    });
    qf_cp_async_commit();
}

// Elements [k, k + CHUNK) of a weight row, k = e0 + rel (rel ≥ 0 from the phase's first
// element e0, a block boundary or, for a grid format, k0), decoded from the row's staged
// bytes `srow` (its bytes from element e0 on) into CHUNK / 2 pairs of T (the mma's input
// type), the first value in the low half. Elements from `rem` on are 0 (a block's padding,
// or a chunk wholly past the phase, whose staged bytes are another row's or stale); only a
// phase's last slab has any (`tail`). `row` only locates a grid format's scale. A format with
// decode_h2 (qf_h2_flag) gives f16 pairs itself; the others' values are packed here.
// Unsigned index arithmetic: rel < BK, and the compiler needs no sign fix-ups.
template <class F, class T>
QF_HD void qf_gemms_pairs(const uint8_t* srow, long long e0, unsigned rel, bool tail, int rem, const uint8_t* grid,
                          long long row, long long K, uint32_t* out) {
    typedef qf_layout<F> L;
    // e0 is a block boundary unless the format is a grid one (e0 = k0, any element): `gl`
    // elements of e0's block lie in front of it.
    const unsigned gl = L::GRID ? (unsigned)(e0 % F::BLOCK) : 0u, q = gl + rel;
    const unsigned bi = q / F::BLOCK, chunk = (q % F::BLOCK) / F::CHUNK;
    const unsigned at = L::GRID ? (bi * F::BLOCK - gl) * L::REGISTRY_BYTES : bi * (unsigned)sizeof(typename F::block);
    const typename F::block* b = reinterpret_cast<const typename F::block*>(srow + at);
    if constexpr (qf_h2_flag<F>::value && !T::BF16) {
        F::decode_h2(b, (int)chunk, out);
        if (tail) {
#pragma unroll
            for (int k = 0; k < F::CHUNK / 2; ++k)
                out[k] &= (2 * k < rem ? 0xffffu : 0u) | (2 * k + 1 < rem ? 0xffff0000u : 0u);
        }
    } else {
        float v[F::CHUNK];
        L::decode(b, (int)chunk, L::scale(grid, row, K, (e0 - gl) / F::BLOCK + bi), v);
        if (tail) {
#pragma unroll
            for (int k = 0; k < F::CHUNK; ++k)
                if (k >= rem) v[k] = 0.0f;
        }
#pragma unroll
        for (int k = 0; k < F::CHUNK / 2; ++k) out[k] = T::pack2(v[2 * k], v[2 * k + 1]);
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
    constexpr int CH = F::CHUNK, SLAB = 4 * CH, NSLAB = C::BK / SLAB, ST = CH / 4;
    static_assert(CH % 4 == 0 && C::BK % SLAB == 0, "a phase holds whole slabs");
    static_assert(S::max_bytes(C::BK) + 15 <= C::SEG, "a phase's bytes of a row fit its SEG");
    const long long m0 = tm * C::TOK, n0 = tn * C::ROWS;
    uint8_t* Wst = reinterpret_cast<uint8_t*>(Xa) + C::XA_BYTES;
    const long long total = N * S(K, 0, K).stride;  // bytes of the tensor's values
    // Rows of this CTA inside the tensor (the rest are neither copied nor decoded), and its
    // 8-token mma columns that hold a token (the rest are neither staged nor multiplied: a
    // 64-token instance at M = 20 does the mma work of 24 tokens).
    const int nrows = N - n0 < C::ROWS ? (int)(N - n0) : C::ROWS;
    const int mcols = M - m0 < C::TOK ? (int)((M - m0 + 7) / 8) : C::MT;

    qf_frag_c acc[QF_WARP_SLOTS(C::NW)][C::RT][C::MT][QF_LANE_SLOTS];
    qf_zero_acc<C::NW, C::RT, C::MT>(acc);

    for (long long k0 = kb; k0 < ke; k0 += C::BK) {
        const long long kend = ke < k0 + C::BK ? ke : k0 + C::BK;
        const S sp(K, k0, kend);
        // Row r's bytes start at byte `lo` of the tensor: its window at lo & ~15, its first
        // byte at lo & 15 of the window (the same for every phase of a row only when the
        // stride is a multiple of 16, so it is recomputed per phase, once per row).
        const long long lo0 = n0 * sp.stride + sp.first;
        qf_sync();  // the previous phase's fragment loads are done with Xa and Wst
        // The rows' raw bytes of [k0, kend): row r's 16-byte windows into Wst + r·SEG.
        qf_gemm_stage_rows<C::NTH, C::SEG>(Wst, w, total, sp, lo0, nrows);
        // Activations [m0, m0 + 8·mcols) × [k0, k0 + BK) as T, 0 outside M × [k0, kend), each at
        // its fragment-order slot: token r = 8·mt + g, element c = SLAB·s + CH·t + j →
        // ((mt·NSLAB + s)·32 + 4g + t)·CH + j. Consecutive threads read consecutive pairs of k.
        qf_for_threads<C::NTH>([&](int t) {
#pragma unroll 4
            for (int e = t; e < mcols * 8 * (C::BK / 2); e += C::NTH) {
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
            const int w0 = wid * 16 * C::RT;  // the warp's first row in the CTA
            // Phase elements from e0 to kend, and from e0 to k0 (grid formats: 0).
            const int span = (int)(kend - sp.e0), lead = (int)(k0 - sp.e0);
            // Each of the lane's 2·RT rows, once per phase: where its bytes are staged. A row
            // past the tensor decodes row 0's bytes instead: only its own row of the mma's
            // product sees them, and the epilogue does not store that row.
            int pr[C::RT][2][QF_LANE_SLOTS];  // offsets into Wst (half a pointer's registers)
            qf_for_lanes([&](int ls, int lane) {
#pragma unroll
                for (int i = 0; i < C::RT; ++i)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int r = w0 + 16 * i + 8 * h + (lane >> 2);
                        const int rr = r < nrows ? r : 0;
                        pr[i][h][ls] = rr * C::SEG + (int)((lo0 + rr * sp.stride) & 15);
                    }
            });
            // One slab at a time (unrolled, the module's PTX grew by half for every format):
            // its 2·RT row decodes are independent, so their loads are in flight together.
#pragma unroll 1
            for (int s = 0; s < NSLAB; ++s) {
                if (lead + s * SLAB >= span) break;  // the same for the whole warp
                qf_frag_a a[C::RT][ST][QF_LANE_SLOTS];
                // Only the phase's last slab can hold elements past kend (the same for the warp).
                const bool tail = lead + (s + 1) * SLAB > span;
                qf_for_lanes([&](int ls, int lane) {
                    const int rel = lead + s * SLAB + (lane & 3) * CH, rem = span - rel;
#pragma unroll
                    for (int i = 0; i < C::RT; ++i) {
                        uint32_t pk[2][CH / 2];
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int r = w0 + 16 * i + 8 * h + (lane >> 2);
                            qf_gemms_pairs<F, T>(Wst + pr[i][h][ls], sp.e0, (unsigned)rel, tail, rem, grid,
                                                 n0 + (r < nrows ? r : 0), K, pk[h]);
                        }
#pragma unroll
                        for (int q = 0; q < ST; ++q) {
                            a[i][q][ls].r[0] = pk[0][2 * q];
                            a[i][q][ls].r[1] = pk[1][2 * q];
                            a[i][q][ls].r[2] = pk[0][2 * q + 1];
                            a[i][q][ls].r[3] = pk[1][2 * q + 1];
                        }
                    }
                });
                // B fragments one 8-token column at a time (registers for 64 tokens).
#pragma unroll
                for (int q = 0; q < ST; ++q)
#pragma unroll
                    for (int j = 0; j < C::MT; ++j) {
                        if (j >= mcols) break;  // the same for the whole CTA
                        qf_frag_b b[QF_LANE_SLOTS];
                        qf_for_lanes([&](int ls, int lane) {
                            const uint16_t* p = Xa + ((j * NSLAB + s) * 32 + lane) * CH + 4 * q;
                            b[ls].r[0] = qf_ld_pair(p);
                            b[ls].r[1] = qf_ld_pair(p + 2);
                        });
#pragma unroll
                        for (int i = 0; i < C::RT; ++i) qf_mma_m16n8k16<T>(acc[ws][i][j], a[i][q], b);
                    }
            }
        });
    }

    // Epilogue: accumulator (i, j, e) of lane (g, t) is weight row 16i + g (+ 8 for e ≥ 2)
    // of the warp's rows and token 8j + 2t + (e & 1).
    qf_for_warps<C::NW>([&](int ws, int wid) {
        qf_for_lanes([&](int ls, int lane) {
            qf_for_acc_t<C::RT, C::MT>(lane, wid * 16 * C::RT, 0, [&](int i, int j, int e, int r, int c) {
                const long long n = n0 + r, m = m0 + c;
                if (m < M && n < N) qf_gemm_store(y, out, m * N + n, acc[ws][i][j][ls].r[e]);
            });
        });
    });
}
