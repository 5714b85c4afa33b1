"""PyTorch's OpInfo samples of the ops only the `cpu` backend compiles, delegated to it, against eager.

The same sweep as test_opinfo.py (scripts/op_coverage.py: every CPU sample of
each OpInfo entry, batched into one program per entry and dtype, bisected on
failure), with `to_backend(partitioner("cpu"))` between `to_edge` and
`to_executorch`, at float32, int64, int32 and bool. Tolerances are the
sweep's: float32 rtol/atol 1e-5, integers and bool exact. A sample the cpu
backend refuses (an empty tensor, a dtype it does not take) runs on the
portable kernels and must still pass; every entry must also have samples
that ran inside a delegate, or it would prove nothing about the backend.
This sweep found the rules in support.py for reciprocal (torch-mlir asserts
on a zero value), full(True), arange to int32 from float bounds, negative
padding and reductions of 0-d tensors.
"""

from __future__ import annotations

import collections
import contextlib
import io
import sys
from pathlib import Path

import pytest
import torch

import etmlir
from etmlir import backends
from etmlir.backends.cpu.support import CPU_ONLY_OPS
from etmlir.devtools import delegation_info

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import op_coverage  # noqa: E402

DTYPES = [torch.float32, torch.int64, torch.int32, torch.bool]
# Entries whose samples never reach a delegate, and why: every `to` sample converts to float64 or to
# channels-last, both left to portable kernels (test_cpu_ops.py runs bool/int64 -> float32 inside one).
NEVER_DELEGATED = {"to"}


def _compile_for_cpu(module: torch.nn.Module, tensors: tuple) -> tuple[bytes, list[str]]:
    """op_coverage._compile with the cpu partitioner; the ops it reports are the delegated ones."""
    from etmlir.frontend.export import import_exported_program, prepare_for_import

    with contextlib.redirect_stderr(io.StringIO()):
        try:
            exported = torch.export.export(module, tensors)
        except Exception as error:  # noqa: BLE001
            raise op_coverage._ExportError(op_coverage._first_line(error)) from error
        prepare_for_import(exported)
        program = import_exported_program(exported, tensors, (__file__, 0))
        part = backends.partitioner("cpu")  # attention kept whole: its samples run the fused kernel
        lowered = etmlir.to_edge(program, etmlir.EdgeCompileConfig(keep=part.ops_to_keep())).to_backend(part)
        delegated = sorted(name for name, (inside, _) in delegation_info(lowered).op_counts.items() if inside)
        return lowered.to_executorch().buffer, delegated


@pytest.fixture(scope="module")
def samples() -> list[dict]:
    patch = pytest.MonkeyPatch()
    patch.setattr(op_coverage, "_compile", _compile_for_cpu)
    patch.setattr(op_coverage, "DTYPES", DTYPES)
    try:
        names = {name.removeprefix("edge.") for name in CPU_ONLY_OPS}
        return op_coverage.sweep(edge_filter=names, progress=False, workers=1)["samples"]
    finally:
        patch.undo()


def test_cpu_only_ops_pass_their_opinfo_samples(samples):
    bad = [s for s in samples if s["status"] in ("failed", "compiler")]
    assert len(samples) > 500, f"only {len(samples)} samples: is the sweep finding the OpInfo entries?"
    listed = "\n".join(f"  {s['entry']} {s['dtype']} #{s['index']}: {s['reason'][:200]}" for s in bad[:30])
    assert not bad, f"{len(bad)} samples failed through the cpu backend:\n{listed}"


def test_every_entry_runs_inside_a_delegate(samples):
    """Each entry has passing samples whose program had one of CPU_ONLY_OPS inside a cpu delegate."""
    delegated = collections.Counter(s["entry"] for s in samples
                                    if s["status"] == "passed" and set(s["edge_ops"]) & set(CPU_ONLY_OPS))
    entries = {s["entry"] for s in samples if s["status"] == "passed"}
    missing = sorted(e for e in entries - NEVER_DELEGATED if not delegated[e])
    assert not missing, f"OpInfo entries none of whose samples reached a cpu delegate: {missing}"
    assert len(entries) >= 30, sorted(entries)
