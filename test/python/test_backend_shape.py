"""A backend is its folder: a toy backend added beside the real ones needs nothing else on the Python side.

The toy backend below is written into a temporary folder that is put on
`etmlir.backends`' search path, exactly as `python/etmlir/backends/toy/`
would be. Without any registration call or list edit it is found by id, its
pass `et-toy-negate` is in the one pass registry (and et-opt's list), and
its partitioner and preprocess run through to_backend and to_executorch.
The runtime half (runtime/backends/toy + one ETMLIR_BACKENDS entry) is
test/cpp's toy backend; this build's runtime does not have it, so loading
the program fails with a message naming the backend.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

import etmlir
import etmlir.backends
from etmlir import runtime
from etmlir.delegation import backend as registry
from etmlir.passes import get_pass, registry as pass_registry, run_pipeline

TOY_INIT = '''
"""The toy backend: delegates edge.neg; its payload is how many ops its pass marked, as text."""
from etmlir.delegation.backend import Backend, PreprocessResult, register_backend
from etmlir.delegation.operator_support import OperatorSupport
from etmlir.delegation.partitioner import Partitioner


class ToyBackend(Backend):
    id = "toy"

    def partitioner(self, **options):
        return Partitioner("toy", OperatorSupport(ops={"edge.neg": None}), compile_specs={})

    def preprocess(self, module, compile_specs):
        from etmlir.backends.toy import pipeline
        return pipeline.preprocess(module, compile_specs)


register_backend(ToyBackend())
'''

TOY_PIPELINE = '''
from etmlir.delegation.backend import PreprocessResult
from etmlir.passes import run_pipeline

PIPELINE = "builtin.module(et-toy-negate)"


def preprocess(module, compile_specs):
    run_pipeline(module, PIPELINE)
    count = sum(1 for op in module.body.operations[0].regions[0].blocks[0].operations if "toy.seen" in op.attributes)
    return PreprocessResult(str(count).encode(), {})
'''

TOY_PASS = '''
"""et-toy-negate: a pass of the toy backend (marks each edge.neg it will run)."""
from torch_mlir import ir
from etmlir.passes.registry import register_pass


@register_pass("et-toy-negate")
def negate(module: ir.Operation) -> None:
    """et-toy-negate: mark every edge.neg with toy.seen."""
    def visit(op):
        if op.name == "edge.neg":
            op.attributes["toy.seen"] = ir.UnitAttr.get()
        return ir.WalkResult.ADVANCE
    module.walk(visit)
'''


@pytest.fixture
def toy_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    folder = tmp_path / "toy"
    (folder / "passes").mkdir(parents=True)
    (folder / "__init__.py").write_text(textwrap.dedent(TOY_INIT))
    (folder / "pipeline.py").write_text(textwrap.dedent(TOY_PIPELINE))
    (folder / "passes" / "__init__.py").write_text("")
    (folder / "passes" / "negate.py").write_text(textwrap.dedent(TOY_PASS))
    # The folder sits where python/etmlir/backends/toy/ would.
    monkeypatch.setattr(etmlir.backends, "__path__", [*etmlir.backends.__path__, str(tmp_path)])
    registry._discovered.cache_clear()
    yield "toy"
    registry._BACKENDS.pop("toy", None)
    registry._discovered.cache_clear()
    pass_registry._REGISTRY.pop("et-toy-negate", None)
    for name in [m for m in sys.modules if m == "etmlir.backends.toy" or m.startswith("etmlir.backends.toy.")]:
        del sys.modules[name]


class Negate(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -(x * 2.0)


def test_a_backend_folder_is_found_by_id_with_its_passes(toy_backend: str) -> None:
    assert toy_backend in etmlir.backends.backend_ids()
    assert toy_backend not in registry._BACKENDS  # found, not yet imported
    info = get_pass("et-toy-negate")
    assert info is not None and info.description == "mark every edge.neg with toy.seen."
    assert "et-toy-negate" in [p.flag for p in etmlir.passes.all_passes()]


def test_the_toy_backend_lowers_and_the_runtime_names_it(toy_backend: str) -> None:
    x = torch.randn(2, 3)
    edge = etmlir.to_edge(etmlir.export(Negate(), (x,)))
    delegated = edge.to_backend(etmlir.backends.partitioner(toy_backend))
    text = str(delegated.module)
    assert 'etmlir.backend = "toy"' in text
    assert "etmlir.payload = dense<49> : tensor<1xui8>" in text  # b"1": its pass ran on the one edge.neg
    pte = delegated.to_executorch().buffer
    with pytest.raises(runtime.Error, match="backend .toy."):
        runtime.load(pte).method("forward")


def test_pipeline_text_names_the_steps() -> None:
    from etmlir.backends.cpu.pipeline import pipeline
    text = pipeline()
    for flag in ("et-edge-to-torch", "et-torch-to-linalg", "et-cpu-split-groups", "et-cpu-fuse-elementwise",
                 "et-cpu-bufferize", "et-cpu-microkernels", "et-cpu-pack-weights", "et-cpu-fuse-inverted-residual", "et-cpu-trace-regions",
                 "et-cpu-report-failures", "et-cpu-to-llvm"):
        assert flag in text and get_pass(flag) is not None
    assert "et-cpu-microkernels" not in pipeline(microkernels=False)
    assert "et-cpu-pack-weights" not in pipeline(microkernels=False)
    assert "et-cpu-fuse-inverted-residual" not in pipeline(microkernels=False)
    assert "et-cpu-pack-weights{panel-rows=6 panel-width=16}" in pipeline(panels=(6, 16))
    assert "et-cpu-trace-regions" not in pipeline(trace_regions=False)


def test_a_pass_flag_maps_to_its_file() -> None:
    """One pass per file, named after its flag: every registered pass lives where its flag says."""
    for info in etmlir.passes.all_passes():
        words = info.flag[len("et-"):].split("-")
        module = info.run.__module__
        core = f"etmlir.passes.{'_'.join(words)}"
        backend = f"etmlir.backends.{words[0]}.passes.{'_'.join(words[1:])}"
        assert module in (core, backend), f"{info.flag} is defined in {module}"


def test_run_pipeline_with_an_unknown_et_pass_names_it() -> None:
    from torch_mlir import ir
    from etmlir.dialects import new_context
    from etmlir.passes import PipelineError
    with new_context():
        module = ir.Module.parse("func.func @f() { return }")
        with pytest.raises(PipelineError, match="et-nonexistent-pass"):
            run_pipeline(module, "builtin.module(et-nonexistent-pass)")
