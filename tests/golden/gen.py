#!/usr/bin/env python3
"""Generate qforge's golden vectors with ggml's own C code (PyPI `ggml-py`, via ctypes).

    pip install ggml-py==0.10.1 numpy
    python3 tests/golden/gen.py            # rewrites tests/golden/*
    QFORGE_GGML_LIB=/path/to/libggml-base.so python3 tests/golden/gen.py

ggml-py 0.10.1 lacks some of ggml's newer types (q2_0). QFORGE_GGML_LIB names the
libggml-base.so of a newer ggml (e.g. one built from llama.cpp's source, never committed);
a format ggml-py does not define is generated with that library. Without it such a format's
committed files (and manifest entries) are kept as they are, and the script says so. Each
library runs in its own worker process (two ggml builds must not share one process).

For every format listed in FORMATS this writes, under tests/golden/<format>/:
  random.bin         random bytes, a whole number of blocks (NaN / Inf scales included)
  random.f32         ggml's dequantize_row_<type> of random.bin (formats with a to_float)
  quant.bin          ggml's quantizer applied to inputs.f32 (every dataset, rows in order)
  quant_imatrix.bin  the same with imatrix.f32 as importance weights (only for quantizers
                     whose output depends on the imatrix)
For the formats ggml refuses to quantize without an importance matrix (iq2_xxs, iq2_xs,
iq1_s), quant.bin is ggml's quantization with uniform weights (an all-ones imatrix): the
reference for qforge's quantization without one. The manifest says so ("uniform_imatrix").
and tests/golden/manifest.json describing datasets and formats. The manifest's "ggml_types"
is ggml's own type table (every quantized type of every library used, read from
ggml_get_type_traits, not from FORMATS): a type listed there that qforge does not register
is a `missing` cell of `cargo xtask test-matrix`. "ggml_libraries" names the libraries, and
each format entry says which one made its files ("ggml"). ggml's RMSE per dataset is
not stored: tests decode quant.bin with qforge's decoder (itself checked bit-exact above).
Everything is deterministic (fixed seeds), so re-running reproduces the committed files.
"""
import ctypes
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
COLS = 512  # two K-quant super-blocks, sixteen 32-blocks per row
ROWS = 4

# name: (ggml type id, block size, block bytes, random blocks, quantizer kind)
#   kind "chunk": size_t quantize_<t>(src, dst, nrows, n_per_row, imatrix)
#   kind "ref":   void quantize_row_<t>_ref(src, dst, k)          (activation formats)
# Ids and sizes are checked against the generating library's own type table. New formats go
# last: the random bytes are drawn in this order from one generator.
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
    "q1_0": (41, 128, 18, 32, "chunk"),
    "q2_0": (42, 64, 18, 48, "chunk"),
}
# ggml has no dequantize_row for q8_1 (it is only ever a vec_dot operand).
NO_TO_FLOAT = {"q8_1"}


def ggml_name(fmt):
    return fmt[:-1] + "K" if fmt.endswith("_k") else fmt


def ggml_py_lib():
    """libggml-base.so of ggml-py, located without loading it (workers load one library each)."""
    spec = importlib.util.find_spec("ggml")
    if spec is None:
        sys.exit("ggml-py is not installed: pip install ggml-py==0.10.1")
    return os.path.join(list(spec.submodule_search_locations)[0], "lib", "libggml-base.so")


def libraries():
    """The ggml libraries, in order of preference: ggml-py, then $QFORGE_GGML_LIB."""
    libs = [ggml_py_lib()]
    extra = os.environ.get("QFORGE_GGML_LIB")
    if extra:
        libs.append(os.path.abspath(extra))
    return libs


class TypeTraits(ctypes.Structure):
    """ggml.h's `struct ggml_type_traits`."""
    _fields_ = [
        ("type_name", ctypes.c_char_p),
        ("blck_size", ctypes.c_int64),
        ("blck_size_interleave", ctypes.c_int64),
        ("type_size", ctypes.c_size_t),
        ("is_quantized", ctypes.c_bool),
        ("to_float", ctypes.c_void_p),
        ("from_float_ref", ctypes.c_void_p),
    ]


class TraitsCpu(ctypes.Structure):
    """ggml-cpu.h's `struct ggml_type_traits_cpu` (read by gen_dot.py and xtask's ggml_bench.py)."""
    _fields_ = [
        ("from_float", ctypes.c_void_p),
        ("vec_dot", ctypes.c_void_p),
        ("vec_dot_type", ctypes.c_int),
        ("nrows", ctypes.c_int64),
    ]


def type_count(lib):
    """GGML_TYPE_COUNT of a library (not exported): ggml_validate_row_data refuses ids past
    the table with a message and accepts zero bytes of any type in it; the last type is never
    a removed one (whose size 0 would divide by zero), so the first id from the top it accepts
    is the last one."""
    lib.ggml_validate_row_data.restype = ctypes.c_bool
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)  # one "invalid type" line per probe
    try:
        for i in range(255, -1, -1):
            if lib.ggml_validate_row_data(ctypes.c_int(i), None, ctypes.c_size_t(0)):
                return i + 1
    finally:
        os.dup2(saved, 2)
        os.close(devnull)
    raise RuntimeError("no ggml type accepted")


def quantized_types(lib):
    """Every quantized type in the library's type table: lower-case name -> id and sizes."""
    lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
    out = {}
    for i in range(type_count(lib)):
        t = lib.ggml_get_type_traits(ctypes.c_int(i)).contents
        if t.is_quantized and t.blck_size > 0:
            name = t.type_name.decode().lower()
            out[name] = {"ggml_type": i, "block_size": t.blck_size, "block_bytes": t.type_size}
    return out


def lib_name(lib):
    lib.ggml_version.restype = ctypes.c_char_p
    lib.ggml_commit.restype = ctypes.c_char_p
    return f"ggml {lib.ggml_version().decode()} ({lib.ggml_commit().decode()})"


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


def generate(lib, fmt, tid, bs, bb, nrand, kind, inputs, imatrix):
    """ggml's decode of <fmt>/random.bin and quantization of the inputs: the manifest entry."""
    fp = ctypes.POINTER(ctypes.c_float)
    d = os.path.join(HERE, fmt)
    gname = ggml_name(fmt)
    entry = {"ggml_type": tid, "block_size": bs, "block_bytes": bb, "random_blocks": nrand}
    raw = np.fromfile(os.path.join(d, "random.bin"), dtype=np.uint8)
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
    ones = np.ones(COLS, dtype=np.float32)
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
    return entry


def worker(path, wanted):
    """One library, in its own process: its type table, and the files of every format in
    `wanted` that it defines (reads inputs.f32, imatrix.f32 and <fmt>/random.bin)."""
    lib = ctypes.CDLL(path)
    lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
    types = quantized_types(lib)
    name = lib_name(lib)
    inputs = np.fromfile(os.path.join(HERE, "inputs.f32"), dtype="<f4").reshape(-1, COLS)
    imatrix = np.fromfile(os.path.join(HERE, "imatrix.f32"), dtype="<f4")
    entries = {}
    for fmt in wanted:
        tid, bs, bb, nrand, kind = FORMATS[fmt]
        t = types.get(fmt)
        if t is None:
            continue
        assert (t["ggml_type"], t["block_size"], t["block_bytes"]) == (tid, bs, bb), (fmt, t)
        entries[fmt] = generate(lib, fmt, tid, bs, bb, nrand, kind, inputs, imatrix)
        entries[fmt]["ggml"] = name
        print(f"{fmt}: ok ({name})", file=sys.stderr)
    return {"library": name, "types": types, "entries": entries}


def run_worker(path, wanted):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", path, *wanted],
                       check=True, stdout=subprocess.PIPE)
    return json.loads(r.stdout)


def main():
    rng = np.random.default_rng(20261121)
    data = datasets(rng)
    inputs = np.concatenate([a for _, a in data], axis=0)
    inputs.tofile(os.path.join(HERE, "inputs.f32"))
    # A skewed importance matrix: a few columns matter a lot more than the rest.
    imatrix = (rng.exponential(1.0, COLS) ** 3 + 1e-3).astype(np.float32)
    imatrix.tofile(os.path.join(HERE, "imatrix.f32"))
    for fmt, (_tid, _bs, bb, nrand, _kind) in FORMATS.items():
        os.makedirs(os.path.join(HERE, fmt), exist_ok=True)
        rng.integers(0, 256, nrand * bb, dtype=np.uint8).tofile(os.path.join(HERE, fmt, "random.bin"))

    path = os.path.join(HERE, "manifest.json")
    old = json.load(open(path)) if os.path.exists(path) else {"formats": {}, "ggml_types": {}}
    manifest = {
        "generator": "tests/golden/gen.py: ggml's C quantizers, to_float and type table, "
                     "from ggml-py 0.10.1 and, for the types it lacks, $QFORGE_GGML_LIB",
        "cols": COLS,
        "datasets": [{"name": n, "rows": ROWS} for n, _ in data],
        "ggml_libraries": [],
        "ggml_types": {},
        "formats": {},
    }
    todo = list(FORMATS)
    for lib in libraries():
        r = run_worker(lib, todo)
        manifest["ggml_libraries"].append(r["library"])
        for name, t in r["types"].items():
            manifest["ggml_types"].setdefault(name, t)
        manifest["formats"].update(r["entries"])
        todo = [f for f in todo if f not in r["entries"]]
    for fmt in todo:
        if fmt not in old["formats"]:
            sys.exit(f"{fmt}: no ggml library here defines it and nothing is committed (set QFORGE_GGML_LIB)")
        e = old["formats"][fmt]
        print(f"{fmt}: no ggml library given defines it (set QFORGE_GGML_LIB to a newer "
              f"libggml-base.so); keeping the committed files from {e.get('ggml', '?')}", file=sys.stderr)
        manifest["formats"][fmt] = e
        if e.get("ggml") not in manifest["ggml_libraries"]:
            manifest["ggml_libraries"].append(e.get("ggml", "?"))
    # Types of a library not given this time (a newer ggml's) stay listed: still ggml's types.
    for name, t in old.get("ggml_types", {}).items():
        manifest["ggml_types"].setdefault(name, t)
    manifest["formats"] = dict(sorted(manifest["formats"].items()))
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        json.dump(worker(sys.argv[2], sys.argv[3:]), sys.stdout)
    else:
        main()
