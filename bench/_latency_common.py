"""Shared pieces of the latency benchmarks (bench/runtime_latency.py, bench/cpu_backend.py).

The cases (one per model of bench/_bench_models.py, a token model once per
sequence length from one program), eager timing, max|diff|, the worker calls
(bench/_executorch_latency_worker.py and bench/_iree_latency_worker.py, run
with the bench environment's python), the host description and the table
helpers. The timing helpers themselves (time_runs, plan_iterations,
cpu_usage) live in the ExecuTorch worker, which must import without etmlir's
native extension.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
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
if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

from _executorch_latency_worker import (MAX_ITERATIONS, MIN_ITERATIONS, cpu_usage, plan_iterations,  # noqa: E402
                                        time_runs)
import _bench_models  # noqa: E402

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
    iree: list[float] = field(default_factory=list)  # bench/cpu_backend.py's IREE column
    iree_diff: float | None = None
    iree_error: str | None = None
    profile: list[tuple[str, int, float]] = field(default_factory=list)  # kernel, calls, seconds
    theirs_profile: list[tuple[str, int, float]] = field(default_factory=list)
    # Thread checks: cpu_usage() of the timed runs (wall, process CPU, calling thread's CPU, threads).
    eager_usage: dict[str, float] = field(default_factory=dict)
    ours_usage: dict[str, float] = field(default_factory=dict)
    theirs_usage: dict[str, float] = field(default_factory=dict)
    iree_usage: dict[str, float] = field(default_factory=dict)
    ours_instructions: list[str] = field(default_factory=list)  # instruction names of one execute()


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
    """Per model: (eager model, example args, dynamic shapes, its cases with their inputs).

    A token model (nanogpt, llama) gets one case per sequence length (seeded
    token ids), all run by the one program exported with its dynamic sequence
    dim; every other model one case on its example inputs. Names: the zoo's
    and bench/_bench_models.py's.
    """
    built = {}
    for name in names:
        model, args, dynamic = _bench_models.build(name)
        if name in _bench_models.TOKEN_MODELS:
            vocab = _bench_models.vocab_size(model)
            generator = torch.Generator().manual_seed(0)
            cases = [Case(f"{name}@{t}", name, f"{name} T={t}",
                          (torch.randint(0, vocab, (1, t), generator=generator),)) for t in seq_lens]
        else:
            cases = [Case(name, name, name, tuple(args))]
        built[name] = (model, args, dynamic, cases)
    return built


def run_eager(model: torch.nn.Module, case: Case, args: argparse.Namespace) -> None:
    """torch eager under no_grad (torch.set_num_threads(1) is the caller's); expected outputs too."""
    with torch.no_grad():
        case.expected = [t.clone() for t in _flatten(model(*case.inputs))]

        runs = 0

        def run() -> float:
            nonlocal runs
            runs += 1
            start = time.perf_counter()
            model(*case.inputs)
            return time.perf_counter() - start

        case.eager, case.eager_usage = cpu_usage(
            lambda: time_runs(run, args.iterations, args.warmup, args.budget))
        case.eager_usage["runs"] = runs


def profile_totals(runs: list[list[tuple[str, float]]]) -> list[tuple[str, int, float]]:
    """(name, calls, seconds) per instruction name from Method.profile runs: each instruction's median
    over the runs, summed per name; slowest first."""
    totals: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter[str] = collections.Counter()
    for index, (kernel, _) in enumerate(runs[0]):
        totals[kernel] += statistics.median(run[index][1] for run in runs)
        calls[kernel] += 1
    return sorted(((k, calls[k], s) for k, s in totals.items()), key=lambda r: -r[2])


def run_ours(method: Any, case: Case, args: argparse.Namespace) -> None:
    """Times a loaded etmlir.runtime Method on the case's inputs with Method.benchmark (the run loop is in C++;
    inputs set again, untimed, before each execute). args: iterations (None: fit args.budget), warmup,
    profile, profile_runs. Fills ours, ours_usage, ours_instructions, profile, ours_diff or ours_error."""
    # Arrays that stay alive for every execute (the method reads them in place).
    inputs = [np.ascontiguousarray(t.numpy()) for t in case.inputs]
    try:
        method(*inputs)
        iterations = args.iterations
        if iterations is None:
            probe = method.benchmark(*inputs, iterations=1, warmup=max(args.warmup, 1))
            iterations = plan_iterations(probe[0], args.budget)
            case.ours, case.ours_usage = cpu_usage(lambda: method.benchmark(*inputs, iterations=iterations,
                                                                             warmup=0))
            case.ours_usage["runs"] = 1 + iterations  # benchmark() runs the method once first
        else:
            case.ours, case.ours_usage = cpu_usage(lambda: method.benchmark(*inputs, iterations=iterations,
                                                                             warmup=args.warmup))
            case.ours_usage["runs"] = 1 + args.warmup + iterations
        profiles = [method.profile(*inputs) for _ in range(args.profile_runs if args.profile else 1)]
        case.ours_instructions = [name for name, _ in profiles[0]]
        if args.profile:
            case.profile = profile_totals(profiles)
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


def run_executorch(cases: list[Case], args: argparse.Namespace, partitioner: str | None = None,
                   threads: int = 1, profile_runs: int = 0, pte_dir: str | None = None) -> dict[str, Any]:
    """Times `cases` in the ExecuTorch worker (bench environment); fills their theirs* fields.

    partitioner: None (no delegates: portable/optimized kernels) or "xnnpack"
    (to_edge_transform_and_lower with XnnpackPartitioner). threads: the
    ExecuTorch threadpool's size. profile_runs > 0: per-kernel profile from an
    ETDump too. pte_dir: where the worker keeps the programs it builds for
    later calls (same partitioner). Returns the worker's JSON result ({} when
    it failed).
    """
    request = {"partitioner": partitioner, "threads": threads, "pte_dir": pte_dir}
    return run_worker("_executorch_latency_worker.py", "ExecuTorch", "theirs", cases, args, request,
                      {"profile_runs": profile_runs})


def run_iree(cases: list[Case], args: argparse.Namespace, threads: int = 1,
             vmfb_dir: str | None = None) -> dict[str, Any]:
    """Times `cases` in the IREE worker (bench environment); fills their iree* fields.

    threads: 1 runs IREE's local-sync driver, n > 1 its local-task driver
    with n workers. vmfb_dir: where the worker keeps the modules it compiles
    for later calls. Returns the worker's JSON result ({} when it failed).
    """
    return run_worker("_iree_latency_worker.py", "IREE", "iree", cases, args,
                      {"threads": threads, "vmfb_dir": vmfb_dir}, {})


def run_worker(script: str, what: str, kind: str, cases: list[Case], args: argparse.Namespace,
               request_fields: dict[str, Any], case_fields: dict[str, Any]) -> dict[str, Any]:
    """Runs bench/`script` with the bench environment's python on `cases` (inputs go there as an .npz,
    outputs come back as an .npz, timings as JSON) and fills the cases' `kind` fields: `kind` (seconds),
    `kind`_usage, `kind`_diff (max|diff| vs case.expected) or `kind`_error. Returns the worker's JSON
    result ({} when it failed)."""
    python = executorch_python(args.executorch_python)
    if python is None or not python.exists():
        message = f"no bench environment ({python or '.venv-bench/bin/python'}; scripts/setup_bench.sh makes one)"
        for case in cases:
            setattr(case, f"{kind}_error", message)
        return {}
    with tempfile.TemporaryDirectory(prefix="etmlir-latency-") as tmp:
        request = {"min_iterations": MIN_ITERATIONS, "max_iterations": MAX_ITERATIONS, **request_fields,
                   "cases": []}
        for case in cases:
            inputs = Path(tmp) / f"{case.id}.in.npz"
            np.savez(inputs, *[t.numpy() for t in case.inputs])
            request["cases"].append({"id": case.id, "model": case.model, "inputs": str(inputs),
                                     "outputs": str(Path(tmp) / f"{case.id}.out.npz"),
                                     "iterations": args.iterations, "warmup": args.warmup,
                                     "budget_s": args.budget, **case_fields})
        (Path(tmp) / "request.json").write_text(json.dumps(request))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "python"),
                                                                        os.environ.get("PYTHONPATH")])))
        print(f"[bench] {what} worker: {python}", file=sys.stderr, flush=True)
        proc = subprocess.run([str(python), str(REPO / "bench" / script), str(Path(tmp) / "request.json")],
                              check=False, env=env, capture_output=True, text=True)
        for line in proc.stderr.splitlines():
            if line.startswith(("[et-worker]", "[iree-worker]")):
                print(line, file=sys.stderr)
        try:
            result = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            tail = "\n".join(proc.stderr.splitlines()[-15:])
            print(f"[bench] {what} worker failed (exit {proc.returncode}):\n{tail}", file=sys.stderr)
            for case in cases:
                setattr(case, f"{kind}_error", f"worker failed (exit {proc.returncode})")
            return {}
        for case in cases:
            got = result["cases"].get(case.id, {"error": "no result"})
            if "error" in got:
                setattr(case, f"{kind}_error", got["error"])
                continue
            setattr(case, kind, got["seconds"])
            setattr(case, f"{kind}_usage", got.get("usage", {}))
            if kind == "theirs":
                case.theirs_profile = [tuple(row) for row in got.get("profile", [])]
            with np.load(Path(tmp) / f"{case.id}.out.npz") as npz:
                setattr(case, f"{kind}_diff",
                        max_abs_diff([npz[f"arr_{i}"] for i in range(len(npz.files))], case.expected))
        return result


def cpu_flags() -> set[str]:
    """The flags of /proc/cpuinfo's first CPU (empty where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def cpu_description() -> str:
    """The CPU's model name, family/model and vector extensions, from /proc/cpuinfo."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or platform.machine()
    flags = set(info.get("flags", "").split())
    vector = [f for f in ("avx512f", "avx512_bf16", "avx512_vnni", "avx2", "fma", "neon") if f in flags]
    return (f"{info.get('model name', platform.machine())} (family {info.get('cpu family', '?')} model "
            f"{info.get('model', '?')}; {', '.join(vector) or 'no AVX'})")


def usage_text(usage: dict[str, float]) -> str:
    """'1.234 ms, other 0.0%, cpu/wall 0.99' for a cpu_usage() dict with "runs": the calling thread's CPU
    time per run (mean, set_inputs included: close to the latency on an idle machine, and unaffected by other
    processes), the CPU time of the other threads as a share of the calling thread's, and the process's CPU
    time over the wall time (below 1: it waited, e.g. for a core other processes held)."""
    if not usage or not usage.get("wall_s"):
        return "-"
    other = max(0.0, usage["process_cpu_s"] - usage["thread_cpu_s"])
    share = other / usage["thread_cpu_s"] if usage["thread_cpu_s"] else 0.0
    per_run = f"{usage['thread_cpu_s'] / usage['runs'] * 1e3:.3f} ms, " if usage.get("runs") else ""
    return f"{per_run}other {share:.1%}, cpu/wall {usage['process_cpu_s'] / usage['wall_s']:.2f}"


def ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1e3:.3f} ({len(seconds)})" if seconds else "-"


def ratio(a: list[float], b: list[float]) -> str:
    return f"{statistics.median(a) / statistics.median(b):.3f}" if a and b else "-"


def diff(value: float | None, error: str | None) -> str:
    return "error" if error else ("-" if value is None else f"{value:.2e}")


def short(message: str, limit: int = 400) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[:limit] + " ..."
