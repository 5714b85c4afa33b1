"""etmlir.devtools.compare: the first op where a program's numbers leave PyTorch eager's.

Bugs are injected where real ones live, in the compiler, never by editing the
`.pte`: the `cpu` backend's `preprocess` made to compile `edge.tanh` as a
sigmoid (the payload is a normal cpu payload; the delegated edge module, the
reference, still says tanh), and et-to-out-variants made to pick the tanh
kernel for `edge.sigmoid` (a portable kernel call). compare() must name that
op and its source line. Tolerances: atol 1e-4, rtol 1e-3 (compare's defaults);
the clean program's ops agree with eager to ~1e-6, the injected bugs are off
by ~0.1 or more.
"""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from torch_mlir import ir

import etmlir
from etmlir.backends import get_backend
from etmlir.devtools import CompareError, Comparison, compare
from etmlir.executable import out_variants
from etmlir.passes import to_out_variants

CPU_OPS = ["edge.addmm", "edge.permute_copy", "edge.view_copy", "edge.tanh", "edge.mul_scalar", "edge.add_tensor",
           "edge.gelu"]


class Net(torch.nn.Module):
    """conv (portable) -> linear, tanh, mul, add, gelu (one cpu delegate) -> sigmoid, sub (portable)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x).reshape(4, 16)
        h = torch.tanh(self.fc(y))
        h = F.gelu(h * 2.0 + y)
        return torch.sigmoid(h) - y


def _line(text: str) -> str:
    """`test_compare.py:N`: the line of Net.forward holding `text`."""
    lines, first = inspect.getsourcelines(Net.forward)
    return f"test_compare.py:{first + next(i for i, line in enumerate(lines) if text in line)}"


def _tanh_as_sigmoid(module: ir.Module) -> None:
    """The injected backend bug: every edge.tanh of the module it compiles becomes an edge.sigmoid."""
    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "edge.tanh":
            with op.context, op.location:
                sigmoid = ir.Operation.create("edge.sigmoid", results=[op.results[0].type], operands=list(op.operands),
                                              attributes={n: op.attributes[n] for n in op.attributes},
                                              ip=ir.InsertionPoint(op))
            op.results[0].replace_all_uses_with(sigmoid.results[0])
            op.erase()
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)


@pytest.fixture(scope="module")
def inputs() -> tuple[torch.Tensor]:
    torch.manual_seed(0)
    return (torch.randn(1, 3, 4, 4),)


@pytest.fixture(scope="module")
def edge(inputs: tuple[torch.Tensor]) -> etmlir.EdgeProgram:
    torch.manual_seed(1)
    return etmlir.to_edge(etmlir.export(Net().eval(), inputs))


@pytest.fixture(scope="module")
def buggy_delegate(edge: etmlir.EdgeProgram, inputs: tuple[torch.Tensor]) -> tuple[Comparison, Comparison]:
    """compare() of the program whose cpu delegate was compiled by the buggy backend (with and without
    bisection). The backend stays buggy while compare() bisects: it compiles prefixes with it."""
    cpu = get_backend("cpu")
    preprocess = cpu.preprocess

    def buggy(module: ir.Module, specs: dict[str, str]):  # noqa: ANN202 - the backend's own signature
        _tanh_as_sigmoid(module)
        return preprocess(module, specs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cpu, "preprocess", buggy)
        delegated = edge.to_backend(etmlir.backends.partitioner("cpu", ops=CPU_OPS))
        program = delegated.to_executorch()
        return compare(program, inputs), compare(program, inputs, bisect=False)


def test_clean_program_has_no_divergence(edge: etmlir.EdgeProgram, inputs: tuple[torch.Tensor]) -> None:
    delegated = edge.to_backend(etmlir.backends.partitioner("cpu", ops=CPU_OPS))
    result = compare(delegated, inputs)
    assert result.first_divergence is None
    assert "no divergence found" in str(result)
    assert result.output_max_abs < 1e-5
    statuses = {r.op: r.status for r in result.ops}
    assert statuses["edge.convolution"] == "ok" and statuses["edge.sigmoid"] == "ok"
    assert statuses["edge.tanh"] == "hidden"  # inside the delegate, not a live-out
    assert {r.delegate for r in result.ops if r.op == "edge.gelu"} == {"cpu_0"}
    assert result.bisection_compiles == 0


def test_bug_inside_a_delegate_is_found_by_bisection(buggy_delegate: tuple[Comparison, ...]) -> None:
    result, _ = buggy_delegate
    found = result.first_divergence
    assert found is not None, str(result)
    assert (found.op, found.delegate, found.backend, found.found_by) == ("edge.tanh", "cpu_0", "cpu", "bisection")
    assert found.source.endswith(_line("torch.tanh")), found.source
    assert found.max_abs > 0.05  # sigmoid vs tanh of the same values
    # log2 of the delegate's 8 ops, plus the whole delegate checked alone.
    assert 1 <= result.bisection_compiles <= 5
    rows = {r.op: r for r in result.ops if r.delegate == "cpu_0"}
    assert rows["edge.tanh"].status == "bisected"
    assert rows["edge.gelu"].status == "diverged"  # the delegate's live-out, the first wrong value the runtime saw
    assert rows["edge.addmm"].status == "hidden"
    outer = {r.op: r.status for r in result.ops if r.delegate is None}
    assert outer["edge.convolution"] == "ok" and outer["edge.sigmoid"] == "inherited"
    text = str(result)
    assert "first divergence: edge.tanh" in text and "in delegate cpu_0 (cpu)" in text and _line("torch.tanh") in text


def test_without_bisection_the_delegate_live_out_is_reported(buggy_delegate: tuple[Comparison, ...]) -> None:
    _, result = buggy_delegate
    found = result.first_divergence
    assert (found.op, found.delegate, found.found_by) == ("edge.gelu", "cpu_0", "capture")
    assert found.source.endswith(_line("F.gelu"))
    assert result.bisection_compiles == 0


def test_bug_in_a_portable_kernel_call(edge: etmlir.EdgeProgram, inputs: tuple[torch.Tensor],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """et-to-out-variants picks aten::tanh.out for edge.sigmoid: the wrong kernel, same signature."""
    def wrong_kernel(aten: str) -> out_variants.OutVariant | None:
        return out_variants.out_variant("aten::tanh" if aten == "aten::sigmoid" else aten)

    monkeypatch.setattr(to_out_variants, "out_variant", wrong_kernel)
    program = edge.to_backend(etmlir.backends.partitioner("cpu", ops=CPU_OPS)).to_executorch()
    monkeypatch.undo()
    result = compare(program, inputs)
    found = result.first_divergence
    assert (found.op, found.delegate, found.found_by) == ("edge.sigmoid", None, "capture"), str(result)
    assert found.source.endswith(_line("torch.sigmoid"))
    sigmoid = next(r for r in result.ops if r.op == "edge.sigmoid")
    assert sigmoid.status == "diverged" and sigmoid.local_abs > 0.05 and sigmoid.instruction is not None
    # The op after it reads its wrong value but computes right: inherited, not diverged.
    assert next(r for r in result.ops if r.op == "edge.sub_tensor").status == "inherited"


def test_tolerances_decide(edge: etmlir.EdgeProgram, inputs: tuple[torch.Tensor]) -> None:
    """A portable program agrees with eager to float32 rounding: nothing diverges at 1e-4, and at a
    tolerance of 0 the first op with any rounding difference is reported as accumulation or capture."""
    loose = compare(edge, inputs)
    assert loose.first_divergence is None and all(r.status in ("ok", "folded") for r in loose.ops)
    exact = compare(edge, inputs, atol=0.0, rtol=0.0)
    if exact.output_max_abs > 0:  # float32 kernels that round differently from torch's
        assert exact.first_divergence is not None
        assert exact.first_divergence.max_abs == pytest.approx(
            next(r.max_abs for r in exact.ops if r.handle == exact.first_divergence.handle))


def test_inputs_must_match_the_program(edge: etmlir.EdgeProgram) -> None:
    with pytest.raises(CompareError, match="inputs do not fit the program.s call: takes 1 positional"):
        compare(edge, (torch.randn(1, 3, 4, 4), torch.randn(2)))



def test_zero_dim_values_are_compared() -> None:
    """A reduction to a 0-d tensor, read by a later op: captured and compared as 0-d, not as [1]."""
    class Scale(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.tanh(x * x.sum())

    x = torch.randn(5)
    result = compare(etmlir.to_edge(etmlir.export(Scale(), (x,))), (x,))
    assert result.first_divergence is None, str(result)
    rows = {r.op: r for r in result.ops}
    assert rows["edge.sum_dim_intlist"].status == "ok" and rows["edge.sum_dim_intlist"].max_abs < 1e-5


class Counter(torch.nn.Module):
    """A buffer updated in place: its kernel call names the state tensor as `self` and as `out`."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("n", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.n.add_(1)
        return torch.tanh(x) + self.n


def test_in_place_state_update_is_captured_once() -> None:
    """A value an instruction names twice is copied once (the capture buffer holds one copy per request)."""
    x = torch.randn(3)
    result = compare(etmlir.to_edge(etmlir.export(Counter(), (x,))).to_executorch(), (x,))
    assert result.first_divergence is None, str(result)
