"""Methods take and return what the model took and returned: nested inputs/outputs, constants, keywords.

`etmlir.export` records the call structure (torch.export's in_spec/out_spec in etmlir's terms,
etmlir.executable.io_structure) on the program; the `.pte` carries it and the runtime's
`Method.__call__` flattens a call by it and rebuilds the result. Numerics are compared with eager
PyTorch at rtol 1e-5 / atol 1e-6 (one or two float ops), and 1e-4 / 1e-5 for BERT.
"""

from __future__ import annotations

import collections
from typing import Any

import flatbuffers
import pytest
import torch
from torch_mlir import ir

import etmlir
import etmlir.runtime as rt
from etmlir.dialects import attrs
from etmlir.edge_program import EdgeProgram
from etmlir.executable import io_structure as io
from etmlir.schema.TreeNode import TreeNode, TreeNodeT
from etmlir.tools import et_inspect

Pair = collections.namedtuple("Pair", ["total", "scaled"])


class Nested(torch.nn.Module):
    """A dict input holding a None, an int, a keyword tensor and a keyword None; a nested result
    with None, int, float and bool constants among the tensors."""

    def forward(self, inputs: dict[str, Any], n: int, mask: Any = None, offset: Any = None) -> dict[str, Any]:
        y = inputs["a"] + inputs["b"] * n + offset
        return {"sum": (y, [y * 2.0, None]), "n": n, "half": 0.5, "ok": True}


def _compile(model: torch.nn.Module, args: tuple, kwargs: dict | None = None) -> etmlir.ExecutorchProgram:
    return etmlir.to_edge(etmlir.export(model, args, kwargs=kwargs)).to_executorch()


@pytest.fixture(scope="module")
def nested() -> dict[str, Any]:
    torch.manual_seed(0)
    inputs = {"a": torch.randn(2, 3), "b": torch.randn(2, 3), "mask": None}
    offset = torch.randn(3)
    edge = etmlir.to_edge(etmlir.export(Nested(), (inputs, 3), kwargs={"mask": None, "offset": offset}))
    et = edge.to_executorch()
    return {"edge": edge, "et": et, "method": rt.load(et.buffer).method(), "inputs": inputs, "offset": offset}


def _assert_same(got: Any, expected: Any, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Same structure (types, keys, constants) and close tensors."""
    assert type(got) is type(expected), (type(got), type(expected))
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got, expected, rtol=rtol, atol=atol)
    elif isinstance(expected, dict):
        assert list(got) == list(expected)
        for key in expected:
            _assert_same(got[key], expected[key], rtol, atol)
    elif isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            _assert_same(g, e, rtol, atol)
    else:
        assert got == expected


def test_dict_input_nested_output_and_constants_match_eager(nested: dict[str, Any]) -> None:
    inputs, offset = nested["inputs"], nested["offset"]
    got = nested["method"](inputs, 3, mask=None, offset=offset)
    _assert_same(got, Nested()(inputs, 3, mask=None, offset=offset))
    # The method itself is flat: three tensor inputs, two tensor outputs.
    assert len(nested["method"].inputs) == 3 and len(nested["method"].outputs) == 2


def test_keyword_argument_may_come_by_position_and_constants_may_be_left_out(nested: dict[str, Any]) -> None:
    inputs, offset = nested["inputs"], nested["offset"]
    expected = Nested()(inputs, 3, offset=offset)
    _assert_same(nested["method"](inputs, 3, None, offset), expected)
    _assert_same(nested["method"](inputs, offset=offset), expected)   # n and mask: their exported values
    _assert_same(nested["method"](inputs=inputs, n=3, offset=offset), expected)


@pytest.mark.parametrize("call, message", [
    (lambda f, i, o: f(i, 4, offset=o), r"n expected 3 \(the value it was exported with\), got 4"),
    (lambda f, i, o: f(i, 3, mask=o, offset=o), r"mask expected None .*got Tensor of shape \(3,\)"),
    (lambda f, i, o: f({**i, "mask": o}, 3, offset=o), r"inputs\['mask'\] expected None"),
    (lambda f, i, o: f({"a": i["a"], "b": i["b"]}, 3, offset=o), r"inputs expected a dict with keys"),
    (lambda f, i, o: f(i, 3), r"missing argument 'offset'"),
    (lambda f, i, o: f(i, 3, offset=o, bias=o), r"unexpected keyword argument 'bias'"),
    (lambda f, i, o: f(i, 3, offset=2), r"input 2 \('offset'\): expected float32\[3\], got float32\[\]"),
    (lambda f, i, o: f(i, 3, offset="2"), r"input 2 \('offset'\): expected a numpy array, torch tensor"),
])
def test_a_call_that_does_not_fit_names_the_argument(nested: dict[str, Any], call: Any, message: str) -> None:
    with pytest.raises(rt.Error, match=message):
        call(nested["method"], nested["inputs"], nested["offset"])


def test_call_flat_takes_and_returns_the_tensors(nested: dict[str, Any]) -> None:
    inputs, offset = nested["inputs"], nested["offset"]
    y, y2 = nested["method"].call_flat(inputs["a"], inputs["b"], offset)
    expected = Nested()(inputs, 3, offset=offset)["sum"]
    torch.testing.assert_close(y, expected[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(y2, expected[1][0], rtol=1e-5, atol=1e-6)


def test_structure_survives_et_opt_text_the_pte_file_and_et_inspect(nested: dict[str, Any], tmp_path: Any) -> None:
    edge: EdgeProgram = nested["edge"]
    # Printed and parsed again (what an et-opt round trip does), the edge module still carries it.
    with edge.context:
        parsed = ir.Module.parse(edge.mlir(large_elements_limit=None))
    reparsed = EdgeProgram(module=parsed, example_args=edge.example_args, dynamic_dims=[])
    assert reparsed.io_structure == edge.io_structure == nested["et"].io_structure
    path = tmp_path / "nested.pte"
    reparsed.to_executorch().save(path)
    method = rt.load(path).method()
    inputs, offset = nested["inputs"], nested["offset"]
    _assert_same(method(inputs, 3, offset=offset), Nested()(inputs, 3, offset=offset))
    text = et_inspect.describe(path.read_bytes(), str(path), max_instructions=0)
    assert ("call: forward(inputs: {'a': in0, 'b': in1, 'mask': None}, n: 3, mask=None, offset=in2) -> "
            "{'sum': (out0, [out1, None]), 'n': 3, 'half': 0.5, 'ok': True}") in text


class Single(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0


class TwoAsList(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
        return [x + y, x - y]


def test_flat_tensor_models_still_return_a_tuple() -> None:
    x, y = torch.randn(4), torch.randn(4)
    single = rt.load(_compile(Single(), (x,)).buffer).method()
    (out,) = single(x)
    torch.testing.assert_close(out, x * 2.0)
    both = rt.load(_compile(TwoAsList(), (x, y)).buffer).method()
    result = both(x, y)
    assert isinstance(result, tuple) and len(result) == 2
    torch.testing.assert_close(result[1], x - y)
    with pytest.raises(rt.Error, match="takes 2 inputs"):  # the flat path's own message, as before
        both(x)


def test_a_model_without_a_structure_stays_flat() -> None:
    x = torch.randn(4)
    et = _compile(Single(), (x,))
    main = next(op.operation for op in et.module.body.operations if op.operation.name == "func.func")
    del main.attributes[attrs.IO_STRUCTURE]
    method = rt.load(etmlir.serialize(et.module)).method()
    assert method.io_structure is None
    (out,) = method(x)
    torch.testing.assert_close(out, x * 2.0)
    with pytest.raises(rt.Error, match="takes its 1 inputs positionally"):
        method(x=x)


class ReturnsPair(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[Pair, int]:
        return Pair(x.sum(0), x * 3.0), 7


def test_namedtuple_rebuilt_as_its_class_or_a_dict_when_it_cannot_be_imported() -> None:
    x = torch.randn(2, 3)
    et = _compile(ReturnsPair(), (x,))
    pair, seven = rt.load(et.buffer).method()(x)
    assert isinstance(pair, Pair) and seven == 7
    torch.testing.assert_close(pair.scaled, x * 3.0)
    torch.testing.assert_close(pair.total, x.sum(0), rtol=1e-5, atol=1e-6)

    Local = collections.namedtuple("Local", ["total", "scaled"])  # noqa: N806 (a class)

    class ReturnsLocal(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> Any:
            return Local(x.sum(0), x * 3.0)

    local = rt.load(_compile(ReturnsLocal(), (x,)).buffer).method()(x)
    assert isinstance(local, dict) and list(local) == ["total", "scaled"]
    torch.testing.assert_close(local["scaled"], x * 3.0)


def test_bert_returns_its_model_output() -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64)
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, 128, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 5:] = 0
    program = etmlir.export(model, (ids,), kwargs={"attention_mask": mask})
    method = rt.load(etmlir.to_edge(program).to_executorch().buffer).method()
    ids2 = torch.randint(0, 128, (2, 8))
    got = method(ids2, attention_mask=mask)
    with torch.no_grad():
        expected = model(ids2, attention_mask=mask)
    assert type(got) is type(expected)
    assert list(got.keys()) == ["last_hidden_state", "pooler_output"]
    torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got.pooler_output, expected.pooler_output, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got[0], expected[0], rtol=1e-4, atol=1e-5)  # ModelOutput indexing too


def test_structure_round_trips_through_json_and_flatbuffer_tables() -> None:
    outputs = io.Node(io.TUPLE, children=(
        io.Node(io.DICT, keys=(3, "x"), children=(io.leaf(1), io.constant("s"))),
        io.Node(io.DICT, keys=("k",), type_name="collections:OrderedDict", children=(io.constant(-2.5),)),
        io.Node(io.CUSTOM, type_name="some.module:Unknown", children=(io.leaf(0), io.constant(False))),
    ))
    structure = io.IOStructure(io.Node(io.TUPLE, children=(io.Node(io.TUPLE, children=(io.leaf(0),)),
                                                             io.Node(io.DICT))), outputs, ("x",))
    assert io.IOStructure.from_json(structure.to_json()) == structure
    builder = flatbuffers.Builder(256)
    builder.Finish(outputs.to_flatbuffer().Pack(builder))
    read = io.Node.from_flatbuffer(TreeNodeT.InitFromObj(TreeNode.GetRootAs(bytes(builder.Output()), 0)))
    assert read == outputs
    rebuilt = io.build(read, ["zero", "one"])
    assert rebuilt == ({3: "one", "x": "s"}, collections.OrderedDict(k=-2.5), ("zero", False))
    assert type(rebuilt[1]) is collections.OrderedDict
