"""Benchmark: MobileNetV2 block by block, the `cpu` delegate vs ExecuTorch 1.5.1-XNNPACK, same threads.

The whole-model ratio of `make bench-cpu` says how far apart the two are, not where. This times each
of MobileNetV2's 19 feature blocks, and its head (pool + classifier), alone:

    bash scripts/setup_bench.sh .venv-bench      # once (ExecuTorch 1.5.1 in its own environment)
    .venv/bin/python bench/cpu_blocks.py [--threads 1] [--iterations 300] [--warmup 30] [--executorch-python PY]

Each block is exported on the tensor it sees in the model (the zoo's seeded weights and input, so
both sides get the same block and the same input) and compiled alone by each side:
  ours      etmlir.export -> to_edge -> to_backend(partitioner("cpu")) -> to_executorch, on
            etmlir.runtime after set_cpu_threads(--threads); Method.benchmark (the run loop in C++,
            the input set once), median of --iterations runs after --warmup
  XNNPACK   torch.export -> to_edge_transform_and_lower(XnnpackPartitioner) -> to_executorch, on the
            bench environment's ExecuTorch runtime with its threadpool at --threads; set_inputs outside
            the clock, perf_counter around execute(), median (this script again, --side xnnpack)
Per block: its input shape, MFLOP (its convolutions and linear layers: 2 x multiply-adds), both medians,
ours / XNNPACK, our GFLOP/s and max|diff| of ours from eager.

Caveat, read before the table: XNNPACK computes channels-last, so a block compiled alone converts its
input from NCHW and its output back inside the delegate, where the whole model converts once at each
end. Its per-block times include those two conversions (large at 112x112 and 56x56, small from 28x28
down); ours keep NCHW throughout and pay none. Neither side's sum is its model's time: a block timed alone
runs with its weights and activations in cache. Prints numbers; never asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "python"))

import _bench_models  # noqa: E402


class Head(torch.nn.Module):
    """MobileNetV2's forward after its feature blocks."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.classifier = model.classifier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, (1, 1)), 1))


def blocks() -> list[tuple[str, torch.nn.Module, torch.Tensor, float]]:
    """(name, module, the input it sees in the model, MFLOP) per feature block, then the head."""
    model, args, _ = _bench_models.build("mobilenet_v2")
    flops = [0.0]

    def count(module: torch.nn.Module, _: tuple, out: torch.Tensor) -> None:
        if isinstance(module, torch.nn.Conv2d):
            taps = module.kernel_size[0] * module.kernel_size[1] * module.in_channels // module.groups
            flops[0] += 2.0 * taps * out.numel()
        elif isinstance(module, torch.nn.Linear):
            flops[0] += 2.0 * module.in_features * out.numel()

    hooks = [module.register_forward_hook(count) for module in model.modules()]
    found = []
    x = args[0]
    with torch.no_grad():
        for i, block in enumerate([*model.features, Head(model).eval()]):
            flops[0] = 0.0
            y = block(x)
            found.append((f"features.{i}" if i < len(model.features) else "head", block, x, flops[0] / 1e6))
            x = y
    for hook in hooks:
        hook.remove()
    return found


def time_ours(found: list, threads: int, iterations: int, warmup: int) -> dict[str, tuple[float, float]]:
    """name -> (median seconds, max|diff| from eager)."""
    import etmlir
    from etmlir import backends
    from etmlir import runtime as rt

    rt.set_cpu_threads(threads)
    result = {}
    for name, block, x, _ in found:
        print(f"[blocks] ours: {name}", file=sys.stderr, flush=True)
        part = backends.partitioner("cpu")
        edge = etmlir.to_edge(etmlir.export(block, (x,)), etmlir.EdgeCompileConfig(keep=part.ops_to_keep()))
        method = rt.load(edge.to_backend(part).to_executorch().buffer).method("forward")
        with torch.no_grad():
            expected = block(x)
        got = torch.from_numpy(method(x.numpy())[0])
        seconds = method.benchmark(x.numpy(), iterations=iterations, warmup=warmup)
        result[name] = (statistics.median(seconds), float((got - expected).abs().max()))
    return result


def time_xnnpack(found: list, threads: int, iterations: int, warmup: int) -> dict[str, float]:
    """name -> median seconds (run in the bench environment)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    torch.set_num_threads(1)
    portable_lib._unsafe_reset_threadpool(threads)  # before any method is loaded
    runtime = Runtime.get()
    result = {}
    for name, block, x, _ in found:
        print(f"[blocks] XNNPACK: {name}", file=sys.stderr, flush=True)
        program = to_edge_transform_and_lower(torch.export.export(block, (x,)),
                                              partitioner=[XnnpackPartitioner()]).to_executorch()
        method = runtime.load_program(program.buffer).load_method("forward")._method
        seconds = []
        for i in range(warmup + iterations):
            method.set_inputs([x])
            start = time.perf_counter()
            method.execute()
            if i >= warmup:
                seconds.append(time.perf_counter() - start)
        result[name] = statistics.median(seconds)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="threads on both sides (default 1)")
    parser.add_argument("--iterations", type=int, default=300, help="timed runs per block and side (default 300)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed runs first (default 30)")
    parser.add_argument("--executorch-python", default=None,
                        help="python of the bench environment (default .venv-bench/bin/python, as bench-cpu)")
    parser.add_argument("--side", choices=("all", "xnnpack"), default="all", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads < 1 or args.iterations < 1 or args.warmup < 0:
        parser.error("--threads and --iterations must be at least 1, --warmup at least 0")
    found = blocks()
    if args.side == "xnnpack":
        print(json.dumps(time_xnnpack(found, args.threads, args.iterations, args.warmup)))
        return 0

    from _latency_common import executorch_python  # the other benches' lookup (ours side only)

    theirs: dict[str, float] = {}
    python = executorch_python(args.executorch_python)
    if python is None or not python.exists():
        print(f"[blocks] no bench environment ({python or '.venv-bench/bin/python'}; scripts/setup_bench.sh makes "
              "one): ours only", file=sys.stderr)
    else:
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
        proc = subprocess.run([str(python), __file__, "--side", "xnnpack", "--threads", str(args.threads),
                               "--iterations", str(args.iterations), "--warmup", str(args.warmup)],
                              env=env, capture_output=True, text=True, check=False)
        try:
            theirs = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            print(f"[blocks] XNNPACK side failed (exit {proc.returncode}):\n"
                  + "\n".join(proc.stderr.splitlines()[-15:]), file=sys.stderr)
    ours = time_ours(found, args.threads, args.iterations, args.warmup)

    print(f"MobileNetV2 block by block, {args.threads} thread(s), medians of {args.iterations} runs "
          "(XNNPACK's times include its NCHW <-> NHWC conversions at each block's edges: see the docstring)")
    print("| block | input | MFLOP | ours ms | XNNPACK ms | ours / XNNPACK | ours GFLOP/s | max|diff| |")
    print("|---|---|---|---|---|---|---|---|")
    def row(name: str, shape: str, mflop: float, ours_s: float, theirs_s: float | None, err: str) -> None:
        their = f"{theirs_s * 1e3:.3f} | {ours_s / theirs_s:.2f}" if theirs_s else "n/a | n/a"
        print(f"| {name} | {shape} | {mflop:.1f} | {ours_s * 1e3:.3f} | {their} | {mflop / 1e3 / ours_s:.1f} | {err} |")

    for name, _, x, mflop in found:
        row(name, "x".join(map(str, x.shape[1:])), mflop, ours[name][0], theirs.get(name), f"{ours[name][1]:.1e}")
    complete = all(name in theirs for name, *_ in found)
    row("sum", "", sum(mflop for *_, mflop in found), sum(seconds for seconds, _ in ours.values()),
        sum(theirs.values()) if complete else None, "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
