"""Inside a `cpu` delegate: timed regions in a trace, and run-time checks that fail without a crash.

The regions come from et-cpu-trace-regions (which edge ops each piece of
generated code came from, read off debug handles in locations); failures
from et-cpu-report-failures (a failed `cf.assert` becomes an error the
runtime returns, naming the op's source line). The models here are ordinary
torch.nn code written for these tests, not zoo models. Numerics: the
delegated outputs are compared with eager at atol 1e-5 / rtol 1e-5 (f32,
elementwise and small linears).
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.export import Dim

import etmlir
import etmlir.runtime as rt
from etmlir import backends
from etmlir.backends.cpu import payload as cpu_payload
from etmlir.devtools import Inspector
from etmlir.executable import pte as pte_file

ET_RUN = Path(sys.executable).parent / "et-run"


class Gate(nn.Module):
    """Two inputs whose first dims must agree: the broadcast inside the delegate checks it at run time."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.proj(x))
        return h * y + 1.0


def _line(text: str) -> int:
    source, start = inspect.getsourcelines(Gate)
    return start + next(i for i, line in enumerate(source) if text in line)


@pytest.fixture(scope="module")
def gate() -> tuple[Gate, bytes]:
    torch.manual_seed(0)
    model = Gate().eval()
    n = Dim("n", min=2, max=16)
    example = (torch.randn(3, 4), torch.randn(3, 4))
    edge = etmlir.to_edge(etmlir.export(model, example, {"x": {0: n}, "y": {0: n}}))
    return model, edge.to_backend(backends.partitioner("cpu")).to_executorch().buffer


def _payload_maps(data: bytes) -> dict[int, dict[int, tuple[int, ...]]]:
    f = pte_file.read(data)
    maps = {}
    for index, d in enumerate(f.program.methods[0].delegates):
        blob = f.segment(d.payload.segment)[d.payload.offset:d.payload.offset + d.payload.size]
        maps[index] = dict(cpu_payload.read_payload(blob)[0].debug_handle_map)
    return maps


def test_a_failed_check_inside_the_payload_names_the_ops_source_line(gate):
    model, data = gate
    method = rt.load(data).method("forward")
    x, y = np.ones((3, 4), np.float32), np.ones((5, 4), np.float32)
    with pytest.raises(rt.Error) as failure:
        method(x, y)
    message = str(failure.value)
    here = os.path.basename(__file__)
    assert f"{here}:{_line('return h * y + 1.0')}" in message, message
    assert "delegate 'cpu'" in message and "mismatched size for broadcast" in message
    # The method is usable again afterwards, with right answers, and the failed runs left nothing
    # allocated in the payload's arena (it would spill to the heap).
    for _ in range(3):
        with pytest.raises(rt.Error, match="mismatched size for broadcast"):
            method(x, y)
    xs, ys = torch.randn(7, 4), torch.randn(7, 4)
    (out,) = method(xs.numpy(), ys.numpy())
    with torch.no_grad():
        np.testing.assert_allclose(np.asarray(out), model(xs, ys).numpy(), atol=1e-5, rtol=1e-5)
    assert rt.cpu_heap_fallbacks() == 0


def test_et_run_reports_the_failure_and_exits_1(gate, tmp_path):
    _, data = gate
    pte, inputs = tmp_path / "gate.pte", tmp_path / "inputs.npz"
    pte.write_bytes(data)
    np.savez(inputs, np.ones((3, 4), np.float32), np.ones((6, 4), np.float32))
    result = subprocess.run([str(ET_RUN), str(pte), "--inputs", str(inputs), "--allow-native"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "mismatched size for broadcast" in result.stderr
    assert f"{os.path.basename(__file__)}:{_line('return h * y + 1.0')}" in result.stderr


def test_a_traced_run_has_one_event_per_region_under_its_delegate_call(gate):
    model, data = gate
    xs, ys = torch.randn(5, 4), torch.randn(5, 4)
    trace = rt.load(data).method("forward").trace(xs.numpy(), ys.numpy(), runs=2)
    with torch.no_grad():
        np.testing.assert_allclose(np.asarray(trace.outputs[0]), model(xs, ys).numpy(), atol=1e-5, rtol=1e-5)
    maps = _payload_maps(data)
    regions = [e for e in trace.events if e.kind == "delegate_op"]
    per_run = len([i for i in maps[0] if i != 0])
    assert per_run >= 2 and len(regions) == 2 * per_run
    for e in regions:
        parent = trace.events[e.parent]
        assert parent.kind == "delegate" and parent.delegate == e.delegate == 0 and e.depth == parent.depth + 1
        assert parent.start_ns <= e.start_ns <= e.end_ns <= parent.end_ns
        assert e.debug_handle == maps[0][e.payload_id][0]
    # The Inspector names the ops inside the delegate: the linear, the tanh, the product and the add.
    names = {e.handle: e.op.decode() for e in pte_file.read(data).program.methods[0].debugInfo}
    rows = [r for r in Inspector(pte=data, trace=trace).rows if r.payload_id is not None]
    covered = {names[h] for r in rows for h in r.handles}
    assert covered >= {"edge.addmm", "edge.tanh", "edge.mul_tensor", "edge.add_scalar"}, covered
    assert all(r.backend == "cpu" and r.calls == 2 for r in rows)


def test_a_failure_in_a_traced_run_closes_its_region(gate):
    _, data = gate
    method = rt.load(data).method("forward")
    with pytest.raises(rt.Error, match="mismatched size for broadcast"):
        method.trace(np.ones((3, 4), np.float32), np.ones((4, 4), np.float32), runs=1)
    trace = method.trace(np.ones((3, 4), np.float32), np.ones((3, 4), np.float32), runs=1)
    assert all(e.end_ns >= e.start_ns > 0 for e in trace.events)


def test_without_regions_the_delegate_is_one_event():
    model = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 3)).eval()
    x = torch.randn(2, 6)
    edge = etmlir.to_edge(etmlir.export(model, (x,)))
    data = edge.to_backend(backends.partitioner("cpu", compile_specs={"trace_regions": "false"})).to_executorch().buffer
    trace = rt.load(data).method("forward").trace(x.numpy(), runs=1)
    assert [e.kind for e in trace.events] == ["delegate"]
    (ids,) = [list(m) for m in _payload_maps(data).values()]
    assert ids == [0]
    with torch.no_grad():
        np.testing.assert_allclose(np.asarray(trace.outputs[0]), model(x).numpy(), atol=1e-5, rtol=1e-5)
