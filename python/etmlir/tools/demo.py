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

Misuse ends in one line and exit status 1, checked before the slow part starts
where it can be: an unknown zoo model, an output directory (`--out-dir`) that
cannot be created or written, missing MobileNetV2 weights or scikit-image. The
`.pte` files are written whole or not at all (a temporary file renamed into
place), so Ctrl-C (exit 130) never leaves a truncated one behind. et-run is
looked for next to the Python interpreter, then on PATH; without it that step
is skipped with a note.
"""

from __future__ import annotations

import argparse
import collections
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch_mlir import ir

import etmlir
import etmlir.runtime
from etmlir import models
from etmlir.models import imagenet
from etmlir.tools.cli import ToolError, run_tool

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


def _write(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all: a temporary file beside it, renamed into place."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # opened like any new file: the umask applies
    try:
        with open(temp, "wb") as f:
            f.write(data)
        os.replace(temp, path)
    except BaseException as error:  # an error or Ctrl-C: no partial file stays behind
        try:
            temp.unlink()
        except OSError:
            pass
        if isinstance(error, OSError):  # a full disk, a directory where the file should go
            raise ToolError(f"cannot write '{path}': {error.strerror or error}") from None
        raise


def _writable_dir(path: Path) -> Path:
    """`path`, created if missing; ToolError naming it when it cannot be created or written."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ToolError(f"output directory '{path}' exists and is not a directory") from None
    except OSError as error:
        raise ToolError(f"cannot create output directory '{path}': {error.strerror or error}") from None
    if not path.is_dir():
        raise ToolError(f"output directory '{path}' exists and is not a directory")
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        raise ToolError(f"cannot write to output directory '{path}': {error.strerror or error}") from None
    return path


def _one_line(error: BaseException) -> str:
    """The first line of an error's message, saying how many diagnostic lines follow it."""
    lines = str(error).strip().splitlines() or [type(error).__name__]
    more = f" (+{len(lines) - 1} more lines; --debug shows all)" if len(lines) > 1 else ""
    return lines[0] + more


def run_model(name: str, out_dir: Path = OUT_DIR) -> None:
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
    path = out_dir / f"{name}.pte"
    _write(path, executable.buffer)
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


def _main_job_inputs() -> tuple[torch.nn.Module, torch.Tensor]:
    """MobileNetV2 with its weights and the photo; ToolError saying what to install when one is missing."""
    try:
        model = models.mobilenet_v2.pretrained()
    except FileNotFoundError as error:  # the weights package (its message says how to install it)
        raise ToolError(f"the main job needs MobileNetV2's weights: {error}") from None
    try:
        image = imagenet.chelsea()
    except ImportError:
        raise ToolError("the main job needs scikit-image for its photo: pip install scikit-image "
                        "(or skip the main job with --no-main)") from None
    return model, image


def main_job(out_dir: Path = OUT_DIR) -> None:
    """MobileNetV2 + ImageNet weights on skimage's chelsea photo, from .pte on the C++ runtime."""
    print("== Main job: MobileNetV2 (torchvision ImageNet weights) classifies skimage's chelsea photo")
    model, image = _main_job_inputs()
    start = time.perf_counter()
    edge = etmlir.to_edge(etmlir.export(model, (image,)))
    executable = edge.to_executorch()
    path = out_dir / "mobilenet_v2_chelsea.pte"
    _write(path, executable.buffer)
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
    _run_et_run(path, image.numpy(), out_dir)
    _cpu_delegated(edge, image, logits, out_dir)


def _cpu_delegated(edge: etmlir.EdgeProgram, image: torch.Tensor, portable_logits: np.ndarray,
                   out_dir: Path = OUT_DIR) -> None:
    """The same model with every op delegated to the `cpu` backend (MLIR-compiled native code)."""
    start = time.perf_counter()
    delegated = edge.to_backend(etmlir.backends.partitioner("cpu"))
    executable = delegated.to_executorch()
    path = out_dir / "mobilenet_v2_chelsea_cpu.pte"
    _write(path, executable.buffer)
    print(f"  cpu backend: compiled to {path} ({len(executable.buffer):,} bytes, native code for this CPU) "
          f"in {time.perf_counter() - start:.1f} s")
    etmlir.runtime.set_cpu_threads(1)
    # The file this process just compiled: its native code is ours to run.
    method = etmlir.runtime.load(path, allow_native_code=True).method("forward")
    (logits,) = method(image.numpy())
    times = sorted(method.benchmark(image.numpy(), iterations=ITERATIONS, warmup=1))
    top = imagenet.top_k(logits)[0]
    print(f"  cpu backend top-1: {top[1]} ({top[2]:.1%}); max |cpu - portable| over the logits: "
          f"{float(np.max(np.abs(logits - portable_logits))):.2e}")
    print(f"  cpu backend latency: median {times[len(times) // 2] * 1e3:.1f} ms, min {times[0] * 1e3:.1f} ms "
          f"over {ITERATIONS} runs (1 thread)")


def find_et_run() -> str | None:
    """et-run next to this Python (the venv's, which `pip install -e .` fills), else the one on PATH."""
    beside = Path(sys.executable).parent / "et-run"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("et-run")


def _run_et_run(path: Path, image: np.ndarray, out_dir: Path = OUT_DIR) -> None:
    """The same program through the C++ command-line runner, no Python in the loop."""
    et_run = find_et_run()
    if et_run is None:
        print(f"  (et-run skipped: not next to {sys.executable} nor on PATH; `pip install -e .` builds it)")
        return
    inputs = out_dir / "chelsea.npz"
    buffer = io.BytesIO()
    np.savez(buffer, image)
    _write(inputs, buffer.getvalue())
    # The demo's own file: its native code (if any) is trusted (runtime/README.md, "Trust and native code").
    command = [et_run, str(path), "--inputs", str(inputs), "--iterations", str(ITERATIONS), "--allow-native"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, errors="backslashreplace")
    except OSError as error:
        raise ToolError(f"cannot run {et_run}: {error.strerror or error}") from None
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise ToolError(f"et-run failed on {path} (exit status {result.returncode}): {detail}")
    latency = [line.strip() for line in result.stdout.splitlines() if line.startswith("latency")]
    print(f"  et-run {path} --inputs {inputs}: {latency[0] if latency else result.stdout.strip()}")


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="etmlir-demo", description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=f"zoo models (default: all of {', '.join(models.ZOO)})")
    parser.add_argument("--no-main", action="store_true", help="skip the main job (MobileNetV2 on the photo)")
    parser.add_argument("--no-zoo", action="store_true", help="skip the per-model IR levels and runs")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR, metavar="DIR",
                        help=f"where the .pte files go (default {OUT_DIR}; created if missing)")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    args = parser.parse_args(argv)
    # Everything that can be checked before the slow part is checked here.
    unknown = [name for name in args.models if name not in models.ZOO]
    if unknown:
        raise ToolError(f"no zoo model {', '.join(repr(n) for n in unknown)} (have: {', '.join(models.ZOO)})")
    if args.models and args.no_zoo:
        raise ToolError(f"zoo models were named ({', '.join(args.models)}) but --no-zoo skips them")
    if args.no_main and args.no_zoo:
        raise ToolError("--no-main and --no-zoo together leave nothing to do")
    out_dir = _writable_dir(args.out_dir)
    torch.set_num_threads(1)
    if not args.no_main:
        try:
            main_job(out_dir)
        except (ir.MLIRError, etmlir.runtime.Error) as exc:
            raise ToolError(f"the main job failed: {_one_line(exc)}") from exc  # --debug: the whole diagnostic
        print()
    if args.no_zoo:
        return 0
    for name in args.models or list(models.ZOO):
        try:
            run_model(name, out_dir)
        except (ir.MLIRError, etmlir.runtime.Error) as exc:
            raise ToolError(f"{name} failed: {_one_line(exc)}") from exc
        print()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_tool("etmlir-demo", _main, argv)


if __name__ == "__main__":
    sys.exit(main())
