#!/usr/bin/env python3
"""Edge-case cross-check data for qforge-fp4 from ggml's own quantizers and decoders
(PyPI ggml-py, as tests/golden/gen.py). Not committed data: run, then point the test at it:

    python3 crates/qforge-fp4/tests/ggml_crosscheck.py /tmp/fp4x
    QFORGE_FP4_GGML_DIR=/tmp/fp4x cargo test -p qforge-fp4 --test ggml_crosscheck

Writes inputs.f32 (rows of COLS values: block magnitudes from subnormal to near f32::MAX,
values just below powers of two, halfway points), <fmt>.bin = ggml's quantize_<fmt>, and
<fmt>.all.bin / <fmt>.all.f32 = every possible scale byte with random codes and ggml's decode.
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
    rng = np.random.default_rng(7)
    rows = []
    for e in range(-149, 128, 3):
        rows.append(rng.standard_normal(COLS) * 2.0 ** e)
    # Exact powers of two and their float predecessors, per block.
    p = 2.0 ** rng.integers(-130, 127, COLS)
    rows.append(np.where(rng.random(COLS) < 0.5, p, np.nextafter(p.astype(np.float32), np.float32(0))))
    rows.append(rng.choice([-1, 1], COLS) * np.float32(3.4028235e38) * rng.random(COLS))
    rows.append(rng.integers(-12, 13, COLS) * 0.25 + rng.choice([0, 0.125], COLS))  # halfway points
    x = np.nan_to_num(np.array(rows, dtype=np.float64).astype(np.float32), posinf=3e38, neginf=-3e38)
    x.tofile(os.path.join(out, "inputs.f32"))
    fp = ctypes.POINTER(ctypes.c_float)
    for name, tid, bb, bs in [("mxfp4", 39, 17, 32), ("nvfp4", 40, 36, 64)]:
        q = getattr(lib, f"quantize_{name}")
        q.restype = ctypes.c_size_t
        dst = np.zeros(x.shape[0] * COLS // bs * bb, dtype=np.uint8)
        q(x.ctypes.data_as(fp), dst.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(x.shape[0]), ctypes.c_int64(COLS), None)
        dst.tofile(os.path.join(out, f"{name}.bin"))
        blocks = rng.integers(0, 256, (256, bb), dtype=np.uint8)
        blocks[:, 0] = np.arange(256)  # every scale byte (nvfp4: sub-block 0)
        if name == "nvfp4":
            blocks[:, 1:4] = np.arange(256)[:, None]
        blocks.tofile(os.path.join(out, f"{name}.all.bin"))
        y = np.zeros(256 * bs, dtype=np.float32)
        deq = getattr(lib, f"dequantize_row_{name}")
        deq.restype = None
        deq(blocks.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(fp), ctypes.c_int64(256 * bs))
        y.tofile(os.path.join(out, f"{name}.all.f32"))


if __name__ == "__main__":
    main(sys.argv[1])
