"""Benchmark: each portable kernel family on a representative shape, etmlir's runtime vs torch eager, one thread.

    OMP_NUM_THREADS=1 .venv/bin/python bench/portable_ops.py [--ops add,sort] [--budget 0.3]

Per op, a one-op module is compiled the way users compile (`etmlir.export`
-> `to_edge` -> `to_executorch`) and run by `etmlir.runtime`; its time is
`Method.benchmark`'s (the run loop is in C++, seconds per execute(), which
includes the runtime's input copy) and eager's is `time.perf_counter()`
around the same call under `torch.no_grad()`, both with one thread
(`torch.set_num_threads(1)`; our kernels are single-threaded), both the
median of runs that fit in --budget seconds (at least 5). It prints the
ratio etmlir / eager per op (lower is better), the geometric mean and the
worst ops, and the largest difference from eager's result as a sanity
check. The goal (issue 15): geomean <= 2x eager, no op over 10x.
Prints numbers; never asserts.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

import etmlir
import etmlir.runtime as rt


def _r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape))
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g, dtype=dtype)
    return torch.randint(0, 50, shape, generator=g, dtype=dtype)


def _idx(high: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(high))


# name -> (function of the inputs, inputs). Shapes: ~64k-1M elements, so kernel time dominates call overhead.
OPS: dict[str, tuple[Callable, Callable[[], tuple]]] = {
    "add": (torch.add, lambda: (_r(256, 1024), _r(256, 1024))),
    "add_broadcast": (torch.add, lambda: (_r(256, 1024), _r(1024))),
    "mul_scalar": (lambda x: x * 3.0, lambda: (_r(256, 1024),)),
    "div": (torch.div, lambda: (_r(256, 1024), _r(256, 1024))),
    "pow_scalar": (lambda x: x.abs().pow(1.7), lambda: (_r(256, 1024),)),
    "remainder": (torch.remainder, lambda: (_r(256, 1024), _r(256, 1024) + 3)),
    "where": (lambda c, a, b: torch.where(c > 0, a, b), lambda: (_r(256, 1024), _r(256, 1024), _r(256, 1024))),
    "eq": (torch.eq, lambda: (_r(256, 1024, dtype=torch.int64), _r(256, 1024, dtype=torch.int64))),
    "bitwise_and": (torch.bitwise_and, lambda: (_r(256, 1024, dtype=torch.int32), _r(256, 1024, dtype=torch.int32))),
    "relu": (torch.relu, lambda: (_r(256, 1024),)),
    "exp": (torch.exp, lambda: (_r(256, 1024),)),
    "log": (lambda x: torch.log(x.abs()), lambda: (_r(256, 1024),)),
    "sin": (torch.sin, lambda: (_r(256, 1024),)),
    "sigmoid": (torch.sigmoid, lambda: (_r(256, 1024),)),
    "tanh": (torch.tanh, lambda: (_r(256, 1024),)),
    "gelu": (F.gelu, lambda: (_r(256, 1024),)),
    "erf": (torch.erf, lambda: (_r(256, 1024),)),
    "abs": (torch.abs, lambda: (_r(256, 1024),)),
    "round": (torch.round, lambda: (_r(256, 1024),)),
    "clamp": (lambda x: torch.clamp(x, -0.5, 0.5), lambda: (_r(256, 1024),)),
    "sum_dim_last": (lambda x: x.sum(-1), lambda: (_r(256, 1024),)),
    "sum_dim_first": (lambda x: x.sum(0), lambda: (_r(256, 1024),)),
    "mean_all": (torch.mean, lambda: (_r(256, 1024),)),
    "amax": (lambda x: x.amax(-1), lambda: (_r(256, 1024),)),
    "amin": (lambda x: x.amin(0), lambda: (_r(256, 1024),)),
    "var": (lambda x: x.var(-1), lambda: (_r(256, 1024),)),
    "prod": (lambda x: x.prod(-1), lambda: (_r(256, 1024) * 0.1 + 1,)),
    "cumsum": (lambda x: x.cumsum(-1), lambda: (_r(256, 1024),)),
    "argmax": (lambda x: x.argmax(-1), lambda: (_r(256, 1024),)),
    "max_dim": (lambda x: x.max(1), lambda: (_r(256, 1024),)),
    "softmax": (lambda x: x.softmax(-1), lambda: (_r(256, 1024),)),
    "log_softmax": (lambda x: x.log_softmax(-1), lambda: (_r(256, 1024),)),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (1024,), w, b), lambda: (_r(256, 1024), _r(1024), _r(1024))),
    "group_norm": (lambda x, w, b: F.group_norm(x, 8, w, b), lambda: (_r(4, 64, 32, 32), _r(64), _r(64))),
    "batch_norm_eval": (lambda x, m, v: F.batch_norm(x, m, v.abs() + 1, training=False),
                        lambda: (_r(4, 64, 32, 32), _r(64), _r(64))),
    "mm": (torch.mm, lambda: (_r(256, 256), _r(256, 256))),
    "bmm": (torch.bmm, lambda: (_r(8, 128, 64), _r(8, 64, 128))),
    "addmm": (lambda b, x, w: torch.addmm(b, x, w), lambda: (_r(256), _r(128, 512), _r(512, 256))),
    "conv2d_3x3": (lambda x, w: F.conv2d(x, w, padding=1), lambda: (_r(1, 32, 56, 56), _r(32, 32, 3, 3))),
    "conv2d_depthwise": (lambda x, w: F.conv2d(x, w, padding=1, groups=64), lambda: (_r(1, 64, 56, 56), _r(64, 1, 3, 3))),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=2), lambda: (_r(1, 32, 28, 28), _r(32, 16, 2, 2))),
    "conv1d": (lambda x, w: F.conv1d(x, w, padding=2), lambda: (_r(4, 32, 512), _r(32, 32, 5))),
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1), lambda: (_r(1, 64, 112, 112),)),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), lambda: (_r(1, 64, 112, 112),)),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, 7), lambda: (_r(1, 256, 14, 14),)),
    "upsample_nearest2d": (lambda x: F.interpolate(x, scale_factor=2.0), lambda: (_r(1, 32, 64, 64),)),
    "upsample_bilinear2d": (lambda x: F.interpolate(x, scale_factor=2.0, mode="bilinear"), lambda: (_r(1, 32, 64, 64),)),
    "permute": (lambda x: x.permute(0, 2, 3, 1).contiguous() + 0, lambda: (_r(1, 64, 56, 56),)),
    "cat": (lambda a, b: torch.cat([a, b], 1), lambda: (_r(64, 1024), _r(64, 1024))),
    "flip": (lambda x: x.flip(-1), lambda: (_r(256, 1024),)),
    "repeat": (lambda x: x.repeat(4, 1), lambda: (_r(64, 1024),)),
    "constant_pad": (lambda x: F.pad(x, (1, 1, 1, 1)), lambda: (_r(1, 64, 56, 56),)),
    "reflection_pad2d": (lambda x: F.pad(x, (2, 2, 2, 2), mode="reflect"), lambda: (_r(1, 64, 56, 56),)),
    "gather": (lambda x, i: torch.gather(x, 1, i), lambda: (_r(256, 1024), _idx(1024, 256, 512))),
    "scatter_add": (lambda x, i, s: x.scatter_add(1, i, s), lambda: (_r(256, 1024), _idx(1024, 256, 512), _r(256, 512))),
    "index_select": (lambda x, i: x.index_select(0, i), lambda: (_r(1024, 256), _idx(1024, 512))),
    "index_tensor": (lambda x, i: x[i], lambda: (_r(1024, 256), _idx(1024, 512))),
    "embedding": (lambda w, i: F.embedding(i, w), lambda: (_r(4096, 256), _idx(4096, 512))),
    "sort": (lambda x: x.sort(-1), lambda: (_r(256, 1024),)),
    "topk": (lambda x: x.topk(8, -1), lambda: (_r(256, 1024),)),
    "nonzero": (lambda x: torch.nonzero(x > 0), lambda: (_r(256, 1024),)),
}


class _One(torch.nn.Module):
    def __init__(self, fn: Callable):
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor):
        return self.fn(*xs)


def _median_seconds(call: Callable[[], object], budget: float) -> float:
    call()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 5 or (time.perf_counter() - start < budget and len(times) < 2000):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def measure(name: str, budget: float) -> tuple[float, float, float]:
    """(eager seconds, etmlir seconds, max |diff|) for one op."""
    fn, make = OPS[name]
    inputs = make()
    module = _One(fn).eval()
    with torch.no_grad():
        want = [w for w in torch.utils._pytree.tree_leaves(module(*inputs)) if isinstance(w, torch.Tensor)]
        eager = _median_seconds(lambda: module(*inputs), budget)
    method = rt.load(etmlir.to_edge(etmlir.export(module, inputs)).to_executorch().buffer).method("forward")
    got = method(*inputs)
    diff = max((float((g.double() - w.double()).abs().max()) if w.numel() else 0.0) for g, w in zip(got, want))
    method(*inputs)
    runs: list[float] = []
    start = time.perf_counter()
    while len(runs) < 5 or (time.perf_counter() - start < budget and len(runs) < 2000):
        runs += method.benchmark(*inputs, iterations=5, warmup=0)
    return eager, statistics.median(runs), diff


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated op names (default: all): " + ", ".join(OPS))
    parser.add_argument("--budget", type=float, default=0.3, help="seconds of timed runs per side per op")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    names = args.ops.split(",") if args.ops else list(OPS)
    print(f"threads: torch {torch.get_num_threads()}, etmlir portable kernels 1; budget {args.budget} s per side")
    print(f"{'op':22} {'eager us':>10} {'etmlir us':>10} {'ratio':>7} {'max|diff|':>10}")
    ratios: dict[str, float] = {}
    for name in names:
        try:
            eager, ours, diff = measure(name, args.budget)
        except Exception as error:  # noqa: BLE001 - a benchmark reports and goes on
            print(f"{name:22} n/a: {type(error).__name__}: {str(error).splitlines()[0][:90]}")
            continue
        ratios[name] = ours / eager
        print(f"{name:22} {eager * 1e6:10.1f} {ours * 1e6:10.1f} {ours / eager:7.2f} {diff:10.2e}", flush=True)
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))
        worst = sorted(ratios.items(), key=lambda kv: -kv[1])[:5]
        print(f"\ngeomean etmlir/eager over {len(ratios)} ops: {geomean:.2f}x (goal <= 2x)")
        print("worst: " + ", ".join(f"{n} {r:.1f}x" for n, r in worst) + " (goal: none over 10x)")
        print(f"ops over 10x: {sum(r > 10 for r in ratios.values())}; not run: {len(names) - len(ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
