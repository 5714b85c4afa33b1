"""Program state: buffers forward mutates (counters, KV caches, running statistics) kept by the method.

Each model is exported once, its `.pte` loaded once, and called many times in a
row next to an eager copy of the model that starts from the same buffers: the
outputs and the state after each call must match. Tolerances: the counter is
exact (small integers in float32); attention and BatchNorm atol 1e-5 / rtol
1e-5 (float32 reductions in a different order than PyTorch's).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

import etmlir
import etmlir.runtime as rt
from etmlir import backends
from etmlir.delegation.partitioner import is_delegate_call
from etmlir.dialects.etx import method_functions, tensor_type
from etmlir.executable import pte

ATOL = RTOL = 1e-5
HEADS, MAX_T, HEAD_DIM = 2, 24, 4
WINDOW = 8  # the sliding-window cache's length


class Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("n", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.n.add_(1)
        return x * self.n


class CachedAttention(nn.Module):
    """One attention step: the token's key and value go into a cache buffer, the query attends to it.

    `write` picks how the cache is written: `index_copy_` or advanced-index assignment
    (`index_put_`) at the position tensor `pos`, or slice assignment with Python ints into a
    sliding window (the cache shifts by one position per token).
    """

    def __init__(self, write: str) -> None:
        super().__init__()
        self.write = write
        self.qkv = nn.Linear(HEADS * HEAD_DIM, 3 * HEADS * HEAD_DIM)
        length = WINDOW if write == "slice" else MAX_T
        self.register_buffer("k_cache", torch.zeros(1, HEADS, length, HEAD_DIM))
        self.register_buffer("v_cache", torch.zeros(1, HEADS, length, HEAD_DIM))

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(1, 1, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
        if self.write == "slice":
            self.k_cache[:, :, :-1] = self.k_cache[:, :, 1:].clone()
            self.k_cache[:, :, -1:] = k
            self.v_cache[:, :, :-1] = self.v_cache[:, :, 1:].clone()
            self.v_cache[:, :, -1:] = v
            return nn.functional.scaled_dot_product_attention(q, self.k_cache, self.v_cache)
        if self.write == "index_copy":
            self.k_cache.index_copy_(2, pos, k)
            self.v_cache.index_copy_(2, pos, v)
        else:
            self.k_cache[:, :, pos] = k
            self.v_cache[:, :, pos] = v
        mask = (torch.arange(MAX_T) <= pos).view(1, 1, 1, MAX_T)
        return nn.functional.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)


def _batch_norm() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, momentum=0.3)).train()


def _compile(model: nn.Module, args: tuple, partitioner: str | None = None):
    """(the model, its edge program, its ExecutorchProgram): the .pte's state starts from the
    model's buffers as they are now (export copies them; calling the model later changes only its own)."""
    edge = etmlir.to_edge(etmlir.export(model, args))
    if partitioner is not None:
        edge = edge.to_backend(backends.partitioner(partitioner))
    return model, edge, edge.to_executorch()


@pytest.fixture(scope="module")
def counter():
    torch.manual_seed(0)
    return _compile(Counter(), (torch.randn(3),))


@pytest.fixture(scope="module")
def attention():
    """write -> (eager model, edge program, ExecutorchProgram)."""
    programs = {}
    for write in ("index_copy", "index_put", "slice"):
        torch.manual_seed(0)
        programs[write] = _compile(CachedAttention(write), (torch.randn(1, 1, HEADS * HEAD_DIM), torch.tensor([0])))
    return programs


def _tokens(count: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    return [(torch.randn(1, 1, HEADS * HEAD_DIM, generator=generator), torch.tensor([i])) for i in range(count)]


def _assert_state_matches(method: rt.Method, model: nn.Module) -> None:
    buffers = dict(model.named_buffers())
    for name in method.state_names:
        np.testing.assert_allclose(method.state(name), buffers[name].numpy(), atol=ATOL, rtol=RTOL)


def test_counter_matches_eager_over_20_calls_and_restarts_after_reset_state(counter):
    model, edge, et = counter
    method = rt.load(et.buffer).method("forward")
    assert method.state_names == ["n"]
    assert len(method.inputs) == 1 and len(method.outputs) == 1  # the state is neither
    x = torch.tensor([1.0, -2.0, 0.5])
    fresh = copy.deepcopy(model)
    for step in range(1, 21):
        (actual,) = method(x)
        np.testing.assert_array_equal(actual.numpy(), model(x).numpy())
        np.testing.assert_array_equal(method.state("n"), np.full(3, step, np.float32))
    method.reset_state()
    np.testing.assert_array_equal(method.state("n"), np.zeros(3, np.float32))
    for _ in range(3):
        (actual,) = method(x)
        np.testing.assert_array_equal(actual.numpy(), fresh(x).numpy())


def test_state_is_not_a_user_input_or_output_at_the_edge_level(counter):
    _, edge, _ = counter
    assert edge.state_names == ["n"]
    assert [spec.sizes for spec in edge.inputs] == [(3,)]
    assert [spec.sizes for spec in edge.outputs] == [(3,)]


def test_two_loaded_methods_keep_separate_state(counter):
    _, _, et = counter
    program = rt.load(et.buffer)
    first, second = program.method("forward"), program.method("forward")
    x = np.ones(3, np.float32)
    for _ in range(4):
        first(x)
    (y,) = second(x)
    np.testing.assert_array_equal(y, np.ones(3, np.float32))
    np.testing.assert_array_equal(first.state("n"), np.full(3, 4, np.float32))


def test_state_gets_its_own_planned_slot_written_in_place(counter, attention):
    for _, _, et in [counter, *attention.values()]:
        assert "aten::clone.out" not in et.kernel_histogram()  # the final write goes straight into the state
        (func_op,) = method_functions(et.module.operation)
        ops = [op.operation for op in func_op.regions[0].blocks[0].operations]
        planned = [op for op in ops if "mem_id" in op.attributes and tensor_type(op) is not None]
        states = [op for op in planned if op.name == "etx.state"]
        assert states
        for state in states:
            begin = state.attributes["offset"].value
            end = begin + state.attributes["size"].value
            for other in planned:
                if other == state or other.attributes["mem_id"].value != state.attributes["mem_id"].value:
                    continue
                o_begin = other.attributes["offset"].value
                assert o_begin + other.attributes["size"].value <= begin or o_begin >= end, \
                    f"{other.name} shares bytes with state {state.attributes['name']}"


@pytest.mark.parametrize("write", ["index_copy", "index_put", "slice"])
def test_kv_cache_attention_matches_eager_one_token_per_call(attention, write):
    model, _, et = attention[write]
    method = rt.load(et.buffer).method("forward")
    assert sorted(method.state_names) == ["k_cache", "v_cache"]
    with torch.no_grad():
        for x, pos in _tokens(20, seed=1):
            (actual,) = method(x, pos)
            np.testing.assert_allclose(actual.numpy(), model(x, pos).numpy(), atol=ATOL, rtol=RTOL)
    _assert_state_matches(method, model)
    assert np.abs(method.state("k_cache")).sum() > 0


@pytest.mark.parametrize("backend", ["nested", "cpu"])
def test_kv_cache_in_a_delegate_matches_eager(backend):
    """The partitioner may take the cache writes: the state goes in as a live-in, its new value
    comes out as a live-out and is copied into the state."""
    torch.manual_seed(0)
    model, edge, et = _compile(CachedAttention("index_put"), (torch.randn(1, 1, HEADS * HEAD_DIM), torch.tensor([0])),
                               partitioner=backend)
    assert any(is_delegate_call(op.operation) for op in edge.function.regions[0].blocks[0].operations)
    method = rt.load(et.buffer).method("forward")
    with torch.no_grad():
        for x, pos in _tokens(20, seed=2):
            (actual,) = method(x, pos)
            np.testing.assert_allclose(actual.numpy(), model(x, pos).numpy(), atol=ATOL, rtol=RTOL)
    _assert_state_matches(method, model)
    method.reset_state()
    assert not np.abs(method.state("k_cache")).any()


def test_batch_norm_in_training_mode_updates_its_running_statistics():
    torch.manual_seed(0)
    model, _, et = _compile(_batch_norm(), (torch.randn(2, 3, 6, 6),))
    method = rt.load(et.buffer).method("forward")
    assert sorted(method.state_names) == ["1.num_batches_tracked", "1.running_mean", "1.running_var"]
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for _ in range(6):
            x = torch.randn(2, 3, 6, 6, generator=generator)
            (actual,) = method(x)
            np.testing.assert_allclose(actual.numpy(), model(x).numpy(), atol=ATOL, rtol=RTOL)
    _assert_state_matches(method, model)
    assert int(method.state("1.num_batches_tracked")) == 6


def test_unknown_state_name_lists_the_method_state(counter):
    method = rt.load(counter[2].buffer).method("forward")
    with pytest.raises(rt.Error, match=r"has no state 'm' \(its state: n\)"):
        method.state("m")


def test_only_files_with_state_need_the_newer_schema_version(counter):
    torch.manual_seed(0)
    _, _, stateless = _compile(nn.Linear(3, 2), (torch.randn(1, 3),))
    assert pte.read(stateless.buffer).program.version == 1
    assert rt.load(stateless.buffer).method("forward").state_names == []
    assert pte.read(counter[2].buffer).program.version == pte.STATE_VERSION


def test_state_entry_pointing_at_an_input_is_refused_at_load(counter):
    f = pte.read(counter[2].buffer)
    method = f.program.methods[0]
    method.state[0].value = method.inputs[0]
    segments = [f.data[f.header.segment_base_offset + s.offset:][:s.size] for s in f.program.segments]
    bad = pte.pack(f.program, segments, f.header.segment_alignment)
    with pytest.raises(rt.Error, match="state 'n' refers to value 0, which is not a tensor with initial data"):
        rt.load(bad)


class BFloat16Accumulator(nn.Module):
    """bfloat16 state (numpy has none: its initial value travels as the bits' int16 view)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("acc", torch.linspace(-1, 1, 4).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.acc.add_(x)
        return self.acc * 2


def test_bfloat16_state_matches_eager_bit_for_bit():
    x = torch.randn(4).to(torch.bfloat16)
    model = BFloat16Accumulator()
    method = rt.load(etmlir.to_edge(etmlir.export(BFloat16Accumulator(), (x,))).to_executorch().buffer).method(
        "forward")
    for _ in range(5):
        (got,) = method(x)
        assert torch.equal(got, model(x))
    assert torch.equal(method.state("acc"), model.acc)
