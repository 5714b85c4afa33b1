"""Benchmark, ExecuTorch half: what ExecuTorch 1.5.1's own memory planner gives the zoo models.

Why it exists: to compare etmlir's memory planning against the reference
implementation. It runs ExecuTorch's stock pipeline (no delegation, default
greedy planning): torch.export -> exir.to_edge -> to_executorch, and reads the
plan back from the emitted program. Prints numbers; never asserts.

ExecuTorch lives in its own environment (`make bench-memory` builds
.venv-bench with the `bench` extra, torch 2.13.0 first; executorch declares no
torch requirement, so pip keeps the CPU build). bench/memory_plan.py imports
this module and runs both planners side by side; run this file alone with
`.venv-bench/bin/python bench/executorch_plan.py [--const-prop]`.

Where the numbers come from (executorch/exir):
  arena_bytes  Program.execution_plan[0].non_const_buffer_sizes, written by
               memory_planning.apply_algo; index 0 is reserved (constants) and is 0.
  naive_bytes  sum of TensorSpec.nbytes() over the specs the planner was given
               (memory_planning.collect_specs_from_nodes with the same flags),
               less those that alias another spec's storage (storage_base).
"""

from __future__ import annotations

import argparse
from importlib.metadata import version
from typing import Any

import torch
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir.memory_planning import collect_specs_from_nodes
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.tensor import ALIGNMENT

MODELS = ["seed_cnn", "mlp", "mobilenet_v2", "nanogpt"]


def executorch_plan(model: torch.nn.Module, example_args: tuple[Any, ...], dynamic_shapes: Any = None,
                    alloc_io: bool = True, const_prop: bool = False) -> dict[str, Any]:
    """ExecuTorch's default memory plan for `model`.

    alloc_io=False plans neither graph inputs nor outputs (the caller provides them);
    const_prop=True folds weight-only ops (e.g. the permute_copy of each linear's
    weight) into constants instead of computing them into the arena at run time.
    """
    exported = torch.export.export(model, example_args, dynamic_shapes=dynamic_shapes)
    planner = MemoryPlanningPass(alloc_graph_input=alloc_io, alloc_graph_output=alloc_io)
    config = ExecutorchBackendConfig(memory_planning_pass=planner, do_quant_fusion_and_const_prop=const_prop)
    et_program = to_edge(exported).to_executorch(config)
    arena = list(et_program.executorch_program.execution_plan[0].non_const_buffer_sizes)
    final = et_program.exported_program()
    specs = [s for s in collect_specs_from_nodes(final.graph_module.graph.nodes, final.graph_signature,
                                                 ignore_graph_input=not alloc_io,
                                                 ignore_graph_output=not alloc_io, do_assertion=False)
             if s.storage_base is None]
    return {"arena_bytes": arena, "total_bytes": sum(arena),
            "naive_bytes": sum(s.nbytes() for s in specs), "num_planned_tensors": len(specs),
            "pte_bytes": len(et_program.buffer)}


def main() -> None:
    from etmlir import models  # needs PYTHONPATH=<repo>/python

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--const-prop", action="store_true", help="fold weight-only ops into constants")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"executorch {version('executorch')}, greedy planning, alignment {ALIGNMENT}, const_prop={args.const_prop}")
    print(f"{'model':<13} {'plan I/O':<8} {'arena_bytes':<18} {'total':>11} {'naive':>11} "
          f"{'reuse':>6} {'tensors':>7} {'pte_bytes':>10}")
    for name in MODELS:
        for alloc_io in (True, False):
            model, example_args, dyn = models.build(name)
            try:
                r = executorch_plan(model, example_args, dyn, alloc_io=alloc_io, const_prop=args.const_prop)
            except Exception as e:  # noqa: BLE001 -- a benchmark reports and goes on
                print(f"{name:<13} {alloc_io!s:<8} FAILED: {type(e).__name__}: {e}")
                continue
            reuse = r["naive_bytes"] / r["total_bytes"] if r["total_bytes"] else float("nan")
            print(f"{name:<13} {alloc_io!s:<8} {r['arena_bytes']!s:<18} {r['total_bytes']:>11} "
                  f"{r['naive_bytes']:>11} {reuse:>5.2f}x {r['num_planned_tensors']:>7} {r['pte_bytes']:>10}")


if __name__ == "__main__":
    main()
