#!/usr/bin/env python3
"""Before/after table from scripts/bench_compare.sh's JSON files:
   scripts/bench_table.py DIR  -> markdown rows: bench, shape, before (us, peer ratio), after, change.
The ratio is peer time / rcute time from the same process (cuBLAS, cuBLASLt int8 or e4m3); rcute us is
the median over rounds of each round's median."""
import glob, json, os, statistics, sys

d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, "cmp-*-*-*.json"))):
    base = os.path.basename(f)[4:-5]
    bench, which, rnd = base.rsplit("-", 2)
    for r in json.load(open(f)):
        if r.get("config", "auto") != "auto":
            continue
        peer = r.get("cublas_us") or r.get("cublaslt_int8_us") or r.get("cublaslt_e4m3_us")
        key = (bench, f'{r["m"]}x{r["n"]}x{r["k"]}')
        rows.setdefault(key, {}).setdefault(which, []).append((r["rcute_us"], peer))
print("| bench | shape | before us (peer/rcute) | after us (peer/rcute) | after/before time |")
print("|---|---|---|---|---|")
for (bench, shape), v in rows.items():
    cells = []
    meds = {}
    for which in ("before", "after"):
        xs = v.get(which, [])
        if not xs:
            cells.append("-"); continue
        us = statistics.median(x[0] for x in xs)
        meds[which] = us
        peers = [x[1] for x in xs if x[1]]
        ratio = statistics.median(p / x[0] for x, p in zip(xs, [x[1] for x in xs]) if p) if peers else None
        cells.append(f"{us:.1f} ({ratio:.3f})" if ratio else f"{us:.1f}")
    ch = f'{meds["after"] / meds["before"]:.3f}' if len(meds) == 2 else "-"
    print(f"| {bench} | {shape} | {cells[0]} | {cells[1]} | {ch} |")
