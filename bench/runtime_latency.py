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
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import etmlir
from _executorch_latency_worker import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    plan_iterations,
    time_runs,
)
from etmlir import models

GOAL_RATIO = 0.1  # etmlir latency <= 0.1x ExecuTorch's, per model
FALLBACK_EXECUTORCH_PYTHON = Path("/work/bench-venv/bin/python")


@dataclass
class Case:
    id: str                 # e.g. "nanogpt@256"
    model: str
    label: str              # e.g. "nanogpt T=256"
    inputs: tuple[torch.Tensor, ...]
    expected: list[torch.Tensor] = field(default_factory=list)
    eager: list[float] = field(default_factory=list)
    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)
    ours_diff: float | None = None
    theirs_diff: float | None = None
    ours_error: str | None = None
    theirs_error: str | None = None
    profile: list[tuple[str, int, float]] = field(default_factory=list)  # kernel, calls, seconds
    theirs_profile: list[tuple[str, int, float]] = field(default_factory=list)


def _flatten(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flatten(v)]
    return [torch.as_tensor(value)]


def max_abs_diff(outputs: Any, expected: list[torch.Tensor]) -> float:
    outputs = [torch.as_tensor(np.asarray(o)) if not isinstance(o, torch.Tensor) else o for o in outputs]
    if len(outputs) != len(expected):
        return float("inf")
    worst = 0.0
    for got, want in zip(outputs, expected):
        if tuple(got.shape) != tuple(want.shape):
            return float("inf")
        worst = max(worst, (got.double() - want.double()).abs().max().item() if want.numel() else 0.0)
    return worst


def make_cases(names: list[str], seq_lens: list[int]) -> dict[str, tuple[torch.nn.Module, Any, Any, list[Case]]]:
    """Per model: (eager model, example args, dynamic shapes, its cases with their inputs)."""
    built = {}
    for name in names:
        model, args, dynamic = models.build(name)
        if name == "nanogpt":
            vocab = model.cfg.vocab_size
            generator = torch.Generator().manual_seed(0)
            cases = [Case(f"{name}@{t}", name, f"{name} T={t}",
                          (torch.randint(0, vocab, (1, t), generator=generator),)) for t in seq_lens]
        else:
            cases = [Case(name, name, name, tuple(args))]
        built[name] = (model, args, dynamic, cases)
    return built


def run_eager(model: torch.nn.Module, case: Case, args: argparse.Namespace) -> None:
    with torch.no_grad():
        case.expected = [t.clone() for t in _flatten(model(*case.inputs))]

        def run() -> float:
            start = time.perf_counter()
            model(*case.inputs)
            return time.perf_counter() - start

        case.eager = time_runs(run, args.iterations, args.warmup, args.budget)


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


def run_ours(method: Any, case: Case, args: argparse.Namespace) -> None:
    # Arrays that stay alive for every execute (the method reads them in place).
    inputs = [np.ascontiguousarray(t.numpy()) for t in case.inputs]
    try:
        method(*inputs)
        iterations = args.iterations
        if iterations is None:
            probe = method.benchmark(*inputs, iterations=1, warmup=max(args.warmup, 1))
            iterations = plan_iterations(probe[0], args.budget)
            case.ours = method.benchmark(*inputs, iterations=iterations, warmup=0)
        else:
            case.ours = method.benchmark(*inputs, iterations=iterations, warmup=args.warmup)
        if args.profile:
            runs = [method.profile(*inputs) for _ in range(args.profile_runs)]
            totals: dict[str, float] = collections.defaultdict(float)
            calls: collections.Counter[str] = collections.Counter()
            for index, (kernel, _) in enumerate(runs[0]):
                totals[kernel] += statistics.median(run[index][1] for run in runs)
                calls[kernel] += 1
            case.profile = sorted(((k, calls[k], s) for k, s in totals.items()), key=lambda r: -r[2])
        # Checked after the timed runs, so a method that ran on the wrong data shows here.
        case.ours_diff = max_abs_diff(method(*inputs), case.expected)
    except Exception as e:  # noqa: BLE001 -- a benchmark reports and goes on
        case.ours_error = f"{type(e).__name__}: {e}"


def executorch_python(requested: str | None) -> Path | None:
    if requested:
        return Path(requested)
    for candidate in (REPO / ".venv-bench/bin/python", FALLBACK_EXECUTORCH_PYTHON):
        if candidate.exists():
            return candidate
    return None


def run_executorch(cases: list[Case], args: argparse.Namespace) -> dict[str, Any]:
    python = executorch_python(args.executorch_python)
    if python is None or not python.exists():
        message = f"no ExecuTorch environment ({python or '.venv-bench/bin/python'}; scripts/setup_bench.sh makes one)"
        for case in cases:
            case.theirs_error = message
        return {}
    with tempfile.TemporaryDirectory(prefix="etmlir-latency-") as tmp:
        request = {"min_iterations": MIN_ITERATIONS, "max_iterations": MAX_ITERATIONS, "cases": []}
        for case in cases:
            inputs = Path(tmp) / f"{case.id}.in.npz"
            np.savez(inputs, *[t.numpy() for t in case.inputs])
            request["cases"].append({"id": case.id, "model": case.model, "inputs": str(inputs),
                                     "outputs": str(Path(tmp) / f"{case.id}.out.npz"),
                                     "iterations": args.iterations, "warmup": args.warmup, "budget_s": args.budget,
                                     "profile_runs": args.profile_runs if args.profile else 0})
        (Path(tmp) / "request.json").write_text(json.dumps(request))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "python"),
                                                                        os.environ.get("PYTHONPATH")])))
        print(f"[bench] ExecuTorch worker: {python}", file=sys.stderr, flush=True)
        proc = subprocess.run([str(python), str(REPO / "bench/_executorch_latency_worker.py"),
                               str(Path(tmp) / "request.json")], check=False, env=env, capture_output=True, text=True)
        for line in proc.stderr.splitlines():
            if line.startswith("[et-worker]"):
                print(line, file=sys.stderr)
        try:
            result = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            tail = "\n".join(proc.stderr.splitlines()[-15:])
            print(f"[bench] ExecuTorch worker failed (exit {proc.returncode}):\n{tail}", file=sys.stderr)
            for case in cases:
                case.theirs_error = f"worker failed (exit {proc.returncode})"
            return {}
        for case in cases:
            got = result["cases"].get(case.id, {"error": "no result"})
            if "error" in got:
                case.theirs_error = got["error"]
                continue
            case.theirs = got["seconds"]
            case.theirs_profile = [tuple(row) for row in got.get("profile", [])]
            with np.load(Path(tmp) / f"{case.id}.out.npz") as npz:
                case.theirs_diff = max_abs_diff([npz[f"arr_{i}"] for i in range(len(npz.files))], case.expected)
        return result


def _ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1e3:.3f} ({len(seconds)})" if seconds else "-"


def _ratio(a: list[float], b: list[float]) -> str:
    return f"{statistics.median(a) / statistics.median(b):.3f}" if a and b else "-"


def _diff(value: float | None, error: str | None) -> str:
    return "error" if error else ("-" if value is None else f"{value:.2e}")


def _short(message: str, limit: int = 400) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[:limit] + " ..."


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
    et_result = {} if args.skip_executorch else run_executorch(cases, args)
    print_report(cases, et_result, build_s, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
