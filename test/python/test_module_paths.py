"""Module paths in debug info: every op in the .pte names the nn.Module it was traced in.

The path (`blocks.1.attn.qkv`) comes from torch.export's nn_module_stack, rides in each op's
location through decomposition, to_edge, delegation and out variants, and lands in the .pte's
DebugEntry.module_path, where the runtime's failure messages and et-inspect read it.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
import torch
from torch import nn

import etmlir
from etmlir import backends
from etmlir import runtime as rt
from etmlir.dialects import attrs
from etmlir.executable import pte
from etmlir.frontend.locations import common_module_path
from etmlir.passes.assign_debug_handles import debug_handle, debug_handles
from etmlir.passes.preprocess_delegates import delegate_modules
from etmlir.tools import et_inspect

DIM = 8


class Lookup(nn.Module):
    def __init__(self, rows: int) -> None:
        super().__init__()
        self.table = nn.Embedding(rows, DIM)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table(ids)


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = torch.softmax(q @ k.transpose(-2, -1) * 0.5, dim=-1)
        return self.proj(weights @ v)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pos = Lookup(16)  # ids 16..31 are fine for the model's embedding but fail here
        self.norm = nn.LayerNorm(DIM)
        self.attn = Attention()
        self.mlp = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        x = x + self.pos(ids)
        x = x + self.attn(self.norm(x))
        return x + self.mlp(x)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = Lookup(32)
        self.blocks = nn.ModuleList([Block() for _ in range(2)])
        self.head = nn.Linear(DIM, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, ids)
        return torch.relu(self.head(x))


CLASSES = (Net, Block, Attention, Lookup)
IDS = torch.tensor([[1, 5, 9, 3]])


def _forward_lines(cls: type) -> range:
    lines, first = inspect.getsourcelines(cls.forward)
    return range(first, first + len(lines))


def _class_of_line(line: int) -> type:
    (owner,) = [cls for cls in CLASSES if line in _forward_lines(cls)]
    return owner


def _innermost_model_class(model: nn.Module, path: str) -> type:
    """The class of the innermost module on `path` defined outside torch (whose forward has the line)."""
    names = path.split(".") if path else []
    while True:
        module = model.get_submodule(".".join(names))
        if not type(module).__module__.startswith("torch."):
            return type(module)
        names.pop()


def _entries(buffer: bytes) -> dict[int, tuple[str, str, str | None]]:
    """handle -> (location, op, module path) of the .pte's forward."""
    method = pte.read(buffer).program.methods[0]
    return {e.handle: (e.location.decode(), e.op.decode(), None if e.modulePath is None else e.modulePath.decode())
            for e in method.debugInfo}


@pytest.fixture(scope="module")
def model() -> Net:
    torch.manual_seed(0)
    return Net().eval()


@pytest.fixture(scope="module")
def delegated(model):
    """(edge program with nested delegates, its .pte bytes): each attention, MLP and lookup a delegate,
    norms, residual adds and the final relu portable."""
    edge = etmlir.to_edge(etmlir.export(model, (IDS,)))
    edge = edge.to_backend(backends.partitioner("nested", skip_ops=["edge.native_layer_norm", "edge.add_tensor", "edge.relu"]))
    return edge, edge.to_executorch().buffer


def test_every_portable_and_delegated_op_names_the_module_it_came_from(model, delegated):
    edge, buffer = delegated
    entries = _entries(buffer)
    inside = {h for nested in delegate_modules(edge.module.operation) for h in debug_handles(nested)}
    instructions = {ins.debugHandle for ins in pte.read(buffer).program.methods[0].instructions} - {0}
    portable = {h for h in instructions if not entries[h][1].startswith("delegate ")}
    assert inside and portable, "the fixture should leave ops on both sides"
    this_file = inspect.getsourcefile(Net)
    for handle in inside | portable:
        location, op, path = entries[handle]
        assert path is not None, f"{op} (handle {handle}) has no module path"
        file, line = location.rsplit(":", 1)
        assert file == this_file
        # The line is in some class's forward; the module the path names is an instance of it
        # (or a torch module, such as nn.Linear, that it called on that line).
        assert _innermost_model_class(model, path) is _class_of_line(int(line)), (op, location, path)
    paths = {entries[h][2] for h in inside | portable}
    assert {"embed.table", "blocks.0.pos.table", "blocks.1.attn.qkv", "blocks.1.mlp.0", "blocks.0.norm", ""} <= paths


def test_ops_a_decomposition_makes_keep_their_source_modules_path(delegated):
    """nn.Linear decomposes into permute_copy + addmm (or view/mm); all of them carry its path."""
    _, buffer = delegated
    by_path: dict[str, set[str]] = {}
    for _, op, path in _entries(buffer).values():
        by_path.setdefault(path, set()).add(op)
    for layer in ("blocks.0.attn.qkv", "blocks.1.attn.proj", "blocks.1.mlp.2", "head"):
        assert "edge.permute_copy" in by_path[layer] and by_path[layer] & {"edge.addmm", "edge.mm"}, by_path[layer]
    assert "edge.softmax" in by_path["blocks.0.attn"] and "edge.gelu" in by_path["blocks.1.mlp.1"]


def test_a_delegate_call_names_the_innermost_module_holding_all_its_ops(delegated):
    edge, buffer = delegated
    entries = _entries(buffer)
    calls = {}
    for op in edge.function.regions[0].blocks[0].operations:
        if attrs.BACKEND in op.operation.attributes:
            calls[op.operation.attributes["callee"].value.split(".")[0]] = debug_handle(op.operation)
    assert len(calls) >= 2
    for nested in delegate_modules(edge.module.operation):
        name = nested.attributes["sym_name"].value
        inner = [entries[h][2] for h in debug_handles(nested)]
        assert entries[calls[name]][2] == common_module_path(inner)
    assert {entries[h][2] for h in calls.values()} >= {"blocks.0.attn", "blocks.1.mlp", "blocks.1.pos.table"}


def test_et_inspect_lists_the_module_of_each_instruction(delegated):
    _, buffer = delegated
    text = et_inspect.describe(buffer, max_instructions=-1)
    assert re.search(r"# .*test_module_paths\.py:\d+ \(edge\.native_layer_norm\) in blocks\.0\.norm$", text, re.M)
    assert re.search(r"# .*\(delegate nested_\d+\) in blocks\.\d\.attn$", text, re.M)


def _failure_message(method, ids: np.ndarray) -> str:
    with pytest.raises(rt.Error) as failure:
        method(ids)
    return str(failure.value)


@pytest.mark.parametrize("delegate", [False, True], ids=["portable", "nested"])
def test_a_failing_op_is_reported_with_its_module_path(model, delegated, delegate):
    """Index 20 is in range for `embed.table` (32 rows), out of range for `blocks.0.pos.table` (16)."""
    if delegate:
        buffer = delegated[1]  # the embeddings are inside nested delegates there
    else:
        buffer = etmlir.to_edge(etmlir.export(model, (IDS,))).to_executorch().buffer
    method = rt.load(buffer).method("forward")
    np.testing.assert_allclose(np.asarray(method(IDS.numpy())[0]), model(IDS).detach().numpy(), atol=1e-5, rtol=1e-5)
    line = _forward_lines(Lookup)[1]  # `return self.table(ids)`
    where = rf"test_module_paths\.py:{line} \(blocks\.0\.pos\.table; method 'forward', instruction \d+"
    suffix = r", delegate 'nested'\)" if delegate else r"\)"
    message = _failure_message(method, np.array([[1, 20, 3, 4]], np.int64))
    assert re.search(where + suffix + r": aten::embedding\.out: index 20", message), message


# -- a transformers model ----------------------------------------------------------------------


class _Logits(nn.Module):
    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.lm = lm

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm(ids).logits


@pytest.fixture(scope="module")
def llama():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16)
    model = _Logits(transformers.LlamaForCausalLM(config).eval()).eval()
    ids = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(1))
    edge = etmlir.to_edge(etmlir.export(model, (ids,)))
    edge = edge.to_backend(backends.partitioner("nested", skip_ops=["edge.mm", "edge.bmm"]))
    return model, edge.to_executorch().buffer


def test_a_llama_s_ops_name_its_layers_projections_and_norms(llama):
    model, buffer = llama
    entries = _entries(buffer)
    by_path: dict[str, set[str]] = {}
    for handle, (_, op, path) in entries.items():
        assert path is not None, f"{op} (handle {handle}) has no module path"
        model.get_submodule(path)  # a module of the model (AttributeError otherwise)
        by_path.setdefault(path, set()).add(op)
    for layer in (0, 1):
        prefix = f"lm.model.layers.{layer}"
        for projection in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            assert "edge.mm" in by_path[f"{prefix}.{projection}"], (projection, by_path[f"{prefix}.{projection}"])
        assert "edge.rsqrt" in by_path[f"{prefix}.input_layernorm"]
        assert "edge.rsqrt" in by_path[f"{prefix}.post_attention_layernorm"]
    assert "edge.embedding" in by_path["lm.model.embed_tokens"] and "edge.mm" in by_path["lm.lm_head"]
    # Matrix products only where a module multiplies: projections, the head, attention's scores.
    for path, ops in by_path.items():
        if "edge.mm" in ops:
            assert path.endswith("_proj") or path == "lm.lm_head", path
        if "edge.rsqrt" in ops:
            assert path.endswith("norm"), path
