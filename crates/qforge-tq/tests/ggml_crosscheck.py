#!/usr/bin/env python3
"""Edge-case cross-check data for qforge-tq from ggml's own quantizers (PyPI ggml-py, as
tests/golden/gen.py). Not committed data: run, then point the test at it:

    python3 crates/qforge-tq/tests/ggml_crosscheck.py /tmp/tqx
    QFORGE_TQ_GGML_DIR=/tmp/tqx cargo test -p qforge-tq --test ggml_crosscheck

Writes inputs.f32 (rows of COLS values: block magnitudes from the smallest subnormal, where
1/amax overflows, to near f32::MAX, and exact halfway points) and <fmt>.bin = ggml's
quantize_<fmt> of them.
"""
import ctypes
import os
import sys

import numpy as np

COLS = 512


def main(out):
    import ggml

    lib = ctypes.CDLL(os.path.join(os.path.dirname(ggml.__file__), "lib", "libggml-base.so"))
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(11)
    rows = [rng.standard_normal(COLS) * 2.0 ** e for e in range(-149, 128, 4)]
    rows.append(rng.integers(-2, 3, COLS) * 0.5)  # halfway points: x / amax = ±0.5
    tiny = np.zeros(COLS)
    tiny[::7] = 1e-45
    tiny[3::7] = -3e-45
    rows.append(tiny)
    x = np.clip(np.array(rows), -3.4e38, 3.4e38).astype(np.float32)
    x.tofile(os.path.join(out, "inputs.f32"))
    fp = ctypes.POINTER(ctypes.c_float)
    for name, bb in [("tq1_0", 54), ("tq2_0", 66)]:
        q = getattr(lib, f"quantize_{name}")
        q.restype = ctypes.c_size_t
        dst = np.zeros(x.shape[0] * COLS // 256 * bb, dtype=np.uint8)
        q(x.ctypes.data_as(fp), dst.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(x.shape[0]), ctypes.c_int64(COLS), None)
        dst.tofile(os.path.join(out, f"{name}.bin"))


if __name__ == "__main__":
    main(sys.argv[1])
