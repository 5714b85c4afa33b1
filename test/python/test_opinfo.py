"""PyTorch's OpInfo samples for every core op, compiled the way users compile and run on the runtime.

One sweep (scripts/op_coverage.py: every CPU sample of every OpInfo entry
that describes an edge op, at every dtype the entry supports, batched into
one program per entry and dtype) feeds both tests. Tolerances are the
sweep's (its docstring): float32 rtol/atol 1e-5, float64 1e-7, float16 1e-3,
bfloat16 1.6e-2 / 1e-2; integers and bool exact.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import op_coverage  # noqa: E402

PASS_RATE = 0.98  # of the samples that reach the runtime (issue 15's acceptance bar)


@pytest.fixture(scope="module")
def results():
    return op_coverage.sweep(progress=False)


def test_opinfo_samples_pass_on_the_runtime(results):
    samples = results["samples"]
    passed = [s for s in samples if s["status"] == "passed"]
    failed = [s for s in samples if s["status"] == "failed"]
    assert len(passed) > 5000, f"only {len(passed)} samples passed: is the sweep finding the OpInfo entries?"
    rate = len(passed) / (len(passed) + len(failed))
    worst = "\n".join(f"  {s['entry']} {s['dtype']} #{s['index']}: {s['reason']}" for s in failed[:40])
    assert rate >= PASS_RATE, f"{rate:.2%} of {len(passed) + len(failed)} samples passed; failures:\n{worst}"


_ROW = re.compile(r"^\| `edge\.(\w+)` \| (.*) \| (.*) \| (\d+) / (\d+) \| (\d+) \| (\d+) \| (\d+) \|$")


def _rows(text: str) -> dict[str, tuple]:
    return {m[1]: m.groups()[1:] for line in text.splitlines() if (m := _ROW.match(line))}


def test_op_coverage_doc_is_current(results):
    """docs/op_coverage.md matches this sweep: kernels, dtypes and sample counts per op.

    A sample whose error sits at a tolerance's edge may pass on one CPU and not on another (eager's own
    kernels differ by ISA), so each op's passed count may differ by one; everything else is exact.
    """
    want = _rows(op_coverage.render(results))
    have = _rows(op_coverage.DOC.read_text())
    assert want, "the rendered table has no rows"
    stale = []
    for op in sorted(set(want) | set(have)):
        a, b = want.get(op), have.get(op)
        if a is None or b is None:
            stale.append(f"edge.{op}: {'missing from' if b is None else 'not in'} the current table")
            continue
        same_columns = a[:2] == b[:2] and a[3:] == b[3:]
        if not same_columns or abs(int(a[2]) - int(b[2])) > 1:
            stale.append(f"edge.{op}: doc {b} vs now {a}")
    assert not stale, "docs/op_coverage.md is stale (run: make op-coverage):\n" + "\n".join(stale[:30])
