"""Latency benchmark, IREE half: compiles and times the benchmark models with IREE 3.13 on the CPU.

Launched by bench/cpu_backend.py (through bench/_latency_common.py) with the bench environment's python
(iree-base-compiler==3.13.0, iree-base-runtime==3.13.0, iree-turbine, torch 2.13.0; etmlir's native
extension is not needed, only `etmlir.models` through PYTHONPATH=<repo>/python):

    PYTHONPATH=python .venv-bench/bin/python bench/_iree_latency_worker.py REQUEST.json

REQUEST.json: {"cases": [{"id", "model", "inputs" (an .npz: arr_0, arr_1, ...), "outputs" (an .npz to
write), "iterations", "warmup", "budget_s"}], "min_iterations", "max_iterations", "threads" (1: the
local-sync driver, on the calling thread; n > 1: the local-task driver with n workers), "vmfb_dir"
(optional: where each model's module is saved, MODEL.vmfb + MODEL.json, and loaded from by later
requests instead of being compiled again)}. Each model is compiled once, so a token model's one module
(its dynamic sequence dim) serves every sequence length:

  export    torch.export.export(model, args, dynamic_shapes) -> ExportedProgram.run_decompositions(table)
            with iree-turbine's AOT decomposition table (current_aot_decompositions(): what
            `iree.turbine.aot.export` applies itself when handed an nn.Module; the core-ATen default
            table leaves _native_batch_norm_legit_no_training and upsample_bilinear2d.vec, which IREE's
            torch input conversion does not legalize) -> iree.turbine.aot.export(ep) -> MLIR text
  compile   iree.compiler.compile_str(..., target_backends=["llvm-cpu"], extra_args=IREE_FLAGS):
            --iree-llvmcpu-target-cpu=host (this CPU's ISA, AVX-512 where it has it),
            --iree-opt-data-tiling=true (packed mmt4d matmuls), and convolutions rewritten to
            channels-last (NHWC activations, HWCF filters) by the preprocessing pass
            iree-preprocessing-convert-conv-to-channels-last (IREE 3.13 has no single flag for it; the
            pass runs through --iree-preprocessing-pass-pipeline), transposes then propagated by the
            global optimizer (--iree-global-opt-propagate-transposes=true)
  run       iree.runtime: one thread is the local-sync driver (dispatches on the calling thread); n
            threads the local-task driver with --task_topology_max_group_count=n (n task workers; the
            calling thread waits), set before the driver is created

Timing: inputs become device arrays once (outside the clock), time.perf_counter() around the
function call (the exported `main`, which waits for its results); outputs are read back once, after
the timed runs, and written to the case's .npz (the caller computes max|diff| against eager), and the
worker's own max|diff| against the eager outputs it computed when it compiled is in the result too.
Prints one JSON line on stdout: versions, driver, flags, per model the compile seconds and module
bytes, per case the seconds of each call and the CPU usage of the timed runs (see cpu_usage in
bench/_executorch_latency_worker.py); any failure is a case's "error" text. Progress goes to stderr.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _executorch_latency_worker import (MAX_ITERATIONS, MIN_ITERATIONS, cached_build, cpu_usage,  # noqa: E402
                                        time_runs)

IREE_FLAGS = (
    "--iree-llvmcpu-target-cpu=host",
    "--iree-opt-data-tiling=true",
    "--iree-preprocessing-pass-pipeline=builtin.module(util.func(iree-preprocessing-convert-conv-to-channels-last))",
    "--iree-global-opt-propagate-transposes=true",
)


def log(message: str) -> None:
    print(f"[iree-worker] {message}", file=sys.stderr, flush=True)


def build_module(name: str) -> tuple[bytes, dict[str, Any]]:
    """(.vmfb bytes, info: export_s, compile_s, total_s, vmfb_bytes, eager_diff) of benchmark model `name`."""
    import numpy as np
    import torch
    import iree.compiler
    import iree.runtime
    import iree.turbine.aot as aot
    from iree.turbine.aot.decompositions import current_aot_decompositions

    import _bench_models

    torch.set_num_threads(1)
    model, args, dynamic = _bench_models.build(name)
    start = time.perf_counter()
    exported = torch.export.export(model, args, dynamic_shapes=dynamic)
    exported = exported.run_decompositions(current_aot_decompositions())
    mlir = str(aot.export(exported).mlir_module)
    exported_at = time.perf_counter()
    vmfb = iree.compiler.compile_str(mlir, target_backends=["llvm-cpu"], extra_args=list(IREE_FLAGS))
    end = time.perf_counter()
    info = {"export_s": exported_at - start, "compile_s": end - exported_at, "total_s": end - start,
            "vmfb_bytes": len(vmfb)}
    # A first numerics check on the example inputs, on one thread, before any timing.
    with torch.no_grad():
        expected = model(*args)
    config = iree.runtime.Config("local-sync")
    context = iree.runtime.SystemContext(config=config)
    context.add_vm_module(iree.runtime.VmModule.copy_buffer(context.instance, vmfb))
    got = _host(context.modules.module["main"](*[a.numpy() for a in args]))
    want = [t.numpy() for t in (expected if isinstance(expected, (tuple, list)) else [expected])]
    info["example_diff"] = (max(float(np.abs(g.astype(np.float64) - w).max()) for g, w in zip(got, want))
                            if len(got) == len(want) and all(g.shape == w.shape for g, w in zip(got, want))
                            else float("inf"))
    return vmfb, info


def _host(result: Any) -> list[Any]:
    import numpy as np

    values = result if isinstance(result, (tuple, list)) else [result]
    return [np.asarray(v.to_host() if hasattr(v, "to_host") else v) for v in values]


def main(argv: list[str]) -> int:
    import numpy as np
    import iree.runtime

    with open(argv[0]) as f:
        request = json.load(f)
    threads = int(request.get("threads", 1))
    if threads > 1:
        iree.runtime.flags.parse_flags(f"--task_topology_max_group_count={threads}")  # before the driver exists
    driver = "local-sync" if threads == 1 else "local-task"
    minimum = request.get("min_iterations", MIN_ITERATIONS)
    maximum = request.get("max_iterations", MAX_ITERATIONS)
    result: dict[str, Any] = {"iree_compiler": version("iree-base-compiler"),
                              "iree_runtime": version("iree-base-runtime"), "iree_turbine": version("iree-turbine"),
                              "driver": driver, "threads": threads,
                              "flags": list(IREE_FLAGS), "models": {}, "cases": {}}
    config = iree.runtime.Config(driver)
    result["process_threads"] = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 0
    functions: dict[str, Any] = {}
    for case in request["cases"]:
        name = case["model"]
        try:
            if name not in functions:
                def build(name: str = name) -> tuple[bytes, dict[str, Any]]:
                    log(f"{name}: torch.export -> run_decompositions (turbine's table) -> iree.turbine.aot.export "
                        f"-> iree-compile (llvm-cpu)")
                    return build_module(name)

                vmfb, result["models"][name] = cached_build(request.get("vmfb_dir"), name, ".vmfb", build, log)
                context = iree.runtime.SystemContext(config=config)
                context.add_vm_module(iree.runtime.VmModule.copy_buffer(context.instance, vmfb))
                functions[name] = context.modules.module["main"]
            function = functions[name]
            with np.load(case["inputs"]) as npz:
                inputs = [iree.runtime.asdevicearray(config.device, npz[f"arr_{i}"]) for i in range(len(npz.files))]

            runs = [0]

            def run(function: Any = function, inputs: list[Any] = inputs, runs: list[int] = runs) -> float:
                runs[0] += 1
                start = time.perf_counter()
                function(*inputs)
                return time.perf_counter() - start

            log(f"{case['id']}: timing ({driver}, {threads} thread(s))")
            seconds, usage = cpu_usage(
                lambda: time_runs(run, case["iterations"], case["warmup"], case["budget_s"], minimum, maximum))
            np.savez(case["outputs"], *_host(function(*inputs)))
            result["cases"][case["id"]] = {"seconds": seconds, "median_s": statistics.median(seconds),
                                           "usage": dict(usage, runs=runs[0])}
            log(f"{case['id']}: median {statistics.median(seconds) * 1e3:.3f} ms over {len(seconds)} runs")
        except Exception as e:  # noqa: BLE001 -- a benchmark reports and goes on
            result["cases"][case["id"]] = {"error": f"{type(e).__name__}: {_first_lines(str(e))}"}
            log(f"{case['id']}: FAILED: {type(e).__name__}: {e}")
    print(json.dumps(result))
    return 0


def _first_lines(text: str, limit: int = 6) -> str:
    """An IREE compiler error carries the tool's whole stderr: its `error:` lines say what failed."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line] or lines
    return "\n".join(errors[:limit]) + (f"\n... ({len(errors) - limit} more)" if len(errors) > limit else "")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
