"""Benchmark: the `cpu` delegate vs ExecuTorch 1.5.1 with XNNPACK vs torch eager, one thread.

Run from the repository root with `make bench-cpu`, or without make (ExecuTorch
in its own environment, made by scripts/setup_bench.sh):

    bash scripts/setup_bench.sh .venv-bench      # once: executorch==1.5.1 + torch 2.13.0
    .venv/bin/python bench/cpu_backend.py [--models mlp nanogpt] [--seq-lens 64 256] [--iterations 30]
        [--warmup 5] [--rounds 3] [--backend cpu] [--skip-executorch] [--executorch-python PY]
        [--executorch-threads 1] [--profile] [--profile-top 10]

Per zoo model (nanogpt once per sequence length, from one program with its
dynamic sequence dim), on the same inputs:
  ours        etmlir.export -> to_edge -> to_backend(partitioner(--backend)) -> to_executorch, on
              etmlir.runtime with set_cpu_threads(1); Method.benchmark (the run loop is in C++; inputs
              set again, untimed, before each execute), seconds per execute()
  XNNPACK     ExecuTorch 1.5.1: torch.export -> to_edge_transform_and_lower(partitioner=[XnnpackPartitioner()])
              -> to_executorch, on the PyPI wheel's pybindings runtime with its threadpool (which XNNPACK's
              runtimes use) reset to one thread before any method is loaded; timed in
              bench/_executorch_latency_worker.py in the bench environment (set_inputs outside the clock,
              perf_counter around execute())
  eager       torch eager, torch.set_num_threads(1), torch.no_grad(); perf_counter per call
Each side compiles each model once. Then --rounds rounds (default 3) measure
every cell: --warmup untimed runs (default 5), then --iterations timed runs
(default 30); ours and eager in this process, XNNPACK in one worker launch
per round (the first builds the programs, later ones load them), and the two
take turns going first, so a load change on a shared machine hits all three.
Every cell is the median of all its timed runs (rounds x iterations); the
per-round medians are printed too. max|diff| is the largest absolute
difference from eager's outputs, read after the timed runs (worst round).
Also printed:
  - compile seconds, export -> .pte bytes, wall clock: ours, and the part in
    to_backend (partitioning, outlining and the delegates' native compile);
    ExecuTorch's, and the part in to_edge_transform_and_lower. Each side
    compiles the models in the same order in one process, so the first model
    also pays that side's one-time imports;
  - what each side delegated: delegate calls and the kernel calls left outside
    them in one execute() (ours from Method.profile's instruction names,
    ExecuTorch's from the program's instruction list), with the ops left
    outside XNNPACK;
  - a thread check per cell, over its warmup and timed runs: the calling
    thread's CPU time per run (a mean, set_inputs included; other processes
    on the machine do not change it, so it cross-checks the medians on a
    loaded machine), the CPU time of every other thread of the process as a
    share of the calling thread's (all three execute on the calling thread:
    ~0% means one thread, whatever the machine's load), and the process's CPU
    time over the wall time (below 1 when it waited for a core). Run with
    --executorch-threads 2 to see what a second XNNPACK thread looks like
    there (the comparison itself is always at one thread).
--profile adds the top instructions of one execute() of ours per case (Method.profile,
median of --profile-runs runs per instruction, summed per kernel or delegate).
Prints numbers; never asserts.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Cases, eager timing, the ExecuTorch worker call and table helpers: shared with bench/runtime_latency.py.
# (It sets OMP_NUM_THREADS & co. to 1 unless set, before numpy and torch load.)
from _latency_common import (FALLBACK_EXECUTORCH_PYTHON, Case, cpu_description, diff, make_cases, ms,  # noqa: E402
                             ratio, run_eager, run_executorch, run_ours, short, usage_text)

import torch  # noqa: E402

import etmlir  # noqa: E402
from etmlir import models  # noqa: E402

GOAL_RATIO = 0.8  # ours <= 0.8x ExecuTorch-XNNPACK's latency, per case
CONTROL_INSTRUCTIONS = frozenset({"move", "free", "jump_false"})


def set_cpu_threads(n: int) -> str:
    """Sets the runtime's cpu-delegate thread count for methods loaded from now on; returns what it is."""
    from etmlir import runtime as rt

    setter = getattr(rt, "set_cpu_threads", None) or getattr(rt._runtime, "set_cpu_threads", None)
    getter = getattr(rt, "cpu_threads", None) or getattr(rt._runtime, "cpu_threads", None)
    if setter is None:
        return "n/a (this etmlir.runtime has no set_cpu_threads)"
    setter(n)
    return str(getter()) if getter else str(n)


def build_ours(model: torch.nn.Module, example_args: Any, dynamic: Any, backend: str) -> tuple[bytes, dict]:
    """The .pte of `model` with `backend`'s partitioner, and compile seconds: total_s (export -> .pte bytes)
    and to_backend_s."""
    start = time.perf_counter()
    edge = etmlir.to_edge(etmlir.export(model, example_args, dynamic_shapes=dynamic))
    partition_start = time.perf_counter()
    edge = edge.to_backend(etmlir.backends.partitioner(backend))
    partition_end = time.perf_counter()
    pte = edge.to_executorch().buffer
    end = time.perf_counter()
    return pte, {"total_s": end - start, "to_backend_s": partition_end - partition_start}


def instruction_summary(names: list[str], backend: str) -> tuple[int, collections.Counter[str]]:
    """(delegate calls, kernel calls per op outside the delegates) of one execute()'s instruction names."""
    delegates = sum(1 for n in names if n == backend or ("::" not in n and n not in CONTROL_INSTRUCTIONS))
    outside = collections.Counter(n for n in names if "::" in n)
    return delegates, outside


def _counts(counter: dict[str, int], top: int = 8) -> str:
    items = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{name.split('::')[-1]} x{n}" for name, n in items[:top])
    return text + (f", ... ({len(items) - top} more)" if len(items) > top else "") if items else "none"


def goal_met(c: Case) -> bool | None:
    if not (c.ours and c.theirs):
        return None
    return statistics.median(c.ours) <= GOAL_RATIO * statistics.median(c.theirs)


def print_report(cases: list[Case], built: dict[str, Any], et_result: dict[str, Any], compile_s: dict[str, dict],
                 cpu_threads: str, args: argparse.Namespace) -> None:
    ours = f"ours ({args.backend})"
    print(f"\n{args.backend} delegate vs ExecuTorch-XNNPACK vs torch eager, one thread")
    print(f"CPU: {cpu_description()}; {os.cpu_count()} CPUs online; load average {args.load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    et_threads = (f"ExecuTorch threadpool {et_result['threadpool_threads']} (XNNPACK's runtimes use it), "
                  f"worker torch {et_result['torch_threads']}" if et_result else "ExecuTorch not run")
    print(f"threads: torch {torch.get_num_threads()} (torch.set_num_threads), OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS')}, etmlir cpu delegate {cpu_threads} (set_cpu_threads), {et_threads}")
    print(f"versions: torch {torch.__version__}; "
          + (f"ExecuTorch {et_result['executorch']} (pip runtime, torch {et_result['torch']})" if et_result
             else "ExecuTorch -"))
    print(f"median ms (runs) over {args.rounds} round(s) of {args.warmup} warmup + {args.iterations} timed runs per "
          f"cell, the runtimes' order alternating between rounds; same inputs for all three; load average at the "
          f"rounds' starts {', '.join(f'{x:.2f}' for x in args.round_loads)}\n")

    header = ("model", f"{ours} ms", "ET-XNNPACK ms", "eager ms", "ours/XNNPACK", "ours/eager",
              "max|diff| ours / XNNPACK", f"ours <= {GOAL_RATIO}x XNNPACK")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for c in cases:
        met = goal_met(c)
        print(" | ".join([c.label, "error" if c.ours_error else ms(c.ours),
                          "error" if c.theirs_error else ms(c.theirs), ms(c.eager), ratio(c.ours, c.theirs),
                          ratio(c.ours, c.eager), f"{diff(c.ours_diff, c.ours_error)} / "
                          f"{diff(c.theirs_diff, c.theirs_error)}",
                          "-" if met is None else "met" if met else "not met"]))
    measured = [c for c in cases if goal_met(c) is not None]
    missed = [c.label for c in measured if not goal_met(c)]
    print(f"\ngoal: ours <= {GOAL_RATIO}x XNNPACK: met on {len(measured) - len(missed)}/{len(measured)}"
          + (f" (not met: {', '.join(missed)})" if missed else "")
          + (f"; {len(cases) - len(measured)} case(s) without both numbers" if len(measured) < len(cases) else ""))
    for c in cases:
        if c.ours_error:
            print(f"{ours} {c.label}: {short(c.ours_error)}")
        if c.theirs_error and not args.skip_executorch:
            print(f"ExecuTorch-XNNPACK {c.label}: {short(c.theirs_error)}")

    if args.rounds > 1:
        print("\nper-round medians, ms (round 1 / 2 / ...; the spread shows the machine's noise)\n")
        header = ("model", "ours", "ET-XNNPACK", "eager")
        print(" | ".join(header))
        print(" | ".join("---" for _ in header))
        for c in cases:
            rounds = args.rounds_seconds[c.id]
            print(" | ".join([c.label] + [" / ".join(f"{statistics.median(r) * 1e3:.3f}" for r in rounds[kind]) or "-"
                                          for kind in KINDS]))

    et_models = (et_result or {}).get("models", {})
    print("\ncompile: export -> .pte bytes, wall s (the first model also pays each side's one-time imports)\n")
    header = ("model", "ours s", "of which to_backend s", "ET-XNNPACK s", "of which to_edge_transform_and_lower s",
              "ours/ET")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for name in built:
        mine = compile_s.get(name, {})
        theirs = et_models.get(name, {}).get("build", {})
        print(" | ".join([name, f"{mine['total_s']:.2f}" if mine else "error",
                          f"{mine['to_backend_s']:.2f}" if mine else "-",
                          f"{theirs['total_s']:.2f}" if theirs else "-", f"{theirs['lower_s']:.2f}" if theirs else "-",
                          f"{mine['total_s'] / theirs['total_s']:.2f}" if mine and theirs else "-"]))

    print("\ndelegation: instructions of one execute() (delegate calls / kernel calls outside them)\n")
    header = ("model", "ours", "ET-XNNPACK", "ops outside XNNPACK (calls)", "ops outside ours (calls)")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for name, (_, _, _, model_cases) in built.items():
        names = next((c.ours_instructions for c in model_cases if c.ours_instructions), None)
        mine = instruction_summary(names, args.backend) if names else None
        info = et_models.get(name, {}).get("instructions")
        print(" | ".join([name, f"{mine[0]} / {sum(mine[1].values())}" if mine else "-",
                          f"{sum(info['delegate_calls'].values())} / {info['kernel_calls']}" if info else "-",
                          _counts(info["outside_ops"]) if info else "-", _counts(mine[1]) if mine else "-"]))

    print("\nthread check, per cell over its warmup + timed runs: the calling thread's CPU ms per run (mean, "
          "set_inputs included), the other threads' CPU time (share of the calling thread's), process CPU / wall\n")
    header = ("model", "ours", "ET-XNNPACK", "eager")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for c in cases:
        print(" | ".join([c.label, usage_text(c.ours_usage), usage_text(c.theirs_usage), usage_text(c.eager_usage)]))
    if args.profile:
        for c in cases:
            if c.profile:
                print_profile(c, args)


def print_profile(c: Case, args: argparse.Namespace) -> None:
    total = sum(s for _, _, s in c.profile)
    print(f"\nprofile, ours, {c.label}: one execute(), median of {args.profile_runs} runs per instruction, summed per "
          f"kernel/delegate; {total * 1e3:.3f} ms in {sum(n for _, n, _ in c.profile)} instructions; "
          f"top {args.profile_top}")
    print("instruction | calls | ms | share")
    print(" | ".join("---" for _ in range(4)))
    for name, n, s in c.profile[:args.profile_top]:
        print(f"{name} | {n} | {s * 1e3:.3f} | {s / total:.1%}" if total else f"{name} | {n} | - | -")


KINDS = ("ours", "theirs", "eager")


class Pool:
    """Each cell's runs over the rounds: per case and runtime, the seconds of each round, the summed
    cpu_usage() and the worst max|diff|."""

    def __init__(self, cases: list[Case]) -> None:
        self.seconds: dict[str, dict[str, list[list[float]]]] = {c.id: {k: [] for k in KINDS} for c in cases}
        self.usage: dict[str, dict[str, dict[str, float]]] = {c.id: {k: {} for k in KINDS} for c in cases}
        self.diff: dict[str, dict[str, float | None]] = {c.id: {"ours": None, "theirs": None} for c in cases}

    def collect(self, case: Case) -> None:
        """Moves the case's latest measurements (what the run_* helpers set) into the pool."""
        for kind in KINDS:
            if getattr(case, kind):
                self.seconds[case.id][kind].append(list(getattr(case, kind)))
            total = self.usage[case.id][kind]
            for key, value in getattr(case, f"{kind}_usage").items():
                total[key] = max(total.get(key, 0), value) if key == "threads" else total.get(key, 0) + value
            setattr(case, kind, [])
            setattr(case, f"{kind}_usage", {})
        for kind in ("ours", "theirs"):
            value = getattr(case, f"{kind}_diff")
            if value is not None:
                worst = self.diff[case.id][kind]
                self.diff[case.id][kind] = value if worst is None else max(worst, value)

    def finish(self, case: Case) -> None:
        """Puts every round's runs back into the case (the medians are over all of them)."""
        for kind in KINDS:
            setattr(case, kind, [s for one_round in self.seconds[case.id][kind] for s in one_round])
            setattr(case, f"{kind}_usage", self.usage[case.id][kind])
        for kind in ("ours", "theirs"):
            setattr(case, f"{kind}_diff", self.diff[case.id][kind])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(models.ZOO), choices=list(models.ZOO))
    parser.add_argument("--seq-lens", nargs="+", type=int, default=[64, 256], help="nanogpt sequence lengths")
    parser.add_argument("--iterations", type=int, default=30, help="timed runs per cell and round (default 30)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs first, per cell and round (default 5)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="measure every cell this many times, alternating the runtimes' order (default 3)")
    parser.add_argument("--backend", default="cpu", choices=etmlir.backends.backend_ids(),
                        help="our partitioner/backend (default cpu)")
    parser.add_argument("--skip-executorch", action="store_true", help="ours and eager only")
    parser.add_argument("--executorch-python", default=None,
                        help=f"python of the ExecuTorch 1.5.1 environment (default .venv-bench/bin/python, "
                             f"else {FALLBACK_EXECUTORCH_PYTHON})")
    parser.add_argument("--executorch-threads", type=int, default=1,
                        help="ExecuTorch threadpool size; only to see what the thread check shows for more "
                             "than one (default 1)")
    parser.add_argument("--profile", action="store_true", help="top instructions of one execute() of ours")
    parser.add_argument("--profile-top", type=int, default=10)
    parser.add_argument("--profile-runs", type=int, default=3)
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.rounds < 1:
        parser.error("--iterations and --rounds must be at least 1")
    args.budget = 0.0  # fixed iteration counts: the adaptive budget of the shared helpers is unused
    torch.set_num_threads(1)
    cpu_threads = set_cpu_threads(1)  # before any method is loaded
    args.load_before = os.getloadavg()[0]
    from etmlir import runtime as rt

    built = make_cases(args.models, args.seq_lens)
    cases = [c for _, _, _, model_cases in built.values() for c in model_cases]
    compile_s: dict[str, dict] = {}
    methods: dict[str, Any] = {}
    for name, (model, example_args, dynamic, model_cases) in built.items():
        print(f"[bench] {name}: export -> to_backend({args.backend}) -> .pte", file=sys.stderr, flush=True)
        try:
            pte, compile_s[name] = build_ours(model, example_args, dynamic, args.backend)
            methods[name] = rt.load(pte).method("forward")
        except Exception as e:  # noqa: BLE001 -- a benchmark reports and goes on
            for case in model_cases:
                case.ours_error = f"{type(e).__name__}: {e}"

    def measure_here(round_args: argparse.Namespace) -> None:
        for name, (model, _, _, model_cases) in built.items():
            for case in model_cases:
                print(f"[bench] {case.label}: eager", file=sys.stderr, flush=True)
                run_eager(model, case, round_args)
                if name in methods:
                    print(f"[bench] {case.label}: ours", file=sys.stderr, flush=True)
                    run_ours(methods[name], case, round_args)

    pool = Pool(cases)
    et_result: dict[str, Any] = {}
    args.round_loads = []
    with tempfile.TemporaryDirectory(prefix="etmlir-cpu-bench-") as pte_dir:
        for index in range(args.rounds):
            args.round_loads.append(os.getloadavg()[0])
            print(f"[bench] round {index + 1}/{args.rounds}", file=sys.stderr, flush=True)
            round_args = argparse.Namespace(**vars(args))
            round_args.profile = args.profile and index == 0

            def measure_executorch() -> None:
                # The first round builds the programs (and reports the compile times); later ones load them.
                result = run_executorch(cases, args, partitioner="xnnpack", threads=args.executorch_threads,
                                        pte_dir=pte_dir)
                for key, value in result.items():
                    et_result.setdefault(key, value)

            steps = [lambda: measure_here(round_args)] + ([] if args.skip_executorch else [measure_executorch])
            for step in steps if index % 2 == 0 else reversed(steps):
                step()
            for case in cases:
                pool.collect(case)
    for case in cases:
        pool.finish(case)
    args.rounds_seconds = pool.seconds
    print_report(cases, built, et_result, compile_s, cpu_threads, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
