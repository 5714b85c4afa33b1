"""etmlir-demo: the main job. MobileNetV2 on a real photo, compiled to .pte and run on the C++ runtime.

First the main job: MobileNetV2 with torchvision's ImageNet weights is
exported, lowered (ATen → Core ATen → Edge → etx) and written to
build/demo/mobilenet_v2.pte; the C++ runtime (portable kernels, one thread)
classifies scikit-image's chelsea photo from that file, and the demo prints
the top-5 classes, the largest difference from PyTorch eager and the latency,
then compiles it again with every op delegated to the `cpu` backend and runs
that `.pte` too.

Then every zoo model goes through the same chain, printing each IR level
with its op counts, the memory plan, and a run of its .pte on the runtime
compared with eager (`--no-zoo` skips this part, `--no-main` the first).
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch_mlir import ir

import etmlir
import etmlir.runtime
from etmlir import models
from etmlir.models import imagenet

OUT_DIR = Path("build/demo")
# Runs per latency measurement (the loop is in C++; the median is printed).
ITERATIONS = 10


def _print_level(title: str, histogram: collections.Counter[str], seconds: float,
                 weights: int | None = None) -> None:
    total = sum(n for op, n in histogram.items() if op != "torch.vtensor.literal")
    weights = histogram.get("torch.vtensor.literal", 0) if weights is None else weights
    print(f"  {title:<12} {total:4d} ops, {weights:3d} weight constants   [{seconds:.2f} s]")
    for op, n in sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0])):
        if op != "torch.vtensor.literal":
            print(f"      {n:4d}  {op}")


def run_model(name: str) -> None:
    entry = models.ZOO[name]
    print(f"== {name}: {entry.description}")
    model, args, dynamic_shapes = models.build(name)
    start = time.perf_counter()
    program = etmlir.export(model, args, dynamic_shapes)
    _print_level("ATen", program.op_histogram(), time.perf_counter() - start)
    for dim in program.dynamic_dims:
        print(f"      dynamic: input {dim.input_index} dim {dim.dim} in [{dim.min}, {dim.max}]")
    start = time.perf_counter()
    program.to_core_aten()
    _print_level("Core ATen", program.op_histogram(), time.perf_counter() - start)
    print(f"      verified by et-verify-core-aten; {len(program.param_names)} named weights")
    start = time.perf_counter()
    edge = etmlir.to_edge(program)
    weights = edge.mlir(debug_info=False).count('"edge.constant"() {etmlir.param')
    _print_level("Edge", edge.op_histogram(), time.perf_counter() - start, weights)
    for index, spec in enumerate(edge.outputs):
        print(f"      output {index}: {spec.dtype} sizes {spec.sizes}, planned at upper bounds {spec.upper_bounds}")
    print("      verified by et-edge-verify (edge ops only, dtypes from the generated tables)")
    start = time.perf_counter()
    executable = edge.to_executorch()
    seconds = time.perf_counter() - start
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"{name}.pte"
    executable.save(path)
    kernels = executable.kernel_histogram()
    print(f"  {'Executable':<12} {sum(kernels.values()):4d} kernel calls, {len(kernels)} distinct kernels   "
          f"[{seconds:.2f} s]")
    print(f"      wrote {path} ({len(executable.buffer):,} bytes; `et-inspect {path}` to read it)")
    for line in executable.memory_plan().summary().splitlines():
        print(f"      {line}")
    _run_on_runtime(path, model, args)


def _max_diff(outputs: tuple, expected: object) -> float:
    flat = expected if isinstance(expected, (tuple, list)) else (expected,)
    return max(float(np.max(np.abs(np.asarray(o, dtype=np.float64) - e.detach().numpy().astype(np.float64))))
               if np.asarray(o).size else 0.0 for o, e in zip(outputs, flat))


def _run_on_runtime(path: Path, model: torch.nn.Module, args: tuple) -> tuple[tuple, float]:
    """Runs the .pte on the C++ runtime; prints latency and the max difference from eager."""
    method = etmlir.runtime.load(path).method("forward")
    outputs = method(*args)
    with torch.no_grad():
        expected = model(*args)
    times = sorted(method.benchmark(*args, iterations=ITERATIONS, warmup=1))
    diff = _max_diff(outputs, expected)
    print(f"  {'Runtime':<12} C++ runtime, portable kernels, 1 thread: median {times[len(times) // 2] * 1e3:.2f} ms "
          f"(min {times[0] * 1e3:.2f} ms, {ITERATIONS} runs); max |runtime - eager| = {diff:.2e}")
    return outputs, diff


def main_job() -> None:
    """MobileNetV2 + ImageNet weights on skimage's chelsea photo, from .pte on the C++ runtime."""
    print("== Main job: MobileNetV2 (torchvision ImageNet weights) classifies skimage's chelsea photo")
    model = models.mobilenet_v2.pretrained()
    image = imagenet.chelsea()
    start = time.perf_counter()
    edge = etmlir.to_edge(etmlir.export(model, (image,)))
    executable = edge.to_executorch()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / "mobilenet_v2_chelsea.pte"
    executable.save(path)
    print(f"  compiled to {path} ({len(executable.buffer):,} bytes) in {time.perf_counter() - start:.1f} s")

    method = etmlir.runtime.load(path).method("forward")
    (logits,) = method(image.numpy())
    with torch.no_grad():
        expected = model(image)
    times = sorted(method.benchmark(image.numpy(), iterations=ITERATIONS, warmup=1))
    diff = float(np.max(np.abs(logits - expected.numpy())))
    print("  top-5 (C++ runtime):")
    for rank, (index, name, probability) in enumerate(imagenet.top_k(logits), 1):
        print(f"    {rank}. {name:<28} {probability:6.1%}   (class {index})")
    eager_top = imagenet.top_k(expected)[0]
    print(f"  eager top-1: {eager_top[1]} ({eager_top[2]:.1%})")
    print(f"  max |runtime - eager| over the 1000 logits: {diff:.2e}")
    print(f"  latency: median {times[len(times) // 2] * 1e3:.1f} ms, min {times[0] * 1e3:.1f} ms "
          f"over {ITERATIONS} runs (portable kernels, 1 thread)")
    _run_et_run(path, image.numpy())
    _cpu_delegated(edge, image, logits)


def _cpu_delegated(edge: etmlir.EdgeProgram, image: torch.Tensor, portable_logits: np.ndarray) -> None:
    """The same model with every op delegated to the `cpu` backend (MLIR-compiled native code)."""
    start = time.perf_counter()
    delegated = edge.to_backend(etmlir.backends.partitioner("cpu"))
    executable = delegated.to_executorch()
    path = OUT_DIR / "mobilenet_v2_chelsea_cpu.pte"
    executable.save(path)
    print(f"  cpu backend: compiled to {path} ({len(executable.buffer):,} bytes, native code for this CPU) "
          f"in {time.perf_counter() - start:.1f} s")
    etmlir.runtime.set_cpu_threads(1)
    method = etmlir.runtime.load(path).method("forward")
    (logits,) = method(image.numpy())
    times = sorted(method.benchmark(image.numpy(), iterations=ITERATIONS, warmup=1))
    top = imagenet.top_k(logits)[0]
    print(f"  cpu backend top-1: {top[1]} ({top[2]:.1%}); max |cpu - portable| over the logits: "
          f"{float(np.max(np.abs(logits - portable_logits))):.2e}")
    print(f"  cpu backend latency: median {times[len(times) // 2] * 1e3:.1f} ms, min {times[0] * 1e3:.1f} ms "
          f"over {ITERATIONS} runs (1 thread)")


def _run_et_run(path: Path, image: np.ndarray) -> None:
    """The same program through the C++ command-line runner, no Python in the loop."""
    et_run = Path(sys.executable).parent / "et-run"
    if not et_run.exists():
        print(f"  (et-run not found next to {sys.executable}; `pip install -e .` builds it)")
        return
    inputs = OUT_DIR / "chelsea.npz"
    np.savez(inputs, image)
    command = [str(et_run), str(path), "--inputs", str(inputs), "--iterations", str(ITERATIONS)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise etmlir.runtime.Error(f"et-run failed: {result.stderr.strip()}")
    latency = [line.strip() for line in result.stdout.splitlines() if line.startswith("latency")]
    print(f"  et-run {path} --inputs {inputs}: {latency[0] if latency else result.stdout.strip()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="etmlir-demo", description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(models.ZOO), help=f"zoo models ({', '.join(models.ZOO)})")
    parser.add_argument("--no-main", action="store_true", help="skip the main job (MobileNetV2 on the photo)")
    parser.add_argument("--no-zoo", action="store_true", help="skip the per-model IR levels and runs")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if not args.no_main:
        try:
            main_job()
        except (ir.MLIRError, etmlir.runtime.Error) as exc:
            print(f"etmlir-demo: the main job failed:\n{exc}", file=sys.stderr)
            return 1
        print()
    if args.no_zoo:
        return 0
    for name in args.models:
        if name not in models.ZOO:
            print(f"etmlir-demo: error: no zoo model '{name}' (have: {', '.join(models.ZOO)})", file=sys.stderr)
            return 1
        try:
            run_model(name)
        except (ir.MLIRError, etmlir.runtime.Error) as exc:
            print(f"etmlir-demo: {name} failed:\n{exc}", file=sys.stderr)
            return 1
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
