"""Benchmark: latency of each zoo model on etmlir's runtime vs torch eager vs ExecuTorch 1.5.1, one thread.

Run from the repository root with `make bench-latency`, or without make (our
environment; ExecuTorch in its own, made by scripts/setup_bench.sh, which
`make bench-memory` also uses):

    bash scripts/setup_bench.sh .venv-bench      # once: executorch==1.5.1 + torch 2.13.0
    OMP_NUM_THREADS=1 .venv/bin/python bench/runtime_latency.py [--models mlp nanogpt] [--seq-lens 64 256]
        [--iterations N] [--warmup W] [--budget S] [--skip-executorch] [--executorch-python PY]
        [--profile] [--profile-top 10]

Per model (nanogpt once per sequence length, from one program with its
dynamic sequence dim), on the same inputs:
  eager       torch eager, torch.set_num_threads(1), torch.no_grad(); time.perf_counter() per call
  etmlir      our .pte (etmlir.export -> to_edge -> to_executorch, inputs caller-owned: see
              build_ours) on etmlir.runtime with its portable kernels; Method.benchmark (the run loop
              is in C++), seconds per execute()
  ExecuTorch  ExecuTorch 1.5.1's own pipeline (torch.export -> exir.to_edge -> to_executorch, no
              partitioner) on the PyPI wheel's runtime, threadpool reset to one thread; measured by
              bench/_executorch_latency_worker.py in the bench environment (inputs go there as an
              .npz, outputs come back as an .npz, timings as JSON). That wheel's kernel library is
              ExecuTorch's "optimized" one: portable kernels except ~20 ops with optimized kernels
              (add/mul/sub/div, mm/bmm/linear, layer_norm, gelu, ...); the ops of each program
              that hit one are printed under the table. Those make its numbers lower than an
              all-portable build's, so etmlir/ET errs against us.
Every number is the median over repeated runs after warmup. Without --iterations
each measurement gets as many runs as fit in --budget seconds (at least 3,
at most 1000): a model whose single run exceeds budget/3 (ExecuTorch's
MobileNetV2 and nanogpt, over a second per run) runs 3 times after one warmup
run and takes longer than the budget. The runs used
are printed per cell. max|diff| is each runtime's largest absolute
difference from eager's outputs (ours: after the timed runs). --profile adds, per case, the top kernels
of one execute() (each instruction's median over --profile-runs runs, summed
per kernel): etmlir's from Method.profile beside ExecuTorch's from an ETDump
(the pip runtime's event tracer; kernels matched by name without namespace).
Prints numbers; never asserts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Cases, eager timing, the ExecuTorch worker call and table helpers: shared with bench/cpu_backend.py.
# (It sets OMP_NUM_THREADS & co. to 1 unless set, before numpy and torch load.)
from _latency_common import (FALLBACK_EXECUTORCH_PYTHON, Case, make_cases, run_eager,  # noqa: E402
                             run_executorch, run_ours)
from _latency_common import diff as _diff, ms as _ms, ratio as _ratio, short as _short  # noqa: E402

import torch  # noqa: E402

import etmlir  # noqa: E402
from _executorch_latency_worker import MAX_ITERATIONS, MIN_ITERATIONS  # noqa: E402
from etmlir import models  # noqa: E402

GOAL_RATIO = 0.1  # etmlir latency <= 0.1x ExecuTorch's, per model


def build_ours(model: torch.nn.Module, example_args: Any, dynamic: Any) -> tuple[Any, float]:
    """Our program with the default config (what `to_executorch()` ships: inputs and outputs planned).

    Method.benchmark sets the inputs again before every execute, outside the
    clock (the plan may reuse an input's bytes after its last use), as
    ExecuTorch's measurement does.
    """
    from etmlir import runtime as rt

    start = time.perf_counter()
    program = etmlir.to_edge(etmlir.export(model, example_args, dynamic)).to_executorch()
    seconds = time.perf_counter() - start
    return rt.load(program.buffer).method("forward"), seconds


def print_report(cases: list[Case], et_result: dict[str, Any], build_s: dict[str, float],
                 args: argparse.Namespace) -> None:
    et_info = (f"ExecuTorch {et_result['executorch']} (pip runtime, threadpool {et_result['threadpool_threads']})"
               if et_result else "ExecuTorch skipped" if args.skip_executorch else "ExecuTorch unavailable")
    print(f"\nLatency, threads: 1 (torch.set_num_threads(1), OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}); "
          f"torch {torch.__version__}; {et_info}; {os.cpu_count()} CPUs, load average "
          f"{args.load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print("median ms (runs) | max|diff| vs eager, etmlir / ExecuTorch\n")
    header = ("model", "eager ms", "etmlir ms", "ExecuTorch-portable ms", "etmlir/ET", "etmlir/eager",
              "max|diff| etmlir / ET")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for c in cases:
        print(" | ".join([c.label, _ms(c.eager), _ms(c.ours) if not c.ours_error else "error",
                          _ms(c.theirs) if not c.theirs_error else "error", _ratio(c.ours, c.theirs),
                          _ratio(c.ours, c.eager),
                          f"{_diff(c.ours_diff, c.ours_error)} / {_diff(c.theirs_diff, c.theirs_error)}"]))
    measured = [c for c in cases if c.ours and c.theirs]
    if measured:
        met = [c for c in measured if statistics.median(c.ours) <= GOAL_RATIO * statistics.median(c.theirs)]
        print(f"\ngoal etmlir <= {GOAL_RATIO}x ExecuTorch: met on {len(met)}/{len(measured)} "
              f"({', '.join(c.label for c in measured if c not in met) or 'all'}"
              f"{' missed' if len(met) < len(measured) else ''})")
    for c in cases:
        if c.ours_error:
            print(f"etmlir {c.label}: {_short(c.ours_error)}")
        if c.theirs_error and not args.skip_executorch:
            print(f"ExecuTorch {c.label}: {_short(c.theirs_error)}")
    if build_s:
        print("etmlir export+compile s: " + ", ".join(f"{m} {s:.1f}" for m, s in build_s.items()))
    for name, info in (et_result or {}).get("models", {}).items():
        print(f"ExecuTorch {name}: {len(info['ops'])} distinct ops, optimized kernels for "
              f"{', '.join(info['optimized_ops']) or 'none'} (portable for the rest)")
    for c in cases:
        if c.profile or c.theirs_profile:
            print_profile(c, args)


def _kernel_key(name: str) -> str:
    """ETDump names kernels without their namespace ("addmm.out"); ours have it ("aten::addmm.out")."""
    return name.split("::")[-1]


def print_profile(c: Case, args: argparse.Namespace) -> None:
    ours = {_kernel_key(k): (k, n, s) for k, n, s in c.profile}
    theirs = {_kernel_key(k): (k, n, s) for k, n, s in c.theirs_profile}
    ours_total = sum(s for _, _, s in c.profile)
    theirs_total = sum(s for _, _, s in c.theirs_profile)
    keys = [_kernel_key(k) for k, _, _ in c.profile[:args.profile_top]]
    keys += [_kernel_key(k) for k, _, _ in c.theirs_profile[:args.profile_top] if _kernel_key(k) not in keys]
    print(f"\nprofile, {c.label}: one execute(), median of {args.profile_runs} runs per instruction, summed per "
          f"kernel; etmlir {ours_total * 1e3:.3f} ms in {sum(n for _, n, _ in c.profile)} instructions"
          + (f", ExecuTorch {theirs_total * 1e3:.3f} ms in {sum(n for _, n, _ in c.theirs_profile)} kernel calls"
             if c.theirs_profile else "")
          + f"; top {args.profile_top} of each, by etmlir time")
    print("kernel | etmlir calls | etmlir ms | etmlir share | ET calls | ET ms | etmlir/ET")
    print(" | ".join("---" for _ in range(7)))
    for key in keys:
        name, n, s = ours.get(key, (None, 0, 0.0))
        their_name, tn, ts = theirs.get(key, (None, 0, 0.0))
        print(" | ".join([name or f"({their_name})", str(n) if name else "-", f"{s * 1e3:.3f}" if name else "-",
                          f"{s / ours_total:.1%}" if name and ours_total else "-", str(tn) if their_name else "-",
                          f"{ts * 1e3:.3f}" if their_name else "-", f"{s / ts:.3f}" if name and ts else "-"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(models.ZOO), choices=list(models.ZOO))
    parser.add_argument("--seq-lens", nargs="+", type=int, default=[64, 256], help="nanogpt sequence lengths")
    parser.add_argument("--iterations", type=int, default=None,
                        help=f"timed runs per measurement (default: fit --budget, {MIN_ITERATIONS}..{MAX_ITERATIONS})")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    parser.add_argument("--budget", type=float, default=3.0, help="seconds per measurement when adapting (default 3)")
    parser.add_argument("--skip-executorch", action="store_true", help="eager and etmlir only")
    parser.add_argument("--executorch-python", default=None,
                        help=f"python of the ExecuTorch 1.5.1 environment (default .venv-bench/bin/python, "
                             f"else {FALLBACK_EXECUTORCH_PYTHON})")
    parser.add_argument("--profile", action="store_true",
                        help="per-kernel profile of one execute(), etmlir (Method.profile) beside ExecuTorch (ETDump)")
    parser.add_argument("--profile-top", type=int, default=10)
    parser.add_argument("--profile-runs", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    args.load_before = os.getloadavg()[0]

    built = make_cases(args.models, args.seq_lens)
    cases = [c for _, _, _, model_cases in built.values() for c in model_cases]
    build_s: dict[str, float] = {}
    for name, (model, example_args, dynamic, model_cases) in built.items():
        for case in model_cases:
            print(f"[bench] {case.label}: eager", file=sys.stderr, flush=True)
            run_eager(model, case, args)
        print(f"[bench] {name}: etmlir export + compile + load", file=sys.stderr, flush=True)
        try:
            method, build_s[name] = build_ours(model, example_args, dynamic)
        except Exception as e:  # noqa: BLE001
            for case in model_cases:
                case.ours_error = f"{type(e).__name__}: {e}"
            continue
        for case in model_cases:
            print(f"[bench] {case.label}: etmlir", file=sys.stderr, flush=True)
            run_ours(method, case, args)
        del method
    et_result = {} if args.skip_executorch else run_executorch(
        cases, args, profile_runs=args.profile_runs if args.profile else 0)
    print_report(cases, et_result, build_s, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
