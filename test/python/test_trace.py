"""The event tracer from Python and et-run: `Method.trace`, `Trace.save`, `load_trace`, `et-run --trace`.

Two small programs, compiled once per module: a portable one (matmul, add, relu, mul: one event per
instruction per run, captures of kernel outputs checked against numpy on the same inputs) and one
whose embedding and relu run in a "nested" delegate (the delegate call's event at depth 0, the inner
method's steps under it at depth 1, their debug handles resolved through the outer .pte's
debug_info). A buffer that fills up raises the tracer's message from Python and makes et-run exit 1
after writing the events that fit.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import etmlir
import etmlir.runtime as rt
from etmlir import backends
from etmlir.executable import pte
from etmlir.schema.InstructionKind import InstructionKind

ET_RUN = Path(sys.executable).parent / "et-run"


class _Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ self.w + 1.0) * 2.0


class _Lookup(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(10, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.table(ids)) * 2.0


def _kernels(buffer: bytes) -> list[tuple[int, str, int, tuple[int, ...]]]:
    """(pc, operator, debug handle, args) of every kernel call of `forward`."""
    method = pte.read(buffer).program.methods[0]
    out = []
    for pc, ins in enumerate(method.instructions):
        if ins.kindType == InstructionKind.KernelCall:
            op = method.operators[ins.kind.op]
            out.append((pc, op.name.decode(), ins.debugHandle, tuple(int(a) for a in ins.kind.args)))
    return out


def _debug_ops(buffer: bytes) -> dict[int, str]:
    """Method.debug_info of `forward`: debug handle -> edge op."""
    method = pte.read(buffer).program.methods[0]
    return {entry.handle: entry.op.decode() for entry in method.debugInfo or []}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    torch.manual_seed(0)
    model = _Small().eval()
    x = torch.randn(2, 4)
    program = etmlir.to_edge(etmlir.export(model, (x,))).to_executorch()
    path = tmp_path_factory.mktemp("trace") / "small.pte"
    path.write_bytes(program.buffer)
    return model, x, program.buffer, path


@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    torch.manual_seed(0)
    model = _Lookup().eval()
    ids = torch.tensor([[1, 2, 3]])
    edge = etmlir.to_edge(etmlir.export(model, (ids,)))
    edge = edge.to_backend(backends.partitioner("nested", skip_ops=["edge.mul_scalar"]))
    buffer = edge.to_executorch().buffer
    path = tmp_path_factory.mktemp("trace") / "nested.pte"
    path.write_bytes(buffer)
    return model, ids, buffer, path


def test_one_event_per_instruction_per_run_with_handles_from_the_pte(small):
    model, x, buffer, _ = small
    method = rt.load(buffer).method("forward")
    trace = method.trace(x, runs=3)
    n = len(pte.read(buffer).program.methods[0].instructions)
    assert trace.complete and trace.runs == 3 and len(trace.events) == 3 * n
    assert [(e.run, e.instruction) for e in trace.events] == [(r, pc) for r in range(3) for pc in range(n)]
    assert all(e.kind == "instruction" and e.depth == 0 and e.parent is None and e.delegate is None
               for e in trace.events)
    # In order, closed, not overlapping.
    for a, b in zip(trace.events, trace.events[1:]):
        assert a.start_ns < a.end_ns <= b.start_ns
    # Kernel events carry the instruction's debug handle, which debug_info maps to its edge op.
    ops = _debug_ops(buffer)
    by_pc = {e.instruction: e.debug_handle for e in trace.events if e.run == 0}
    for pc, operator, handle, _ in _kernels(buffer):
        assert by_pc[pc] == handle and handle in ops, (pc, operator)
    assert {ops[by_pc[pc]] for pc, *_ in _kernels(buffer)} == {"edge.mm", "edge.add_scalar", "edge.relu",
                                                                 "edge.mul_scalar"}
    # The outputs are the last run's, and right.
    np.testing.assert_allclose(trace.outputs[0].numpy(), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert trace.program_sha256 == hashlib.sha256(buffer).hexdigest()


def test_captures_copy_kernel_outputs_right_after_they_are_written(small):
    model, x, buffer, _ = small
    kernels = _kernels(buffer)
    relu = next(k for k in kernels if k[1] == "aten::relu")
    mul = next(k for k in kernels if k[1] == "aten::mul")
    # The out argument is a kernel's last; both share arena bytes with other values, so only a copy made
    # right after the instruction holds them.
    requests = [(mul[0], mul[3][-1]), (relu[0], relu[3][-1])]
    trace = rt.load(buffer).method("forward").trace(x, runs=2, capture=requests)
    assert trace.complete
    assert [(c.run, c.instruction, c.value) for c in trace.captures] == [
        (r, pc, v) for r in range(2) for pc, v in sorted(requests)]
    w = model.w.detach().numpy()
    expected_relu = np.maximum(x.numpy() @ w + 1.0, 0.0)
    for c in trace.captures:
        want = expected_relu if c.instruction == relu[0] else 2.0 * expected_relu
        assert c.array.dtype == np.float32
        np.testing.assert_allclose(c.array, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(rt.Error, match="capture names instruction 999"):
        rt.load(buffer).method("forward").trace(x, capture=[(999, 0)])
    with pytest.raises(rt.Error, match=r"capture request is an \(instruction, value\) pair"):
        rt.load(buffer).method("forward").trace(x, capture=[(1, 2, 3)])


def test_save_and_load_round_trip(small, tmp_path):
    _, x, buffer, _ = small
    method = rt.load(buffer).method("forward")
    kernels = _kernels(buffer)
    trace = method.trace(x, runs=2, capture=[(kernels[-1][0], kernels[-1][3][-1])])
    path = tmp_path / "t.ettrace"
    trace.save(path)
    loaded = rt.load_trace(path)
    assert loaded == trace  # every field but the outputs, which the file does not hold
    assert loaded.writer == "etmlir.runtime" and loaded.cpu.split()[0] in ("x86_64", "aarch64")
    np.testing.assert_array_equal(loaded.captures[0].array, trace.captures[0].array)
    # Not a trace, or damaged: a clear error.
    (tmp_path / "bad.ettrace").write_bytes(buffer)
    with pytest.raises(rt.Error, match="not a trace file"):
        rt.load_trace(tmp_path / "bad.ettrace")
    data = bytearray(path.read_bytes())
    (tmp_path / "cut.ettrace").write_bytes(bytes(data[:len(data) // 2]))
    with pytest.raises(rt.Error, match="cut.ettrace: a damaged trace file"):
        rt.load_trace(tmp_path / "cut.ettrace")
    with pytest.raises(rt.Error, match="no trace of method 'other'"):
        rt.load_trace(path, method="other")


def test_nested_delegate_events_nest_under_the_delegate_call(nested):
    model, ids, buffer, _ = nested
    method = rt.load(buffer).method("forward")
    trace = method.trace(ids, runs=2)
    assert trace.complete
    events = trace.events
    calls = [i for i, e in enumerate(events) if e.kind == "delegate" and e.depth == 0]
    assert len(calls) == 2 and [events[i].run for i in calls] == [0, 1]
    ops = _debug_ops(buffer)
    for call in calls:
        inner = [events[i] for i in trace.children(call)]
        assert inner and all(e.depth == 1 and e.kind == "instruction" and e.run == events[call].run for e in inner)
        # The inner steps run within the delegate call, and their handles are the outer program's.
        assert all(events[call].start_ns <= e.start_ns <= e.end_ns <= events[call].end_ns for e in inner)
        inner_ops = {ops.get(e.debug_handle) for e in inner if e.debug_handle}
        assert inner_ops == {"edge.embedding", "edge.relu"}
    # Outside the delegate: the multiplication, at depth 0.
    outer_ops = {ops.get(e.debug_handle) for e in events if e.depth == 0 and e.kind == "instruction"}
    assert "edge.mul_scalar" in outer_ops
    np.testing.assert_allclose(trace.outputs[0].numpy(), model(ids).detach().numpy(), atol=1e-6)


def test_a_full_buffer_raises_the_tracers_message_unless_dropped_events_are_allowed(small):
    _, x, buffer, _ = small
    method = rt.load(buffer).method("forward")
    n = len(pte.read(buffer).program.methods[0].instructions)
    with pytest.raises(rt.Error, match=rf"event buffer full: 2 events kept, {2 * n - 2} dropped \(a buffer of "
                                       rf"{2 * n} events holds them all\)"):
        method.trace(x, runs=2, max_events=2)
    partial = method.trace(x, runs=2, max_events=2, allow_dropped=True)
    assert not partial.complete and len(partial.events) == 2 and partial.dropped_events == 2 * n - 2
    # The method still runs right afterwards (the tracer is detached).
    (y,) = method(x)
    assert np.isfinite(y.numpy()).all()
    with pytest.raises(rt.Error, match="runs must be an int >= 1"):
        method.trace(x, runs=0)


def _et_run(*args: object) -> subprocess.CompletedProcess:
    assert ET_RUN.exists(), f"{ET_RUN} was not built (scripts/dev_rebuild.sh builds it)"
    return subprocess.run([str(ET_RUN), *map(str, args)], check=False, capture_output=True, text=True, timeout=120)


def test_et_run_trace_writes_every_timed_run_into_one_file(nested, tmp_path):
    _, _, buffer, path = nested
    out = tmp_path / "run.ettrace"
    result = _et_run(path, "--iterations", 3, "--warmup", 1, "--trace", out)
    assert result.returncode == 0, result.stderr
    assert f"trace: {out} (" in result.stdout
    trace = rt.load_trace(out)
    assert trace.writer == "et-run" and trace.runs == 3 and trace.complete and trace.method == "forward"
    assert trace.program_sha256 == hashlib.sha256(buffer).hexdigest() and trace.program_path == str(path)
    # The same events per run as the Python API records.
    ours = rt.load(buffer).method("forward").trace(torch.tensor([[1, 1, 0]]), runs=3)
    assert [(e.kind, e.depth, e.instruction, e.debug_handle, e.parent) for e in trace.events] == \
        [(e.kind, e.depth, e.instruction, e.debug_handle, e.parent) for e in ours.events]


def test_et_run_trace_overflow_exits_1_after_writing_what_fit(small, tmp_path):
    _, _, _, path = small
    out = tmp_path / "full.ettrace"
    result = _et_run(path, "--iterations", 2, "--trace", out, "--trace-events", 3)
    assert result.returncode == 1
    assert "event buffer full: 3 events kept" in result.stderr and "is incomplete" in result.stderr
    trace = rt.load_trace(out)
    assert len(trace.events) == 3 and trace.dropped_events > 0 and not trace.complete
    usage = _et_run(path, "--trace-events", 3)
    assert usage.returncode == 2 and "--trace-events needs --trace FILE" in usage.stderr
