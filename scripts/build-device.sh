#!/usr/bin/env bash
# Build (here, on the CPU machine) everything the GPU machine runs, into .device/
# (git-ignored; name it in the device tool's `carry`): the test binaries of the crates
# with GPU tests (rcute-kernel, rcute-tests) and the release `rcute` binary, stripped to
# stay well under the device tool's 64 MiB transfer limit. Then run `bash scripts/gpu.sh` on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .device && mkdir -p .device/bin
cargo build --release -p rcute-cli
cp "${CARGO_TARGET_DIR:-target}/release/rcute" .device/bin/
cargo test --release -p rcute-kernel -p rcute-tests --no-run --message-format=json 2>/dev/null \
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
du -sh .device
