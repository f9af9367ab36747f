#!/usr/bin/env python3
"""Generate cute_oracle_size_one.tsv: layout-algebra expressions whose operands have
size-1 modes (static and dynamic, with zero and non-zero strides), evaluated by CuTe's own
C++ headers with g++, in CuTe's spelling (`_N` static, plain `N` a runtime int).

Usage (from the repository root):

    python3 crates/layout/tests/data/gen_size_one.py CUTLASS_INCLUDE CCCL_INCLUDE CUDA_INCLUDE [N]

CUTLASS_INCLUDE is `include/` of NVIDIA/cutlass (CuTe), CCCL_INCLUDE a directory with
`cuda/std/...` (libcu++, e.g. from the `nvidia-cuda-cccl-cu12` wheel), CUDA_INCLUDE one
with `cuda_runtime_api.h` (`.cuda/nvidia/cu13/include` after `scripts/setup-cuda.sh`); N
candidates (default 600). Candidates rcute
rejects are left out (checking a rejection needs one g++ run per case); every candidate
rcute accepts is compiled in batches: a batch that fails to compile is bisected, and a case
that does not compile is recorded as ERROR (CuTe rejects it at compile time, so rcute must
too). Cases whose program dies at run time become comment lines.
"""

import os
import random
import subprocess
import sys
import tempfile

# The rcute binary (`cargo build -p rcute-cli` first); RCUTE_BIN overrides the path.
RCUTE = [os.environ.get("RCUTE_BIN", "target/debug/rcute")]


def leaf_text(v, static):
    return f"_{v}" if static else str(v)


def leaf_cpp(v, static):
    return f"Int<{v}>{{}}" if static else f"int({v})"


class Tup:
    """A nested integer tuple with static / dynamic leaves."""

    def __init__(self, kids=None, leaf=None):
        self.kids, self.leaf = kids, leaf

    def text(self):
        if self.leaf is not None:
            return leaf_text(*self.leaf)
        return "(" + ",".join(k.text() for k in self.kids) + ")"

    def cpp(self, ctor):
        if self.leaf is not None:
            return leaf_cpp(*self.leaf)
        return f"{ctor}(" + ", ".join(k.cpp(ctor) for k in self.kids) + ")"

    def leaves(self):
        if self.leaf is not None:
            return [self]
        return [x for k in self.kids for x in k.leaves()]


def rand_shape(rng, depth=0):
    if depth >= 2 or rng.random() < 0.45:
        v = rng.choice([1, 1, 1, 2, 2, 4, 3, 8])
        return Tup(leaf=(v, rng.random() < 0.7))
    return Tup(kids=[rand_shape(rng, depth + 1) for _ in range(rng.randint(1, 3))])


def copy_with_strides(shape, rng, compact):
    """A stride tuple congruent to `shape`: column-major compact (possibly scaled), or random."""
    acc = [rng.choice([1, 1, 2])]

    def go(t):
        if t.leaf is not None:
            if compact:
                d = acc[0] if t.leaf[0] != 1 or rng.random() < 0.5 else rng.choice([0, 1, 4])
                acc[0] *= t.leaf[0]
            else:
                d = rng.choice([0, 1, 2, 4, 8, 16])
            return Tup(leaf=(d, rng.random() < 0.7))
        return Tup(kids=[go(k) for k in t.kids])

    return go(shape)


class Lay:
    def __init__(self, shape, stride):
        self.shape, self.stride = shape, stride

    def text(self):
        return f"{self.shape.text()}:{self.stride.text()}"

    def cpp(self):
        s = self.shape.cpp("make_shape")
        d = self.stride.cpp("make_stride")
        return f"make_layout({s}, {d})"


def rand_layout(rng):
    sh = rand_shape(rng)
    return Lay(sh, copy_with_strides(sh, rng, rng.random() < 0.6))


def rand_int(rng):
    v = rng.choice([1, 2, 4, 8, 16, 32])
    return (v, rng.random() < 0.7)


UNARY = ["coalesce", "filter", "complement", "right_inverse", "left_inverse", "make_layout_like"]
BINARY = [
    "composition",
    "logical_divide",
    "zipped_divide",
    "tiled_divide",
    "flat_divide",
    "logical_product",
    "zipped_product",
    "tiled_product",
    "flat_product",
    "blocked_product",
    "raked_product",
    "max_common_layout",
]


def candidate(rng):
    """(rcute text, C++ expression) of one random call."""
    a = rand_layout(rng)
    r = rng.random()
    if r < 0.3:
        f = rng.choice(UNARY)
        if f == "complement" and rng.random() < 0.5:
            n = rand_int(rng)
            return f"complement({a.text()}, {leaf_text(*n)})", f"complement({a.cpp()}, {leaf_cpp(*n)})"
        return f"{f}({a.text()})", f"{f}({a.cpp()})"
    if r < 0.4:
        # A by-mode tiler of layouts.
        ms = [rand_layout(rng) for _ in range(rng.randint(1, 2))]
        f = rng.choice(["composition", "logical_divide", "zipped_divide", "logical_product"])
        t = "[" + ", ".join(m.text() for m in ms) + "]"
        c = "make_tile(" + ", ".join(m.cpp() for m in ms) + ")"
        return f"{f}({a.text()}, {t})", f"{f}({a.cpp()}, {c})"
    b = rand_layout(rng)
    f = rng.choice(BINARY)
    return f"{f}({a.text()}, {b.text()})", f"{f}({a.cpp()}, {b.cpp()})"


# Hand-picked size-1 cases (in rcute's exact spelling and CuTe's C++), checked first.
CURATED = [
    ("composition(_4:_1, _1:_1)", "composition(Layout<_4, _1>{}, Layout<_1, _1>{})"),
    ("composition(4:1, 1:1)", "composition(make_layout(4, 1), make_layout(1, 1))"),
    ("composition(_4:_1, 1:1)", "composition(Layout<_4, _1>{}, make_layout(1, 1))"),
    ("composition((_4,_2):(_1,_4), _1:_1)", "composition(Layout<Shape<_4, _2>, Stride<_1, _4>>{}, Layout<_1, _1>{})"),
    ("composition((_4,_2):(_2,_8), _1:_3)", "composition(Layout<Shape<_4, _2>, Stride<_2, _8>>{}, Layout<_1, _3>{})"),
    ("composition(_8:_2, _1:_0)", "composition(Layout<_8, _2>{}, Layout<_1, _0>{})"),
    ("coalesce((_1,_1):(_2,_4))", "coalesce(Layout<Shape<_1, _1>, Stride<_2, _4>>{})"),
    ("coalesce((1,1):(2,4))", "coalesce(make_layout(make_shape(1, 1), make_stride(2, 4)))"),
    ("coalesce((_2,_1,_4):(_1,_7,_2))", "coalesce(Layout<Shape<_2, _1, _4>, Stride<_1, _7, _2>>{})"),
    ("complement(_4:_1, _4)", "complement(Layout<_4, _1>{}, _4{})"),
    ("complement(_1:_1)", "complement(Layout<_1, _1>{})"),
    ("logical_divide(_4:_1, _1:_1)", "logical_divide(Layout<_4, _1>{}, Layout<_1, _1>{})"),
    ("zipped_divide(_8:_1, [_1:_1])", "zipped_divide(Layout<_8, _1>{}, make_tile(Layout<_1, _1>{}))"),
    ("logical_product(_1:_1, _4:_1)", "logical_product(Layout<_1, _1>{}, Layout<_4, _1>{})"),
    ("blocked_product(_1:_1, (_2,_2):(_1,_2))", "blocked_product(Layout<_1, _1>{}, Layout<Shape<_2, _2>, Stride<_1, _2>>{})"),
    ("right_inverse(_1:_0)", "right_inverse(Layout<_1, _0>{})"),
    ("left_inverse(_1:_5)", "left_inverse(Layout<_1, _5>{})"),
    ("make_layout_like((_1,_4):(_5,_1))", "make_layout_like(Layout<Shape<_1, _4>, Stride<_5, _1>>{})"),
    ("filter((_1,_4):(_5,_1))", "filter(Layout<Shape<_1, _4>, Stride<_5, _1>>{})"),
    ("max_common_layout(_1:_1, _1:_1)", "max_common_layout(Layout<_1, _1>{}, Layout<_1, _1>{})"),
]

PRELUDE = """#include <cute/layout.hpp>
#include <cute/util/print.hpp>
#include <cstdlib>
using namespace cute;
"""


def program(cases):
    body = []
    for i, (_, c) in enumerate(cases):
        body.append(f"  if (which < 0 || which == {i}) {{ print({c}); print(\"\\n\"); }}")
    return PRELUDE + "int main(int argc, char** argv) {\n  int which = argc > 1 ? atoi(argv[1]) : -1;\n" + "\n".join(body) + "\n}\n"


def compile_ok(cases, flags, exe):
    with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
        f.write(program(cases))
    r = subprocess.run(["g++", *flags, "-o", exe, f.name], capture_output=True)
    os.unlink(f.name)
    return r.returncode == 0


def run_cases(cases, flags, exe, out):
    """Append (text, result) for `cases` to `out`; bisect on compile failures."""
    if not cases:
        return
    if not compile_ok(cases, flags, exe):
        if len(cases) == 1:
            out.append((cases[0][0], "ERROR"))
            return
        h = len(cases) // 2
        run_cases(cases[:h], flags, exe, out)
        run_cases(cases[h:], flags, exe, out)
        return
    for i, (t, _) in enumerate(cases):
        r = subprocess.run([exe, str(i)], capture_output=True, text=True)
        if r.returncode != 0:
            out.append((t, "RUNTIME_ERROR"))
        else:
            out.append((t, r.stdout.strip()))


def main():
    incs = [a for a in sys.argv[1:] if os.path.isdir(a)]
    nums = [int(a) for a in sys.argv[1:] if a.isdigit()]
    n = nums[0] if nums else 600
    flags = ["-std=c++17", "-O0"] + [f"-I{d}" for d in incs]
    rng = random.Random(20261125)
    seen, cands = set(), list(CURATED)
    while len(cands) < n + len(CURATED):
        t, c = candidate(rng)
        if t in seen:
            continue
        seen.add(t)
        r = subprocess.run(RCUTE + ["layout", "--exact", t], capture_output=True, text=True)
        if r.returncode == 0:
            cands.append((t, c))
    out = []
    exe = os.path.join(tempfile.mkdtemp(), "cute_case")
    for k in range(0, len(cands), 100):
        run_cases(cands[k : k + 100], flags, exe, out)
        print(f"{len(out)} / {len(cands)}", file=sys.stderr)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cute_oracle_size_one.tsv")
    with open(path, "w") as f:
        f.write(
            "# expression\tCuTe result, printed by CuTe itself (static ints as _N, dynamic ints plain); "
            "operands with size-1 modes; inputs use CuTe's spelling: _N is Int<N>{}, a plain N is a "
            "runtime int(N); generated by gen_size_one.py with CuTe's C++ headers (g++)\n"
        )
        for t, r in out:
            if r == "RUNTIME_ERROR":
                f.write(f"# {t}\t{r}\n")
            else:
                f.write(f"{t}\t{r}\n")


if __name__ == "__main__":
    main()
