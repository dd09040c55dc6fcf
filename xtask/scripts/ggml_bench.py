#!/usr/bin/env python3
"""Time ggml's own C quantize / dequantize / mat-vec (PyPI ggml-py, via ctypes), single-threaded.

    python3 xtask/scripts/ggml_bench.py FORMAT OP N      # prints one JSON object
    python3 xtask/scripts/ggml_bench.py FORMAT matvec N,K 1 [THREADS [repack]]
    python3 xtask/scripts/ggml_bench.py FORMAT matmul N,K M [THREADS [repack]]
    python3 xtask/scripts/ggml_bench.py --features       # ggml's version, the x86 features its CPU code was built with

OPs `matvec` / `matmul` time ggml's real mat-vec / mat-mul: a graph `ggml_mul_mat(W[FORMAT,
K x N], x[f32, K x M])` computed by the CPU backend (`ggml_backend_cpu_init`,
`ggml_backend_cpu_set_n_threads`, `ggml_backend_graph_compute`), one thread unless THREADS
says otherwise. That includes ggml quantizing x to the format's `vec_dot_type`, as qforge's
native mode does. Formats without a
CPU `vec_dot` in ggml print an "error" field instead of a rate. `repack`: W in the CPU
backend's repack buffer type (ggml's interleaved layouts; an "error" field for the types it
has none for on this CPU).

Used by `cargo xtask bench` to put qforge's numbers next to ggml's from the same run.
"""
import ctypes
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden"))
from gen import FORMATS, TraitsCpu, ggml_name, ggml_py_lib  # noqa: E402

COLS = 4096


def load_lib():
    """ggml-py's libggml-base.so."""
    return ctypes.CDLL(ggml_py_lib())


def has_type(fmt):
    """Whether ggml-py's library defines `fmt` (newer ggml types, e.g. q2_0, it lacks)."""
    if fmt not in FORMATS:
        return False
    lib = load_lib()
    g = ggml_name(fmt)
    return hasattr(lib, f"dequantize_row_{g}") or hasattr(lib, f"quantize_row_{g}_ref")


def median_time(fn):
    """Median seconds per call after one warm-up: at least 3 runs, about 0.7 s, at most 1000."""
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < 0.7 and len(times) < 1000):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2], len(times)


def repack_probe(tid, k):
    """Whether ggml's CPU repack buffer takes a `tid` weight of 8 rows of `k`: tried in a child
    process, because for a type it has no layout for, setting the tensor crashes."""
    pid = os.fork()
    if pid == 0:
        try:
            from ggml import ggml as G

            ctx = G.ggml_init(G.ggml_init_params(mem_size=1 << 16, mem_buffer=None, no_alloc=True))
            w = G.ggml_new_tensor_2d(ctx, tid, k, 8)
            lib = ctypes.CDLL(os.path.join(os.path.dirname(G.__file__), "lib", "libggml-cpu.so"))
            lib.ggml_cpu_init.restype = None
            lib.ggml_cpu_init()
            f = lib._Z35ggml_backend_cpu_repack_buffer_typev
            f.restype = ctypes.c_void_p
            G.ggml_backend_alloc_ctx_tensors_from_buft(ctx, ctypes.c_void_p(f()))
            data = np.zeros(G.ggml_nbytes(w), dtype=np.uint8)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            G.ggml_backend_tensor_set(w, data.ctypes.data_as(ctypes.c_void_p), 0, data.size)
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def mul_mat(fmt, op, shape, m, threads, repack=False):
    """ggml's real mat-vec / mat-mul: `ggml_mul_mat(W[fmt, K x N], x[f32, K x M])` on the CPU
    backend with `threads` threads (it keeps one work buffer for x quantized to vec_dot_type).

    `repack`: W lives in the CPU backend's repack buffer type (what llama.cpp's CPU backend
    uses by default where it can: `ggml_backend_cpu_repack_buffer_type`), so setting it
    interleaves its rows and the mat-mul runs ggml's repacked kernels; an error line where
    ggml has no repacked layout for the type on this CPU."""
    import ggml
    from ggml import ggml as G

    n, k = (int(v) for v in shape.split(","))
    if fmt not in FORMATS:
        print(json.dumps({"format": fmt, "op": op, "error": "not a ggml type"}))
        return
    tid, bs, bb, _, _ = FORMATS[fmt]
    libdir = os.path.join(os.path.dirname(ggml.__file__), "lib")
    cpu = ctypes.CDLL(os.path.join(libdir, "libggml-cpu.so"))
    cpu.ggml_cpu_init.restype = None
    cpu.ggml_cpu_init()
    cpu.ggml_get_type_traits_cpu.restype = ctypes.POINTER(TraitsCpu)
    cpu.ggml_get_type_traits_cpu.argtypes = [ctypes.c_int]
    tr = cpu.ggml_get_type_traits_cpu(tid).contents
    if not tr.vec_dot:
        print(json.dumps({"format": fmt, "op": op, "error": "ggml has no CPU vec_dot for this type"}))
        return
    wbytes = n * (k // bs) * bb
    mem = wbytes + 4 * (k + n) * m + (1 << 20)
    ctx = G.ggml_init(G.ggml_init_params(mem_size=mem, mem_buffer=None, no_alloc=False))
    wctx, layout = None, None
    if repack and not repack_probe(tid, k):
        print(json.dumps({"format": fmt, "op": op, "error": "ggml has no repacked layout for this type here"}))
        return
    if repack:
        # The weight alone in a no-alloc context, allocated in the repack buffer type.
        wctx = G.ggml_init(G.ggml_init_params(mem_size=1 << 16, mem_buffer=None, no_alloc=True))
        w = G.ggml_new_tensor_2d(wctx, tid, k, n)
        buft_fn = cpu._Z35ggml_backend_cpu_repack_buffer_typev
        buft_fn.restype = ctypes.c_void_p
        wbuf = G.ggml_backend_alloc_ctx_tensors_from_buft(wctx, ctypes.c_void_p(buft_fn()))
        if not wbuf:
            print(json.dumps({"format": fmt, "op": op, "error": "no repack buffer"}))
            return
    else:
        w = G.ggml_new_tensor_2d(ctx, tid, k, n)
    x = G.ggml_new_tensor_2d(ctx, 0, k, m)  # GGML_TYPE_F32
    y = G.ggml_mul_mat(ctx, w, x)
    gf = G.ggml_new_graph(ctx)
    G.ggml_build_forward_expand(gf, y)

    rng = np.random.default_rng(1)
    wf = (rng.standard_normal(n * k) * 1.7).astype(np.float32)
    G.ggml_quantize_init(tid)
    lib = load_lib()
    lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
    ones = np.ones(k, dtype=np.float32)
    fp = ctypes.POINTER(ctypes.c_float)
    imp = ones.ctypes.data_as(fp) if lib.ggml_quantize_requires_imatrix(ctypes.c_int(tid)) else None
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    wq = np.zeros(wbytes, dtype=np.uint8)
    lib.ggml_quantize_chunk(ctypes.c_int(tid), wf.ctypes.data_as(fp), wq.ctypes.data_as(ctypes.c_void_p),
                            ctypes.c_int64(0), ctypes.c_int64(n), ctypes.c_int64(k), imp)
    if repack:
        # Setting the tensor is where the repack buffer interleaves the rows (not timed); ggml
        # logs "repack tensor ... with <layout>" on stderr when it does, which is the only
        # sign it gives (a type it has no layout for is kept as it is).
        import tempfile
        with tempfile.TemporaryFile() as log:
            saved = os.dup(2)
            os.dup2(log.fileno(), 2)
            try:
                G.ggml_backend_tensor_set(w, wq.ctypes.data_as(ctypes.c_void_p), 0, wbytes)
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            log.seek(0)
            said = log.read().decode(errors="replace")
        if "repack tensor" not in said:
            print(json.dumps({"format": fmt, "op": op, "error": "ggml has no repacked layout for this type here"}))
            return
        layout = said.strip().split(" with ")[-1]
    else:
        ctypes.memmove(G.ggml_get_data(w), wq.ctypes.data, wbytes)
    xv = (rng.standard_normal(k * m) * 1.7).astype(np.float32)
    ctypes.memmove(G.ggml_get_data(x), xv.ctypes.data, 4 * k * m)

    backend = G.ggml_backend_cpu_init()
    G.ggml_backend_cpu_set_n_threads(backend, threads)
    secs, runs = median_time(lambda: G.ggml_backend_graph_compute(backend, gf))
    G.ggml_backend_free(backend)
    G.ggml_free(ctx)
    if wctx is not None:
        G.ggml_backend_buffer_free(wbuf)
        G.ggml_free(wctx)
    print(json.dumps({"format": fmt, "op": op, "shape": [n, k], "rows": m, "threads": threads, "seconds": secs,
                      "repack": layout if repack else False,
                      "elements_per_s": n * k * m / secs, "weight_bytes_per_s": wbytes / secs,
                      "quantized_bytes": wbytes, "runs": runs}))


def features():
    """The ggml version and the instruction sets its CPU backend was compiled for
    (`ggml_cpu_has_*`)."""
    import ggml

    cpu = ctypes.CDLL(os.path.join(os.path.dirname(ggml.__file__), "lib", "libggml-cpu.so"))
    base = load_lib()
    base.ggml_version.restype = ctypes.c_char_p
    base.ggml_commit.restype = ctypes.c_char_p
    out = {"version": f"ggml {base.ggml_version().decode()} ({base.ggml_commit().decode()})"}
    for name in ("avx2", "fma", "f16c", "avx_vnni", "avx512", "avx512_vbmi", "avx512_vnni", "avx512_bf16"):
        f = getattr(cpu, f"ggml_cpu_has_{name}", None)
        if f is not None:
            f.restype = ctypes.c_int
            out[name] = bool(f())
    print(json.dumps(out))


def main():
    if sys.argv[1] == "--features":
        return features()
    fmt, op = sys.argv[1], sys.argv[2]
    if not has_type(fmt):
        print(json.dumps({"format": fmt, "op": op, "error": "ggml-py's library does not define this type"}))
        return
    if op in ("matvec", "matmul"):
        m = 1 if op == "matvec" else int(sys.argv[4])
        threads = int(sys.argv[5]) if len(sys.argv) > 5 else 1
        repack = len(sys.argv) > 6 and sys.argv[6] == "repack"
        return mul_mat(fmt, op, sys.argv[3], m, threads, repack)
    n = int(sys.argv[3])
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
    secs, runs = median_time(fn)
    print(json.dumps({"format": fmt, "op": op, "n": n, "seconds": secs, "elements_per_s": n / secs,
                      "bytes_per_s": (q.size + 4 * n) / secs, "runs": runs}))


if __name__ == "__main__":
    main()
