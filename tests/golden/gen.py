#!/usr/bin/env python3
"""Generate qforge's golden vectors with ggml's own C code (PyPI `ggml-py`, via ctypes).

    pip install ggml-py==0.10.1 numpy
    python3 tests/golden/gen.py            # rewrites tests/golden/*

For every format listed in FORMATS this writes, under tests/golden/<format>/:
  random.bin         random bytes, a whole number of blocks (NaN / Inf scales included)
  random.f32         ggml's dequantize_row_<type> of random.bin (formats with a to_float)
  quant.bin          ggml's quantizer applied to inputs.f32 (every dataset, rows in order)
  quant_imatrix.bin  the same with imatrix.f32 as importance weights (only for quantizers
                     whose output depends on the imatrix)
For the formats ggml refuses to quantize without an importance matrix (iq2_xxs, iq2_xs,
iq1_s), quant.bin is ggml's quantization with uniform weights (an all-ones imatrix): the
reference for qforge's quantization without one. The manifest says so ("uniform_imatrix").
and tests/golden/manifest.json describing datasets and formats. ggml's RMSE per dataset is
not stored: tests decode quant.bin with qforge's decoder (itself checked bit-exact above).
Everything is deterministic (fixed seeds), so re-running reproduces the committed files.
"""
import ctypes
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
COLS = 512  # two K-quant super-blocks, sixteen 32-blocks per row
ROWS = 4

# name: (ggml type id, block size, block bytes, random blocks, quantizer kind)
#   kind "chunk": size_t quantize_<t>(src, dst, nrows, n_per_row, imatrix)
#   kind "ref":   void quantize_row_<t>_ref(src, dst, k)          (activation formats)
FORMATS = {
    "q4_0": (2, 32, 18, 64, "chunk"),
    "q4_1": (3, 32, 20, 64, "chunk"),
    "q5_0": (6, 32, 22, 64, "chunk"),
    "q5_1": (7, 32, 24, 64, "chunk"),
    "q8_0": (8, 32, 34, 64, "chunk"),
    "q8_1": (9, 32, 36, 64, "ref"),
    "q2_k": (10, 256, 84, 24, "chunk"),
    "q3_k": (11, 256, 110, 24, "chunk"),
    "q4_k": (12, 256, 144, 24, "chunk"),
    "q5_k": (13, 256, 176, 24, "chunk"),
    "q6_k": (14, 256, 210, 24, "chunk"),
    "q8_k": (15, 256, 292, 24, "ref"),
    "iq2_xxs": (16, 256, 66, 24, "chunk"),
    "iq2_xs": (17, 256, 74, 24, "chunk"),
    "iq2_s": (22, 256, 82, 24, "chunk"),
    "iq3_xxs": (18, 256, 98, 24, "chunk"),
    "iq3_s": (21, 256, 110, 24, "chunk"),
    "iq1_s": (19, 256, 50, 24, "chunk"),
    "iq1_m": (29, 256, 56, 24, "chunk"),
    "iq4_nl": (20, 32, 18, 64, "chunk"),
    "iq4_xs": (23, 256, 136, 24, "chunk"),
    "tq1_0": (34, 256, 54, 24, "chunk"),
    "tq2_0": (35, 256, 66, 24, "chunk"),
    "mxfp4": (39, 32, 17, 64, "chunk"),
    "nvfp4": (40, 64, 36, 48, "chunk"),
}
# ggml has no dequantize_row for q8_1 (it is only ever a vec_dot operand).
NO_TO_FLOAT = {"q8_1"}


def ggml_name(fmt):
    return fmt[:-1] + "K" if fmt.endswith("_k") else fmt


def load_lib():
    import ggml  # noqa: F401  (locates the shared library shipped with ggml-py)

    libdir = os.path.join(os.path.dirname(ggml.__file__), "lib")
    return ctypes.CDLL(os.path.join(libdir, "libggml-base.so"))


def datasets(rng):
    g = lambda: rng.standard_normal((ROWS, COLS))
    out = []
    out.append(("gaussian", g()))
    out.append(("heavy_tailed", rng.standard_t(2.5, (ROWS, COLS))))
    x = g() * 0.5
    idx = rng.integers(0, COLS, (ROWS, 6))
    for r in range(ROWS):
        x[r, idx[r]] = rng.choice([-1, 1], 6) * rng.uniform(20, 60, 6)
    out.append(("outliers", x))
    out.append(("tiny", g() * 1e-5))
    out.append(("huge", g() * 3e3))
    out.append(("all_zero", np.zeros((ROWS, COLS))))
    out.append(("uniform_pos", rng.uniform(0.1, 2.0, (ROWS, COLS))))
    return [(n, a.astype(np.float32)) for n, a in out]


def main():
    lib = load_lib()
    rng = np.random.default_rng(20261121)
    data = datasets(rng)
    inputs = np.concatenate([a for _, a in data], axis=0)
    inputs.tofile(os.path.join(HERE, "inputs.f32"))
    # A skewed importance matrix: a few columns matter a lot more than the rest.
    imatrix = (rng.exponential(1.0, COLS) ** 3 + 1e-3).astype(np.float32)
    imatrix.tofile(os.path.join(HERE, "imatrix.f32"))

    manifest = {
        "generator": "tests/golden/gen.py with ggml-py 0.10.1 (ggml's C quantizers and to_float)",
        "cols": COLS,
        "datasets": [{"name": n, "rows": ROWS} for n, _ in data],
        "formats": {},
    }
    fp = ctypes.POINTER(ctypes.c_float)
    lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
    ones = np.ones(COLS, dtype=np.float32)
    for fmt, (tid, bs, bb, nrand, kind) in FORMATS.items():
        d = os.path.join(HERE, fmt)
        os.makedirs(d, exist_ok=True)
        gname = ggml_name(fmt)
        entry = {"ggml_type": tid, "block_size": bs, "block_bytes": bb, "random_blocks": nrand}

        raw = rng.integers(0, 256, nrand * bb, dtype=np.uint8)
        raw.tofile(os.path.join(d, "random.bin"))
        if fmt not in NO_TO_FLOAT:
            deq = getattr(lib, f"dequantize_row_{gname}")
            deq.restype = None
            y = np.zeros(nrand * bs, dtype=np.float32)
            deq(raw.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(fp), ctypes.c_int64(nrand * bs))
            y.tofile(os.path.join(d, "random.f32"))
            entry["has_to_float"] = True
        else:
            entry["has_to_float"] = False

        row_bytes = COLS // bs * bb
        lib.ggml_quantize_init(ctypes.c_int(tid))  # builds the IQ grids' search maps
        needs_im = kind == "chunk" and bool(lib.ggml_quantize_requires_imatrix(ctypes.c_int(tid)))
        entry["uniform_imatrix"] = needs_im
        variants = [("quant.bin", ones if needs_im else None)]
        if kind == "chunk":
            variants.append(("quant_imatrix.bin", imatrix))
        written = []
        for fname, im in variants:
            out = np.zeros(inputs.shape[0] * row_bytes, dtype=np.uint8)
            if kind == "chunk":
                q = getattr(lib, f"quantize_{gname}")
                q.restype = ctypes.c_size_t
                imp = im.ctypes.data_as(fp) if im is not None else None
                n = q(inputs.ctypes.data_as(fp), out.ctypes.data_as(ctypes.c_void_p),
                      ctypes.c_int64(inputs.shape[0]), ctypes.c_int64(COLS), imp)
                assert n == out.size, (fmt, n, out.size)
            else:
                q = getattr(lib, f"quantize_row_{gname}_ref")
                q.restype = None
                q(inputs.ctypes.data_as(fp), out.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(inputs.size))
            if fname == "quant_imatrix.bin" and not needs_im:
                plain = np.fromfile(os.path.join(d, "quant.bin"), dtype=np.uint8)
                if np.array_equal(plain, out):
                    continue  # this quantizer ignores importance weights
            out.tofile(os.path.join(d, fname))
            written.append(fname)
        stale = os.path.join(d, "quant_imatrix.bin")
        if "quant_imatrix.bin" not in written and os.path.exists(stale):
            os.remove(stale)
        entry["quant_files"] = written
        manifest["formats"][fmt] = entry
        print(f"{fmt}: ok", file=sys.stderr)

    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
