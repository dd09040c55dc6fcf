#!/usr/bin/env python3
"""Reference FP8 conversions for qforge-fp8, from ml_dtypes (an independent implementation).

    python3 -m pip install ml_dtypes==0.6.0 numpy && python3 tests/golden/fp8/gen.py

Writes, for e4m3 (ml_dtypes.float8_e4m3fn) and e5m2 (ml_dtypes.float8_e5m2):
  decode_{kind}.f32   the value of each of the 256 codes (little-endian f32, NaN where NaN)
  sweep.f32           f32 test inputs: every code's value, the midpoints between neighbours
                      (ties) and their f32 neighbours, f32 subnormals, values past the
                      largest finite fp8, and pseudo-random bit patterns over a wide range
  sweep_{kind}.u8     ml_dtypes' round-to-nearest-even code of clip(x, -MAX, MAX) for each
                      sweep input: saturating conversion (qforge never produces Inf / NaN)
Deterministic: rerunning reproduces the committed files byte for byte.
"""
import os

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def codes_values(dt):
    return np.arange(256, dtype=np.uint8).view(dt).astype(np.float32)


def sweep():
    parts = []
    for dt in KINDS.values():
        v = codes_values(dt)
        v = np.sort(v[np.isfinite(v)])
        mids = ((v[1:].astype(np.float64) + v[:-1]) / 2).astype(np.float32)  # exact: fp8 values are short
        parts += [v, mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))]
        top = np.float32(v[-1])
        parts.append(np.array([top * 1.01, top * 2, 3e38, -3e38, top + 1], dtype=np.float32))
    # f32 subnormals and tiny normals
    parts.append(np.array([1, 2, 3, 0x7FFFFF, 0x800000, 0x800001], dtype=np.uint32).view(np.float32))
    rng = np.random.default_rng(8)
    # random bit patterns with exponents in [2^-30, 2^20], both signs
    exp = rng.integers(127 - 30, 127 + 20, size=15000, dtype=np.uint32)
    man = rng.integers(0, 1 << 23, size=15000, dtype=np.uint32)
    sign = rng.integers(0, 2, size=15000, dtype=np.uint32)
    parts.append(((sign << 31) | (exp << 23) | man).view(np.float32))
    x = np.concatenate(parts).astype(np.float32)
    x = np.concatenate([x, -x])
    return x[np.isfinite(x)]


def main():
    x = sweep()
    x.astype("<f4").tofile(os.path.join(HERE, "sweep.f32"))
    for name, dt in KINDS.items():
        codes_values(dt).astype("<f4").tofile(os.path.join(HERE, f"decode_{name}.f32"))
        vals = codes_values(dt)
        mx = np.float32(np.max(vals[np.isfinite(vals)]))
        q = np.clip(x, -mx, mx).astype(dt).view(np.uint8)
        q.tofile(os.path.join(HERE, f"sweep_{name}.u8"))


if __name__ == "__main__":
    main()
