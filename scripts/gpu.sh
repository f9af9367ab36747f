#!/usr/bin/env bash
# Run on the GPU machine (repo root, .device/ carried; build it here with
# scripts/build-device.sh): every test binary with the GPU required, compute-sanitizer on
# the GPU kernels, then the GEMM benchmark against cuBLAS. Logs go to $OUT/logs.tgz.
# RCUTE_BENCH_ARGS overrides the benchmark shapes; RCUTE_GPU_STEPS picks the steps
# (default "tests sanitize bench candle"; split them across calls to stay under a call's
# limit, or run several sets side by side); RCUTE_GPU_JOBS runs that many test binaries at
# once. The `candle` step runs rcute-candle's GPU tests and examples from
# .device-candle/candle.tgz (RCUTE_DEVICE_CANDLE=1 scripts/build-device.sh; carried on its
# own, see that script).
set -uo pipefail
cd "$(dirname "$0")/.."
export RCUTE_REQUIRE_GPU=1 RCUTE_CUDA_HOME="${RCUTE_CUDA_HOME:-/usr/local/cuda}" RCUTE_CACHE_DIR=/tmp/rcute-cache
# insta finds snapshots from the workspace root, which it asks cargo for; there is no cargo here.
export INSTA_WORKSPACE_ROOT="$PWD" INSTA_UPDATE=no
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
STEPS=${RCUTE_GPU_STEPS:-tests sanitize bench candle}
# One log folder and archive per set of steps, so that several invocations with different
# RCUTE_GPU_STEPS can run side by side in one call.
TAG=$(echo "$STEPS" | tr -c 'a-zA-Z0-9\n-' '_'); TAG=${TAG%_}
LOGS=/tmp/rcute-logs-$TAG; rm -rf "$LOGS"; mkdir -p "$LOGS"
trap 'tar czf "$OUT/logs-$TAG.tgz" -C "$LOGS" .' EXIT
# The test binaries were built in /work/main and find their data files (kernels/,
# tests/data) through that compile-time path: point it at this checkout.
# (/work/wt: binaries built in a second worktree while /work/main had work in progress.)
for p in /work/main /work/wt; do
  if [ ! -e "$p" ] && [ "$PWD" != "$p" ]; then mkdir -p /work && ln -s "$PWD" "$p"; fi
done
# build-device.sh ships the binaries gzipped (.device/bin.tgz) to stay under the 64 MiB a
# call carries; unpack once (several invocations in one call share the unpacked folder).
if [ -f .device/bin.tgz ] && [ ! -d .device/bin ]; then tar xzf .device/bin.tgz -C .device; fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
fail=0
step() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# "sanitize" runs every sanitizer block; "sanitize-NAME" one block (atoms, sm80, sm90,
# scaled, awq, moe, apps), to split the sanitizers over several calls.
sstep() { step sanitize || step "sanitize-$1"; }
# "sanitize-NAME-TOOL" runs one tool of a block (e.g. sanitize-awq-racecheck): the awq and
# moe blocks take longer than one call with their three tools in a row, side by side they fit.
# `tools NAME TOOL...` prints the tools of block NAME that the steps select.
tools() {
  local b=$1 tool; shift
  for tool in "$@"; do if sstep "$b" || step "sanitize-$b-$tool"; then echo "$tool"; fi; done
}

# RCUTE_GPU_JOBS test binaries run at once (default 1). Correctness tests share the GPU
# well; their float64 references are CPU-bound, and the GPU machine has 16 cores.
run_test() {  # binary; prints its summary, leaves its status in $LOGS/NAME.rc
  local t=$1 log="$LOGS/$(basename "$1").log" rc=0
  "$t" --test-threads=1 >"$log" 2>&1 || rc=$?
  echo "$rc" >"$LOGS/$(basename "$t").rc"
  if [ "$rc" != 0 ]; then
    { echo "=== $t"; echo "FAILED: $t"; tail -40 "$log"; } >"$log.summary"
  else
    { echo "=== $t"; grep -E "^test result" "$log" | tail -1; } >"$log.summary"
  fi
}
if step tests; then
  for t in .device/bin/test-*; do
    while [ "$(jobs -rp | wc -l)" -ge "${RCUTE_GPU_JOBS:-1}" ]; do sleep 0.2; done
    run_test "$t" &
  done
  wait
  for t in .device/bin/test-*; do
    cat "$LOGS/$(basename "$t").log.summary"
    [ "$(cat "$LOGS/$(basename "$t").rc" 2>/dev/null)" = 0 ] || fail=1
  done
fi

sanitize_filtered() {  # tool binary [test filter]; bounded in time
  local tool=$1 t=$2 filter=${3:-} log
  log="$LOGS/sanitizer-$tool-$(basename "$t")${filter:+-$filter}.log"
  echo "=== compute-sanitizer --tool $tool $t $filter"
  if RCUTE_CASES=2 timeout 400 compute-sanitizer --tool "$tool" --error-exitcode 9 "$t" $filter --test-threads=1 >"$log" 2>&1; then
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" "$log" | tail -3
  else
    echo "sanitizer $tool FAILED"; tail -30 "$log"; fail=1
  fi
}
# Atoms and the kernel built from atoms: memcheck, racecheck, synccheck.
for tool in $(tools atoms memcheck racecheck synccheck); do
  for t in .device/bin/test-*-gpu_atoms .device/bin/test-*-build_from_atoms; do
    [ -e "$t" ] && sanitize_filtered "$tool" "$t"
  done
done
# The SM80 GEMM kernels (every config of the kernel-level suite): memcheck. (racecheck
# serializes CTAs, so serial split-K's CTA-to-CTA spin wait never completes under it.)
sstep sm80 && for t in .device/bin/test-*-gpu_gemm_sm80; do
  [ -e "$t" ] && sanitize_filtered memcheck "$t"
done
# The SM90 GEMM kernels (every schedule, split-K, the fused epilogue, stream-K): memcheck
# with two random cases per configuration; racecheck and synccheck on the fused-epilogue
# test (three schedules, split-K included) and the stream-K test. Bounded in time.
sstep sm90 && for t in .device/bin/test-*-gpu_gemm_sm90; do
  [ -e "$t" ] || continue
  sanitize_filtered memcheck "$t"
  sanitize_filtered racecheck "$t" sm90_gemm_with_fused_epilogue
  sanitize_filtered synccheck "$t" sm90_gemm_with_fused_epilogue
  # hybrid stream-K: the last-arriver reduction (no CTA waits on another, so racecheck's
  # serialized CTAs finish)
  sanitize_filtered racecheck "$t" sm90_stream_k_matches
  sanitize_filtered synccheck "$t" sm90_stream_k_matches
done

# INT8 / FP8 scaled GEMMs: the exact INT8 kernel test (SM80-class and Turing kernels,
# parallel split-K only, so no CTA-to-CTA waits under racecheck) and the FP8 ops test (the
# SM90 FP8 kernel) under memcheck, racecheck and synccheck, bounded in time. (The SM90 INT8
# kernel is covered by the SM90 suite's memcheck above.)
sstep scaled && for t in .device/bin/test-*-gpu_scaled_mm; do
  [ -e "$t" ] || continue
  for tool in memcheck racecheck synccheck; do
    sanitize_filtered "$tool" "$t" kernel_accumulates_int8_exactly
    sanitize_filtered "$tool" "$t" ops_fp8_scaled_mm_matches_reference
  done
done
# AWQ (dequantize, the W4A16 GEMM with split-K) and the MoE routing kernels: memcheck,
# racecheck, synccheck.
# racecheck takes gpu_awq_ops one test at a time: whole, it outgrew one bound.
for tool in $(tools awq memcheck racecheck synccheck); do
  for t in .device/bin/test-*-gpu_awq .device/bin/test-*-gpu_awq_ops .device/bin/test-*-gpu_moe_routing; do
    [ -e "$t" ] || continue
    if [ "$tool" = racecheck ] && [[ "$t" == *-gpu_awq_ops ]]; then
      for name in $("$t" --list --format terse 2>/dev/null | sed -n 's/: test$//p'); do
        sanitize_filtered "$tool" "$t" "$name"
      done
    else
      sanitize_filtered "$tool" "$t"
    fi
  done
done
# The fused MoE layer (routing, grouped GEMMs with gather / SwiGLU / scatter, finalize) and
# its prepared-weight form (the reorder kernels, the `_prep` decode GEMMs) and GEMM1 routing
# a decode batch itself (`_route_`), and the row tiles' tails (`gpu_moe_tail`): memcheck,
# racecheck, synccheck.
for tool in $(tools moe memcheck racecheck synccheck); do
  for t in .device/bin/test-*-gpu_moe .device/bin/test-*-gpu_moe_prepared .device/bin/test-*-gpu_moe_route .device/bin/test-*-gpu_moe_tail; do
    [ -e "$t" ] && sanitize_filtered "$tool" "$t"
  done
done
# The narrow-vector SM80 kernels (any shape) and ops on caller streams / in graphs: memcheck.
sstep apps && for t in .device/bin/test-*-gpu_any_shape .device/bin/test-*-gpu_streams; do
  [ -e "$t" ] && sanitize_filtered memcheck "$t"
done

if step bench && [ -x .device/bin/rcute ]; then
  args=${RCUTE_BENCH_ARGS:---shape 2048x2048x2048 --shape 4096x4096x4096 --shape 8192x8192x8192 --shape 4096x14336x4096 --shape 16x4096x4096 --shape 32x4096x4096 --shape 64x4096x4096 --shape 128x4096x4096 --shape 16x14336x4096 --shape 32x14336x4096 --shape 64x14336x4096 --shape 128x14336x4096}
  echo "=== rcute bench gemm $args"
  .device/bin/rcute bench gemm $args --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.txt" || fail=1
fi
# rcute-candle (crates/candle, a workspace of its own): its GPU tests, the README's lines
# (example `readme`) and a Mixtral MoE block and an AWQ Llama MLP against candle's own ops
# (example `moe_block`, tokens from RCUTE_CANDLE_TOKENS, default "64"; the output, with
# both times and the ratio, goes to $OUT/candle.txt).
if step candle; then
  tgz=.device-candle/candle.tgz
  if [ ! -f "$tgz" ]; then
    echo "=== candle: no $tgz (RCUTE_DEVICE_CANDLE=1 scripts/build-device.sh, carry .device-candle): not run"
  else
    dir=/tmp/rcute-candle; rm -rf "$dir"; mkdir -p "$dir"; tar xzf "$tgz" -C "$dir"
    # candle-kernels links libcudart.so.13; candle opens cuBLAS and cuRAND at run time.
    export LD_LIBRARY_PATH="$RCUTE_CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10; do
      [ -e "$RCUTE_CUDA_HOME/lib64/$lib" ] || { echo "candle: $RCUTE_CUDA_HOME/lib64/$lib is missing"; fail=1; }
    done
    for t in "$dir"/test-*; do
      echo "=== candle $(basename "$t")"
      if ! "$t" --test-threads=1 >"$LOGS/candle-$(basename "$t").log" 2>&1; then
        echo "FAILED: candle $t"; tail -40 "$LOGS/candle-$(basename "$t").log"; fail=1
      else
        grep -E "^test result" "$LOGS/candle-$(basename "$t").log" | tail -1
      fi
    done
    echo "=== candle example-readme" | tee "$OUT/candle.txt"
    "$dir/example-readme" 2>&1 | tee -a "$OUT/candle.txt" || { echo "FAILED: candle example-readme"; fail=1; }
    for tokens in ${RCUTE_CANDLE_TOKENS:-64}; do
      echo "=== candle example-moe_block $tokens" | tee -a "$OUT/candle.txt"
      "$dir/example-moe_block" "$tokens" 2>&1 | tee -a "$OUT/candle.txt" || { echo "FAILED: candle example-moe_block $tokens"; fail=1; }
    done
  fi
fi
exit $fail
