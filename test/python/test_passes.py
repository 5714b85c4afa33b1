"""The pass registry and pipeline parser shared by et-opt and the Python API."""

from __future__ import annotations

import pytest
from torch_mlir import ir

from etmlir.dialects import new_context
from etmlir.passes import PipelineError, all_passes, get_pass, run_pipeline
from etmlir.passes.pipeline import parse_pipeline
from etmlir.passes.registry import PassOptionError

LINEAR = """
func.func @f(%x: !torch.vtensor<[2,3],f32>, %w: !torch.vtensor<[4,3],f32>) -> !torch.vtensor<[2,4],f32> {
  %none = torch.constant.none
  %0 = torch.aten.linear %x, %w, %none : !torch.vtensor<[2,3],f32>, !torch.vtensor<[4,3],f32>, !torch.none -> !torch.vtensor<[2,4],f32>
  return %0 : !torch.vtensor<[2,4],f32>
}
"""


def test_registry_lists_both_passes_with_descriptions():
    flags = {p.flag: p for p in all_passes()}
    assert {"et-decompose-to-core-aten", "et-verify-core-aten"} <= set(flags)
    assert all(p.description for p in flags.values())


def test_pipeline_parser_keeps_nested_options_and_pipelines():
    elements = parse_pipeline("builtin.module(et-decompose-to-core-aten{keep=aten.a.b,aten.c},"
                              "func.func(canonicalize{max-iterations=3},cse),cse)")
    assert [e.name for e in elements] == ["et-decompose-to-core-aten", "func.func", "cse"]
    assert elements[0].options == "keep=aten.a.b,aten.c"
    assert elements[1].nested == "canonicalize{max-iterations=3},cse"


def test_options_are_typed_and_checked():
    info = get_pass("et-decompose-to-core-aten")
    assert info.parse_options("keep=aten.linear.default,aten.relu") == {"keep": ["aten.linear.default", "aten.relu"]}
    with pytest.raises(PassOptionError, match="unknown option 'nope'"):
        info.parse_options("nope=1")
    with pytest.raises(PassOptionError, match="unknown op 'aten.a.default'"):
        info.parse_options("keep=aten.a.default")


def test_python_and_upstream_passes_run_in_one_pipeline():
    with new_context():
        module = ir.Module.parse(LINEAR)
        run_pipeline(module, "builtin.module(et-decompose-to-core-aten,canonicalize,et-verify-core-aten)")
        text = str(module)
    assert "torch.aten.mm" in text and "torch.aten.linear" not in text


def test_verify_failure_raises_with_the_op_named():
    with new_context():
        module = ir.Module.parse(LINEAR)
        with pytest.raises(ir.MLIRError) as error:
            run_pipeline(module, "builtin.module(et-verify-core-aten)")
    messages = [d.message for d in error.value.error_diagnostics]
    assert any("'torch.aten.linear' (aten.linear.default) is not a Core ATen op" in m for m in messages)


def test_unknown_pass_is_a_pipeline_error():
    with new_context():
        module = ir.Module.parse(LINEAR)
        with pytest.raises(PipelineError, match="unknown pass"):
            run_pipeline(module, "builtin.module(not-a-pass)")
