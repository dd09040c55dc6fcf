#!/usr/bin/env python3
"""Generate tests/golden/iq1_m/ties.*: iq1_m blocks whose split search is a near-tie, so the
bytes depend on the order of ggml's float operations (the regression vector for qforge's
iq1_m encoder, checked by crates/qforge-iq/tests/iq1m_ties.rs).

    QFORGE_GGML_LIB=/path/to/libggml-base.so python3 tests/golden/gen_iq1m_ties.py

QFORGE_GGML_LIB is a newer ggml's libggml-base.so (built -fPIC from the llama.cpp source that
llama-quantize uses, never committed): its quantize_row_iq1_m_impl scores the splits from
per-half prefix sums. ggml-py 0.10.1 (pip) still accumulates every split's sums value by
value; the two agree except at near-ties. This draws 20000 random rows of 256 values with a
random importance matrix (fixed seed), quantizes them with both libraries (each in its own
worker process) and keeps the rows where they disagree. Writes:
  ties_x.f32        the rows (256 f32 each)
  ties_imatrix.f32  their importance weights
  ties_quant.bin    the newer ggml's quantize_iq1_m of each row (56 bytes per row)
"""
import ctypes
import importlib.util
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS, COLS, IQ1_M, BYTES = 20000, 256, 29, 56


def worker(lib_path, x_path, im_path, out_path):
    lib = ctypes.CDLL(lib_path)
    x = np.fromfile(x_path, dtype=np.float32)
    im = np.fromfile(im_path, dtype=np.float32)
    lib.ggml_quantize_init(ctypes.c_int(IQ1_M))
    lib.quantize_iq1_m.restype = ctypes.c_size_t
    fp = ctypes.POINTER(ctypes.c_float)
    rows = x.size // COLS
    out = np.zeros(rows * BYTES, dtype=np.uint8)
    for r in range(rows):
        lib.quantize_iq1_m(x[r * COLS:].ctypes.data_as(fp), out[r * BYTES:].ctypes.data_as(ctypes.c_void_p),
                           ctypes.c_int64(1), ctypes.c_int64(COLS), im[r * COLS:].ctypes.data_as(fp))
    out.tofile(out_path)


def main():
    new_lib = os.environ.get("QFORGE_GGML_LIB")
    if not new_lib:
        sys.exit("set QFORGE_GGML_LIB to a newer ggml's libggml-base.so")
    spec = importlib.util.find_spec("ggml")
    if spec is None:
        sys.exit("pip install ggml-py==0.10.1 numpy")
    old_lib = os.path.join(os.path.dirname(spec.origin), "lib", "libggml-base.so")
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((ROWS, COLS)) * rng.uniform(0.01, 0.1, (ROWS, 1))).astype(np.float32)
    im = (rng.gamma(0.5, 1.0, (ROWS, COLS)) + 1e-3).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        xp, ip = os.path.join(tmp, "x.f32"), os.path.join(tmp, "im.f32")
        x.tofile(xp)
        im.tofile(ip)
        outs = []
        for i, lib in enumerate([old_lib, new_lib]):
            op = os.path.join(tmp, f"q{i}.bin")
            subprocess.run([sys.executable, __file__, "--worker", lib, xp, ip, op], check=True)
            outs.append(np.fromfile(op, dtype=np.uint8).reshape(ROWS, BYTES))
    rows = np.nonzero((outs[0] != outs[1]).any(axis=1))[0]
    if rows.size == 0:
        sys.exit("the two libraries agree on every row: is QFORGE_GGML_LIB the newer ggml?")
    d = os.path.join(HERE, "iq1_m")
    x[rows].tofile(os.path.join(d, "ties_x.f32"))
    im[rows].tofile(os.path.join(d, "ties_imatrix.f32"))
    outs[1][rows].tofile(os.path.join(d, "ties_quant.bin"))
    print(f"{rows.size} near-tie rows: {rows.tolist()}")


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:])
    else:
        main()
