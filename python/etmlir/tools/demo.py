"""etmlir-demo: the main job. Export every zoo model and print each IR level it passes through.

For now the levels are ATen (what torch.export produces, imported into
torch-mlir's `torch` dialect), Core ATen (after `et-decompose-to-core-aten`,
checked by `et-verify-core-aten`), Edge (`etmlir.to_edge`: the generated
`edge` dialect on builtin tensors, checked by `et-edge-verify`) and the
executable program (`to_executorch`: out-variant kernels, the memory plan and
the `.pte` file, written to build/demo/); the run on the C++ runtime comes
with the runtime issue.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import torch
from torch_mlir import ir

import etmlir
from etmlir import models


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
    out_dir = Path("build/demo")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.pte"
    executable.save(path)
    kernels = executable.kernel_histogram()
    print(f"  {'Executable':<12} {sum(kernels.values()):4d} kernel calls, {len(kernels)} distinct kernels   "
          f"[{seconds:.2f} s]")
    print(f"      wrote {path} ({len(executable.buffer):,} bytes; `et-inspect {path}` to read it)")
    for line in executable.memory_plan().summary().splitlines():
        print(f"      {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="etmlir-demo", description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(models.ZOO), help=f"zoo models ({', '.join(models.ZOO)})")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for name in args.models:
        if name not in models.ZOO:
            print(f"etmlir-demo: error: no zoo model '{name}' (have: {', '.join(models.ZOO)})", file=sys.stderr)
            return 1
        try:
            run_model(name)
        except ir.MLIRError as exc:
            print(f"etmlir-demo: {name} failed:\n{exc}", file=sys.stderr)
            return 1
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
