#!/usr/bin/env bash
# qforge GPU kit (made by `cargo xtask gpu-kit` on a build machine; see docs/cuda.md).
#
#   run.sh [OUTDIR]   on a machine with an NVIDIA GPU and its driver (no Rust needed): prints
#                     the device and driver, runs the CUDA tests (the GPU-only ones included),
#                     `xtask test-matrix --device cuda`, the GPU benchmarks, and writes
#                     gpu-report.json and gpu-report.md (plus every step's log) into OUTDIR
#                     (default: ./gpu-report). Exits non-zero if any step failed.
#   run.sh --check    anywhere (no GPU needed): everything the kit needs is present and loads
#                     (binaries execute, test binaries list their tests, the PTX modules parse;
#                     with ptxas on PATH or in $PTXAS, every module also assembles for sm_80).
#
# Each step has its own time limit (seconds, overridable: QF_T_TESTS, QF_T_MATRIX, QF_T_BENCH);
# the tests and the matrix run side by side, so together the steps stay under 9 minutes.
set -u
KIT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export QFORGE_BIN="$KIT/bin/qforge" QFORGE_GOLDEN_DIR="$KIT/golden"
T_TESTS="${QF_T_TESTS:-180}" T_MATRIX="${QF_T_MATRIX:-180}" T_BENCH="${QF_T_BENCH:-300}"

die() { echo "run.sh: $*" >&2; exit 2; }
[ -f "$KIT/kit.txt" ] || die "$KIT/kit.txt is missing: not a complete kit (make one with cargo xtask gpu-kit)"
command -v timeout >/dev/null || die "coreutils' timeout is needed"

# The binaries travel gzip'd (a third of their size): each is unpacked beside its .gz, once.
for z in "$KIT"/bin/*.gz "$KIT"/tests/*.gz; do
  [ -e "$z" ] || continue
  f="${z%.gz}"
  [ -x "$f" ] && [ "$f" -nt "$z" ] && continue
  { gzip -dc "$z" > "$f.part" && chmod +x "$f.part" && mv -f "$f.part" "$f"; } || die "cannot unpack $z"
done

# ---- --check: no GPU needed ----------------------------------------------------------------
if [ "${1:-}" = "--check" ]; then
  fails=0
  ok() { echo "  ok    $*"; }
  bad() { echo "  FAIL  $*"; fails=$((fails + 1)); }
  echo "== files (kit.txt)"
  while read -r kind path; do
    case "$kind" in ''|'#'*) continue ;; esac
    if [ -s "$KIT/$path" ]; then ok "$path"; else bad "$path is missing or empty"; fi
    if [ "$kind" = bin ] || [ "$kind" = test ]; then
      [ -x "$KIT/$path" ] || bad "$path is not executable"
    fi
  done < "$KIT/kit.txt"
  echo "== binaries execute"
  if n=$("$KIT/bin/qforge" formats --json 2>&1 | grep -c '"name"'); [ "$n" -gt 0 ]; then
    ok "bin/qforge formats --json ($n formats)"
  else
    bad "bin/qforge formats --json: $n formats"
  fi
  if "$KIT/bin/xtask" --help >/dev/null 2>&1; then ok "bin/xtask --help"; else bad "bin/xtask --help"; fi
  echo "== test binaries list their tests (GPU-only tests are ignored by default, run here with --include-ignored)"
  while read -r kind path; do
    [ "$kind" = test ] || continue
    all=$("$KIT/$path" --list 2>/dev/null | grep -c ': test$') || true
    ign=$("$KIT/$path" --list --ignored 2>/dev/null | grep -c ': test$') || true
    if [ "${all:-0}" -gt 0 ]; then ok "$path: $all tests, $ign of them ignored without --include-ignored"; else bad "$path lists no tests"; fi
  done < "$KIT/kit.txt"
  echo "== PTX modules"
  if "$KIT/bin/xtask" kit-check-ptx; then ok "every module the binaries embed parses and defines its kernels"; else bad "PTX check"; fi
  [ "$fails" -eq 0 ] && { echo "kit check: ok ($KIT)"; exit 0; }
  echo "kit check: $fails problem(s)"
  exit 1
fi

# ---- the GPU run --------------------------------------------------------------------------
case "${1:-}" in -*) die "unknown option $1 (run.sh [OUTDIR] | run.sh --check)" ;; esac
OUT="${1:-$PWD/gpu-report}"
mkdir -p "$OUT" || die "cannot create $OUT"
OUT="$(cd "$OUT" && pwd)"
STEPS="$OUT/steps.tsv"
: > "$STEPS"
started=$(date +%s)

# step NAME LIMIT LOGFILE CMD...: runs CMD under `timeout LIMIT`, stdout+stderr into LOGFILE,
# and records "NAME<TAB>rc<TAB>milliseconds<TAB>LOGFILE" (rc 124: it ran past its limit).
step() {
  local name=$1 limit=$2 log=$3; shift 3
  local t0 rc
  t0=$(date +%s%N)
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))" "$log" >> "$STEPS"
  printf '%-28s rc=%-3s %s\n' "$name" "$rc" "$(tail -n 1 "$OUT/$log" | cut -c1-100)"
  return 0
}

echo "== device and driver"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm,clocks.max.mem --format=csv \
    | tee "$OUT/device.txt"
else
  echo "nvidia-smi not found; the device is named from the driver by the benchmarks" | tee "$OUT/device.txt"
fi

# cuBLAS (the dequant + cuBLAS GEMM and the dense baseline) is loaded at run time: from the
# system's library path, or else from the nvidia-cublas wheel of this machine's python3.
if ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so'; then
  for d in $(python3 -c 'import glob, site
for s in site.getsitepackages() + [site.getusersitepackages()]:
    for p in glob.glob(s + "/nvidia/*/lib") + glob.glob(s + "/nvidia/*/*/lib"): print(p)' 2>/dev/null); do
    if ls "$d"/libcublas.so* >/dev/null 2>&1; then
      export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      break
    fi
  done
fi
echo "cuBLAS from: $( (ldconfig -p 2>/dev/null | grep -m1 -o '/[^ ]*libcublas\.so[^ ]*') || echo "${LD_LIBRARY_PATH:-nowhere (the cuBLAS tests and benchmarks will fail)}")" | tee -a "$OUT/device.txt"

# The tests and the matrix check results and time nothing, so they run side by side (the GPU
# machine has the cores; a lent GPU is short of minutes); the benchmarks run alone after them.
# QF_SKIP_TESTS=1: benchmarks only (a run on a short lease, after one that ran the tests).
if [ -z "${QF_SKIP_TESTS:-}" ]; then
echo "== CUDA tests (GPU-only tests included) and the test matrix's CUDA cells, side by side"
while read -r kind path; do
  [ "$kind" = test ] || continue
  name=$(basename "$path")
  step "test:$name" "$T_TESTS" "test-$name.log" "$KIT/$path" --include-ignored &
done < "$KIT/kit.txt"
step "test-matrix --device cuda" "$T_MATRIX" "matrix.log" \
  sh -c "'$KIT/bin/xtask' test-matrix --device cuda --json > '$OUT/matrix.json'" &
wait
fi

echo "== GPU benchmarks"
# QF_BENCH_FORMATS=a,b, QF_BENCH_OPS=gemm,… and QF_BENCH_GEMM_M=1,16,… (optional): measure
# only these formats, benchmark groups (dequant, matvec, gemm) and GEMM rows: a short run on
# a short lease.
step "gpu-bench" "$T_BENCH" "bench.log" "$KIT/bin/xtask" gpu-bench --out "$OUT/bench.json" \
  ${QF_BENCH_FORMATS:+--formats "$QF_BENCH_FORMATS"} ${QF_BENCH_OPS:+--ops "$QF_BENCH_OPS"} \
  ${QF_BENCH_GEMM_M:+--gemm-m "$QF_BENCH_GEMM_M"}

# QF_NCU=REGEX (optional): Nsight Compute on the first launch of the kernels that match, during
# a gpu-bench run of QF_NCU_FORMATS (default q4_0) at QF_NCU_M (default 2048), into ncu.log:
# speed of light, warp states (stall reasons), scheduler and occupancy. The GPU machines'
# Firecracker runtime lets ncu read the counters; the clocks are left as they are.
if [ -n "${QF_NCU:-}" ]; then
  echo "== Nsight Compute on $QF_NCU"
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
  step "ncu $QF_NCU" "${QF_T_NCU:-150}" "ncu.log" "${NCU:-ncu}" --clock-control none -k "regex:$QF_NCU" -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    "$KIT/bin/xtask" gpu-bench --out "$OUT/ncu-bench.json" --formats "${QF_NCU_FORMATS:-q4_0}" --ops gemm \
    --gemm-m "${QF_NCU_M:-2048}"
fi

# QF_SKIP_TORCH=1: leave the PyTorch peers out (their figures from an earlier run still hold).
if [ -z "${QF_SKIP_TORCH:-}" ]; then
  echo "== the peers on this device (PyTorch: cuBLAS f16 / bf16, cuBLASLt FP8)"
  step "torch reference" "${QF_T_TORCH:-120}" "torch.log" python3 "$KIT/torch_ref.py" "$OUT/torch.json"
fi

echo "== report"
"$KIT/bin/xtask" gpu-report --dir "$OUT" --kit "$KIT" --seconds "$(( $(date +%s) - started ))"
rc=$?
echo "report: $OUT/gpu-report.md, $OUT/gpu-report.json (whole run $(( $(date +%s) - started )) s)"
exit $rc
