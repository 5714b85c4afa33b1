"""Benchmark: what the cpu backend's timed regions (et-cpu-trace-regions) cost when nothing traces.

Every region of a cpu payload calls two hooks that test one pointer when no tracer is attached.
This compiles one zoo model twice with the cpu backend, with regions (the default) and with the
compile spec trace_regions=false, and times both untraced in this process (Method.benchmark, one
thread for the portable kernels and the delegates), interleaved round after round so drift hits
both alike. It also checks that a traced run's Inspector total agrees with the untraced latency
(etmlir.devtools.latency_check) and prints the Inspector's top rows: the ops inside the delegates.

    OMP_NUM_THREADS=1 .venv/bin/python bench/cpu_region_overhead.py [--model nanogpt] [--rounds 15]
        [--iterations 10] [--top 15]

Prints numbers; never asserts. The goal (issue 21): regions / no regions within 1% untraced.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import etmlir  # noqa: E402
from etmlir import backends, models  # noqa: E402
from etmlir import runtime as rt  # noqa: E402
from etmlir.devtools import Inspector, latency_check  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="nanogpt", choices=sorted(models.ZOO))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rt.set_backend_threads(1)
    model, example, dynamic = models.build(args.model)

    def compile_with(specs: dict[str, str]) -> bytes:
        start = time.perf_counter()
        edge = etmlir.to_edge(etmlir.export(model, example, dynamic))
        data = edge.to_backend(backends.partitioner("cpu", compile_specs=specs)).to_executorch().buffer
        print(f"compiled {args.model} with cpu compile specs {specs or '{}'} in {time.perf_counter() - start:.1f} s")
        return data

    with_regions, without = compile_with({}), compile_with({"trace_regions": "false"})
    inputs = [a.numpy() if isinstance(a, torch.Tensor) else np.asarray(a) for a in example]
    on = rt.load(with_regions, allow_native_code=True).method("forward")
    off = rt.load(without, allow_native_code=True).method("forward")
    times_on: list[float] = []
    times_off: list[float] = []
    for r in range(args.rounds):
        pair = [(off, times_off), (on, times_on)]
        for method, times in (pair if r % 2 == 0 else pair[::-1]):
            times += method.benchmark(*inputs, iterations=args.iterations, warmup=2)
    med_on, med_off = statistics.median(times_on), statistics.median(times_off)
    print(f"untraced, 1 thread, {args.rounds} rounds x {args.iterations} runs: regions {med_on * 1e3:.3f} ms, "
          f"no regions {med_off * 1e3:.3f} ms, ratio {med_on / med_off:.4f}")
    inspector = Inspector(pte=with_regions, trace=on.trace(*inputs, runs=args.iterations))
    print(inspector.table(top=args.top))
    for _ in range(2):
        print(latency_check(with_regions, tuple(inputs), runs=30, allow_native_code=True))


if __name__ == "__main__":
    main()
