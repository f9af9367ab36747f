#!/usr/bin/env bash
# Install the CUDA pieces rcute needs on a machine without a CUDA toolkit:
# NVRTC, the runtime/CRT headers, cuobjdump and nvdisasm, as NVIDIA's pip wheels, into
# <workspace root>/.cuda (git-ignored). rcute-kernel finds them there.
#
# Idempotent: a marker file records what was installed; re-running is a no-op
# unless the pinned versions change. Needs only python3 with pip.
#
# Usage: scripts/setup-cuda.sh [--force]
#   RCUTE_CUDA_WHEELS=<dir>  install somewhere else than <root>/.cuda
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${RCUTE_CUDA_WHEELS:-$root/.cuda}"

packages=(
    "nvidia-cuda-nvrtc==13.0.88"
    "nvidia-cuda-runtime==13.0.88"
    "nvidia-cuda-crt==13.0.88"
    # cuobjdump (13.2+) disassembles sm_90a cubins on the CPU; since 13.x it
    # runs nvdisasm for -sass, so both are needed. Standalone tools: they need
    # not match the NVRTC version, but must match each other.
    "nvidia-cuda-cuobjdump==13.5.37"
    "nvidia-cuda-nvdisasm==13.5.37"
)
marker="$dest/.rcute-installed"
want="${packages[*]}"

if [[ "${1:-}" != "--force" && -f "$marker" && "$(cat "$marker")" == "$want" ]]; then
    exit 0
fi

if ! command -v python3 >/dev/null 2>&1; then
    echo "setup-cuda: python3 not found; install python3 and pip first" >&2
    exit 1
fi
if ! python3 -m pip --version >/dev/null 2>&1; then
    echo "setup-cuda: pip not available; run 'apt-get install python3-pip' (Debian) first" >&2
    exit 1
fi

if [[ -e "$dest" && ! -f "$marker" && -n "$(ls -A "$dest" 2>/dev/null)" ]]; then
    echo "setup-cuda: $dest exists and was not made by this script; not touching it" >&2
    exit 1
fi

echo "setup-cuda: installing CUDA wheels into $dest" >&2
# Install into a staging directory and move it into place, so an interrupted
# run never leaves a half-populated $dest behind a valid-looking marker.
mkdir -p "$(dirname "$dest")"
stage="$(mktemp -d "${dest%/}.partial.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
# Debian's pip refuses to install into an "externally managed" environment
# unless told; PIP_BREAK_SYSTEM_PACKAGES is ignored by pips that do not know it.
PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install \
    --quiet --disable-pip-version-check --no-input --no-cache-dir \
    --no-deps --target "$stage" "${packages[@]}"

# The tools ship without the executable bit in some wheel versions.
find "$stage" -path '*/bin/*' -type f -exec chmod +x {} + 2>/dev/null || true
printf '%s' "$want" > "$stage/.rcute-installed"

rm -rf "$dest"
mv "$stage" "$dest"
trap - EXIT
echo "setup-cuda: done" >&2
