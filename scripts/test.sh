#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs the NVRTC/CUDA-header/cuobjdump
# wheels into .cuda/ (no GPU needed), then runs every test of the workspace.
# GPU tests skip with a printed reason unless RCUTE_REQUIRE_GPU=1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-cuda.sh
export RCUTE_CUDA_WHEELS="${RCUTE_CUDA_WHEELS:-$PWD/.cuda}"
cargo test --workspace --locked "$@"
