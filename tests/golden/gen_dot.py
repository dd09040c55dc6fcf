#!/usr/bin/env python3
"""Golden vectors for the native (integer) dot products, from ggml's CPU backend (PyPI
`ggml-py`, libggml-cpu via ctypes).

    python3 tests/golden/gen_dot.py         # rewrites tests/golden/dot/*
    QFORGE_GGML_LIB=/path/to/libggml-base.so python3 tests/golden/gen_dot.py

Each format's dots come from the ggml library that made its golden files (gen.py's
manifest, "ggml"): ggml-py's libggml-cpu.so, or the libggml-cpu.so beside $QFORGE_GGML_LIB
for the types ggml-py lacks (q2_0); each library runs in its own worker process. Without
that library those formats' committed dot files are kept, and the script says so.

For every weight format with a CPU `vec_dot` in ggml, this takes the weight rows of
tests/golden/<format>/quant.bin (all 28 rows, every dataset) and ACT_ROWS activation rows of
inputs.f32, and writes under tests/golden/dot/:
  <format>.act.bin   ggml's `from_float` of each activation row into the format's
                     vec_dot_type (q8_0 / q8_1 / q8_k), rows after one another
  <format>.dot.f32   ggml's `vec_dot(weight row w, activation row a)` for every pair,
                     little-endian f32, weight-row major (28 × ACT_ROWS)
and tests/golden/dot/manifest.json naming the vec_dot_type of each format.
ggml's CPU kernels are SIMD builds for this machine; their f32 accumulation order differs
from the scalar one, so tests compare to ~1e-6 relative (of the sum of |terms|), not bitwise.
"""
import ctypes
import json
import os
import subprocess
import sys

import numpy as np

from gen import COLS, FORMATS, HERE, TraitsCpu, ggml_name, lib_name, libraries  # noqa: F401

ACT_ROWS = [0, 5, 10, 27]  # gaussian r0, heavy_tailed r1, outliers r2, uniform_pos r3
TYPE_NAMES = {v[0]: k for k, v in FORMATS.items()}


FROM_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
VEC_DOT = ctypes.CFUNCTYPE(
    None,
    ctypes.c_int,
    ctypes.POINTER(ctypes.c_float),
    ctypes.c_size_t,
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
)


def worker(base_path, wanted):
    """The dots of the formats in `wanted` with one library (base + the cpu backend beside it)."""
    base = ctypes.CDLL(base_path, mode=ctypes.RTLD_GLOBAL)
    cpu = ctypes.CDLL(os.path.join(os.path.dirname(base_path), "libggml-cpu.so"))
    cpu.ggml_cpu_init.restype = None
    cpu.ggml_cpu_init()
    cpu.ggml_get_type_traits_cpu.restype = ctypes.POINTER(TraitsCpu)
    cpu.ggml_get_type_traits_cpu.argtypes = [ctypes.c_int]
    name = lib_name(base)
    # Only the formats whose golden files this library made (their dots use its bytes).
    golden = json.load(open(os.path.join(HERE, "manifest.json")))["formats"]
    wanted = [f for f in wanted if golden[f].get("ggml") == name]

    x = np.fromfile(os.path.join(HERE, "inputs.f32"), dtype="<f4").reshape(-1, COLS)
    acts = np.ascontiguousarray(x[ACT_ROWS])
    out_dir = os.path.join(HERE, "dot")
    entries = {}
    for fmt in wanted:
        tid, bs, bb, _n, _kind = FORMATS[fmt]
        tr = cpu.ggml_get_type_traits_cpu(tid).contents
        if not tr.vec_dot:
            continue
        dot_name = TYPE_NAMES.get(tr.vec_dot_type)
        if dot_name is None:
            continue
        dtid, dbs, dbb, _, _ = FORMATS[dot_name]
        dtr = cpu.ggml_get_type_traits_cpu(dtid).contents
        from_float = FROM_FLOAT(dtr.from_float)
        vec_dot = VEC_DOT(tr.vec_dot)
        arow_bytes = COLS // dbs * dbb
        abuf = (ctypes.c_uint8 * (arow_bytes * len(ACT_ROWS)))()
        for i, a in enumerate(acts):
            a = np.ascontiguousarray(a, dtype=np.float32)
            from_float(a.ctypes.data, ctypes.addressof(abuf) + i * arow_bytes, COLS)
        w = np.fromfile(os.path.join(HERE, fmt, "quant.bin"), dtype=np.uint8)
        wrow_bytes = COLS // bs * bb
        wrows = w.reshape(-1, wrow_bytes)
        res = np.zeros((wrows.shape[0], len(ACT_ROWS)), dtype=np.float32)
        s = ctypes.c_float()
        for r, row in enumerate(wrows):
            row = np.ascontiguousarray(row)
            for j in range(len(ACT_ROWS)):
                vec_dot(COLS, ctypes.byref(s), 0, row.ctypes.data, 0, ctypes.addressof(abuf) + j * arow_bytes, 0, 1)
                res[r, j] = s.value
        with open(os.path.join(out_dir, fmt + ".act.bin"), "wb") as f:
            f.write(bytes(abuf))
        res.astype("<f4").tofile(os.path.join(out_dir, fmt + ".dot.f32"))
        entries[fmt] = {"dot_type": dot_name, "weight_rows": int(wrows.shape[0])}
        print(f"{fmt:8} vec_dot_type {dot_name}  {wrows.shape[0]}x{len(ACT_ROWS)} dots ({name})", file=sys.stderr)
    return {"library": name, "entries": entries}


def main():
    golden = json.load(open(os.path.join(HERE, "manifest.json")))["formats"]
    out_dir = os.path.join(HERE, "dot")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "manifest.json")
    old = json.load(open(path))["formats"] if os.path.exists(path) else {}
    manifest = {"cols": COLS, "act_rows": ACT_ROWS, "formats": {}}
    todo = list(FORMATS)
    for lib in libraries():
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", lib, *todo],
                           check=True, stdout=subprocess.PIPE)
        r = json.loads(r.stdout)
        manifest["formats"].update(r["entries"])
        todo = [f for f in todo if golden[f].get("ggml") != r["library"]]
    for fmt in todo:
        if fmt in old:
            print(f"{fmt}: its ggml library was not given (QFORGE_GGML_LIB); keeping the committed dots",
                  file=sys.stderr)
            manifest["formats"][fmt] = old[fmt]
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        json.dump(worker(sys.argv[2], sys.argv[3:]), sys.stdout)
    else:
        main()
