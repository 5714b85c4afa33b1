"""Run real architectures through every path and say how far each got: the model coverage table.

For one architecture (`etmlir.models.architectures`) the model is exported and
lowered to the edge level once; the edge program is then finished three ways —
all on the portable kernels, delegated whole to the `nested` backend, and
partitioned for the `cpu` backend (lowered again with the ops that backend
runs whole kept, attention, where the model has them) — and each `.pte` is run by the C++ runtime
and compared with eager on the same inputs:

    result = check("llama")
    result.paths["cpu"].stage, result.paths["cpu"].max_error

A path that fails records the stage it reached and the error's first line,
which names the op and the model's source line. `scripts/model_coverage.py`
writes the table for every architecture to `docs/model_coverage.md`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch

import etmlir
import etmlir.backends
import etmlir.runtime as rt
from etmlir.frontend.aten_ops import canonical_op_name
from etmlir.frontend.core_aten import normalize_keep
from etmlir.models import architectures

PATHS = ("portable", "nested", "cpu")
# Stages in order; a path's `stage` is the last one it completed.
STAGES = ("build", "export", "edge", "delegate", "pte", "run", "match")
# float32 outputs after a few layers of GEMMs and reductions in a different order than eager's.
RTOL, ATOL = 1e-4, 1e-4


@dataclasses.dataclass
class PathResult:
    stage: str = "build"            # last stage completed; "match" means it passed
    max_error: float | None = None  # max |runtime - eager| over all outputs
    error: str = ""                 # the first line of the failure, empty when it passed
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.stage == "match"


@dataclasses.dataclass
class ArchitectureResult:
    name: str
    family: str
    source: str
    reference_magnitude: float = 0.0   # max |eager output|: what the errors are relative to
    paths: dict[str, PathResult] = dataclasses.field(default_factory=dict)


def _first_line(exc: BaseException) -> str:
    """The failure's first informative line (MLIR diagnostics start after a header line)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if line.startswith("error:"):
            return line
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def _outputs(value: Any) -> list[Any]:
    """The leaves of a (possibly nested) output structure, in order."""
    return torch.utils._pytree.tree_leaves(value)


def _compare(got: Any, expected: list[torch.Tensor]) -> float:
    got = _outputs(got)
    if len(got) != len(expected):
        raise AssertionError(f"the runtime returned {len(got)} outputs, eager {len(expected)}")
    worst = 0.0
    for index, (g, e) in enumerate(zip(got, expected)):
        g = torch.as_tensor(np.asarray(g)) if not isinstance(g, torch.Tensor) else g
        if tuple(g.shape) != tuple(e.shape):
            raise AssertionError(f"output {index} has shape {tuple(g.shape)}, eager {tuple(e.shape)}")
        difference = (g.double() - e.double()).abs()
        worst = max(worst, float(difference.max()) if difference.numel() else 0.0)
        if not torch.allclose(g.double(), e.double(), rtol=RTOL, atol=ATOL, equal_nan=True):
            raise AssertionError(f"output {index} differs from eager by up to {float(difference.max()):.3g}")
    return worst


def _finish(edge: Any, program: Any, path: str, args: tuple[Any, ...], expected: list[torch.Tensor],
            result: PathResult) -> None:
    start = time.perf_counter()
    try:
        if path != "portable":
            partitioner = etmlir.backends.partitioner(path)
            keep = partitioner.ops_to_keep()
            if keep and _has_any(program, keep):  # lowered again, keeping what the backend runs whole
                edge = etmlir.to_edge(program, etmlir.EdgeCompileConfig(keep=keep))
            edge = edge.to_backend(partitioner)
        result.stage = "delegate"
        buffer = edge.to_executorch().buffer
        result.stage = "pte"
        got = rt.load(buffer, allow_native_code=True).method("forward")(*args)  # compiled just above
        result.stage = "run"
        result.max_error = _compare(got, expected)
        result.stage = "match"
    except Exception as exc:  # the table records every failure; nothing is raised past it
        result.error = _first_line(exc)
    result.seconds += time.perf_counter() - start


def check(name: str, paths: Iterable[str] = PATHS,
          progress: Callable[[str], None] | None = None) -> ArchitectureResult:
    """Build architecture `name`, export and lower it once, then finish and run it on each path."""
    entry = architectures.ARCHITECTURES[name]
    result = ArchitectureResult(entry.name, entry.family, entry.source)
    paths = tuple(paths)
    for path in paths:
        result.paths[path] = PathResult()
    start = time.perf_counter()
    stage = "build"
    try:
        model, args = architectures.build(name)
        with torch.no_grad():
            expected = [t.detach() for t in _outputs(model(*args))]
        result.reference_magnitude = max(float(t.abs().max()) for t in expected if t.numel())
        stage = "export"
        program = etmlir.export(model, args)
        stage = "edge"
        edge = etmlir.to_edge(program)
    except Exception as exc:
        for path in paths:
            result.paths[path].stage = _previous(stage)
            result.paths[path].error = _first_line(exc)
            result.paths[path].seconds = time.perf_counter() - start
        return result
    shared = time.perf_counter() - start
    for path in paths:
        if progress:
            progress(f"{name}: {path}")
        result.paths[path].stage = "edge"
        result.paths[path].seconds = shared
        _finish(edge, program, path, args, expected, result.paths[path])
    return result


def _has_any(program: Any, overloads: tuple[str, ...]) -> bool:
    """Whether the exported program calls any of the ATen ops `overloads` (`aten.x` or `aten.x.overload`)."""
    wanted = normalize_keep(overloads)
    return any(name.startswith("torch.aten.") and canonical_op_name(name) in wanted for name in program.op_histogram())


def _previous(stage: str) -> str:
    """The stage completed before `stage` failed."""
    index = STAGES.index(stage)
    return STAGES[index - 1] if index else "none"


def markdown_table(results: list[ArchitectureResult], paths: Iterable[str] = PATHS) -> str:
    """One row per architecture: family, source, and per path the stage reached and max error."""
    paths = tuple(paths)
    header = ["architecture", "family", "built from", "max abs(eager)"] + list(paths)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    failures: list[str] = []
    for r in results:
        cells = [f"`{r.name}`", r.family, f"`{r.source}`", f"{r.reference_magnitude:.3g}"]
        for path in paths:
            p = r.paths[path]
            if p.passed:
                cells.append(f"pass, {p.max_error:.1e}")
            else:
                cells.append(f"**fails at {_next(p.stage)}** [{len(failures) + 1}]")
                failures.append(f"{len(failures) + 1}. `{r.name}` / {path}: {p.error.replace('|', '/')}")
        lines.append("| " + " | ".join(cells) + " |")
    if failures:
        lines += ["", "Failures:", ""] + failures
    return "\n".join(lines) + "\n"


def _next(stage: str) -> str:
    index = STAGES.index(stage) if stage in STAGES else -1
    return STAGES[index + 1] if index + 1 < len(STAGES) else stage
