#!/usr/bin/env bash
# Run on the GPU machine (repo root, .device/ carried): the whole test suite with the GPU
# required, compute-sanitizer on the GPU atom tests, then the benchmarks. Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
export RCUTE_REQUIRE_GPU=1 RCUTE_CUDA_HOME="${RCUTE_CUDA_HOME:-/usr/local/cuda}" RCUTE_CACHE_DIR=/tmp/rcute-cache
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
LOGS=/tmp/rcute-logs; rm -rf "$LOGS"; mkdir -p "$LOGS"
trap 'tar czf "$OUT/logs.tgz" -C "$LOGS" .' EXIT
# The test binaries were built in /work/main and find their data files (kernels/,
# tests/data) through that compile-time path: point it at this checkout.
if [ ! -e /work/main ] && [ "$PWD" != /work/main ]; then mkdir -p /work && ln -s "$PWD" /work/main; fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
fail=0
for t in .device/bin/test-*; do
  echo "=== $t"
  if ! "$t" --test-threads=1 >"$LOGS/$(basename "$t").log" 2>&1; then
    echo "FAILED: $t"; tail -40 "$LOGS/$(basename "$t").log"; fail=1
  else
    grep -E "^test result" "$LOGS/$(basename "$t").log" | tail -1
  fi
done
# Memory and race checks of the per-atom GPU kernels.
for tool in memcheck racecheck synccheck; do
  for t in .device/bin/test-*-gpu_atoms* .device/bin/test-*-build_from_atoms*; do
    [ -e "$t" ] || continue
    echo "=== compute-sanitizer --tool $tool $t"
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$t" --test-threads=1 >"$LOGS/sanitizer-$tool-$(basename "$t").log" 2>&1 \
      && grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" "$LOGS/sanitizer-$tool-$(basename "$t").log" | tail -3 \
      || { echo "sanitizer $tool FAILED"; tail -30 "$LOGS/sanitizer-$tool-$(basename "$t").log"; fail=1; }
  done
done
if [ -x .device/bin/rcute ] && .device/bin/rcute --help 2>/dev/null | grep -q " bench "; then
  .device/bin/rcute bench gemm ${RCUTE_BENCH_ARGS:-} --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.txt"
fi
exit $fail
