#!/usr/bin/env python3
"""Report Rust functions longer than a limit and files longer than a limit in crates/*/src
(test modules, i.e. `#[cfg(test)] mod ... { }` blocks, excluded), and generated units in
kernels/ that carry unfolded arithmetic. Usage: scripts/code_shape.py [--fn 150] [--file 1200]
Exit status 1 when anything is over."""
import argparse, pathlib, re, sys

root = pathlib.Path(__file__).resolve().parent.parent

def strip_tests(lines):
    out, skip, depth = [], False, 0
    pending = False
    for ln in lines:
        s = ln.strip()
        if s.startswith("#[cfg(test)]"):
            pending = True
            out.append(None)
            continue
        if pending and not skip:
            if re.match(r"(pub(\(crate\))?\s+)?mod\s+\w+\s*\{", s):
                skip, depth = True, 0
            pending = False
        if skip:
            depth += ln.count("{") - ln.count("}")
            out.append(None)
            if depth <= 0 and "}" in ln:
                skip = False
            continue
        out.append(ln)
    return out

fn_re = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"C\"\s+)?fn\s+(\w+)")

def functions(lines):
    res = []
    i = 0
    while i < len(lines):
        m = fn_re.match(lines[i])
        if not m:
            i += 1
            continue
        # find the opening brace of the body (or a ';' for declarations)
        j, depth, started = i, 0, False
        while j < len(lines):
            code = re.sub(r'"(\\.|[^"\\])*"', '""', lines[j])
            code = re.sub(r"//.*", "", code)
            if not started and ";" in code and "{" not in code:
                break
            for ch in code:
                if ch == "{":
                    depth += 1; started = True
                elif ch == "}":
                    depth -= 1
            if started and depth <= 0:
                break
            j += 1
        if started:
            res.append((m.group(7), i + 1, j - i + 1))
        i += 1
    return res

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fn", type=int, default=150)
    ap.add_argument("--file", type=int, default=1200)
    a = ap.parse_args()
    bad = 0
    for f in sorted(root.glob("crates/*/src/**/*.rs")):
        marked = strip_tests(f.read_text().splitlines())
        rel = f.relative_to(root)
        code_lines = len([l for l in marked if l is not None])
        lines = [l if l is not None else "" for l in marked]
        if code_lines > a.file:
            print(f"file {rel}: {code_lines} lines"); bad += 1
        for name, start, length in functions(lines):
            if length > a.fn:
                print(f"fn {rel}:{start} {name}: {length} lines"); bad += 1
    for f in sorted(root.glob("kernels/*.cu")):
        t = f.read_text()
        for pat in ["+ 0)", "- 0)", "* 1)", ">> 0", "<< 0"]:
            c = t.count(pat)
            if c:
                print(f"unit {f.name}: {c} x '{pat}'"); bad += 1
        if "_sm90_" in f.name and "gemm" in f.name:
            n = t.count("\n")
            # A hybrid stream-K unit (`_sk`) carries its walk (rcute_kernel::stream_k) and
            # the last-arriver reduction beside the data-parallel kernel: ~190 lines more.
            limit = 1100 if "_sk" in f.name else 900
            if n > limit:
                print(f"unit {f.name}: {n} lines (> {limit})"); bad += 1
    print(f"{bad} over the limits")
    sys.exit(1 if bad else 0)

main()
