"""Latency benchmark, ExecuTorch half: times ExecuTorch 1.5.1's runtime on the benchmark models.

Launched by bench/runtime_latency.py and bench/cpu_backend.py (through
bench/_latency_common.py) with the bench environment's python
(executorch==1.5.1, torch 2.13.0; etmlir's native extension is not needed,
only `etmlir.models` through PYTHONPATH=<repo>/python). The models are
bench/_bench_models.py's: the zoo, plus the llama decoder and ResNet-18 that
bench/cpu_backend.py adds:

    PYTHONPATH=python .venv-bench/bin/python bench/_executorch_latency_worker.py REQUEST.json

REQUEST.json: {"cases": [{"id", "model", "inputs" (an .npz: arr_0, arr_1, ...),
"outputs" (an .npz to write), "iterations" (null: adapt to the time budget),
"warmup", "budget_s", "profile_runs" (0: none)}], "min_iterations",
"max_iterations", "partitioner" (null or absent: none; "xnnpack"), "threads"
(the threadpool's size, default 1), "pte_dir" (optional: a folder where each
model's program is saved, MODEL.pte + MODEL.json, and loaded from by later
requests instead of being built again; the same partitioner's only)}. Each
model is built once, so a token model's one program (nanogpt's and llama's
dynamic sequence dim) serves every sequence length:
  partitioner null     torch.export -> exir.to_edge -> to_executorch (no delegates, default config)
  partitioner xnnpack  torch.export -> exir.to_edge_transform_and_lower(partitioner=[XnnpackPartitioner()])
                       -> to_executorch (default config)
Prints one JSON line on stdout: per case the seconds of each execute(), the
CPU usage of the timed runs (see cpu_usage) and, with profile_runs, per-kernel
seconds of one execute() from an ETDump of a separately loaded module; per
model the compile seconds, the ops in the program, which of them run an
optimized kernel, and the instructions (delegate calls, kernel calls and the
ops of those left outside the delegates). Progress goes to stderr.

What the PyPI runtime runs: its pybindings link libexecutorch_kernels_optimized.so,
ExecuTorch's "optimized" kernel library: the portable kernels, except for the
ops in OPTIMIZED_OPS below (kernels/optimized/optimized.yaml; the list is the
`opt_*_out` functions that library exports), which get vectorized or
Eigen-BLAS/threadpool implementations. There is no portable-only runtime in
the wheel, so those ops are reported per model. The XNNPACK delegate is
registered in the same pybindings. The threadpool (ExecuTorch's one
pthreadpool, which the optimized kernels and XNNPACK's runtimes both use; an
XNNPACK runtime takes it when its delegate is initialized at method load) is
reset to "threads" threads before anything is loaded (bench/cpu_backend.py
launches one worker per thread count); torch (export, and nothing at run
time) runs on one thread.

Timing: set_inputs() outside the clock, time.perf_counter() around
ExecuTorchMethod.execute() only (the pybind call costs microseconds against
millisecond runs); outputs are read back once, after the timed runs.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

# Ops the ExecuTorch 1.5.1 wheel's kernel library implements in kernels/optimized
# (every other op is the portable kernel). From the `opt_*_out` symbols of
# executorch/lib/libexecutorch_kernels_optimized.so.
OPTIMIZED_OPS = frozenset({
    "aten::add.out", "aten::add.Scalar_out", "aten::sub.out", "aten::sub.Scalar_out",
    "aten::mul.out", "aten::mul.Scalar_out", "aten::div.out", "aten::div.Scalar_out",
    "aten::bmm.out", "aten::mm.out", "aten::linear.out", "aten::native_layer_norm.out",
    "aten::gelu.out", "aten::elu.out", "aten::exp.out", "aten::_log_softmax.out",
    "aten::le.Scalar_out", "aten::le.Tensor_out", "aten::where.self_out", "aten::sum.IntList_out",
    "aten::grid_sampler_2d.out", "aten::_fft_r2c.out", "aten::_fft_c2r.out",
})

MIN_ITERATIONS = 3
MAX_ITERATIONS = 1000


def log(message: str) -> None:
    print(f"[et-worker] {message}", file=sys.stderr, flush=True)


def plan_iterations(seconds_per_run: float, budget_s: float, minimum: int = MIN_ITERATIONS,
                    maximum: int = MAX_ITERATIONS) -> int:
    """How many timed runs fit in budget_s, at least `minimum` (slow models go over it), at most `maximum`."""
    if seconds_per_run <= 0:
        return maximum
    return max(minimum, min(maximum, int(budget_s / seconds_per_run)))


def time_runs(run: Callable[[], float], iterations: int | None, warmup: int, budget_s: float,
              minimum: int = MIN_ITERATIONS, maximum: int = MAX_ITERATIONS) -> list[float]:
    """Seconds of each timed run; `run` does one run and returns its seconds.

    With iterations=None the count comes from the last warmup run's time (one
    warmup run at least) and the budget, and warmup stops after a run longer
    than budget/minimum (such a run is its own warmup).
    """
    last = None
    for _ in range(max(warmup, 1 if iterations is None else 0)):
        last = run()
        if iterations is None and last * minimum > budget_s:
            break
    if iterations is None:
        iterations = plan_iterations(last, budget_s, minimum, maximum)
    return [run() for _ in range(iterations)]


def cpu_usage(fn: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """fn()'s result and how it used the CPU: wall seconds, the process's CPU seconds (all threads, user +
    system), the calling thread's CPU seconds, and the process's thread count afterwards (Linux; 0 elsewhere).

    A run on the calling thread alone has process CPU == thread CPU whatever the machine's load; worker
    threads that compute show as process CPU above the calling thread's.
    """
    wall, process, thread = time.perf_counter(), time.process_time(), time.thread_time()
    result = fn()
    usage = {"wall_s": time.perf_counter() - wall, "process_cpu_s": time.process_time() - process,
             "thread_cpu_s": time.thread_time() - thread,
             "threads": len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 0}
    return result, usage


def cached_build(directory: str | None, name: str, suffix: str, build: Callable[[], tuple[bytes, dict[str, Any]]],
                 say: Callable[[str], None] = log) -> tuple[bytes, dict[str, Any]]:
    """A model's compiled bytes and their build record: read back from `directory` when an earlier
    worker launch wrote them there (the record then says cached), else built and written there.
    Shared by this worker and bench/_iree_latency_worker.py (`say` is the worker's log)."""
    cached = os.path.join(directory, f"{name}{suffix}") if directory else None
    if cached and os.path.exists(cached):
        say(f"{name}: loading {cached} (built by an earlier request)")
        with open(cached, "rb") as f:
            data = f.read()
        with open(cached[:-len(suffix)] + ".json") as f:
            return data, dict(json.load(f), cached=True)
    data, record = build()
    if cached:
        with open(cached, "wb") as f:
            f.write(data)
        with open(cached[:-len(suffix)] + ".json", "w") as f:
            json.dump(record, f)
    return data, record


def build_program(name: str, partitioner: str | None = None) -> tuple[Any, dict[str, float]]:
    """(ExecuTorch program, compile seconds: export_s, lower_s (to_edge[_transform_and_lower]),
    to_executorch_s, total_s) of benchmark model `name` (bench/_bench_models.py)."""
    import torch
    from executorch.exir import to_edge, to_edge_transform_and_lower

    import _bench_models

    model, args, dynamic = _bench_models.build(name)
    start = time.perf_counter()
    exported = torch.export.export(model, args, dynamic_shapes=dynamic)
    exported_at = time.perf_counter()
    if partitioner is None:
        edge = to_edge(exported)
    elif partitioner == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    else:
        raise ValueError(f"unknown partitioner '{partitioner}' (known: xnnpack)")
    lowered_at = time.perf_counter()
    program = edge.to_executorch()
    len(program.buffer)  # serializes (the bytes are cached), inside the clock as ours is
    end = time.perf_counter()
    return program, {"export_s": exported_at - start, "lower_s": lowered_at - exported_at,
                     "to_executorch_s": end - lowered_at, "total_s": end - start}


def _op_name(op: Any) -> str:
    return op.name + (f".{op.overload}" if op.overload else "")


def program_ops(program: Any) -> list[str]:
    plan = program.executorch_program.execution_plan[0]
    return [_op_name(op) for op in plan.operators]


def program_instructions(program: Any) -> dict[str, Any]:
    """The instructions of the program's first plan: delegate calls per backend, kernel calls, and how many
    calls each op outside the delegates gets."""
    plan = program.executorch_program.execution_plan[0]
    delegates: dict[str, int] = {}
    outside: dict[str, int] = {}
    other = 0
    for chain in plan.chains:
        for instruction in chain.instructions:
            kind = type(instruction.instr_args).__name__
            if kind == "DelegateCall":
                backend = plan.delegates[instruction.instr_args.delegate_index].id
                delegates[backend] = delegates.get(backend, 0) + 1
            elif kind == "KernelCall":
                op = _op_name(plan.operators[instruction.instr_args.op_index])
                outside[op] = outside.get(op, 0) + 1
            else:
                other += 1
    return {"delegate_calls": delegates, "kernel_calls": sum(outside.values()), "outside_ops": outside,
            "other_instructions": other}


def profile_case(buffer: bytes, inputs: list[Any], runs: int, workdir: str) -> list[tuple[str, int, float]]:
    """(kernel, calls, seconds) per kernel of one execute(), from an ETDump of `runs` runs
    (median per instruction across runs, then summed per kernel), slowest first."""
    from executorch.devtools import Inspector
    from executorch.extension.pybindings import portable_lib

    module = portable_lib._load_for_executorch_from_buffer(buffer, enable_etdump=True, debug_buffer_size=0)
    for _ in range(runs):
        module.forward(inputs)
    etdump = os.path.join(workdir, "profile.etdp")
    module.write_etdump_result_to_file(etdump, os.path.join(workdir, "profile.bin"))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inspector = Inspector(etdump_path=etdump)
    totals: dict[str, float] = {}
    calls: dict[str, int] = {}
    for block in inspector.event_blocks:
        if block.name != "Execute":
            continue
        for event in block.events:
            if not event.name.startswith("native_call_") or not event.perf_data:
                continue
            name = event.name[len("native_call_"):]
            totals[name] = totals.get(name, 0.0) + statistics.median(event.perf_data.raw) * 1e-3  # raw is ms
            calls[name] = calls.get(name, 0) + 1
    return sorted(((k, calls[k], s) for k, s in totals.items()), key=lambda r: -r[2])


def main(argv: list[str]) -> int:
    import numpy as np
    import torch

    torch.set_num_threads(1)
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    with open(argv[0]) as f:
        request = json.load(f)
    partitioner = request.get("partitioner")
    portable_lib._unsafe_reset_threadpool(int(request.get("threads", 1)))  # before any method is loaded
    minimum = request.get("min_iterations", MIN_ITERATIONS)
    maximum = request.get("max_iterations", MAX_ITERATIONS)
    result: dict[str, Any] = {"executorch": version("executorch"), "torch": torch.__version__,
                              "threadpool_threads": portable_lib._threadpool_get_thread_count(),
                              "torch_threads": torch.get_num_threads(), "partitioner": partitioner,
                              "models": {}, "cases": {}}
    runtime = Runtime.get()
    methods: dict[str, Any] = {}
    buffers: dict[str, bytes] = {}
    for case in request["cases"]:
        name = case["model"]
        try:
            if name not in methods:
                def build(name: str = name) -> tuple[bytes, dict[str, Any]]:
                    log(f"{name}: torch.export -> " + ("to_edge" if partitioner is None else
                                                       f"to_edge_transform_and_lower ({partitioner})")
                        + " -> to_executorch")
                    program, seconds = build_program(name, partitioner)
                    ops = program_ops(program)
                    return program.buffer, {"build_s": seconds["total_s"], "build": seconds,
                                            "pte_bytes": len(program.buffer), "ops": ops,
                                            "optimized_ops": [op for op in ops if op in OPTIMIZED_OPS],
                                            "instructions": program_instructions(program)}

                buffers[name], result["models"][name] = cached_build(request.get("pte_dir"), name, ".pte", build)
                loaded = runtime.load_program(buffers[name])
                methods[name] = loaded.load_method("forward")._method  # ExecuTorchMethod
            method = methods[name]
            with np.load(case["inputs"]) as npz:
                inputs = [torch.from_numpy(npz[f"arr_{i}"]) for i in range(len(npz.files))]

            runs = [0]

            def run(method: Any = method, inputs: list[Any] = inputs, runs: list[int] = runs) -> float:
                runs[0] += 1
                method.set_inputs(inputs)
                start = time.perf_counter()
                method.execute()
                return time.perf_counter() - start

            log(f"{case['id']}: timing")
            seconds, usage = cpu_usage(
                lambda: time_runs(run, case["iterations"], case["warmup"], case["budget_s"], minimum, maximum))
            method.set_inputs(inputs)
            method.execute()
            outputs = [o.numpy() if isinstance(o, torch.Tensor) else np.asarray(o) for o in method.get_outputs()]
            np.savez(case["outputs"], *outputs)
            result["cases"][case["id"]] = {"seconds": seconds, "median_s": statistics.median(seconds),
                                           "usage": dict(usage, runs=runs[0])}
            log(f"{case['id']}: median {statistics.median(seconds) * 1e3:.3f} ms over {len(seconds)} runs")
            if case.get("profile_runs"):
                log(f"{case['id']}: profiling (ETDump, {case['profile_runs']} runs)")
                result["cases"][case["id"]]["profile"] = profile_case(
                    buffers[name], inputs, case["profile_runs"], os.path.dirname(case["outputs"]))
        except Exception as e:  # noqa: BLE001 -- a benchmark reports and goes on
            result["cases"][case["id"]] = {"error": f"{type(e).__name__}: {e}"}
            log(f"{case['id']}: FAILED: {type(e).__name__}: {e}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
