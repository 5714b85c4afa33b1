"""Benchmark: the `vulkan` delegate on this machine's Vulkan device vs our portable runtime vs torch eager.

Run from the repository root with `make bench-vulkan`, or without make:

    .venv/bin/python bench/vulkan_backend.py [--models mlp nanogpt] [--seq-lens 64 256] [--runs 10]
        [--warmup 0] [--budget 10]

It prints the device the runtime's `vulkan` backend opened
(etmlir.runtime.backend_status("vulkan")) and stops with exit status 1 when
there is none. On lavapipe (Mesa's Vulkan driver on the CPU; what
scripts/setup.sh installs and CI runs) the vulkan column is a functional
check of the whole path (partition -> SPIR-V -> dispatch graph -> Vulkan
queue) at CPU speed, not a GPU number: lavapipe runs each compute shader's
workgroups through LLVM-compiled CPU code, which is slower than our portable
kernels. On a real GPU the same table is the GPU figure.

Per zoo model (nanogpt once per sequence length, from one program with its
dynamic sequence dim), on the same inputs:
  vulkan    etmlir.export -> to_edge -> to_backend(partitioner("vulkan")) -> to_executorch, on
            etmlir.runtime; nanogpt's partitioner gets compile_specs={"sizes": "<--seq-lens>"}, so its
            one .pte holds a dispatch graph per listed length
  portable  the same edge program without to_backend: our portable kernels
  eager     torch eager, torch.set_num_threads(1), torch.no_grad(); perf_counter per call
Both of ours are timed by Method.benchmark (the run loop is in C++; inputs
set again, untimed, before each execute), as bench/cpu_backend.py and
bench/runtime_latency.py time them, with set_backend_threads(1). Threads:
torch and OMP at 1; lavapipe's own compute pool at LP_NUM_THREADS=1 unless
set (lavapipe executes a submission on its queue thread while the calling
thread waits, so the thread check below reports process CPU, not the
calling thread's).

One lavapipe call takes from about a millisecond (seed_cnn) to tens of
seconds (nanogpt T=256), so the run counts are small and adapt. Each of our
cells makes one checked call first (its outputs give max|diff|, the largest
absolute difference from eager's; its time sizes the timed runs), then
Method.benchmark's own untimed input-setting execute, --warmup untimed runs
(default 0) and the timed runs: as many as fit in --budget seconds (default
10; 0: always --runs) at the checked call's speed, at least one, at most
--runs (default 10). Eager makes its reference call (the outputs ours are
checked against), --warmup + 1 untimed runs and --runs timed runs. Every
cell is the median of its timed runs; the count is printed beside it. The
default settings take about three minutes on lavapipe with two cores, most
of it nanogpt's vulkan calls. One round, in the order eager, vulkan,
portable per case (bench/cpu_backend.py alternates rounds; here a second
round would double the lavapipe minutes for a figure that is a check).
Each model is compiled once per path; compile seconds (export -> .pte
bytes) and what went to the vulkan delegates
(etmlir.devtools.delegation_info) are printed under the table, and a thread
check per cell: the process's CPU time per run and over the wall time.
Prints numbers; never asserts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# lavapipe sizes its compute thread pool from LP_NUM_THREADS when the Vulkan device is created; one
# thread, as for every other column, unless the caller picked a count.
os.environ.setdefault("LP_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Cases, eager timing and table helpers: shared with bench/runtime_latency.py and bench/cpu_backend.py.
# (It sets OMP_NUM_THREADS & co. to 1 unless set, before numpy and torch load.)
from _executorch_latency_worker import cpu_usage, plan_iterations  # noqa: E402
from _latency_common import (Case, cpu_description, diff, make_cases, max_abs_diff, ms, ratio,  # noqa: E402
                             run_eager, short)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import etmlir  # noqa: E402
from etmlir import models  # noqa: E402
from etmlir.devtools import delegation_info  # noqa: E402

BACKEND = "vulkan"
KINDS = ("vulkan", "portable")


@dataclass
class Cell:
    """One of our runtimes on one case: seconds per timed run, cpu_usage() of the Method.benchmark call
    (with "runs"), max|diff| from eager, or the error that stopped it."""

    seconds: list[float] = field(default_factory=list)
    usage: dict[str, float] = field(default_factory=dict)
    diff: float | None = None
    error: str | None = None


@dataclass
class Built:
    """One model's compiled program on one path: the loaded method, compile seconds and delegation."""

    method: Any = None
    total_s: float = 0.0
    to_backend_s: float = 0.0
    pte_bytes: int = 0
    delegation: Any = None  # etmlir.devtools.DelegationInfo of the vulkan path's edge program
    error: str | None = None


def build(model: torch.nn.Module, example_args: Any, dynamic: Any, kind: str, seq_lens: list[int]) -> Built:
    """Our program of `model` on path `kind` ("vulkan": delegated; "portable": no to_backend), loaded."""
    from etmlir import runtime as rt

    built = Built()
    try:
        start = time.perf_counter()
        edge = etmlir.to_edge(etmlir.export(model, example_args, dynamic_shapes=dynamic))
        if kind == BACKEND:
            specs = {"sizes": ",".join(str(t) for t in seq_lens)} if dynamic else None
            partition_start = time.perf_counter()
            edge = edge.to_backend(etmlir.backends.partitioner(BACKEND, compile_specs=specs))
            built.to_backend_s = time.perf_counter() - partition_start
            built.delegation = delegation_info(edge)
        data = edge.to_executorch().buffer
        built.total_s = time.perf_counter() - start
        built.pte_bytes = len(data)
        built.method = rt.load(data).method("forward")
    except Exception as e:  # noqa: BLE001 -- a benchmark reports and goes on
        built.error = f"{type(e).__name__}: {e}"
    return built


def run_method(method: Any, case: Case, args: argparse.Namespace) -> Cell:
    """Times a loaded Method on the case's inputs: one checked call (max|diff| from case.expected, and the
    speed that sizes the timed runs), then Method.benchmark with --warmup and the timed runs."""
    cell = Cell()
    # Arrays that stay alive for every execute (the method reads them in place).
    inputs = [np.ascontiguousarray(t.numpy()) for t in case.inputs]
    try:
        start = time.perf_counter()
        outputs = method.call_flat(*inputs)
        first_s = time.perf_counter() - start
        cell.diff = max_abs_diff(list(outputs), case.expected)
        runs = plan_iterations(first_s, args.budget, minimum=1, maximum=args.runs) if args.budget else args.runs
        cell.seconds, cell.usage = cpu_usage(lambda: method.benchmark(*inputs, iterations=runs, warmup=args.warmup))
        cell.usage["runs"] = 1 + args.warmup + runs  # benchmark() runs the method once first
    except Exception as e:  # noqa: BLE001 -- a benchmark reports and goes on
        cell.error = f"{type(e).__name__}: {e}"
    return cell


def cores_text(usage: dict[str, float]) -> str:
    """'12.345 ms, 0.99 cores' for a cpu_usage() dict with "runs": the process's CPU time per run (mean, untimed
    runs included) and the process's CPU time over the wall time (how many cores the cell kept busy)."""
    if not usage or not usage.get("wall_s"):
        return "-"
    per_run = f"{usage['process_cpu_s'] / usage['runs'] * 1e3:.3f} ms, " if usage.get("runs") else ""
    return f"{per_run}{usage['process_cpu_s'] / usage['wall_s']:.2f} cores"


def delegated_text(info: Any) -> str:
    """'153 of 153 ops in 1 delegate' from a DelegationInfo."""
    if info is None:
        return "-"
    counts = info.backends.get(BACKEND)
    delegated = counts.delegated_ops if counts else 0
    total = info.num_delegated_ops + info.num_non_delegated_ops
    subgraphs = counts.subgraphs if counts else 0
    return f"{delegated} of {total} ops in {subgraphs} delegate{'s' if subgraphs != 1 else ''}"


def print_report(cases: list[Case], cells: dict[str, dict[str, Cell]], built: dict[str, dict[str, Built]],
                 status: dict[str, Any], args: argparse.Namespace) -> None:
    from etmlir import runtime as rt

    print("\nvulkan delegate vs our portable runtime vs torch eager")
    print(f"Vulkan device: {status['device'] or '(the driver gave no name)'}"
          + ("; lavapipe runs Vulkan on the CPU: the vulkan column is a functional check, not a GPU number"
             if "llvmpipe" in status["device"].lower() or "lavapipe" in status["device"].lower() else ""))
    print(f"CPU: {cpu_description()}; {os.cpu_count()} CPUs online; load average {args.load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    print(f"threads: torch {torch.get_num_threads()} (torch.set_num_threads), OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS')}, etmlir backends {rt.backend_threads()} (set_backend_threads), "
          f"LP_NUM_THREADS={os.environ.get('LP_NUM_THREADS')} (lavapipe's compute pool)")
    print(f"versions: torch {torch.__version__}")
    budget = f"as many as fit in {args.budget:g} s, at most {args.runs}, at least 1" if args.budget else str(args.runs)
    print(f"median ms (timed runs) per cell: one checked call, {args.warmup} warmup run(s) after "
          f"Method.benchmark's first execute, then timed runs: {budget}; same inputs for all three\n")

    header = ("model", "vulkan ms", "portable ms", "eager ms", "vulkan/portable", "vulkan/eager",
              "max|diff| vulkan / portable")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for c in cases:
        vk, pt = cells[c.id]["vulkan"], cells[c.id]["portable"]
        print(" | ".join([c.label, "error" if vk.error else ms(vk.seconds), "error" if pt.error else ms(pt.seconds),
                          ms(c.eager), ratio(vk.seconds, pt.seconds), ratio(vk.seconds, c.eager),
                          f"{diff(vk.diff, vk.error)} / {diff(pt.diff, pt.error)}"]))
    for c in cases:
        for kind in KINDS:
            if cells[c.id][kind].error:
                print(f"{kind} {c.label}: {short(cells[c.id][kind].error)}")

    print("\ncompile: export -> .pte bytes, wall s (the first model also pays the one-time imports and compilers); "
          "what went to the vulkan delegates (etmlir.devtools.delegation_info)\n")
    header = ("model", "vulkan s", "of which to_backend s", "portable s", "vulkan .pte bytes", "delegated")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for name, paths in built.items():
        vk, pt = paths["vulkan"], paths["portable"]
        print(" | ".join([name, "error" if vk.error else f"{vk.total_s:.2f}",
                          "-" if vk.error else f"{vk.to_backend_s:.2f}", "error" if pt.error else f"{pt.total_s:.2f}",
                          "-" if vk.error else str(vk.pte_bytes), delegated_text(vk.delegation)]))
    for name, paths in built.items():
        for kind in KINDS:
            if paths[kind].error:
                print(f"{kind} {name}: {short(paths[kind].error)}")

    print("\nthread check, per cell: the process's CPU ms per run (mean, untimed runs included), and its CPU time "
          "over the wall time (cores kept busy)\n")
    header = ("model", "vulkan", "portable", "eager")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for c in cases:
        print(" | ".join([c.label, cores_text(cells[c.id]["vulkan"].usage), cores_text(cells[c.id]["portable"].usage),
                          cores_text(c.eager_usage)]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(models.ZOO), choices=list(models.ZOO))
    parser.add_argument("--seq-lens", nargs="+", type=int, default=[64, 256],
                        help="nanogpt sequence lengths, all from one .pte (default 64 256)")
    parser.add_argument("--runs", "--iterations", dest="runs", type=int, default=10,
                        help="timed runs per cell, at most (default 10; see --budget)")
    parser.add_argument("--warmup", type=int, default=0,
                        help="untimed runs per cell besides the checked call and benchmark's first (default 0)")
    parser.add_argument("--budget", type=float, default=10.0,
                        help="seconds of timed runs per cell; fewer than --runs when they would take longer, "
                             "at least one (default 10; 0: always --runs)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0 or args.budget < 0:
        parser.error("--runs must be at least 1, --warmup and --budget at least 0")
    torch.set_num_threads(1)
    from etmlir import runtime as rt

    rt.set_backend_threads(1)  # before any method is loaded
    if BACKEND not in rt.compiled_backends():
        print(f"error: this etmlir.runtime was built without the {BACKEND} backend "
              f"(it has: {', '.join(rt.compiled_backends())})", file=sys.stderr)
        return 1
    status = rt.backend_status(BACKEND)
    print(f"[bench] Vulkan device: {status['device'] or '-'}" if status["available"] else
          f"[bench] no Vulkan device: {status['reason']}", file=sys.stderr, flush=True)
    if not status["available"]:
        print(f"error: the vulkan backend cannot run here: {status['reason']}\n"
              f"  install a Vulkan driver (scripts/setup.sh installs lavapipe, Mesa's CPU driver) and rerun",
              file=sys.stderr)
        return 1
    args.load_before = os.getloadavg()[0]

    models_built = make_cases(args.models, args.seq_lens)
    cases = [c for _, _, _, model_cases in models_built.values() for c in model_cases]
    built: dict[str, dict[str, Built]] = {}
    cells: dict[str, dict[str, Cell]] = {}
    for name, (model, example_args, dynamic, model_cases) in models_built.items():
        built[name] = {}
        for kind in KINDS:
            print(f"[bench] {name}: export -> {'to_backend(vulkan) -> ' if kind == BACKEND else ''}.pte ({kind})",
                  file=sys.stderr, flush=True)
            built[name][kind] = build(model, example_args, dynamic, kind, args.seq_lens)
        for case in model_cases:
            print(f"[bench] {case.label}: eager", file=sys.stderr, flush=True)
            # One more warmup run stands for Method.benchmark's first execute; always --runs timed runs.
            eager_args = argparse.Namespace(iterations=args.runs, warmup=args.warmup + 1, budget=0.0)
            run_eager(model, case, eager_args)  # also case.expected, what our outputs are checked against
            cells[case.id] = {}
            for kind in KINDS:
                print(f"[bench] {case.label}: {kind}", file=sys.stderr, flush=True)
                program = built[name][kind]
                cells[case.id][kind] = (Cell(error=program.error) if program.error
                                        else run_method(program.method, case, args))
        for kind in KINDS:
            built[name][kind].method = None  # frees the delegate's device memory before the next model
    print_report(cases, cells, built, status, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
