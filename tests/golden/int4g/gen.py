#!/usr/bin/env python3
"""Golden bytes for qforge's int4g, from torchao's documented 8da4w formulas (numpy only).

torchao (quant_primitives.choose_qparams_affine, MappingType.SYMMETRIC, int4 range -8..7,
eps = torch.finfo(torch.float32).eps) and quantize_affine, per group of G weights:

    scale = clamp(max(-min(x, 0), max(x, 0)) / ((7 - (-8)) / 2), min=eps)   # f32
    scale = scale.to(scale_dtype)                                           # RNE
    q     = clamp(round(x / scale), -8, 7)                                  # half to even

A row whose length is not a multiple of G is padded with zeros (torchao's padding_allowed),
which leaves every amax, hence every scale, unchanged. Packing is qforge's block layout:
[scale LE][G/2 bytes], byte j = (q[j] + 8) | (q[j + G/2] + 8) << 4.

Writes inputs.f32 (ROWS x COLS little-endian f32) and int4g_g{G}_{dtype}.bin for every group
size and scale dtype. Deterministic: `python3 tests/golden/int4g/gen.py` reproduces the
committed files byte for byte.
"""
import os

import numpy as np

ROWS, COLS = 12, 1100
GROUPS = [32, 64, 128, 256, 4096]
DTYPES = ["f32", "f16", "bf16"]
EPS = np.finfo(np.float32).eps  # 2^-23
HERE = os.path.dirname(os.path.abspath(__file__))


def to_bf16_bits(x):
    """f32 -> bf16 bits, round to nearest even (finite input)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def round_scale(s, dtype):
    """(stored bytes, value as f32) of a f32 scale array in the scale dtype."""
    if dtype == "f32":
        return s.astype("<f4").tobytes(), s
    if dtype == "f16":
        h = s.astype(np.float16)  # numpy rounds to nearest even
        assert np.all(np.isfinite(h)), "golden data must not overflow f16 scales"
        return h.astype("<f2").tobytes(), h.astype(np.float32)
    bits = to_bf16_bits(s)
    return bits.astype("<u2").tobytes(), (bits.astype(np.uint32) << 16).view(np.float32)


def quantize_row(x, g, dtype):
    n = -(-len(x) // g) * g
    xp = np.zeros(n, dtype=np.float32)
    xp[: len(x)] = x
    groups = xp.reshape(-1, g)
    amax = np.maximum(-np.minimum(groups.min(axis=1), 0), np.maximum(groups.max(axis=1), 0))
    scale = np.maximum(amax / np.float32(7.5), EPS).astype(np.float32)
    raw, sf = round_scale(scale, dtype)
    q = np.clip(np.rint(groups / sf[:, None]), -8, 7).astype(np.int32) + 8
    size = {"f32": 4, "f16": 2, "bf16": 2}[dtype]
    out = bytearray()
    for i in range(groups.shape[0]):
        out += raw[i * size:(i + 1) * size]
        lo, hi = q[i, : g // 2], q[i, g // 2:]
        out += (lo | (hi << 4)).astype(np.uint8).tobytes()
    return bytes(out)


def inputs():
    rng = np.random.default_rng(20240607)
    x = np.zeros((ROWS, COLS), dtype=np.float32)
    for r in range(ROWS - 4):
        x[r] = rng.standard_normal(COLS) * 10.0 ** rng.uniform(-3, 3)
    x[2, 40:200] = 0.0  # all-zero groups (scale = eps, q = 0) inside a normal row
    x[3, ::7] *= 30.0  # outliers
    # Exact ties: amax 7.5 gives scale 1 in every dtype, values k + 0.5 round half to even.
    x[ROWS - 4] = np.resize(np.array([7.5, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -7.5, 6.5, -6.5, 4.5], np.float32), COLS)
    x[ROWS - 3] = rng.standard_normal(COLS) * 1e-7  # scale clamped to eps or f16-subnormal
    x[ROWS - 2] = rng.standard_normal(COLS) * 3e-4  # f16-subnormal scales
    x[ROWS - 1] = 0.0  # all zero
    return x


def main():
    x = inputs()
    x.astype("<f4").tofile(os.path.join(HERE, "inputs.f32"))
    for g in GROUPS:
        for dt in DTYPES:
            data = b"".join(quantize_row(row, g, dt) for row in x)
            with open(os.path.join(HERE, f"int4g_g{g}_{dt}.bin"), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
