#!/usr/bin/env bash
# Build (here, on the CPU machine) everything the GPU machine runs, into .device/
# (git-ignored; name it in the device tool's `carry`): the test binaries of the crates
# with GPU tests (rcute-kernel, rcute-tests) and the release `rcute` binary, stripped and
# gzipped (.device/bin.tgz) to stay well under the device tool's 64 MiB transfer limit. Then run `bash scripts/gpu.sh` on the GPU machine.
#
# RCUTE_DEVICE_CANDLE=1 also builds rcute-candle (crates/candle, its own workspace: candle's
# CUDA kernels are compiled with nvcc from pip wheels, scripts/build-candle.sh) into
# .device-candle/candle.tgz: its GPU test binary and its examples, stripped and gzipped
# (~35 MB: each binary holds candle's ~40 MB of PTX). It is a directory of its own because
# .device (~60 MB) and it together exceed the 64 MiB a call carries: run the `candle` step in
# a call of its own (carry .device-candle, RCUTE_GPU_STEPS=candle). Off by default: the
# first build installs the nvcc wheels and compiles candle's kernels (minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .device && mkdir -p .device/bin
# The nccl feature (expert parallelism) loads NCCL at run time: with one GPU its one-rank
# tests run, with two the two-rank ones too (RCUTE_REQUIRE_GPU=2), and `rcute bench moe --ranks`.
cargo build --release -p rcute-cli --features nccl
cp "${CARGO_TARGET_DIR:-target}/release/rcute" .device/bin/
cargo test --release -p rcute-kernel -p rcute-tests --features rcute-tests/nccl --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys, shutil, os
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"].replace("-", "_")
        kind = m["target"]["kind"][0]
        pkg = m["package_id"].split("#")[0].rsplit("/", 1)[-1]
        dst = ".device/bin/test-%s-%s-%s" % (pkg, kind, name)
        shutil.copy(m["executable"], dst)
        print(dst)
'
strip .device/bin/* 2>/dev/null || true
# Stripped, the binaries exceed the 64 MiB a device call carries; gzipped they are ~1/3 of
# that. scripts/gpu.sh unpacks .device/bin.tgz on the GPU machine.
tar czf .device/bin.tgz -C .device bin && rm -rf .device/bin
du -sh .device
if [ "${RCUTE_DEVICE_CANDLE:-0}" = 1 ]; then
  rm -rf .device-candle
  CANDLE_PROFILE=release scripts/build-candle.sh --device .device-candle
fi
