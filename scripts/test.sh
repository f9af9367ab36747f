#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs the NVRTC/CUDA-header/cuobjdump
# wheels into .cuda/ (no GPU needed), then runs every test of the workspace.
# GPU tests skip with a printed reason unless RCUTE_REQUIRE_GPU=1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-cuda.sh
export RCUTE_CUDA_WHEELS="${RCUTE_CUDA_WHEELS:-$PWD/.cuda}"
# CI (CI=true): a one-shot build on a machine whose free disk varies. Full debug info and
# incremental caches took ~11 GB over the two workspaces' debug builds, and a CI run once
# died in the linker (lld, SIGBUS: its output file is mapped, so a full disk kills it).
# Line tables keep panics' file:line; neither setting changes what the tests check.
if [ "${CI:-}" = true ]; then
    export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
    export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}"
    df -h . | sed 's/^/test.sh: disk: /' >&2
fi
# No crate's files import each other in a circle, and no function or file outgrows the
# limits of scripts/code_shape.py (both exit 1 and say where otherwise).
python3 scripts/import_cycles.py >/dev/null || { python3 scripts/import_cycles.py | grep -v "no circles"; exit 1; }
python3 scripts/code_shape.py
cargo test --workspace --locked "$@"
# Clippy finds nothing in any crate or test of the workspace.
cargo clippy --workspace --all-targets --locked -- -D warnings
# The rustdoc of every crate builds without a warning (broken or private intra-doc links).
RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings" cargo doc --workspace --no-deps --locked
# Expert parallelism (cargo feature `nccl` of rcute-ops, off by default): its CPU tests
# (typed errors, a missing NCCL), and that its GPU test and `rcute bench moe --ranks`
# build. NCCL is loaded at run time (rcute_ops::ep::library), so none is needed here.
cargo test --locked -p rcute-ops --features nccl --test ep_bad_input
cargo check --locked -p rcute-cli -p rcute-tests --features rcute-cli/nccl,rcute-tests/nccl --tests
# rcute-candle (crates/candle: its own workspace, excluded from the one above) with candle's
# CUDA backend, whose kernels nvcc from NVIDIA's pip wheels compiles (no GPU needed; its GPU
# tests skip): ~20 min from scratch measured on 2 busy cores, so it fits CI's time
# (crates/candle/README.md, "CI"). RCUTE_TEST_CANDLE=0 skips it.
if [ "${RCUTE_TEST_CANDLE:-1}" = 1 ]; then
    if [ "${CI:-}" = true ]; then
        # Nothing below reuses the workspace's debug build (the candle build has its own
        # target directory), so CI frees its disk first.
        rm -rf "${CARGO_TARGET_DIR:-target}/debug"
        df -h . | sed 's/^/test.sh: disk: /' >&2
    fi
    if command -v g++ >/dev/null; then
        CANDLE_PROFILE=dev bash scripts/build-candle.sh
    else
        echo "test.sh: rcute-candle not built: nvcc needs a host C++ compiler (g++), and there is none" >&2
    fi
fi
