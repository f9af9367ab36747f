#!/usr/bin/env bash
# Run on the GPU machine: the benchmark rows of the open performance issues (#12 AWQ, #13
# MoE, #15 Hopper throughput), each with its peer timed in the same process, with one
# `rcute` binary (default .device/bin/rcute from scripts/build-device.sh; RCUTE_BIN picks
# another). Outputs go to $OUT/rows-<block>.txt.
#   RCUTE_ROWS       blocks to run (default "gemm awq moe"; ~1-3 min each on an H200)
#   RCUTE_ROWS_GPU   a substring the GPU's name must contain (e.g. H200: the targets are
#                    H200 numbers); on any other GPU the script prints the name and exits 0
# Data: random (each bench's own generator), weights rotated over >= 150 MB where the row is
# memory-bound, CUDA-graph medians; `--config prepared-auto` is `Ops::awq_gemm_prepared`,
# `--prepared auto` the MoE layer on `MoeWeights::prepare`d experts (rows up to T = 64).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export RCUTE_CUDA_HOME="${RCUTE_CUDA_HOME:-/usr/local/cuda}" RCUTE_CACHE_DIR="${RCUTE_CACHE_DIR:-/tmp/rcute-cache}"
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee "$OUT/rows-gpu.txt"
if [ -n "${RCUTE_ROWS_GPU:-}" ] && [[ "$name" != *"$RCUTE_ROWS_GPU"* ]]; then
  echo "open-rows: $name is not an $RCUTE_ROWS_GPU: nothing run"; exit 0
fi
if [ -z "${RCUTE_BIN:-}" ] && [ -f .device/bin.tgz ] && [ ! -d .device/bin ]; then tar xzf .device/bin.tgz -C .device; fi
R=${RCUTE_BIN:-.device/bin/rcute}
fail=0
row() {  # block, then the rcute arguments; bounded in time
  echo "=== rcute ${*:2}" | tee -a "$OUT/rows-$1.txt"
  timeout 240 "$R" "${@:2}" 2>&1 | tee -a "$OUT/rows-$1.txt" || { echo "FAILED: ${*:2}"; fail=1; }
}
for b in ${RCUTE_ROWS:-gemm awq moe}; do
  case $b in
    gemm)
      row gemm bench gemm --shape 2048x2048x2048 --shape 4096x4096x4096 --shape 8192x8192x8192 --shape 4096x14336x4096 --iters 20
      row gemm bench scaled-mm --shape 8192x8192x8192 --shape 4096x14336x4096 --shape 1024x14336x4096 --iters 20
      row gemm bench gemm --dtype e4m3 --shape 8192x8192x8192 --shape 4096x14336x4096 --iters 20 ;;
    awq)
      for s in 1x14336x4096 16x14336x4096 32x14336x4096 64x14336x4096 128x14336x4096 1x4096x4096 16x4096x4096 1024x14336x4096; do
        row awq bench awq --shape "$s" --group 128 --iters 10 --config prepared-auto
      done
      row awq bench awq --shape 4096x14336x4096 --group 128 --iters 5 --config prepared-auto --dequantize ;;
    moe)
      row moe bench moe --experts 8 --topk 2 --hidden 4096 --inter 14336 --renormalize --tokens 1 --tokens 16 --tokens 64 --prepared auto --iters 10
      row moe bench moe --experts 8 --topk 2 --hidden 4096 --inter 14336 --renormalize --tokens 256 --tokens 1024 --tokens 4096 --iters 10
      row moe bench moe --experts 64 --topk 6 --hidden 2048 --inter 1408 --tokens 1 --tokens 64 --prepared auto --iters 10
      row moe bench moe --experts 64 --topk 6 --hidden 2048 --inter 1408 --tokens 1024 --tokens 4096 --iters 10 ;;
    *) echo "open-rows: unknown block $b"; fail=1 ;;
  esac
done
exit $fail
