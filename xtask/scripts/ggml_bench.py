#!/usr/bin/env python3
"""Time ggml's own C quantize / dequantize (PyPI ggml-py, via ctypes), single-threaded.

    python3 xtask/scripts/ggml_bench.py FORMAT OP N      # prints one JSON object

Used by `cargo xtask bench` to put qforge's numbers next to ggml's from the same run.
"""
import ctypes
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden"))
from gen import FORMATS, ggml_name, load_lib  # noqa: E402

COLS = 4096


def main():
    fmt, op, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tid, bs, bb, _, kind = FORMATS[fmt]
    lib = load_lib()
    g = ggml_name(fmt)
    rows = n // COLS
    x = (np.random.default_rng(1).standard_normal(n) * 1.7).astype(np.float32)
    q = np.zeros(n // bs * bb, dtype=np.uint8)
    fp = ctypes.POINTER(ctypes.c_float)
    xp, qp = x.ctypes.data_as(fp), q.ctypes.data_as(ctypes.c_void_p)
    if kind == "chunk":
        lib.ggml_quantize_init(ctypes.c_int(tid))  # the IQ types' grid maps (not timed)
        lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
        # ggml refuses some IQ types without an imatrix: uniform weights, like qforge's default.
        ones = np.ones(COLS, dtype=np.float32)
        imp = ones.ctypes.data_as(fp) if lib.ggml_quantize_requires_imatrix(ctypes.c_int(tid)) else None
        qf = getattr(lib, f"quantize_{g}")
        qf.restype = ctypes.c_size_t
        quant = lambda: qf(xp, qp, ctypes.c_int64(rows), ctypes.c_int64(COLS), imp)
    else:
        qf = getattr(lib, f"quantize_row_{g}_ref")
        qf.restype = None
        quant = lambda: qf(xp, qp, ctypes.c_int64(n))
    quant()
    if op == "quantize":
        fn = quant
    elif op == "dequant":
        try:
            df = getattr(lib, f"dequantize_row_{g}")
        except AttributeError:
            print(json.dumps({"format": fmt, "op": op, "error": "ggml has no to_float"}))
            return
        df.restype = None
        y = np.zeros(n, dtype=np.float32)
        yp = y.ctypes.data_as(fp)
        fn = lambda: df(qp, yp, ctypes.c_int64(n))
    else:
        raise SystemExit(f"unknown op {op}")
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < 0.7 and len(times) < 1000):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times.sort()
    secs = times[len(times) // 2]
    print(json.dumps({"format": fmt, "op": op, "n": n, "seconds": secs, "elements_per_s": n / secs,
                      "bytes_per_s": (q.size + 4 * n) / secs, "runs": len(times)}))


if __name__ == "__main__":
    main()
