"""etmlir.devtools.delegation_info: what was delegated, what was not, and why, from hand-written IR."""

from __future__ import annotations

import re

import pytest
from torch import nn
from torch_mlir import ir

import etmlir
from etmlir import backends, models
from etmlir.devtools import DelegatedSubgraph, NotDelegatedOp, delegation_info
from etmlir.dialects import new_context
from etmlir.edge_program import EdgeProgram

# After et-outline-delegates: two delegates (one preprocessed, with a payload), an op the
# backend refused and one no partitioner looked at. Constants are not ops.
OUTLINED = """
module {
  func.func @forward(%x: tensor<2x4xf32>, %idx: tensor<2xi64>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %w = "edge.constant"() {etmlir.param = "emb.weight", value = dense<1.0> : tensor<8x4xf32>} : () -> tensor<8x4xf32>
    %0 = "edge.embedding"(%w, %idx) {padding_idx = -1 : i64, scale_grad_by_freq = false, sparse = false, etmlir.debug_handle = 1 : i64, etmlir.not_delegated = {nested = "edge.embedding is not an op the backend supports"}} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32> loc(callsite("torch/nn/modules/sparse.py":190:15 at "model.py":41:8))
    %1:2 = call @nested_0.forward(%x, %0) {etmlir.backend = "nested", etmlir.debug_handle = 10 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
    %2 = "edge.relu"(%1#0) {etmlir.debug_handle = 5 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("model.py":46:8)
    %3 = call @nested_1.forward(%2) {etmlir.backend = "nested", etmlir.debug_handle = 11 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %3, %1#1 : tensor<2x4xf32>, tensor<2x4xf32>
  }
  module @nested_0 attributes {etmlir.backend = "nested"} {
    func.func @forward(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
      %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
      %w = "edge.constant"() {etmlir.param = "fc1.weight", value = dense<0.5> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
      %b = "edge.constant"() {etmlir.param = "fc1.bias", value = dense<0.1> : tensor<4xf32>} : () -> tensor<4xf32>
      %0 = "edge.addmm"(%b, %arg0, %w, %one, %one) {etmlir.debug_handle = 2 : i64} : (tensor<4xf32>, tensor<2x4xf32>, tensor<4x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x4xf32>
      %1 = "edge.add_tensor"(%0, %arg1, %one) {etmlir.debug_handle = 3 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<i64>) -> tensor<2x4xf32>
      %2 = "edge.gelu"(%1) {approximate = "none", etmlir.debug_handle = 4 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
      return %2, %1 : tensor<2x4xf32>, tensor<2x4xf32>
    }
  }
  func.func private @nested_0.forward(tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) attributes {etmlir.backend = "nested"}
  module @nested_1 attributes {etmlir.backend = "nested", etmlir.compile_specs = {key = "value"}, etmlir.payload = dense_resource<nested_1.payload> : tensor<16xui8>} {
    func.func @forward(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
      %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
      %w = "edge.constant"() {etmlir.param = "fc2.weight", value = dense<0.5> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
      %b = "edge.constant"() {etmlir.param = "fc2.bias", value = dense<0.1> : tensor<4xf32>} : () -> tensor<4xf32>
      %0 = "edge.addmm"(%b, %arg0, %w, %one, %one) {etmlir.debug_handle = 6 : i64} : (tensor<4xf32>, tensor<2x4xf32>, tensor<4x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x4xf32>
      return %0 : tensor<2x4xf32>
    }
  }
  func.func private @nested_1.forward(tensor<2x4xf32>) -> tensor<2x4xf32> attributes {etmlir.backend = "nested"}
}
{-#
  dialect_resources: {
    builtin: {
      nested_1.payload: "0x0400000000010203040506070809101112131415"
    }
  }
#-}
"""

# Tagged by two partitioners, not outlined: a tag is a subgraph of the backend it names.
TAGGED = """
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %w = "edge.constant"() {etmlir.param = "fc.weight", value = dense<0.5> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %0 = "edge.mm"(%x, %w) {etmlir.debug_handle = 1 : i64, etmlir.delegation_tag = "nested_0"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("mlp.py":10:8)
  %1 = "edge.add_tensor"(%0, %x, %one) {etmlir.debug_handle = 2 : i64, etmlir.delegation_tag = "nested_0"} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<i64>) -> tensor<2x4xf32> loc("mlp.py":11:8)
  %2 = "edge.exp"(%1) {etmlir.debug_handle = 3 : i64, etmlir.not_delegated = {nested = "edge.exp is not an op the backend supports", xnn = "f32 exp is slow"}} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc(fused["mlp.py":12:8, "torch/nn/functional.py":100:4])
  %3 = "edge.relu"(%2) {etmlir.debug_handle = 4 : i64, etmlir.delegation_tag = "xnn_1"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("mlp.py":13:8)
  %4 = "edge.sym_size_int"(%3) {dim = 0 : i64, etmlir.debug_handle = 5 : i64} : (tensor<2x4xf32>) -> tensor<i64> loc("mlp.py":14:8)
  %5 = "edge.add_tensor"(%3, %1, %one) {etmlir.debug_handle = 6 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<i64>) -> tensor<2x4xf32> loc("mlp.py":15:8)
  return %5 : tensor<2x4xf32>
}
"""


def report(text: str):
    with new_context():
        module = ir.Module.parse(text)
        return delegation_info(module)


def parse_github_table(text: str) -> list[list[str]]:
    """Rows (header first) of a github-format table, cells stripped; the |---| rule dropped."""
    rows = []
    for line in text.splitlines():
        assert line.startswith("|") and line.endswith("|"), line
        if set(line) <= set("|-: "):
            continue
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_outlined_delegates_count_their_ops_and_not_constants():
    info = report(OUTLINED)
    assert info.num_delegated_subgraphs == 2
    assert info.num_delegated_ops == 4
    assert info.num_non_delegated_ops == 2
    assert info.op_counts == {"edge.add_tensor": (1, 0), "edge.addmm": (2, 0), "edge.embedding": (0, 1),
                              "edge.gelu": (1, 0), "edge.relu": (0, 1)}
    assert info.subgraphs == [
        DelegatedSubgraph("nested_0", "nested", {"edge.add_tensor": 1, "edge.addmm": 1, "edge.gelu": 1},
                          outlined=True, payload_bytes=None),
        DelegatedSubgraph("nested_1", "nested", {"edge.addmm": 1}, outlined=True, payload_bytes=16)]


def test_refusal_has_op_handle_user_source_line_and_reason():
    info = report(OUTLINED)
    # The callsite's innermost frame is torch's; the report names the model's line.
    assert info.not_delegated == [NotDelegatedOp("edge.embedding", 1, "model.py:41",
                                                 {"nested": "edge.embedding is not an op the backend supports"})]
    assert info.unexplained == {"edge.relu": 1}
    assert info.why_not_delegated().splitlines() == [
        "edge.embedding #1 at model.py:41",
        "    nested: edge.embedding is not an op the backend supports",
        "1 non-delegated op with no recorded reason (no partitioner looked at it): edge.relu x1"]


def test_table_has_a_row_per_op_sorted_and_a_total():
    info = report(OUTLINED)
    rows = parse_github_table(info.table())
    assert rows == [["op", "delegated", "not delegated"],
                    ["edge.add_tensor", "1", "0"], ["edge.addmm", "2", "0"], ["edge.embedding", "0", "1"],
                    ["edge.gelu", "1", "0"], ["edge.relu", "0", "1"], ["total", "4", "2"]]
    assert info.table(tablefmt="plain").splitlines()[-1].split() == ["total", "4", "2"]


def test_graph_shows_each_call_as_one_line_with_its_ops():
    lines = report(OUTLINED).delegated_graph().splitlines()
    assert [" ".join(line.split()) for line in lines] == [
        "func @forward(%arg0, %arg1):",
        "%1 = edge.embedding(emb.weight, %arg1) model.py:41",
        "%2:2 = delegate nested_0 [nested] (%arg0, %1): 3 ops (edge.add_tensor x1, edge.addmm x1, edge.gelu x1)",
        "%3 = edge.relu(%2#0) model.py:46",
        "%4 = delegate nested_1 [nested] (%3): 1 op (edge.addmm x1), payload 16 B",
        "return %4, %2#1"]


def test_tagged_ops_are_delegated_before_outlining_per_backend():
    info = report(TAGGED)
    assert info.num_delegated_subgraphs == 2
    assert info.num_delegated_ops == 3
    assert info.num_non_delegated_ops == 3  # exp, the size query and the last add
    assert info.op_counts == {"edge.add_tensor": (1, 1), "edge.exp": (0, 1), "edge.mm": (1, 0),
                              "edge.relu": (1, 0), "edge.sym_size_int": (0, 1)}
    assert [(s.name, s.backend, s.num_ops, s.outlined) for s in info.subgraphs] == [
        ("nested_0", "nested", 2, False), ("xnn_1", "xnn", 1, False)]
    assert {name: (c.subgraphs, c.delegated_ops, c.refused_ops) for name, c in info.backends.items()} == {
        "nested": (1, 2, 1), "xnn": (1, 1, 1)}
    assert info.not_delegated[0].reasons == {"nested": "edge.exp is not an op the backend supports",
                                             "xnn": "f32 exp is slow"}
    assert info.not_delegated[0].location == "mlp.py:12"
    assert info.unexplained == {"edge.add_tensor": 1, "edge.sym_size_int": 1}
    summary = info.summary().splitlines()
    assert summary[1:] == ["delegated ops: 3 (50.0% of 6)",
                           "non-delegated ops: 3 (1 with a recorded reason, 2 without)",
                           "  nested: 1 subgraph, 2 ops delegated, 1 refused",
                           "  xnn: 1 subgraph, 1 op delegated, 1 refused"]
    graph = [" ".join(line.split()) for line in info.delegated_graph().splitlines()]
    assert graph[1] == "%3 = tagged nested_0 [nested] (%arg0): 2 ops (edge.add_tensor x1, edge.mm x1)"
    assert graph[3] == "%5 = tagged xnn_1 [xnn] (%4): 1 op (edge.relu x1)"
    assert graph[5] == "%7 = edge.add_tensor(%5, %3, 1) mlp.py:15"  # a scalar constant by its value


def test_str_has_every_section_under_a_heading():
    info = report(OUTLINED)
    text = str(info)
    headings = [line for line in text.splitlines() if line.startswith("== ")]
    assert headings == ["== Delegation summary ==", "== Ops ==", "== Delegated graph ==", "== Why not delegated =="]
    for section in (info.summary(), info.table(), info.delegated_graph(), info.why_not_delegated()):
        assert section in text


def test_edge_program_is_accepted():
    with new_context():
        program = EdgeProgram(module=ir.Module.parse(TAGGED), example_args=(), dynamic_dims=[])
        assert delegation_info(program).num_delegated_ops == 3


def test_module_without_a_function_is_an_error_naming_what_it_holds():
    text = """module {
      func.func private @nested_0.forward() attributes {etmlir.backend = "nested"}
      module @nested_0 {}
    }"""
    with pytest.raises(ValueError, match=r"no top-level func\.func with a body to report on \(it holds: "
                                         r"func\.func @nested_0\.forward, builtin\.module @nested_0\)"):
        report(text)


def test_call_of_a_missing_delegate_is_an_error_naming_the_callee():
    text = OUTLINED.replace("module @nested_1 ", "module @other_1 ")
    with pytest.raises(ValueError, match=r"calls @nested_1\.forward, but the module holds no nested module "
                                         r"@nested_1$"):
        report(text)


def test_mlp_partitioned_by_the_nested_backend():
    """End to end: the nested backend takes the linear layers, its partitioner refuses the skipped relus."""
    model, args, dynamic = models.build("mlp")
    edge = etmlir.to_edge(etmlir.export(model, args, dynamic))
    lowered = edge.to_backend(backends.partitioner("nested", skip_ops=["edge.relu"]))
    info = delegation_info(lowered)
    # Every op of the edge program is counted once, on one side or the other.
    assert info.num_delegated_ops + info.num_non_delegated_ops == sum(edge.op_histogram().values())
    linears = sum(isinstance(m, nn.Linear) for m in model.modules())  # each: an addmm and its weight's permute_copy
    relus = sum(isinstance(m, nn.ReLU) for m in model.modules())  # one between consecutive linears, all skipped
    assert info.op_counts == {"edge.addmm": (linears, 0), "edge.permute_copy": (linears, 0), "edge.relu": (0, relus)}
    assert info.num_delegated_subgraphs == linears  # the relus cut the linears apart
    assert all(s.backend == "nested" and s.outlined and s.payload_bytes > 0 for s in info.subgraphs)
    assert [entry.op for entry in info.not_delegated] == ["edge.relu"] * relus
    for entry in info.not_delegated:
        assert list(entry.reasons) == ["nested"] and "edge.relu" in entry.reasons["nested"]
        assert re.fullmatch(r".*mlp\.py:\d+", entry.location) and entry.handle is not None
    assert info.num_unexplained == 0
    graph = info.delegated_graph().splitlines()
    assert sum("delegate nested_" in line for line in graph) == linears
