#!/usr/bin/env bash
# Builds scripts/peers/cutlass_gemm8.cu: CUTLASS's own SM90 INT8 / FP8 GEMMs as a peer of
# `rcute bench scaled-mm` (see the .cu's header). One object per kernel, compiled side by
# side (a CUTLASS SM90 GEMM takes ~40 s of nvcc), then linked.
#
#   CUTLASS_DIR=/path/to/cutlass scripts/peers/cutlass_gemm8.sh [OUTPUT]   (default /tmp/cutlass_gemm8)
#
# CUTLASS_DIR holds CUTLASS's `include/` and `tools/util/include/` (v3.9 or later; measured
# with v4.7.0). NVCC defaults to /usr/local/cuda/bin/nvcc; JOBS (default: all cores) limits
# the parallel compiles; EXTRA_NVCC_FLAGS is appended.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${CUTLASS_DIR:?set CUTLASS_DIR to a CUTLASS checkout (include/, tools/util/include/)}"
NVCC="${NVCC:-/usr/local/cuda/bin/nvcc}"
out="${1:-/tmp/cutlass_gemm8}"
jobs="${JOBS:-$(nproc)}"
parts=$(grep -c '^GEMM8_VARIANT(' "$here/cutlass_gemm8.cu")
obj="$(mktemp -d)"
trap 'rm -rf "$obj"' EXIT
flags=(-arch=sm_90a -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -diag-suppress 20012
  -I"$CUTLASS_DIR/include" -I"$CUTLASS_DIR/tools/util/include" -I"$here"
  ${EXTRA_NVCC_FLAGS:-})
pids=()
for p in $(seq 0 "$parts"); do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 0.5; done
  "$NVCC" "${flags[@]}" -DGEMM8_PART="$p" -c "$here/cutlass_gemm8.cu" -o "$obj/part$p.o" \
    >"$obj/part$p.log" 2>&1 &
  pids+=($!)
done
fail=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "part $i failed:" >&2
    grep -v "^$" "$obj/part$i.log" | head -40 >&2
    fail=1
  fi
done
[ "$fail" = 0 ] || exit 1
"$NVCC" -arch=sm_90a "$obj"/part*.o -o "$out"
echo "built $out ($parts kernels)"
