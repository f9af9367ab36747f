#!/usr/bin/env bash
# The main job, on a fresh machine: install the NVRTC wheels, generate the standard
# catalogue (checking kernels/ is in sync), compile every unit with NVRTC and show what was
# produced. With a GPU (nvidia-smi answers) it then verifies the kernels on the device and
# runs the benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-cuda.sh
export RCUTE_CUDA_WHEELS="${RCUTE_CUDA_WHEELS:-$PWD/.cuda}"
cargo build --release -q -p rcute-cli
rcute="${CARGO_TARGET_DIR:-target}/release/rcute"
"$rcute" gen --check
"$rcute" run
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "GPU found: verifying and benchmarking on the device"
  RCUTE_REQUIRE_GPU=1 cargo test --release -q -p rcute-tests -- --test-threads=1
  "$rcute" bench gemm --shape 4096x4096x4096 --shape 8192x8192x8192 \
    --shape 16x4096x4096 --shape 128x4096x4096 --shape 16x14336x4096 --shape 128x14336x4096
else
  echo "no GPU: kernels generated and compiled; GPU verification and benchmarks skipped"
fi
