#!/usr/bin/env bash
# Run on the GPU machine: time two builds of `rcute` in one call, alternating them so that
# clock and thermal drift hit both alike, each against its in-process peer (cuBLAS for bf16,
# cuBLASLt INT8 for scaled-mm). Usage:
#   scripts/bench_compare.sh BEFORE_BIN AFTER_BIN [ROUNDS]
# Writes $OUT/cmp-<bench>-<before|after>-<round>.json; scripts/bench_table.py turns them into
# the before/after table of BENCHMARKS.md. RCUTE_CMP_BENCHES picks the benches
# (default "gemm scaled-mm e4m3"); RCUTE_CMP_ITERS the samples per kernel (default 20). The
# FP8 8192^3 GEMM runs at the GPU's power cap: 20 samples (about 0.2 s) fall in the clock
# controller's transient and scatter by +-3% from run to run on an H100; 200 samples time the
# capped steady state to about +-0.3% (BENCHMARKS.md, "Generator before/after (#16)").
# RCUTE_CMP_BEFORE_ARGS / RCUTE_CMP_AFTER_ARGS add arguments to one side's runs: binaries
# from before the benches rotated B (`--rotate-mb`, default 150 MB) time decode shapes from a
# warm L2, so compare them with RCUTE_CMP_AFTER_ARGS="--rotate-mb 0".
set -uo pipefail
before=$1 after=$2 rounds=${3:-2} iters=${RCUTE_CMP_ITERS:-20}
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
gemm_shapes="--shape 2048x2048x2048 --shape 4096x4096x4096 --shape 8192x8192x8192 --shape 4096x14336x4096 --shape 16x4096x4096 --shape 64x4096x4096 --shape 128x4096x4096 --shape 16x14336x4096 --shape 128x14336x4096"
smm_shapes="--shape 8192x8192x8192 --shape 4096x14336x4096 --shape 16x4096x4096 --shape 128x4096x4096 --shape 16x14336x4096 --shape 128x14336x4096"
e4m3_shapes="--shape 8192x8192x8192 --shape 4096x14336x4096"
for r in $(seq 1 "$rounds"); do
  for which in before after; do
    bin=$before; extra=${RCUTE_CMP_BEFORE_ARGS:-}
    [ "$which" = after ] && { bin=$after; extra=${RCUTE_CMP_AFTER_ARGS:-}; }
    for b in ${RCUTE_CMP_BENCHES:-gemm scaled-mm e4m3}; do
      case $b in
        gemm) "$bin" bench gemm $gemm_shapes $extra --iters "$iters" --json "$OUT/cmp-gemm-$which-$r.json" ;;
        scaled-mm) "$bin" bench scaled-mm $smm_shapes $extra --iters "$iters" --json "$OUT/cmp-scaled-mm-$which-$r.json" ;;
        e4m3) "$bin" bench gemm --dtype e4m3 $e4m3_shapes $extra --iters "$iters" --json "$OUT/cmp-e4m3-$which-$r.json" ;;
      esac > "$OUT/cmp-$b-$which-$r.txt" 2>&1 || { echo "FAILED: $which $b"; tail -20 "$OUT/cmp-$b-$which-$r.txt"; }
    done
  done
done
echo "bench_compare done"
