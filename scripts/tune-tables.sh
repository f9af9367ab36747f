#!/usr/bin/env bash
# Re-measure a shipped tuning table on the GPU it is for (run on that GPU, repo root,
# after scripts/build-device.sh): every benchmark shape of bf16 GEMM, INT8 and FP8
# scaled-mm, AWQ and the fused MoE layer. Usage: scripts/tune-tables.sh OUT.json
# (then copy OUT.json to crates/ops/tuning/h100.json or h200.json). ~3 min on an H100.
# RCUTE_TUNE_OPS="awq moe" re-measures only those ops (of gemm, scaled-mm, awq, moe): start
# from a copy of the shipped table as OUT.json, whose entries still current are kept (the
# merge drops those whose kernel families' generators changed).
set -u
OPS=" ${RCUTE_TUNE_OPS:-gemm scaled-mm awq moe} "
on() { case "$OPS" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
T=${1:?usage: scripts/tune-tables.sh OUT.json}
[ -d .device/bin ] || tar xzf .device/bin.tgz -C .device
R=${RCUTE_BIN:-.device/bin/rcute}
export RCUTE_CUDA_HOME="${RCUTE_CUDA_HOME:-/usr/local/cuda}" RCUTE_CACHE_DIR="${RCUTE_CACHE_DIR:-/tmp/rcute-cache}"
D4=""; D14=""; for m in 1 2 4 8 16 32 64 128; do D4="$D4 --shape ${m}x4096x4096"; D14="$D14 --shape ${m}x14336x4096"; done
BIG="--shape 2048x2048x2048 --shape 4096x4096x4096 --shape 4096x14336x4096 --shape 8192x8192x8192"
A=""; for n in 4096 14336; do for m in 1 16 32 64; do A="$A --shape ${m}x${n}x4096"; done; done
set -e
if on gemm; then $R tune gemm $D4 --budget 3 --iters 7 --out "$T"; fi
if on gemm; then $R tune gemm $D14 --budget 3 --iters 7 --out "$T"; fi
if on gemm; then $R tune gemm $BIG --budget 10 --iters 5 --out "$T"; fi  # 31 candidates each (swizzled walks last)
if on scaled-mm; then $R tune scaled-mm $D4 $D14 --budget 3 --iters 7 --out "$T"; fi
if on scaled-mm; then $R tune scaled-mm $BIG --budget 3 --iters 5 --out "$T"; fi
if on scaled-mm; then $R tune scaled-mm --dtype e4m3 $D4 $D14 --budget 1 --iters 7 --out "$T"; fi
if on scaled-mm; then $R tune scaled-mm --dtype e4m3 --shape 4096x14336x4096 --shape 8192x8192x8192 --budget 3 --iters 5 --out "$T"; fi
if on awq; then $R tune awq $A --group 128 --budget 2 --iters 7 --out "$T"; fi
if on moe; then $R tune moe --shape 1x4096x14336 --shape 16x4096x14336 --shape 64x4096x14336 --experts 8 --topk 2 --budget 2 --iters 5 --out "$T"; fi
if on moe; then $R tune moe --shape 1x2048x1408 --shape 64x2048x1408 --shape 256x2048x1408 --experts 64 --topk 6 --budget 2 --iters 5 --out "$T"; fi
# Prefill: the SM90 family's forms against the SM80 family's tiles (rules first).
if on moe; then $R tune moe --shape 256x4096x14336 --shape 1024x4096x14336 --shape 4096x4096x14336 --experts 8 --topk 2 --budget 3 --iters 5 --out "$T"; fi
if on moe; then $R tune moe --shape 1024x2048x1408 --shape 2048x2048x1408 --shape 4096x2048x1408 --experts 64 --topk 6 --budget 3 --iters 5 --out "$T"; fi
