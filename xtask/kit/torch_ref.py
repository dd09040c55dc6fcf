#!/usr/bin/env python3
"""qforge GPU kit: the peers' GEMM times on the same device, for the GPU report.

Run by run.sh after `xtask gpu-bench`, on the GPU machine's python3 with PyTorch:

  * cuBLAS bf16 and f16 (`torch.matmul`, f32 accumulate) on unquantized weights;
  * cuBLASLt FP8 (`torch._scaled_mm`, e4m3 x e4m3, bf16 output) with the scaling qforge's FP8
    GEMM uses (1 x 128 activation blocks, 128 x 128 weight blocks) where this PyTorch has it,
    else per-row scales (named in the output);

for Y[M x N] = X[M x K] . W^T on the shapes of gpu-bench's GEMM table. Times are medians of
event-timed runs after warm-ups, inputs random (never zeros). Writes JSON to argv[1].
"""
import json
import sys

import torch

SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336)]
MS = [16, 64, 128, 512, 2048, 8192]
WARM, REPS = 3, 15


def median_ms(fn):
    for _ in range(WARM):
        fn()
    times = []
    for _ in range(REPS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def fp8_call(m, n, k):
    """The fastest FP8 scaling this PyTorch offers for the shape: (name, callable)."""
    x = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    attempts = [
        # blockwise: 1 x 128 activations (M x K/128, K-major outer), 128 x 128 weights
        ("block 1x128 / 128x128",
         torch.rand(k // 128, m, device="cuda").t() + 0.5,
         torch.rand(n // 128, k // 128, device="cuda").t() + 0.5),
        ("block 1x128 / 128x128",
         torch.rand(k // 128, m, device="cuda").t() + 0.5,
         torch.rand(n // 128, k // 128, device="cuda") + 0.5),
        ("row-wise", torch.rand(m, 1, device="cuda") + 0.5, torch.rand(1, n, device="cuda") + 0.5),
        ("tensor-wise", torch.tensor(1.0, device="cuda"), torch.tensor(1.0, device="cuda")),
    ]
    errors = []
    for name, sa, sb in attempts:
        try:
            def call(sa=sa, sb=sb):
                return torch._scaled_mm(x, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
            call()
            torch.cuda.synchronize()
            return name, call, errors
        except Exception as e:  # noqa: BLE001 - report which scalings this build lacks
            errors.append(f"{name}: {str(e).splitlines()[0][:160]}")
    return None, None, errors


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "torch.json"
    torch.manual_seed(0)
    rows, notes = [], set()
    for n, k in SHAPES:
        for m in MS:
            row = {"n": n, "k": k, "m": m}
            x16 = torch.randn(m, k, device="cuda", dtype=torch.float16)
            w16 = torch.randn(n, k, device="cuda", dtype=torch.float16)
            row["f16_ms"] = median_ms(lambda: torch.matmul(x16, w16.t()))
            xb, wb = x16.to(torch.bfloat16), w16.to(torch.bfloat16)
            row["bf16_ms"] = median_ms(lambda: torch.matmul(xb, wb.t()))
            name, call, errors = fp8_call(m, n, k)
            notes.update(errors)
            if call is not None:
                row["fp8_scaling"] = name
                row["fp8_ms"] = median_ms(call)
            rows.append(row)
            print(json.dumps(row), flush=True)
    report = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "method": f"median of {REPS} event-timed runs after {WARM} warm-ups; random inputs; bf16 out for FP8",
        "rows": rows,
        "fp8_unavailable_scalings": sorted(notes),
    }
    with open(out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
