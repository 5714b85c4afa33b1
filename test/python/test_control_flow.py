"""torch.cond, while_loop and map, compiled once each to a .pte and run against PyTorch eager.

Each program is exported, lowered and loaded once (module-scoped fixtures); every test then
runs it on inputs that take different paths (both branches, several trip counts). Outputs are
compared with eager PyTorch on the same inputs: float results within atol 1e-5 (the same
portable kernels run in both paths; the tolerance covers reassociation only), integers exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.while_loop import while_loop
from torch_mlir import ir

import etmlir
from etmlir import backends

ATOL = 1e-5


def _line(marker: str) -> int:
    """The line of this file that holds `marker` (where an error must point)."""
    for number, text in enumerate(Path(__file__).read_text().splitlines(), start=1):
        if marker in text and "_line(" not in text:
            return number
    raise AssertionError(f"no line holds {marker!r}")


def _compile(model: torch.nn.Module, args: tuple, dynamic_shapes=None, partitioner=None):
    edge = etmlir.to_edge(etmlir.export(model, args, dynamic_shapes=dynamic_shapes))
    if partitioner is not None:
        edge = edge.to_backend(partitioner)
    program = edge.to_executorch()
    return program, etmlir.runtime.load(program.buffer).method("forward")


def _assert_matches_eager(method, model: torch.nn.Module, *args: torch.Tensor) -> None:
    got = method(*args)
    want = model(*args)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = torch.as_tensor(g)
        assert g.shape == w.shape and g.dtype == w.dtype
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g, w, atol=ATOL, rtol=0)
        else:
            assert torch.equal(g, w)


# ------------------------------------------------------------------------------------------ models


class Branches(torch.nn.Module):
    """torch.cond with a weight read in one branch and different ops in each."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 4))

    def forward(self, p: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        def true_fn(x):
            return torch.relu(x @ self.w) + 1

        def false_fn(x):
            return (x @ self.w).sin() * 2

        return torch.cond(p.sum() > 0, true_fn, false_fn, (x,)) - 0.5


class Nested(torch.nn.Module):
    """A cond inside one branch of another: three paths."""

    def forward(self, p: torch.Tensor, q: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        def inner_true(x):
            return x * 10

        def inner_false(x):
            return x - 10

        def outer_true(x, q):
            return torch.cond(q > 0, inner_true, inner_false, (x,)) + 1

        def outer_false(x, q):
            return x.cos()

        return torch.cond(p > 0, outer_true, outer_false, (x, q))


class CountedSum(torch.nn.Module):
    """while i < n: acc += x * i; the trip count is an input."""

    def forward(self, n: torch.Tensor, x: torch.Tensor):
        def cond_fn(i, acc):
            return i < n

        def body_fn(i, acc):
            return i + 1, acc + x * i

        return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), torch.zeros_like(x)))


class Fibonacci(torch.nn.Module):
    """Carried values that swap places every iteration: (a, b) -> (b, a + b)."""

    def forward(self, n: torch.Tensor, a: torch.Tensor, b: torch.Tensor):
        def cond_fn(i, a, b):
            return i < n

        def body_fn(i, a, b):
            return i + 1, b.clone(), a + b

        return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), a, b))


class Collatz(torch.nn.Module):
    """A cond inside a loop whose trip count depends on the data: Collatz steps to reach 1."""

    def forward(self, x: torch.Tensor):
        def cond_fn(x, steps):
            return x > 1

        def body_fn(x, steps):
            def even(x):
                return x * 0.5

            def odd(x):
                return 3 * x + 1

            return torch.cond(x % 2 == 0, even, odd, (x,)), steps + 1

        return while_loop(cond_fn, body_fn, (x, torch.zeros((), dtype=torch.int64)))


class Mapped(torch.nn.Module):
    """map over the leading dim of xs, with a weight and an extra argument."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4))

    def forward(self, xs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        def body(x, y):
            return torch.tanh(x * self.w) + y

        return hop_map(body, xs, y)


class DynamicBranches(torch.nn.Module):
    """Branches that return different dynamic sizes: [n] and [2n], n <= 8 (bound: 16)."""

    def forward(self, p: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        def true_fn(x):
            return x.sin() * 2

        def false_fn(x):
            return torch.cat([x, x]).cos()

        return torch.cond(p.sum() > 0, true_fn, false_fn, (x,)) + 1


class PassThrough(torch.nn.Module):
    """Branches that return values defined before the cond (canonicalized to arith.select) and a
    weight (moved from the constant segment into the result's slot)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, p: torch.Tensor, x: torch.Tensor, y: torch.Tensor):
        def true_fn(x, y):
            return x.clone(), y * 2

        def false_fn(x, y):
            return y.clone(), self.w.clone()

        a, b = torch.cond(p > 0, true_fn, false_fn, (x, y))
        return a + 1, b


DYNAMIC_SHAPES = {"p": None, "x": {0: torch.export.Dim("n", min=2, max=8)}}
LOOP_DYNAMIC_SHAPES = {"n": None, "x": {0: torch.export.Dim("k", min=2, max=16)}}


@pytest.fixture(scope="module")
def compiled():
    """name -> (model, ExecutorchProgram, loaded method), each compiled once."""
    torch.manual_seed(0)
    cases = {
        "branches": (Branches(), (torch.tensor(1.0), torch.randn(2, 3)), None),
        "nested": (Nested(), (torch.tensor(1.0), torch.tensor(1.0), torch.randn(3)), None),
        "counted_sum": (CountedSum(), (torch.tensor(3), torch.randn(4)), None),
        "fibonacci": (Fibonacci(), (torch.tensor(5), torch.zeros(2), torch.ones(2)), None),
        "collatz": (Collatz(), (torch.tensor(6.0),), None),
        "mapped": (Mapped(), (torch.randn(5, 4), torch.randn(4)), None),
        "dynamic": (DynamicBranches(), (torch.tensor(1.0), torch.randn(5)), DYNAMIC_SHAPES),
        "dynamic_loop": (CountedSum(), (torch.tensor(3), torch.randn(5)), LOOP_DYNAMIC_SHAPES),
        "pass_through": (PassThrough(), (torch.tensor(1.0), torch.randn(3), torch.randn(3)), None),
    }
    out = {}
    for name, (model, args, dynamic) in cases.items():
        program, method = _compile(model, args, dynamic)
        out[name] = (model, program, method)
    return out


# ------------------------------------------------------------------------------------------ tests


def test_cond_runs_the_branch_its_predicate_picks(compiled):
    model, program, method = compiled["branches"]
    kernels = program.kernel_histogram()
    assert "aten::relu.out" in kernels and "aten::sin.out" in kernels  # both branches, one program
    for p in (1.0, -1.0, 0.0):
        _assert_matches_eager(method, model, torch.tensor(p), torch.randn(2, 3))


def test_nested_cond_takes_all_three_paths(compiled):
    model, _, method = compiled["nested"]
    for p, q in ((1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0)):
        _assert_matches_eager(method, model, torch.tensor(p), torch.tensor(q), torch.randn(3))


def test_while_loop_runs_a_data_dependent_number_of_times(compiled):
    model, _, method = compiled["counted_sum"]
    for n in (0, 1, 4, 9):
        _assert_matches_eager(method, model, torch.tensor(n), torch.randn(4))


def test_while_loop_swapping_carried_values(compiled):
    model, _, method = compiled["fibonacci"]
    for n in (0, 1, 6, 12):
        _assert_matches_eager(method, model, torch.tensor(n), torch.rand(2), torch.rand(2))


def test_cond_inside_while_loop(compiled):
    model, _, method = compiled["collatz"]
    for x in (1.0, 6.0, 7.0, 27.0):  # 27 takes 111 steps
        _assert_matches_eager(method, model, torch.tensor(x))


def test_map_over_leading_dim(compiled):
    model, program, method = compiled["mapped"]
    assert program.kernel_histogram()["aten::tanh.out"] == 5  # unrolled: one body per slice
    _assert_matches_eager(method, model, torch.randn(5, 4), torch.randn(4))


def test_dynamic_sizes_inside_branches_are_bounded(compiled):
    model, program, method = compiled["dynamic"]
    (output,) = [op for op in program.module.body.operations[0].regions[0].blocks[0].operations
                 if op.operation.name == "etx.output"]
    slot = output.operation.operands[0].owner
    assert list(ir.DenseI64ArrayAttr(slot.attributes["upper_bounds"])) == [16]  # 2 * max(n)
    for p in (1.0, -1.0):
        for n in (2, 5, 8):
            _assert_matches_eager(method, model, torch.tensor(p), torch.randn(n))


def test_loop_carried_dynamic_sizes_are_bounded(compiled):
    model, _, method = compiled["dynamic_loop"]
    for n, k in ((0, 2), (3, 7), (9, 16)):
        _assert_matches_eager(method, model, torch.tensor(n), torch.randn(k))


def test_branches_returning_earlier_values_and_weights(compiled):
    model, _, method = compiled["pass_through"]
    for p in (1.0, -1.0):
        _assert_matches_eager(method, model, torch.tensor(p), torch.randn(3), torch.randn(3))


def test_control_flow_under_the_nested_backend(compiled):
    # Top-level ops and each branch's and loop body's ops are delegated in their own blocks;
    # the control flow stays in the outer program.
    for name, args in (("branches", [(torch.tensor(1.0), torch.randn(2, 3)), (torch.tensor(-1.0), torch.randn(2, 3))]),
                       ("counted_sum", [(torch.tensor(0), torch.randn(4)), (torch.tensor(5), torch.randn(4))])):
        model = compiled[name][0]
        program, method = _compile(model, args[0], partitioner=backends.partitioner("nested"))
        assert program.kernel_histogram() == {}  # every computation runs in a delegate
        for call in args:
            _assert_matches_eager(method, model, *call)


# ------------------------------------------------------------------------------------------ errors


@torch.library.custom_op("etmlir_control_flow_test::twice", mutates_args=())
def _twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@_twice.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class BranchWithoutKernel(torch.nn.Module):
    def forward(self, p: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        def true_fn(x):
            return torch.ops.etmlir_control_flow_test.twice(x) + 1  # no out variant

        def false_fn(x):
            return x - 1

        return torch.cond(p > 0, true_fn, false_fn, (x,))


class BranchIndexing(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 3))

    def forward(self, p: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        def true_fn(idx):
            return torch.index_select(self.w, 0, idx)  # index out of range

        def false_fn(idx):
            return self.w[:2] * 2

        return torch.cond(p > 0, true_fn, false_fn, (idx,))


def test_compile_error_names_the_branch_line():
    program = etmlir.to_edge(etmlir.export(BranchWithoutKernel(), (torch.tensor(1.0), torch.randn(3))))
    with pytest.raises(ir.MLIRError) as error:
        program.to_executorch()
    message = str(error.value)
    assert f"test_control_flow.py\":{_line('# no out variant')}" in message
    assert "etmlir_control_flow_test::twice has no out variant" in message


def test_run_time_error_names_the_branch_line():
    model = BranchIndexing()
    _, method = _compile(model, (torch.tensor(1.0), torch.tensor([0, 1])))
    _assert_matches_eager(method, model, torch.tensor(-1.0), torch.tensor([7, 1]))  # the other branch runs
    with pytest.raises(etmlir.runtime.Error) as error:
        method(torch.tensor(1.0), torch.tensor([7, 1]))
    assert f"test_control_flow.py:{_line('# index out of range')}" in str(error.value)
    assert "index 7 is out of bounds" in str(error.value)


def test_map_over_a_dynamic_dim_is_refused_with_its_line():
    class DynamicMap(torch.nn.Module):
        def forward(self, xs):
            return hop_map(lambda x: x + 1, xs)  # dynamic map

    with pytest.raises(ValueError) as error:
        etmlir.export(DynamicMap(), (torch.randn(4, 2),), dynamic_shapes={"xs": {0: torch.export.Dim("n", max=8)}})
    assert f"test_control_flow.py:{_line('# dynamic map')}" in str(error.value)
    assert "only known at run time" in str(error.value)
