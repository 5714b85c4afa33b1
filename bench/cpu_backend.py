"""Benchmark: the `cpu` delegate vs ExecuTorch 1.5.1 with XNNPACK vs IREE 3.13 vs torch eager, at 1 and 2 threads.

Run from the repository root with `make bench-cpu`, or without make (ExecuTorch and IREE in their
own environment, made by scripts/setup_bench.sh):

    bash scripts/setup_bench.sh .venv-bench      # once: torch 2.13.0, executorch==1.5.1, iree 3.13.0, transformers
    .venv/bin/python bench/cpu_backend.py [--models mlp nanogpt llama resnet18] [--seq-lens 64 256]
        [--threads 1 2] [--iterations 30] [--warmup 50] [--rounds 3] [--backend cpu] [--skip-executorch]
        [--skip-iree] [--executorch-python PY] [--profile] [--profile-top 10]

Models (bench/_bench_models.py): the zoo (seed_cnn, mlp, mobilenet_v2, nanogpt) plus a LLaMA-style
decoder (transformers' LlamaForCausalLM, 4 layers x 256, GQA, seeded random weights) and a
ResNet-18 written out in the bench (BasicBlock x [2,2,2,2], batch norm, 224x224). The token models
(nanogpt, llama) run once per --seq-lens length, all from one program exported with a dynamic sequence
dim, on every side. Per case and thread count n (--threads, default 1 and 2), on the same inputs:
  ours        etmlir.export -> to_edge -> to_backend(partitioner(--backend)) -> to_executorch, compiled
              once; on etmlir.runtime, one Method per thread count loaded from the same .pte after
              set_cpu_threads(n) (the count is read at load); Method.benchmark (the run loop is in C++;
              inputs set again, untimed, before each execute), seconds per execute()
  XNNPACK     ExecuTorch 1.5.1: torch.export -> to_edge_transform_and_lower(partitioner=[XnnpackPartitioner()])
              -> to_executorch, on the PyPI wheel's pybindings runtime with its threadpool (which XNNPACK's
              runtimes use) reset to n threads before any method is loaded; timed in
              bench/_executorch_latency_worker.py in the bench environment, one launch per thread count
              (set_inputs outside the clock, perf_counter around execute())
  IREE        IREE 3.13 (iree-base-compiler/-runtime 3.13.0, iree-turbine): torch.export ->
              run_decompositions(turbine's AOT table) -> iree.turbine.aot.export -> iree-compile for
              llvm-cpu with --iree-llvmcpu-target-cpu=host --iree-opt-data-tiling=true, convolutions
              made channels-last by --iree-preprocessing-pass-pipeline=builtin.module(util.func(
              iree-preprocessing-convert-conv-to-channels-last)) and --iree-global-opt-propagate-transposes=true;
              run on the local-sync driver at 1 thread, local-task with --task_topology_max_group_count=n
              at n; timed in bench/_iree_latency_worker.py in the bench environment, one launch per
              thread count (inputs made device arrays outside the clock, perf_counter around the call)
  eager       torch eager, torch.set_num_threads(n), torch.no_grad(); perf_counter per call
Each side compiles each model once. Then --rounds rounds (default 3) measure every cell: --warmup
untimed runs (default 50: with 5, our 2-thread pool was still settling when the clock started, the
MLP measuring 0.078 ms instead of 0.048 and ResNet-18 29.5 ms instead of 19.0), then --iterations
timed runs (default 30); ours and eager in this process,
XNNPACK and IREE in one worker launch each per round and thread count (the first builds the
programs, later ones load them), and the sides take turns going first, so a load change on a shared
machine hits all four. Every cell is the median of all its timed runs (rounds x iterations); the
per-round medians are printed too. max|diff| is the largest absolute difference from eager's outputs
(same thread count), read after the timed runs (worst round).
Goals, per case: at 1 thread ours <= 0.8x min(XNNPACK, IREE); at 2 threads ours <= 0.8x XNNPACK@2.
Also printed:
  - the header: the CPU, its vector flags (avx512f, avx2 yes/no) and which microkernel ISA ours ran:
    the cpu backend builds payloads for the compiling host, its microkernels at gcc
    -march=etmlir.backends.cpu.target.host().march (x86-64-v4: the AVX-512 path, x86-64-v3: AVX2+FMA,
    anything else: the portable C path);
  - the 2-thread speedup over 1 thread per case, each side (with --threads 1 2);
  - compile seconds, export -> program bytes, wall clock: ours, and the part in to_backend
    (partitioning, outlining and the delegates' native compile); ExecuTorch's, and the part in
    to_edge_transform_and_lower; IREE's, and the part in iree-compile. Each side compiles the models
    in the same order in one process, so the first model also pays that side's one-time imports;
  - what ours and XNNPACK delegated: delegate calls and the kernel calls left outside them in one
    execute() (ours from Method.profile's instruction names, ExecuTorch's from the program's
    instruction list), with the ops left outside XNNPACK;
  - a thread check per cell, over its warmup and timed runs: the calling thread's CPU time per run
    (a mean, set_inputs included; other processes on the machine do not change it), the CPU time of
    every other thread of the process as a share of the calling thread's (~0% at one thread, whatever
    the machine's load; at 2 threads the workers' share shows whether a second thread did work), and
    the process's CPU time over the wall time (below 1 when it waited for a core).
--profile adds the top instructions of one execute() of ours per case and thread count (Method.profile,
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

# Cases, eager timing, the worker calls and table helpers: shared with bench/runtime_latency.py.
# (It sets OMP_NUM_THREADS & co. to 1 unless set, before numpy and torch load.)
from _latency_common import (FALLBACK_EXECUTORCH_PYTHON, Case, cpu_description, cpu_flags, diff,  # noqa: E402
                             make_cases, ms, ratio, run_eager, run_executorch, run_iree, run_ours, short, usage_text)

import torch  # noqa: E402

import _bench_models  # noqa: E402
import etmlir  # noqa: E402
from etmlir import runtime as rt  # noqa: E402

GOAL_RATIO = 0.8  # ours <= 0.8x the baseline's latency, per case: min(XNNPACK, IREE) at 1 thread, XNNPACK above
CONTROL_INSTRUCTIONS = frozenset({"move", "free", "jump_false"})
KINDS = ("ours", "theirs", "iree", "eager")  # Case fields: ours, ExecuTorch-XNNPACK, IREE, torch eager
COLUMNS = {"ours": "ours", "theirs": "ET-XNNPACK", "iree": "IREE", "eager": "eager"}
MARCH_PATHS = {"x86-64-v4": "AVX-512 path", "x86-64-v3": "AVX2+FMA path"}


def microkernel_isa() -> str:
    """Which microkernel path the cpu backend's payloads run here: its gcc -march for this host."""
    try:
        from etmlir.backends.cpu import target

        march = target.host().march
    except Exception as e:  # noqa: BLE001 -- the header says why rather than the bench dying
        return f"unknown ({type(e).__name__}: {e})"
    return f"gcc -march={march} ({MARCH_PATHS.get(march, 'portable C path')})"


def flags_summary() -> str:
    flags = cpu_flags()
    return ", ".join(f"{flag} {'yes' if flag in flags else 'no'}" for flag in ("avx512f", "avx2", "fma"))


def build_ours(model: torch.nn.Module, example_args: Any, dynamic: Any, backend: str) -> tuple[bytes, dict]:
    """The .pte of `model` with `backend`'s partitioner, and compile seconds: total_s (export -> .pte bytes)
    and to_backend_s."""
    start = time.perf_counter()
    partitioner = etmlir.backends.partitioner(backend)
    # Ops the backend runs whole (the cpu backend's fused attention) stay undecomposed.
    config = etmlir.EdgeCompileConfig(keep=partitioner.ops_to_keep())
    edge = etmlir.to_edge(etmlir.export(model, example_args, dynamic_shapes=dynamic), config)
    partition_start = time.perf_counter()
    edge = edge.to_backend(partitioner)
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


def goal_text(threads: int) -> str:
    return (f"ours <= {GOAL_RATIO}x min(XNNPACK, IREE)" if threads == 1
            else f"ours <= {GOAL_RATIO}x XNNPACK@{threads}")


def goal(c: Case, threads: int) -> tuple[bool, str] | None:
    """(met, what it was measured against) of the case's goal at `threads`; None without the numbers."""
    if not c.ours:
        return None
    baselines = ("theirs", "iree") if threads == 1 else ("theirs",)
    measured = {kind: statistics.median(getattr(c, kind)) for kind in baselines if getattr(c, kind)}
    if not measured:
        return None
    kind = min(measured, key=measured.get)
    against = (f"min: {COLUMNS[kind]}" if len(measured) == len(baselines) > 1
               else COLUMNS[kind] + (" only" if len(baselines) > 1 else ""))
    return statistics.median(c.ours) <= GOAL_RATIO * measured[kind], against


def _table(header: tuple[str, ...], rows: list[list[str]]) -> None:
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for row in rows:
        print(" | ".join(row))


def _speedup(one: list[float], many: list[float]) -> str:
    return f"{statistics.median(one) / statistics.median(many):.2f}x" if one and many else "-"


def print_report(cases_at: dict[int, list[Case]], built: dict[str, Any], et_results: dict[int, dict],
                 iree_results: dict[int, dict], compile_s: dict[str, dict], cpu_threads: dict[int, int],
                 args: argparse.Namespace) -> None:
    ours = f"ours ({args.backend})"
    counts = list(cases_at)
    et_any = next((r for r in et_results.values() if r), {})
    iree_any = next((r for r in iree_results.values() if r), {})
    print(f"\n{args.backend} delegate vs ExecuTorch-XNNPACK vs IREE vs torch eager, at "
          f"{' and '.join(map(str, counts))} thread(s)")
    print(f"CPU: {cpu_description()}; {os.cpu_count()} CPUs online; {flags_summary()}; load average "
          f"{args.load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"{ours} microkernels: {microkernel_isa()}, built for this host (etmlir.backends.cpu.target.host())")
    print(f"versions: torch {torch.__version__}; "
          + (f"ExecuTorch {et_any['executorch']} (pip runtime, torch {et_any['torch']})" if et_any
             else "ExecuTorch -")
          + "; " + (f"IREE compiler {iree_any['iree_compiler']}, runtime {iree_any['iree_runtime']}, iree-turbine "
                    f"{iree_any['iree_turbine']}" if iree_any else "IREE -"))
    if iree_any:
        print(f"IREE: iree-compile (llvm-cpu) {' '.join(iree_any['flags'])}")
    for n in counts:
        et, iree = et_results.get(n), iree_results.get(n)
        print(f"threads {n}: torch {n} (torch.set_num_threads), etmlir cpu delegate {cpu_threads.get(n, '-')} "
              f"(set_cpu_threads before load), "
              + (f"ExecuTorch threadpool {et['threadpool_threads']} (XNNPACK's runtimes use it), "
                 if et else "ExecuTorch not run, ")
              + (f"IREE {iree['driver']}" + (f" --task_topology_max_group_count={n}" if n > 1 else "")
                 if iree else "IREE not run"))
    print(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; median ms (runs) over {args.rounds} round(s) of "
          f"{args.warmup} warmup + {args.iterations} timed runs per cell, the sides' order alternating between "
          f"rounds; same inputs for all four; load average at the rounds' starts "
          f"{', '.join(f'{x:.2f}' for x in args.round_loads)}")

    errors: dict[tuple[str, str, str], list[int]] = collections.defaultdict(list)
    for n, cases in cases_at.items():
        print(f"\n{n} thread(s); goal: {goal_text(n)}\n")
        rows = []
        for c in cases:
            met = goal(c, n)
            rows.append([c.label, "error" if c.ours_error else ms(c.ours), "error" if c.theirs_error else ms(c.theirs),
                         "error" if c.iree_error else ms(c.iree), ms(c.eager), ratio(c.ours, c.theirs),
                         ratio(c.ours, c.iree), ratio(c.ours, c.eager),
                         f"{diff(c.ours_diff, c.ours_error)} / {diff(c.theirs_diff, c.theirs_error)} / "
                         f"{diff(c.iree_diff, c.iree_error)}",
                         "-" if met is None else f"{'met' if met[0] else 'not met'} ({met[1]})"])
            for side, error in ((ours, c.ours_error), ("ExecuTorch-XNNPACK", c.theirs_error),
                                ("IREE", c.iree_error)):
                if error and not (side == "ExecuTorch-XNNPACK" and args.skip_executorch) \
                        and not (side == "IREE" and args.skip_iree):
                    errors[(side, c.label, short(error))].append(n)
        _table(("model", f"{ours} ms", "ET-XNNPACK ms", "IREE ms", "eager ms", "ours/XNNPACK", "ours/IREE",
                "ours/eager", "max|diff| ours / XNNPACK / IREE", goal_text(n)), rows)
        measured = [c for c in cases if goal(c, n) is not None]
        missed = [c.label for c in measured if not goal(c, n)[0]]
        print(f"\ngoal at {n} thread(s), {goal_text(n)}: met on {len(measured) - len(missed)}/{len(measured)}"
              + (f" (not met: {', '.join(missed)})" if missed else "")
              + (f"; {len(cases) - len(measured)} case(s) without the numbers" if len(measured) < len(cases)
                 else ""))
    if errors:
        print()
    for (side, label, error), at in errors.items():
        print(f"{side} {label} ({'/'.join(map(str, at))} thread(s)): {error}")

    if len(counts) > 1:
        one = counts[0]
        for n in counts[1:]:
            print(f"\n{n}-thread speedup over {one} thread(s): median@{one} / median@{n} (above 1: faster)\n")
            by_id = {c.id: c for c in cases_at[one]}
            _table(("model",) + tuple(COLUMNS[k] for k in KINDS),
                   [[c.label] + [_speedup(getattr(by_id[c.id], k), getattr(c, k)) for k in KINDS]
                    for c in cases_at[n]])

    if args.rounds > 1:
        for n, cases in cases_at.items():
            print(f"\nper-round medians at {n} thread(s), ms (round 1 / 2 / ...; the spread shows the machine's "
                  f"noise)\n")
            seconds = args.rounds_seconds[n]
            _table(("model",) + tuple(COLUMNS[k] for k in KINDS),
                   [[c.label] + [" / ".join(f"{statistics.median(r) * 1e3:.3f}" for r in seconds[c.id][k]) or "-"
                                 for k in KINDS] for c in cases])

    et_models: dict[str, Any] = {}
    iree_models: dict[str, Any] = {}
    for results, side_models in ((et_results, et_models), (iree_results, iree_models)):
        for r in results.values():
            for name, info in r.get("models", {}).items():
                side_models.setdefault(name, info)
    print("\ncompile: export -> program bytes, wall s (the first model also pays each side's one-time imports)\n")
    rows = []
    for name in built:
        mine = compile_s.get(name, {})
        theirs = et_models.get(name, {}).get("build", {})
        iree = iree_models.get(name, {})
        rows.append([name, f"{mine['total_s']:.2f}" if mine else "error",
                     f"{mine['to_backend_s']:.2f}" if mine else "-",
                     f"{theirs['total_s']:.2f}" if theirs else "-", f"{theirs['lower_s']:.2f}" if theirs else "-",
                     f"{iree['total_s']:.2f}" if iree else "-", f"{iree['compile_s']:.2f}" if iree else "-",
                     f"{mine['total_s'] / theirs['total_s']:.2f}" if mine and theirs else "-",
                     f"{mine['total_s'] / iree['total_s']:.2f}" if mine and iree else "-"])
    _table(("model", "ours s", "of which to_backend s", "ET-XNNPACK s", "of which to_edge_transform_and_lower s",
            "IREE s", "of which iree-compile s", "ours/ET", "ours/IREE"), rows)

    print("\ndelegation: instructions of one execute() (delegate calls / kernel calls outside them)\n")
    first = {c.id: c for c in cases_at[counts[0]]}
    rows = []
    for name, (_, _, _, model_cases) in built.items():
        names = next((first[c.id].ours_instructions for c in model_cases if first[c.id].ours_instructions), None)
        mine = instruction_summary(names, args.backend) if names else None
        info = et_models.get(name, {}).get("instructions")
        rows.append([name, f"{mine[0]} / {sum(mine[1].values())}" if mine else "-",
                     f"{sum(info['delegate_calls'].values())} / {info['kernel_calls']}" if info else "-",
                     _counts(info["outside_ops"]) if info else "-", _counts(mine[1]) if mine else "-"])
    _table(("model", "ours", "ET-XNNPACK", "ops outside XNNPACK (calls)", "ops outside ours (calls)"), rows)

    for n, cases in cases_at.items():
        print(f"\nthread check at {n} thread(s), per cell over its warmup + timed runs: the calling thread's CPU ms "
              f"per run (mean, set_inputs included), the other threads' CPU time (share of the calling thread's), "
              f"process CPU / wall\n")
        _table(("model",) + tuple(COLUMNS[k] for k in KINDS),
               [[c.label] + [usage_text(getattr(c, f"{k}_usage")) for k in KINDS] for c in cases])
    if args.profile:
        for n, cases in cases_at.items():
            for c in cases:
                if c.profile:
                    print_profile(c, n, args)


def print_profile(c: Case, threads: int, args: argparse.Namespace) -> None:
    total = sum(s for _, _, s in c.profile)
    print(f"\nprofile, ours, {c.label}, {threads} thread(s): one execute(), median of {args.profile_runs} runs per "
          f"instruction, summed per kernel/delegate; {total * 1e3:.3f} ms in {sum(n for _, n, _ in c.profile)} "
          f"instructions; top {args.profile_top}")
    _table(("instruction", "calls", "ms", "share"),
           [[name, str(n), f"{s * 1e3:.3f}" if total else "-", f"{s / total:.1%}" if total else "-"]
            for name, n, s in c.profile[:args.profile_top]])


class Pool:
    """Each cell's runs over the rounds: per case and side, the seconds of each round, the summed
    cpu_usage() and the worst max|diff|."""

    DIFF_KINDS = ("ours", "theirs", "iree")

    def __init__(self, cases: list[Case]) -> None:
        self.seconds: dict[str, dict[str, list[list[float]]]] = {c.id: {k: [] for k in KINDS} for c in cases}
        self.usage: dict[str, dict[str, dict[str, float]]] = {c.id: {k: {} for k in KINDS} for c in cases}
        self.diff: dict[str, dict[str, float | None]] = {c.id: {k: None for k in self.DIFF_KINDS} for c in cases}

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
        for kind in self.DIFF_KINDS:
            value = getattr(case, f"{kind}_diff")
            if value is not None:
                worst = self.diff[case.id][kind]
                self.diff[case.id][kind] = value if worst is None else max(worst, value)

    def finish(self, case: Case) -> None:
        """Puts every round's runs back into the case (the medians are over all of them)."""
        for kind in KINDS:
            setattr(case, kind, [s for one_round in self.seconds[case.id][kind] for s in one_round])
            setattr(case, f"{kind}_usage", self.usage[case.id][kind])
        for kind in self.DIFF_KINDS:
            setattr(case, f"{kind}_diff", self.diff[case.id][kind])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(_bench_models.MODELS), choices=list(_bench_models.MODELS))
    parser.add_argument("--seq-lens", nargs="+", type=int, default=[64, 256],
                        help="sequence lengths of the token models, nanogpt and llama (2..256; default 64 256)")
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2],
                        help="thread counts, each measured on every side (default 1 2)")
    parser.add_argument("--iterations", type=int, default=30, help="timed runs per cell and round (default 30)")
    parser.add_argument("--warmup", type=int, default=50, help="untimed runs first, per cell and round (default 50)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="measure every cell this many times, alternating the sides' order (default 3)")
    parser.add_argument("--backend", default="cpu", choices=etmlir.backends.backend_ids(),
                        help="our partitioner/backend (default cpu)")
    parser.add_argument("--skip-executorch", action="store_true", help="no ExecuTorch-XNNPACK column")
    parser.add_argument("--skip-iree", action="store_true", help="no IREE column")
    parser.add_argument("--executorch-python", default=None,
                        help=f"python of the bench environment, ExecuTorch 1.5.1 and IREE 3.13 (default "
                             f".venv-bench/bin/python, else {FALLBACK_EXECUTORCH_PYTHON})")
    parser.add_argument("--profile", action="store_true", help="top instructions of one execute() of ours")
    parser.add_argument("--profile-top", type=int, default=10)
    parser.add_argument("--profile-runs", type=int, default=3)
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.rounds < 1:
        parser.error("--iterations and --rounds must be at least 1")
    if min(args.threads) < 1:
        parser.error("--threads must be at least 1")
    args.threads = list(dict.fromkeys(args.threads))
    args.budget = 0.0  # fixed iteration counts: the adaptive budget of the shared helpers is unused
    args.load_before = os.getloadavg()[0]
    torch.set_num_threads(args.threads[0])

    built = make_cases(args.models, args.seq_lens)
    # One set of cases per thread count, on the same input tensors.
    cases_at: dict[int, list[Case]] = {}
    model_cases_at: dict[int, dict[str, list[Case]]] = {}
    for n in args.threads:
        model_cases_at[n] = {name: [Case(c.id, c.model, c.label, c.inputs) for c in model_cases]
                             for name, (_, _, _, model_cases) in built.items()}
        cases_at[n] = [c for model_cases in model_cases_at[n].values() for c in model_cases]
    compile_s: dict[str, dict] = {}
    methods: dict[tuple[str, int], Any] = {}
    cpu_threads: dict[int, int] = {}
    for name, (model, example_args, dynamic, _) in built.items():
        print(f"[bench] {name}: export -> to_backend({args.backend}) -> .pte", file=sys.stderr, flush=True)
        try:
            pte, compile_s[name] = build_ours(model, example_args, dynamic, args.backend)
            for n in args.threads:
                rt.set_cpu_threads(n)  # read when the method is loaded
                methods[(name, n)] = rt.load(pte).method("forward")
                cpu_threads[n] = rt.cpu_threads()
        except Exception as e:  # noqa: BLE001 -- a benchmark reports and goes on
            for n in args.threads:
                for case in model_cases_at[n][name]:
                    case.ours_error = f"{type(e).__name__}: {e}"

    def measure_here(n: int, round_args: argparse.Namespace) -> None:
        torch.set_num_threads(n)
        for name, (model, _, _, _) in built.items():
            for case in model_cases_at[n][name]:
                print(f"[bench] {case.label} @{n}: eager", file=sys.stderr, flush=True)
                run_eager(model, case, round_args)
                if (name, n) in methods:
                    print(f"[bench] {case.label} @{n}: ours", file=sys.stderr, flush=True)
                    run_ours(methods[(name, n)], case, round_args)

    pools = {n: Pool(cases) for n, cases in cases_at.items()}
    et_results: dict[int, dict[str, Any]] = {}
    iree_results: dict[int, dict[str, Any]] = {}
    args.round_loads = []
    with tempfile.TemporaryDirectory(prefix="etmlir-cpu-bench-") as program_dir:
        # Each worker keeps its programs in its own folder (both write MODEL.json beside them).
        pte_dir, vmfb_dir = os.path.join(program_dir, "executorch"), os.path.join(program_dir, "iree")
        os.mkdir(pte_dir)
        os.mkdir(vmfb_dir)
        for index in range(args.rounds):
            args.round_loads.append(os.getloadavg()[0])
            print(f"[bench] round {index + 1}/{args.rounds}", file=sys.stderr, flush=True)
            round_args = argparse.Namespace(**vars(args))
            round_args.profile = args.profile and index == 0
            for n in args.threads:
                def measure_executorch(n: int = n) -> None:
                    # The first launch builds the programs (and reports the compile times); later ones load them.
                    result = run_executorch(cases_at[n], args, partitioner="xnnpack", threads=n, pte_dir=pte_dir)
                    if result:
                        et_results.setdefault(n, result)

                def measure_iree(n: int = n) -> None:
                    # Same for IREE's modules (one module serves every thread count).
                    result = run_iree(cases_at[n], args, threads=n, vmfb_dir=vmfb_dir)
                    if result:
                        iree_results.setdefault(n, result)

                steps = ([lambda n=n: measure_here(n, round_args)]
                         + ([] if args.skip_executorch else [measure_executorch])
                         + ([] if args.skip_iree else [measure_iree]))
                for step in steps if index % 2 == 0 else reversed(steps):
                    step()
                for case in cases_at[n]:
                    pools[n].collect(case)
    for n, cases in cases_at.items():
        for case in cases:
            pools[n].finish(case)
    args.rounds_seconds = {n: pool.seconds for n, pool in pools.items()}
    print_report(cases_at, built, et_results, iree_results, compile_s, cpu_threads, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
