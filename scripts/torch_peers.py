#!/usr/bin/env python3
"""Torch peers for the scaled-GEMM benchmarks (issue #6), run on the GPU machine with its
Python (PyTorch 2.x). Prints one JSON object per line:

  {"peer": "int_mm+scale", "m":..., "n":..., "k":..., "us":..., "tops":...}

Peers, timed the way `rcute bench` times rcute (median over samples, each sample a CUDA
graph of 10 calls, random data):
  * int_mm+scale: torch._int_mm (s8 x s8 -> s32), then the unfused per-token / per-channel
    scaling and bias in torch: (acc.float() * a_scale[:, None] * b_scale[None, :] + bias)
    .to(bfloat16) -- the pipeline a user would write;
  * int_mm: torch._int_mm alone (s32 out, no scaling);
  * scaled_mm_fp8: torch._scaled_mm with e4m3 inputs, row-wise f32 scales (M x 1, 1 x N),
    bf16 out (cuBLASLt).
torch._int_mm needs M > 16 in some versions: smaller M is padded to 32 rows and reported
with "padded_m".
"""
import json
import sys

import torch


def graph_median_us(fn, samples=30, per_sample=10):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(per_sample):
            fn()
    times = []
    for _ in range(samples):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / per_sample)
    times.sort()
    return times[len(times) // 2]


def int8_peers(m, n, k):
    dev = "cuda"
    mp = m if m > 16 else 32
    a = torch.randint(-127, 128, (mp, k), dtype=torch.int8, device=dev)
    b = torch.randint(-127, 128, (n, k), dtype=torch.int8, device=dev).t()  # column-major K x N
    a_scale = torch.rand(mp, device=dev, dtype=torch.float32) / 64
    b_scale = torch.rand(n, device=dev, dtype=torch.float32) / 64
    bias = torch.randn(n, device=dev, dtype=torch.bfloat16)
    out = []

    def int_mm():
        return torch._int_mm(a, b)

    def unfused():
        acc = torch._int_mm(a, b)
        return (acc.float() * a_scale[:, None] * b_scale[None, :] + bias.float()).to(torch.bfloat16)

    for name, fn in (("int_mm", int_mm), ("int_mm+scale", unfused)):
        try:
            us = graph_median_us(fn)
            rec = {"peer": name, "m": m, "n": n, "k": k, "us": us, "tops": 2 * m * n * k / us / 1e6}
            if mp != m:
                rec["padded_m"] = mp
            out.append(rec)
        except Exception as e:  # noqa: BLE001 - report and go on
            out.append({"peer": name, "m": m, "n": n, "k": k, "error": str(e)[:200]})
    return out


def fp8_peer(m, n, k):
    dev = "cuda"
    a = (torch.randn(m, k, device=dev) * 0.5).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device=dev) * 0.5).to(torch.float8_e4m3fn).t()
    sa = torch.rand(m, 1, device=dev, dtype=torch.float32) + 0.5
    sb = torch.rand(1, n, device=dev, dtype=torch.float32) + 0.5

    def fn():
        return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    try:
        us = graph_median_us(fn)
        return [{"peer": "scaled_mm_fp8", "m": m, "n": n, "k": k, "us": us, "tops": 2 * m * n * k / us / 1e6}]
    except Exception as e:  # noqa: BLE001
        return [{"peer": "scaled_mm_fp8", "m": m, "n": n, "k": k, "error": str(e)[:200]}]


def main():
    torch.manual_seed(0)
    shapes = [(8192, 8192, 8192), (4096, 14336, 4096)]
    for m in (1, 16, 32, 64, 128):
        shapes += [(m, 4096, 4096), (m, 14336, 4096)]
    for s in shapes:
        for rec in int8_peers(*s):
            print(json.dumps(rec), flush=True)
    for s in [(8192, 8192, 8192), (4096, 14336, 4096)]:
        for rec in fp8_peer(*s):
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    sys.exit(main())
