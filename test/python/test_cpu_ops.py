"""The ops only the `cpu` backend compiles (support.CPU_ONLY_OPS) and its non-f32 ops, end to end.

Each module uses the ops the way ordinary model code does (a rotary
embedding, an RMSNorm, grouped-query attention's rank-5 key repeat, a causal
mask built from integer positions and booleans) and must be delegated as one
piece, then match eager on the C++ runtime. Tolerances: integer and bool
results exact; float results atol/rtol 1e-5 (cos, sin, pow, sqrt, log are
libm's or LLVM's in float32, a few ulp from eager's), the decoder block 1e-4
(two matrix products and a softmax accumulate in another order).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import etmlir
import etmlir.runtime as rt
from etmlir import backends
from etmlir.delegation.partitioner import is_delegate_call
from etmlir.devtools import delegation_info


def _compile(model: nn.Module, args: tuple, dynamic_shapes=None) -> tuple[etmlir.EdgeProgram, rt.Method]:
    edge = etmlir.to_edge(etmlir.export(model, args, dynamic_shapes=dynamic_shapes))
    lowered = edge.to_backend(backends.partitioner("cpu"))
    return lowered, rt.load(lowered.to_executorch().buffer).method("forward")


def _outside(program: etmlir.EdgeProgram) -> dict[str, int]:
    """Ops left outside every delegate: name -> count."""
    return {name: counts[1] for name, counts in delegation_info(program).op_counts.items() if counts[1]}


def _delegates(program: etmlir.EdgeProgram) -> int:
    return sum(is_delegate_call(op.operation) for op in program.function.regions[0].blocks[0].operations)


def _check(actual: list, expected: tuple, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        assert tuple(got.shape) == tuple(want.shape)
        if want.dtype.is_floating_point:
            np.testing.assert_allclose(got.numpy(), want.numpy(), atol=atol, rtol=rtol)
        else:
            np.testing.assert_array_equal(got.numpy(), want.numpy())


class MathOps(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        positive = x.abs() + 0.5
        return (x.cos() * y.sin(), positive.pow(2) + positive.pow(0.5), positive.sqrt() + positive.log(),
                positive.rsqrt(), torch.maximum(x, y) - torch.minimum(x, y), x.sum(dim=-1, keepdim=True),
                x.amax(dim=1))


def test_transcendentals_powers_and_reductions_match_eager():
    g = torch.Generator().manual_seed(0)
    args = (torch.randn(4, 8, 16, generator=g) * 3, torch.randn(4, 8, 16, generator=g) * 3)
    program, method = _compile(MathOps(), args)
    assert _outside(program) == {}, _outside(program)
    with torch.no_grad():
        _check(method(*args), MathOps()(*args))


class MaskOps(nn.Module):
    """Integer positions and boolean masks, as attention-mask code builds them."""

    def forward(self, positions: torch.Tensor, padding: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q = positions.unsqueeze(-1)
        k = positions.unsqueeze(-2)
        causal = k <= q                                    # le_tensor on int64
        keep = causal & padding.unsqueeze(-2).logical_not().logical_not()
        keep = keep | (q == 0)                             # eq_scalar, logical_or
        empty = torch.logical_not(keep).any(dim=-1)        # any_dim
        shifted = positions * 2 + 1 - positions            # integer arithmetic
        big = positions > 3
        masked = torch.where(keep, scores, torch.full_like(scores, -1e9))
        return keep, empty, shifted, big.to(torch.float32), positions.to(torch.float32) * 0.5, masked.softmax(-1)


def test_integer_and_boolean_mask_ops_match_eager_exactly():
    positions = torch.arange(6).reshape(1, 6).expand(2, 6).contiguous()
    padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    scores = torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(1))
    args = (positions, padding, scores)
    program, method = _compile(MaskOps(), args)
    assert _outside(program) == {}, _outside(program)
    with torch.no_grad():
        _check(method(*args), MaskOps()(*args))


class DecoderAttention(nn.Module):
    """RMSNorm, rotary embedding, grouped-query attention (keys repeated through rank 5), causal mask."""

    def __init__(self, dim: int = 64, heads: int = 4, kv_heads: int = 2) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.norm_weight = nn.Parameter(torch.rand(dim) + 0.5)
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq)

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm_weight
        freqs = positions.to(torch.float32).unsqueeze(-1) * self.inv_freq
        angles = torch.cat((freqs, freqs), dim=-1).unsqueeze(1)
        cos, sin = angles.cos(), angles.sin()
        q = self.q(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
        repeat = self.heads // self.kv_heads
        k = k[:, :, None].expand(b, self.kv_heads, repeat, t, self.head_dim).reshape(b, self.heads, t, self.head_dim)
        v = v[:, :, None].expand(b, self.kv_heads, repeat, t, self.head_dim).reshape(b, self.heads, t, self.head_dim)
        causal = positions.unsqueeze(-1) >= positions.unsqueeze(-2)
        scores = (q @ k.transpose(-1, -2)) * self.head_dim ** -0.5
        scores = scores.masked_fill(causal.logical_not().unsqueeze(1), float("-inf"))
        out = scores.softmax(-1) @ v
        return x + self.o(out.transpose(1, 2).reshape(b, t, d))


@pytest.mark.parametrize("length", [5, 16])
def test_decoder_attention_with_rope_gqa_and_mask_is_one_delegate(length):
    torch.manual_seed(2)
    model = DecoderAttention().eval()
    x = torch.randn(2, 16, 64)
    positions = torch.arange(16).expand(2, 16).contiguous()
    seq = torch.export.Dim("seq", min=2, max=32)
    program, method = _compile(model, (x, positions), dynamic_shapes=({1: seq}, {1: seq}))
    assert _outside(program) == {}, _outside(program)
    assert _delegates(program) == 1
    args = (torch.randn(2, length, 64), torch.arange(length).expand(2, length).contiguous())
    with torch.no_grad():
        _check(method(*args), (model(*args),), atol=1e-4, rtol=1e-4)


def test_a_channels_last_copy_stays_outside_with_its_reason():
    class ToChannelsLast(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * 2).to(memory_format=torch.channels_last) + 1

    x = torch.randn(1, 3, 4, 4)
    edge = etmlir.to_edge(etmlir.export(ToChannelsLast(), (x,)))
    lowered = edge.to_backend(backends.partitioner("cpu"))
    assert _outside(lowered) == {"edge.to_dim_order_copy": 1}
    assert "a copy to dim order [0, 2, 3, 1] (not contiguous) is not compiled" in str(delegation_info(lowered))
    (actual,) = rt.load(lowered.to_executorch().buffer).method("forward")(x)
    np.testing.assert_allclose(actual.numpy(), (x * 2 + 1).numpy(), atol=1e-6)


class ExplicitPadding(nn.Module):
    """F.pad before a convolution, as TF-style "same" padding does (transformers' MobileNetV2, EfficientNet):
    asymmetric pads, bottom/right only included, before depthwise and dense convolutions at strides 1 and 2."""

    PADS = ((0, 1, 0, 1), (1, 1, 1, 1), (1, 0, 1, 0), (0, 0, 1, 1), (2, 1, 0, 1))

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(channels, channels, 3, stride=stride, groups=groups, bias=False)
                                   for groups in (channels, 1) for stride in (1, 2) for _ in self.PADS)

    def forward(self, *xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # One input per convolution: a pad of an input nothing else reads is what the kernels absorb.
        pads = self.PADS * 4
        return tuple(conv(nn.functional.pad(x, pad)) for conv, pad, x in zip(self.convs, pads, xs))


def test_explicit_padding_before_convolutions_matches_eager():
    torch.manual_seed(3)
    model = ExplicitPadding().eval()
    xs = tuple(torch.randn(1, 8, 9, 9) for _ in model.convs)
    program, method = _compile(model, xs)
    assert _outside(program) == {}, _outside(program)
    with torch.no_grad():
        _check(method(*xs), model(*xs), atol=1e-5, rtol=1e-5)


class GroupNorms(nn.Module):
    """GroupNorm as conv and audio models use it: several groups, one group per channel (no affine), one group."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.GroupNorm(4, 16), nn.GroupNorm(16, 16, affine=False), nn.GroupNorm(1, 16, eps=1e-3)
        for p in self.parameters():
            nn.init.normal_(p)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.a(x), self.b(x) * 2, self.c(y)


def test_group_norm_matches_eager():
    torch.manual_seed(4)
    model = GroupNorms().eval()
    args = (torch.randn(2, 16, 5, 7) * 3 + 1, torch.randn(3, 16, 40))
    program, method = _compile(model, args)
    assert _outside(program) == {}, _outside(program)
    with torch.no_grad():
        _check(method(*args), model(*args))


class TokenEmbedding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tokens, self.positions = nn.Embedding(50, 16), nn.Embedding(8, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        return self.tokens(ids) + self.positions(positions)


def test_embedding_is_delegated_and_refuses_an_index_out_of_range():
    torch.manual_seed(5)
    model = TokenEmbedding().eval()
    ids = torch.tensor([[0, 7, 49, 3, 3, 12]])
    program, method = _compile(model, (ids,))
    assert _outside(program) == {}, _outside(program)
    with torch.no_grad():
        _check(method(ids), (model(ids),), atol=0, rtol=0)
    for bad, why in ((50, "index must be smaller than dim size"), (-1, "index must be larger or equal to 0")):
        with pytest.raises(Exception, match=why) as raised:
            method(torch.tensor([[0, 1, bad, 3, 4, 5]]))
        assert "test_cpu_ops.py" in str(raised.value), "the error names the model's source line"


def test_an_empty_tensor_stays_on_the_portable_kernels():
    """torch-mlir's group norm divides by N * groups and some lowerings assert on empty tensors: an op with
    an empty tensor is not delegated (a SIGFPE or an abort while compiling, before this rule)."""
    class Norm(nn.Module):
        def forward(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return nn.functional.group_norm(x, 1, w, b), x.cos(), (x * 2).pow(3)

    args = (torch.randn(0, 2), torch.randn(2), torch.randn(2))
    edge = etmlir.to_edge(etmlir.export(Norm(), args))
    lowered = edge.to_backend(backends.partitioner("cpu"))
    assert set(_outside(lowered)) == {"edge.native_group_norm", "edge.cos", "edge.mul_scalar",
                                      "edge.pow_tensor_scalar"}, _outside(lowered)
    assert "(tensor<0x2xf32>) has no elements; it is left to the portable kernels" in str(delegation_info(lowered))
    actual = rt.load(lowered.to_executorch().buffer).method("forward")(*args)
    assert [tuple(a.shape) for a in actual] == [(0, 2)] * 3
