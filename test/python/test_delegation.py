"""Delegation end to end: partition, outline, preprocess, `.pte`, runtime, against PyTorch eager.

Every zoo model is partially delegated to the `nested` backend (a skipped op
keeps part of it on portable kernels, so delegate calls and kernel calls
mix), lowered as a whole, and called from another model (composition). The
nested backend runs the same portable kernels, so the tolerances are
test_runtime.py's: seed CNN and MLP atol 1e-5 / rtol 1e-4, MobileNetV2
atol 2e-3 / rtol 1e-3, nanoGPT atol 1e-3 / rtol 1e-3.
"""

from __future__ import annotations

import collections
import inspect
import re

import numpy as np
import pytest
import torch
from torch import nn

from etmlir.dialects import attrs
import etmlir
import etmlir.runtime as rt
from etmlir import backends, models
from etmlir.delegation.partitioner import is_delegate_call

TOLERANCES = {  # name -> (atol, rtol)
    "seed_cnn": (1e-5, 1e-4),
    "mlp": (1e-5, 1e-4),
    "mobilenet_v2": (2e-3, 1e-3),
    "nanogpt": (1e-3, 1e-3),
}
# One op per model left on portable kernels, so the delegated program mixes both.
SKIPPED = {"seed_cnn": "edge.relu", "mlp": "edge.relu", "mobilenet_v2": "edge.add_tensor",
           "nanogpt": "edge.embedding"}


def _eager(model, args) -> np.ndarray:
    with torch.no_grad():
        return model(*args).numpy()


def _top_ops(program: etmlir.EdgeProgram) -> collections.Counter[str]:
    return collections.Counter("delegate" if is_delegate_call(op.operation) else op.operation.name
                               for op in program.function.regions[0].blocks[0].operations)


@pytest.fixture(scope="module")
def delegated(edge_zoo):
    """name -> (partially delegated EdgeProgram, its ExecutorchProgram)."""
    out = {}
    for name in models.ZOO:
        edge = edge_zoo[name].to_backend(backends.partitioner("nested", skip_ops=[SKIPPED[name]]))
        out[name] = (edge, edge.to_executorch())
    return out


@pytest.mark.parametrize("name", models.ZOO)
def test_partially_delegated_zoo_model_runs_and_matches_eager(zoo, edge_zoo, delegated, name):
    model, args, _ = zoo[name]
    edge, et = delegated[name]
    ops = _top_ops(edge)
    assert ops["delegate"] >= 1
    skipped_in_source = edge_zoo[name].op_histogram()[SKIPPED[name]]
    assert ops[SKIPPED[name]] == skipped_in_source > 0  # the skipped op stayed outside, every one
    (actual,) = rt.load(et.buffer).method("forward")(*args)
    atol, rtol = TOLERANCES[name]
    np.testing.assert_allclose(actual.numpy(), _eager(model, args), atol=atol, rtol=rtol)


def test_the_input_program_is_left_unchanged(edge_zoo, delegated):
    assert not any(is_delegate_call(op.operation) for op in edge_zoo["mlp"].function.regions[0].blocks[0].operations)
    assert attrs.DELEGATION_TAG not in edge_zoo["mlp"].mlir()


@pytest.mark.parametrize("length", [7, 200])
def test_delegated_nanogpt_runs_at_two_sequence_lengths_from_one_pte(zoo, delegated, length):
    model, _, _ = zoo["nanogpt"]
    method = rt.load(delegated["nanogpt"][1].buffer).method("forward")
    tokens = torch.randint(0, 65, (1, length), generator=torch.Generator().manual_seed(length))
    (actual,) = method(tokens)
    assert actual.shape == (1, length, 65)
    np.testing.assert_allclose(actual.numpy(), _eager(model, (tokens,)), atol=1e-3, rtol=1e-3)


def test_each_delegate_is_a_deduplicated_payload_segment_named_in_the_pte(zoo, delegated):
    from etmlir.tools.et_inspect import describe
    edge, et = delegated["mobilenet_v2"]
    # The skipped residual adds (one per InvertedResidual with stride 1 and n_in == n_out) cut the chain: one more.
    delegates = 1 + sum(m.use_residual for m in zoo["mobilenet_v2"][0].modules()
                        if isinstance(m, models.mobilenet_v2.InvertedResidual))
    assert _top_ops(edge)["delegate"] == delegates
    text = describe(et.buffer)
    assert text.count("backend 'nested', payload segment") == delegates
    assert text.count("delegate payload") == delegates  # all different, so one segment each
    with pytest.raises(ValueError, match="already has delegate calls"):
        etmlir.to_backend("nested", edge)


@pytest.mark.parametrize("name", models.ZOO)
def test_whole_program_delegation_runs_and_matches_eager(zoo, edge_zoo, name):
    model, args, _ = zoo[name]
    lowered = etmlir.to_backend("nested", edge_zoo[name], {"fold_constants": "true"})
    assert dict(_top_ops(lowered.program)) == {"delegate": 1, "func.return": 1}
    (actual,) = rt.load(lowered.to_executorch().buffer).method("forward")(*args)
    atol, rtol = TOLERANCES[name]
    np.testing.assert_allclose(actual.numpy(), _eager(model, args), atol=atol, rtol=rtol)


class _Outer(nn.Module):
    """A model that calls a lowered module between its own ops."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.head = nn.Linear(10, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.head(torch.relu(self.inner(x * 0.5))), dim=-1)


def test_composition_a_lowered_module_called_from_another_model(zoo, edge_zoo):
    mlp, args, _ = zoo["mlp"]
    lowered = etmlir.to_backend("nested", edge_zoo["mlp"])
    torch.manual_seed(0)
    outer = _Outer(lowered).eval()
    reference = _Outer(mlp).eval()
    reference.head.load_state_dict(outer.head.state_dict())
    # Eager: the lowered module runs its payload on etmlir's runtime.
    with torch.no_grad():
        np.testing.assert_allclose(outer(*args).numpy(), reference(*args).numpy(), atol=1e-5, rtol=1e-4)
    edge = etmlir.to_edge(etmlir.export(outer, args))
    ops = _top_ops(edge)
    assert ops["delegate"] == 1 and ops["edge.addmm"] == 1  # the head stays on portable kernels
    # The outer ops' debug handles start above the delegate's: every handle names one op.
    handles = [int(h) for h in re.findall(r"etmlir.debug_handle = (\d+)", edge.mlir())]
    assert len(handles) == len(set(handles))
    (actual,) = rt.load(edge.to_executorch().buffer).method("forward")(*args)
    np.testing.assert_allclose(actual.numpy(), _eager(reference, args), atol=1e-5, rtol=1e-4)


def test_one_lowered_module_called_twice_is_stored_once(zoo, edge_zoo):
    from etmlir.tools.et_inspect import describe
    mlp, args, _ = zoo["mlp"]
    lowered = etmlir.to_backend("nested", edge_zoo["mlp"])

    class SameTwice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = lowered

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x) - self.inner(x * 2.0)

    edge = etmlir.to_edge(etmlir.export(SameTwice(), args))
    et = edge.to_executorch()
    text = describe(et.buffer)
    assert text.count("backend 'nested', payload segment") == 2 and text.count("delegate payload") == 1
    (actual,) = rt.load(et.buffer).method("forward")(*args)
    expected = _eager(mlp, args) - _eager(mlp, (args[0] * 2.0,))
    np.testing.assert_allclose(actual.numpy(), expected, atol=2e-5, rtol=1e-4)


def test_composing_two_lowered_modules_renumbers_the_second(zoo, edge_zoo):
    mlp, args, _ = zoo["mlp"]
    first = etmlir.to_backend("nested", edge_zoo["mlp"])
    second = etmlir.to_backend("nested", edge_zoo["mlp"])

    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = first, second

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.a(x) + self.b(x)

    edge = etmlir.to_edge(etmlir.export(Twice(), args))
    assert _top_ops(edge)["delegate"] == 2
    handles = [int(h) for h in re.findall(r"etmlir.debug_handle = (\d+)", edge.mlir())]
    assert len(handles) == len(set(handles))
    (actual,) = rt.load(edge.to_executorch().buffer).method("forward")(*args)
    np.testing.assert_allclose(actual.numpy(), 2 * _eager(mlp, args), atol=2e-5, rtol=1e-4)


class _Lookup(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(10, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = self.table(ids)  # the op that fails on an index out of range
        return torch.relu(rows) * 2.0


def test_a_delegate_failing_at_run_time_names_the_source_line_of_the_failing_op():
    torch.manual_seed(0)
    model = _Lookup().eval()
    ids = torch.tensor([[1, 2, 3]])
    edge = etmlir.to_edge(etmlir.export(model, (ids,)))
    edge = edge.to_backend(backends.partitioner("nested", skip_ops=["edge.relu"]))
    method = rt.load(edge.to_executorch().buffer).method("forward")
    np.testing.assert_allclose(method(ids)[0].numpy(), _eager(model, (ids,)), atol=1e-6)
    line = inspect.getsourcelines(_Lookup.forward)[1] + 1
    with pytest.raises(rt.Error, match=rf"test_delegation.py:{line} \(table; method 'forward', instruction \d+, "
                                       r"delegate 'nested'\): aten::embedding.out: index 20"):
        method(torch.tensor([[1, 20, 3]]))


def test_partitioner_options_and_refusal_reasons(zoo, edge_zoo):
    partitioner = backends.partitioner("nested", ops=["edge.addmm", "edge.relu"], min_group_size=2)
    result = partitioner.partition(etmlir.program.clone_module(edge_zoo["mlp"].module).operation)
    layers = zoo["mlp"][0].layers  # one addmm per nn.Linear, one relu per nn.ReLU: one chain
    assert result.tags == ["nested_0"] and result.delegated_ops == len(layers)
    with pytest.raises(KeyError, match=r"no backend 'cpu9' is registered \(registered: .*nested"):
        backends.partitioner("cpu9")
    with pytest.raises(ValueError, match="min_group_size must be at least 1"):
        backends.partitioner("nested", min_group_size=0)
    edge = edge_zoo["nanogpt"].to_backend(backends.partitioner("nested", ops=["edge.addmm", "edge.gelu"]))
    refused = [op.operation for op in edge.module.body.operations[0].regions[0].blocks[0].operations
               if attrs.NOT_DELEGATED in op.operation.attributes]
    reasons = {op.name: str(op.attributes[attrs.NOT_DELEGATED]) for op in refused}
    assert reasons["edge.softmax"] == '{nested = "edge.softmax is not an op the backend supports"}'
    assert "a size query stays with its readers" in reasons["edge.sym_size_int"]
    assert all("is not an op the backend supports" in reason for name, reason in reasons.items()
               if name != "edge.sym_size_int")


def test_operator_support_predicates_say_why():
    from etmlir.backends import OperatorSupport
    from etmlir.dialects import new_context
    from torch_mlir import ir
    with new_context():
        module = ir.Module.parse('''
          func.func @f(%x: tensor<2x?xf32>, %y: tensor<2x3xf64>) -> (tensor<2x?xf32>, tensor<2x3xf64>) {
            %0 = "edge.relu"(%x) : (tensor<2x?xf32>) -> tensor<2x?xf32>
            %1 = "edge.neg"(%y) : (tensor<2x3xf64>) -> tensor<2x3xf64>
            return %0, %1 : tensor<2x?xf32>, tensor<2x3xf64>
          }''')
        relu, neg = [op.operation for op in module.body.operations[0].regions[0].blocks[0].operations][:2]
        support = OperatorSupport(ops={"edge.relu": None, "edge.neg": lambda op: "negation is off today"},
                                  dtypes={"f32"}, static_shapes=True)
        assert support.refusal(relu) == ("edge.relu: operand 0 has a dynamic shape (tensor<2x?xf32>); "
                                         "the backend needs static shapes")
        assert support.refusal(neg) == "edge.neg: operand 0 has dtype f64; the backend takes f32"
        assert OperatorSupport(ops={"edge.neg": lambda op: "negation is off today"}).refusal(neg) == \
            "edge.neg: negation is off today"
        assert OperatorSupport(ops={"edge.neg": None}).refusal(relu) == \
            "edge.relu is not an op the backend supports"


def test_a_backend_that_cannot_compile_fails_naming_the_delegate(edge_zoo):
    with pytest.raises(Exception, match=r"delegate @nested_0: nested backend: unknown compile spec\(s\) speed"):
        etmlir.to_backend("nested", edge_zoo["mlp"], {"speed": "max"})


def test_selected_operators_look_inside_nested_payloads(delegated, tmp_path):
    import importlib.util
    from pathlib import Path
    script = Path(__file__).resolve().parents[2] / "scripts" / "selected_operators.py"
    spec = importlib.util.spec_from_file_location("selected_operators", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _, et = delegated["mlp"]
    # Outside the delegates only the skipped relu runs; the addmms are inside the payloads.
    assert module.operators(et.buffer) == {"aten::addmm.out", "aten::relu.out"}


def test_et_run_runs_a_delegated_program(delegated, tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    path = tmp_path / "mlp_nested.pte"
    delegated["mlp"][1].save(path)
    result = subprocess.run([str(Path(sys.executable).parent / "et-run"), str(path), "--iterations", "2"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "float32[8, 10]" in result.stdout


def test_delegation_report_for_nanogpt_lists_refused_ops_with_reasons_and_lines(zoo, edge_zoo):
    from etmlir.devtools import delegation_info
    partitioner = backends.partitioner("nested", ops=["edge.addmm", "edge.view_copy", "edge.gelu", "edge.bmm"])
    info = delegation_info(edge_zoo["nanogpt"].to_backend(partitioner))
    text = str(info)
    n_layer = zoo["nanogpt"][0].cfg.n_layer  # per block: 4 biased linears (addmm), 1 attention softmax (refused)
    assert info.num_delegated_subgraphs >= n_layer and info.num_delegated_ops > 0 and info.num_non_delegated_ops > 0
    assert info.op_counts["edge.addmm"][1] == 0 and info.op_counts["edge.addmm"][0] >= 4 * n_layer
    assert info.op_counts["edge.softmax"] == (0, n_layer)
    assert "== Delegation summary ==" in text and "== Ops ==" in text and "== Why not delegated ==" in text
    # Every refused op has a reason from the backend's OperatorSupport and a line of nanogpt.py.
    refused = {entry.op for entry in info.not_delegated}
    assert "edge.softmax" in refused and "edge.embedding" in refused
    assert all(entry.reasons.get("nested") for entry in info.not_delegated)
    assert all(re.search(r"nanogpt\.py:\d+$", entry.location) for entry in info.not_delegated
               if entry.op != "edge.sym_size_int")
    assert "edge.softmax is not an op the backend supports" in text
    assert re.search(r"\| edge\.addmm\s+\|\s+\d+ \|\s+0 \|", info.table())


def test_the_pte_marks_each_delegate_calls_live_outs(zoo, delegated):
    from etmlir.tools.et_inspect import describe
    _, et = delegated["mlp"]
    calls = [line for line in describe(et.buffer).splitlines() if ": delegate " in line and "->" in line]
    linears = sum(isinstance(m, nn.Linear) for m in zoo["mlp"][0].modules())  # the skipped relus cut them apart
    assert len(calls) == linears and all(re.search(r"delegate \d\(%\d+\) -> %\d+", line) for line in calls)
