#!/usr/bin/env bash
# Build rcute-candle (crates/candle, a workspace of its own) with candle's CUDA backend,
# its example and its tests, on a machine without a CUDA toolkit.
#
# * NVRTC and the CUDA headers rcute compiles its kernels with: scripts/setup-cuda.sh.
# * candle's `cuda` feature compiles candle's kernels with nvcc at build time: nvcc, NVVM
#   (cicc, libdevice), the CRT / runtime headers and CCCL come from NVIDIA's pip wheels,
#   installed into <root>/.cuda-nvcc (git-ignored), for CUDA_COMPUTE_CAP=90 (H100/H200).
# * candle-core 0.11 asks cudarc for `dynamic-linking`, rcute for `dynamic-loading`, and
#   cudarc's build script refuses both at once ("Both `dynamic-loading` and
#   `dynamic-linking` features are active"). The build therefore patches candle-core: a
#   copy of its published source whose cudarc features say `dynamic-loading` (the CUDA
#   API is the same; the driver is loaded at run time, as rcute does), in
#   <root>/.cuda-nvcc/candle-core, used through `--config patch.crates-io...` (the
#   committed Cargo.lock is restored afterwards).
#
# Usage: scripts/build-candle.sh [--no-cuda | --device DIR] [extra cargo args for `cargo test`]
#   --no-cuda: build and test without candle's CUDA backend (validation tests only).
#   --device DIR: build (no test run) the GPU test binary and the examples, stripped, into
#     DIR/candle.tgz for the GPU machine (scripts/gpu.sh's `candle` step; see
#     scripts/build-device.sh). Stripped, each binary is ~45 MB (candle's kernels' PTX for
#     sm_90a); gzip makes the three ~35 MB.
#   CARGO_TARGET_DIR: as usual (the CUDA build uses $CARGO_TARGET_DIR/cuda).
#   CANDLE_PROFILE: the cargo profile of the CUDA build (default: release, for the
#   example's timings).
# Runs the CPU tests; GPU tests skip without a GPU (RCUTE_REQUIRE_GPU=1 makes them fail).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
crate="$root/crates/candle"
target="${CARGO_TARGET_DIR:-$crate/target}"
jobs=(-j "${CARGO_BUILD_JOBS:-$(nproc)}")
export RCUTE_CUDA_WHEELS="${RCUTE_CUDA_WHEELS:-$root/.cuda}"
RCUTE_CUDA_WHEELS="$RCUTE_CUDA_WHEELS" "$root/scripts/setup-cuda.sh"

device=""
if [[ "${1:-}" == "--device" ]]; then
    device="$(mkdir -p "$2" && cd "$2" && pwd)"
    shift 2
fi
if [[ "${1:-}" == "--no-cuda" ]]; then
    shift
    cd "$crate"
    CARGO_TARGET_DIR="$target" cargo test --locked "${jobs[@]}" "$@"
    exit 0
fi

dest="$root/.cuda-nvcc"
packages=(
    "nvidia-cuda-nvcc==13.0.88"
    "nvidia-nvvm==13.0.88"
    "nvidia-cuda-crt==13.0.88"
    "nvidia-cuda-runtime==13.0.88"
    "nvidia-cuda-cccl==13.0.85"
)
marker="$dest/.rcute-installed"
if [[ ! -f "$marker" || "$(cat "$marker")" != "${packages[*]}" ]]; then
    echo "build-candle: installing nvcc wheels into $dest" >&2
    rm -rf "$dest"
    PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install \
        --quiet --disable-pip-version-check --no-input --no-cache-dir \
        --no-deps --target "$dest" "${packages[@]}"
    find "$dest" \( -path '*/bin/*' -o -path '*/nvvm/bin/*' \) -type f -exec chmod +x {} +
    printf '%s' "${packages[*]}" > "$marker"
fi
cuda="$dest/nvidia/cu13"
# candle-kernels links libcudart by its unversioned name.
[[ -e "$cuda/lib/libcudart.so" ]] || ln -s libcudart.so.13 "$cuda/lib/libcudart.so"

# candle-core with cudarc's `dynamic-loading` (see above).
cd "$crate"
version="$(awk '/^name = "candle-core"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)"
patched="$dest/candle-core"
if [[ ! -f "$patched/.version" || "$(cat "$patched/.version")" != "$version" ]]; then
    cargo fetch --locked >/dev/null
    crate_file="$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"candle-core-$version.crate" | head -1)"
    rm -rf "$patched" && mkdir -p "$patched"
    tar -xzf "$crate_file" -C "$patched" --strip-components=1
    python3 - "$patched/Cargo.toml" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
start = s.index("[dependencies.cudarc]")
end = s.find("\n[", start)
dep = s[start:end]
assert '"dynamic-linking"' in dep, "candle-core's cudarc features changed"
s = s[:start] + dep.replace('"dynamic-linking"', '"dynamic-loading"') + s[end:]
open(p, "w").write(s)
PY
    printf '%s' "$version" > "$patched/.version"
fi

mkdir -p "$target"
cp Cargo.lock "$target/Cargo.lock.saved"
trap 'cp "$target/Cargo.lock.saved" "$crate/Cargo.lock"' EXIT
export PATH="$cuda/bin:$PATH" CUDA_HOME="$cuda" CUDA_COMPUTE_CAP=90
export LIBRARY_PATH="$cuda/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
export LD_LIBRARY_PATH="$cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_TARGET_DIR="$target/cuda"
patch=(--config "patch.crates-io.candle-core.path=\"$patched\"")
profile=(--profile "${CANDLE_PROFILE:-release}")
if [[ -n "$device" ]]; then
    stage="$device/stage"
    rm -rf "$stage" "$device/candle.tgz" && mkdir -p "$stage"
    # The GPU tests and the examples (validation.rs and readme.rs need no GPU: run them
    # here with this script without --device).
    cargo build "${patch[@]}" "${jobs[@]}" "${profile[@]}" --features cuda --examples --test gpu \
        --message-format=json | python3 -c '
import json, shutil, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        kind = m["target"]["kind"][0]
        dst = sys.argv[1] + "/%s-%s" % ("test" if kind == "test" else kind, m["target"]["name"])
        shutil.copy(m["executable"], dst)
        print(dst, file=sys.stderr)
' "$stage"
    strip "$stage"/*
    tar czf "$device/candle.tgz" -C "$stage" .
    rm -rf "$stage"
    du -sh "$device/candle.tgz"
    exit 0
fi
cargo build "${patch[@]}" "${jobs[@]}" "${profile[@]}" --features cuda --lib --examples --tests
cargo test "${patch[@]}" "${jobs[@]}" "${profile[@]}" --features cuda "$@"
