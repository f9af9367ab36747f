#!/usr/bin/env python3
"""List the import edges between the files of each crate and report circles.

An edge A -> B means file A names an item of file B through `crate::...` or `super::...`
(in a `use` or inline in code). `mod` declarations and `pub use` re-exports are structure,
not dependencies: a name reached through a re-export (`crate::Gpu`, `super::Plan`) is
followed to the file that defines it. Test modules (`#[cfg(test)] mod ...` to the end of
the file) and comments are ignored.

    python3 scripts/import_cycles.py [--edges] [--skip CRATE:PREFIX ...] [CRATE ...]

CRATE defaults to every crate under crates/; `--skip collective:sm90_` leaves out the files
of that crate whose module path starts with the prefix. Exits 1 when a crate has a circle.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates")


def modules(src):
    """{module path tuple: file} for every .rs file under src."""
    out = {}
    for d, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(d, f), src)[:-3].split(os.sep)
            if rel[-1] in ("lib", "mod", "main"):
                rel = rel[:-1]
            out[tuple(rel)] = os.path.join(d, f)
    return out


def strip(text):
    """Code without comments, string literals and trailing test modules."""
    m = re.search(r"#\[cfg\(test\)\]\s*(pub(\(crate\))?\s+)?mod\s+\w+\s*\{", text)
    if m:
        text = text[: m.start()]
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return text


def expand(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = tree.strip()
    i = tree.find("{")
    if i < 0:
        return [tree]
    head, body = tree[:i], tree[i + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    return [head + q for p in parts if p.strip() for q in expand(p)]


def paths(code):
    """(is_pub_use, path) for every use-tree leaf and inline crate::/super:: path."""
    out = []
    for m in re.finditer(r"(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", code):
        for leaf in expand(re.sub(r"\s+", "", m.group(2))):
            out.append((bool(m.group(1)), leaf.split(" as ")[0]))
    rest = re.sub(r"(pub(?:\([^)]*\))?\s+)?use\s+[^;]+;", "", code)
    for m in re.finditer(r"\b((?:crate|super)(?:::\w+)+)", rest):
        out.append((False, m.group(1)))
    return out


def absolute(mod, path):
    segs = path.split("::")
    if segs[0] == "crate":
        return segs[1:]
    base = list(mod)
    while segs and segs[0] in ("super", "self"):
        if segs[0] == "super":
            base = base[:-1]
        segs = segs[1:]
    return base + segs


def crate_edges(src):
    mods = modules(src)
    uses = {m: paths(strip(open(f).read())) for m, f in mods.items()}
    # name re-exported by a module -> absolute path it points to
    reexports = {m: {} for m in mods}
    for m, ps in uses.items():
        for pub, p in ps:
            if pub and not p.endswith("*"):
                a = absolute(m, p)
                reexports[m][a[-1]] = a

    def resolve(segs, seen=0):
        """The file module defining the item at absolute path segs."""
        k = max(i for i in range(len(segs) + 1) if tuple(segs[:i]) in mods)
        owner = tuple(segs[:k])
        if k < len(segs) and segs[k] in reexports[owner] and seen < 10:
            target = reexports[owner][segs[k]] + segs[k + 1 :]
            if target != segs:
                return resolve(target, seen + 1)
        return owner

    edges = {m: set() for m in mods}
    for m, ps in uses.items():
        for pub, p in ps:
            if pub or p.endswith("*") or not p.startswith(("crate", "super", "self")):
                continue
            t = resolve(absolute(m, p))
            if t != m and t != ():
                edges[m].add(t)
    return mods, edges


def cycles(edges):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def name(m):
    return "::".join(m) or "lib"


def main(argv):
    show = "--edges" in argv
    skip, rest, it = [], [], iter(argv)
    for a in it:
        if a == "--skip":
            skip.append(tuple(next(it).split(":", 1)))
        elif not a.startswith("--"):
            rest.append(a)
    crates = rest or sorted(os.listdir(ROOT))
    bad = False
    for c in crates:
        src = os.path.join(ROOT, c, "src")
        if not os.path.isdir(src):
            continue
        _, edges = crate_edges(src)
        dropped = {m for m in edges for k, pre in skip if k == c and name(m).startswith(pre)}
        edges = {m: ts - dropped for m, ts in edges.items() if m not in dropped}
        if show:
            for m in sorted(edges):
                if edges[m]:
                    print(f"{c}: {name(m)} -> {', '.join(name(t) for t in sorted(edges[m]))}")
        found = cycles(edges)
        for comp in found:
            bad = True
            inner = [f"{name(a)} -> {name(b)}" for a in comp for b in sorted(edges[a]) if b in comp]
            print(f"{c}: circle among {', '.join(name(x) for x in comp)} ({'; '.join(inner)})")
        if not found:
            print(f"{c}: no circles")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
