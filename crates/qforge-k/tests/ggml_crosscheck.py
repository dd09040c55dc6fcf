#!/usr/bin/env python3
"""Data for tests/ggml_crosscheck.rs: ggml's K-quantizers (PyPI ggml-py, via ctypes) on 448
rows x 1024 columns of varied random data, with and without an importance matrix that has
zero columns.

    python3 crates/qforge-k/tests/ggml_crosscheck.py /tmp/kextra
    QFORGE_K_GGML_DIR=/tmp/kextra cargo test -p qforge-k --test ggml_crosscheck -- --nocapture
"""
import ctypes
import os
import sys

import ggml
import numpy as np

out_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/kextra"
os.makedirs(out_dir, exist_ok=True)
lib = ctypes.CDLL(os.path.join(os.path.dirname(ggml.__file__), "lib", "libggml-base.so"))
fp = ctypes.POINTER(ctypes.c_float)
rng = np.random.default_rng(7)
COLS, R = 1024, 64


def dataset(kind):
    if kind == 0:
        return rng.standard_normal((R, COLS))
    if kind == 1:
        return rng.standard_t(1.5, (R, COLS))
    if kind == 2:
        return rng.uniform(-1, 3, (R, COLS))
    if kind == 3:
        x = rng.standard_normal((R, COLS)) * 0.01
        x[rng.random((R, COLS)) < 0.3] = 0
        return x
    if kind == 4:
        return -np.abs(rng.standard_normal((R, COLS))) * 5
    if kind == 5:  # every 16 columns at a different scale, e^-10 .. e^10
        return rng.standard_normal((R, COLS)) * np.exp(rng.uniform(-10, 10, (R, COLS // 16))).repeat(16, axis=1)
    return np.round(rng.standard_normal((R, COLS)) * 4) / 4


x = np.concatenate([dataset(k) for k in range(7)]).astype(np.float32)
im = (rng.exponential(1.0, COLS) ** 2).astype(np.float32)
im[rng.random(COLS) < 0.1] = 0
x.tofile(os.path.join(out_dir, "inputs.f32"))
im.tofile(os.path.join(out_dir, "imatrix.f32"))
for name, bb in [("q2_K", 84), ("q3_K", 110), ("q4_K", 144), ("q5_K", 176), ("q6_K", 210)]:
    for tag, imp in [("plain", None), ("im", im)]:
        out = np.zeros(x.shape[0] * COLS // 256 * bb, dtype=np.uint8)
        q = getattr(lib, f"quantize_{name}")
        q.restype = ctypes.c_size_t
        q(x.ctypes.data_as(fp), out.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(x.shape[0]),
          ctypes.c_int64(COLS), imp.ctypes.data_as(fp) if imp is not None else None)
        out.tofile(os.path.join(out_dir, f"{name.lower()}.{tag}.bin"))
out = np.zeros(x.size // 256 * 292, dtype=np.uint8)
lib.quantize_row_q8_K_ref.restype = None
lib.quantize_row_q8_K_ref(x.ctypes.data_as(fp), out.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(x.size))
out.tofile(os.path.join(out_dir, "q8_k.plain.bin"))
