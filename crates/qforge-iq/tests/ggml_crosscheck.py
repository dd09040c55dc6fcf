#!/usr/bin/env python3
"""Write a larger cross-check set for qforge-iq with ggml's own quantizers (PyPI ggml-py).

    QFORGE_GGML_LIB=/path/to/libggml-base.so python3 crates/qforge-iq/tests/ggml_crosscheck.py /tmp/iqx [rows] [cols]
    QFORGE_IQ_GGML_DIR=/tmp/iqx cargo test -p qforge-iq --test ggml_crosscheck -- --ignored --nocapture

QFORGE_GGML_LIB names the libggml-base.so of the ggml that llama-quantize uses (for example the
llama.cpp vendored in llama-cpp-python's sdist, configured with GGML_NATIVE=OFF and built as the
`ggml-base` target; never committed). Without it the script uses PyPI ggml-py 0.10.1, whose
iq1_m quantizer predates llama.cpp's per-half prefix sums (PR #28706) and gives other bytes on
sparse rows and near-ties, so it then writes no iq1_m data.

Writes inputs.f32 (rows x cols: gaussian, heavy-tailed, outliers, tiny, huge, sparse and
integer-valued rows with many ties), imatrix.f32 and, per format, <fmt>.plain.bin (without
importance weights; uniform weights for the formats ggml requires them for) and <fmt>.im.bin.
"""
import ctypes
import os
import sys

import numpy as np

FORMATS = {"iq2_xxs": 16, "iq2_xs": 17, "iq2_s": 22, "iq3_xxs": 18, "iq3_s": 21,
           "iq1_s": 19, "iq1_m": 29, "iq4_nl": 20, "iq4_xs": 23}


def main():
    out = sys.argv[1]
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    cols = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
    os.makedirs(out, exist_ok=True)
    formats = dict(FORMATS)
    lib_path = os.environ.get("QFORGE_GGML_LIB")
    if not lib_path:
        import ggml
        lib_path = os.path.join(os.path.dirname(ggml.__file__), "lib", "libggml-base.so")
        del formats["iq1_m"]
        print("ggml-py: no iq1_m data (set QFORGE_GGML_LIB to a post-#28706 ggml)", file=sys.stderr)
    lib = ctypes.CDLL(lib_path)
    rng = np.random.default_rng(7)
    kinds = [
        lambda: rng.standard_normal(cols),
        lambda: rng.standard_t(2.0, cols),
        lambda: rng.standard_normal(cols) * np.where(rng.random(cols) < 0.01, 50.0, 1.0),
        lambda: rng.standard_normal(cols) * 1e-6,
        lambda: rng.standard_normal(cols) * 1e4,
        lambda: rng.standard_normal(cols) * (rng.random(cols) < 0.1),
        lambda: rng.integers(-3, 4, cols).astype(np.float64),
        lambda: rng.uniform(-1, 1, cols) + 0.5,
    ]
    x = np.stack([kinds[r % len(kinds)]() for r in range(rows)]).astype(np.float32)
    im = (rng.exponential(1.0, cols) ** 2 + 1e-2).astype(np.float32)
    x.tofile(os.path.join(out, "inputs.f32"))
    im.tofile(os.path.join(out, "imatrix.f32"))
    fp = ctypes.POINTER(ctypes.c_float)
    lib.ggml_row_size.restype = ctypes.c_size_t
    lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
    for name, tid in formats.items():
        lib.ggml_quantize_init(ctypes.c_int(tid))
        rb = lib.ggml_row_size(ctypes.c_int(tid), ctypes.c_int64(cols))
        q = getattr(lib, f"quantize_{name}")
        q.restype = ctypes.c_size_t
        plain = np.ones(cols, dtype=np.float32) if lib.ggml_quantize_requires_imatrix(ctypes.c_int(tid)) else None
        for tag, w in [("plain", plain), ("im", im)]:
            buf = np.zeros(rows * rb, dtype=np.uint8)
            wp = w.ctypes.data_as(fp) if w is not None else None
            q(x.ctypes.data_as(fp), buf.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(rows), ctypes.c_int64(cols), wp)
            buf.tofile(os.path.join(out, f"{name}.{tag}.bin"))
        print(name, file=sys.stderr)


if __name__ == "__main__":
    main()
