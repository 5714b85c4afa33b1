"""The cpu backend's fused attention: `aten.scaled_dot_product_attention` kept whole by `to_edge`
(`EdgeCompileConfig(keep=partitioner.ops_to_keep())`), run as one call of etmlir_uk_attention
(et-cpu-attention, runtime/backends/cpu/payload_c/attention.c).

Every case runs on the C++ runtime at 1 and 2 threads and is compared with eager on the same inputs,
atol / rtol 1e-5 (float32 dot products over a head of up to 80 terms and a softmax over up to 200
keys); each checks which kernel the delegate calls, so a case that silently fell back to the
decomposed matmuls and softmax fails. The forms are PyTorch's: causal, float and boolean masks
(broadcast over heads and batch), grouped-query attention, an explicit scale, cross attention
(rows != keys), a dynamic sequence length, head sizes that are not a multiple of the vector
width, rows that see no key, and NaN (which, unlike eager's fused kernel, spreads to its row).
"""

from __future__ import annotations


import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import etmlir
import etmlir.runtime as rt
from etmlir import backends
from etmlir.devtools import delegation_info

ATOL = 1e-5


class Attention(nn.Module):
    def __init__(self, **kwargs) -> None:
        super().__init__()
        self.kwargs = kwargs

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, *mask, **self.kwargs)


def _program(model: nn.Module, inputs: tuple, dynamic=None) -> bytes:
    part = backends.partitioner("cpu")
    assert part.ops_to_keep() == ("aten.scaled_dot_product_attention",)
    edge = etmlir.to_edge(etmlir.export(model, inputs, dynamic_shapes=dynamic),
                          etmlir.EdgeCompileConfig(keep=part.ops_to_keep())).to_backend(part)
    info = delegation_info(edge)
    assert info.num_non_delegated_ops == 0, info.why_not_delegated()
    return edge.to_executorch().buffer


def _check(pte: bytes, model: nn.Module, *inputs: torch.Tensor) -> None:
    with torch.no_grad():
        want = model(*inputs).numpy()
    for threads in (1, 2):
        rt.set_cpu_threads(threads)
        try:
            got = rt.load(pte).method("forward")(*[x.numpy() for x in inputs])[0]
        finally:
            rt.set_cpu_threads(1)
        np.testing.assert_allclose(np.asarray(got), want, atol=ATOL, rtol=ATOL, err_msg=f"{threads} thread(s)")


def _qkv(batch: int, heads: int, rows: int, keys: int, depth: int, vdepth: int, kv_heads: int | None = None,
         seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    kv = kv_heads or heads
    return (torch.randn(batch, heads, rows, depth, generator=g), torch.randn(batch, kv, keys, depth, generator=g),
            torch.randn(batch, kv, keys, vdepth, generator=g))


CASES = {
    # name: (sdpa kwargs, (batch, heads, rows, keys, depth, vdepth, kv_heads), mask: None | "float" | "bool", kernel)
    "causal": ({"is_causal": True}, (1, 6, 64, 64, 64, 64, None), None, "etmlir_uk_attention"),
    "unmasked": ({}, (3, 2, 19, 21, 24, 8, None), None, "etmlir_uk_attention"),
    "scale_only": ({"scale": 0.05}, (1, 4, 16, 16, 64, 64, None), None, "etmlir_uk_attention"),
    "causal_odd_sizes": ({"is_causal": True}, (2, 3, 37, 37, 20, 13, None), None, "etmlir_uk_attention"),
    "float_mask": ({}, (1, 4, 33, 33, 32, 48, None), "float", "etmlir_uk_attention_mask"),
    "bool_mask": ({}, (2, 2, 17, 40, 80, 80, None), "bool", "etmlir_uk_attention_bmask"),
    "cross_attention_mask": ({}, (1, 8, 5, 200, 64, 64, None), "float", "etmlir_uk_attention_mask"),
    "scale_and_mask": ({"scale": 0.3}, (1, 4, 24, 24, 16, 16, None), "float", "etmlir_uk_attention_mask"),
    "grouped_query_causal": ({"is_causal": True, "enable_gqa": True}, (1, 8, 48, 48, 32, 32, 2), None,
                             "etmlir_uk_attention"),
    # One head of 200 rows: at 2 threads split into units of 56 rows (the last one short), each packing
    # the keys it reads; and a longer unmasked one (an audio encoder's), one unit per head at 1 thread.
    "long_causal_one_head": ({"is_causal": True}, (1, 1, 200, 200, 32, 32, None), None, "etmlir_uk_attention"),
    "long_two_heads_bool_mask": ({}, (1, 2, 300, 300, 64, 64, None), "bool", "etmlir_uk_attention_bmask"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_attention_runs_in_one_kernel_and_matches_eager(kernel_calls, name):
    kwargs, shape, mask_kind, kernel = CASES[name]
    batch, heads, rows, keys, depth, vdepth, kv_heads = shape
    q, k, v = _qkv(batch, heads, rows, keys, depth, vdepth, kv_heads)
    inputs: tuple = (q, k, v)
    if mask_kind == "float":
        inputs += (torch.randn(1, 1, rows, keys) * 2,)  # broadcast over batch and heads
    elif mask_kind == "bool":
        g = torch.Generator().manual_seed(1)
        mask = torch.rand(batch, 1, rows, keys, generator=g) > 0.3
        mask[..., 0] = True  # every row sees a key (a row that sees none: its own test)
        inputs += (mask,)
    model = Attention(**kwargs)
    _check(_program(model, inputs), model, *inputs)
    assert kernel_calls[kernel] == 1, dict(kernel_calls)
    assert "etmlir_uk_batch_matmul" not in kernel_calls and "etmlir_uk_batch_matmul_ep" not in kernel_calls


def test_dynamic_sequence_length(kernel_calls):
    """One program for every length up to the bound: the causal rows and the scratch follow the run's size."""
    q, k, v = _qkv(1, 4, 32, 32, 32, 32)
    t = torch.export.Dim("t", min=2, max=128)
    model = Attention(is_causal=True)
    pte = _program(model, (q, k, v), dynamic=({2: t}, {2: t}, {2: t}))
    assert kernel_calls["etmlir_uk_attention"] == 1
    for length in (2, 31, 97, 128):
        _check(pte, model, *_qkv(1, 4, length, length, 32, 32, seed=length))


def test_rows_that_see_no_key_are_zeros_like_eager(kernel_calls):
    """PyTorch's attention gives zeros for a row whose mask hides every key (its safe softmax)."""
    q, k, v = _qkv(1, 2, 6, 9, 16, 16)
    mask = torch.ones(1, 1, 6, 9, dtype=torch.bool)
    mask[..., 2, :] = False
    fmask = torch.zeros(1, 1, 6, 9)
    fmask[..., 4, :] = float("-inf")
    for m in (mask, fmask):
        model = Attention()
        with torch.no_grad():
            assert not model(q, k, v, m).isnan().any()
        _check(_program(model, (q, k, v, m)), model, q, k, v, m)


def test_nan_spreads_to_its_row_only(kernel_calls):
    """A NaN in a query makes that row's scores, softmax and output NaN (as the decomposed matmuls and
    softmax compute it; eager's fused CPU kernel returns numbers for that row instead); every other
    row matches eager."""
    q, k, v = _qkv(1, 2, 8, 8, 16, 16)
    q[0, 1, 3, 5] = float("nan")
    model = Attention(is_causal=True)
    pte = _program(model, (q, k, v))
    got = np.asarray(rt.load(pte).method("forward")(q.numpy(), k.numpy(), v.numpy())[0])
    with torch.no_grad():
        want = model(q, k, v).numpy()
    assert np.isnan(got[0, 1, 3]).all()
    got[0, 1, 3] = want[0, 1, 3]
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=ATOL)


class Block(nn.Module):
    """A pre-norm causal self-attention block as models write it: fused qkv projection, heads split by
    view + transpose, attention, heads merged, output projection, residual."""

    def __init__(self, dim: int = 96, heads: int = 3) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.proj(y.transpose(1, 2).reshape(b, t, c))


def test_a_transformer_block_keeps_its_attention_whole(kernel_calls):
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(1, 40, 96)
    _check(_program(model, (x,)), model, x)
    assert kernel_calls["etmlir_uk_attention"] == 1


def test_torch_nn_transformer_encoder_layer(kernel_calls):
    """torch.nn's own encoder layer (nobody here wrote it) with a padding mask."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True).eval()
    x = torch.randn(2, 12, 64)
    pad = torch.zeros(2, 12, dtype=torch.bool)
    pad[1, 9:] = True

    class Encoder(nn.Module):
        def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
            return layer(x, src_key_padding_mask=pad)

    model = Encoder()
    _check(_program(model, (x, pad)), model, x, pad)
    assert sum(n for name, n in kernel_calls.items() if name.startswith("etmlir_uk_attention")) == 1, dict(kernel_calls)


def test_a_kept_attention_that_is_not_delegated_is_a_clear_error():
    q, k, v = _qkv(1, 2, 8, 8, 16, 16)
    edge = etmlir.to_edge(etmlir.export(Attention(is_causal=True), (q, k, v)),
                          etmlir.EdgeCompileConfig(keep=("aten.scaled_dot_product_attention",)))
    with pytest.raises(Exception, match=r"scaled_dot_product_attention.*kept from decomposition"):
        edge.to_executorch()


def test_skipping_the_op_means_it_is_not_kept():
    assert backends.partitioner("cpu", skip_ops=["edge.scaled_dot_product_attention"]).ops_to_keep() == ()
    assert backends.partitioner("cpu", ops=["edge.addmm"]).ops_to_keep() == ()


@pytest.mark.parametrize("form", ["dropout", "batch_broadcast"])
def test_forms_no_kernel_runs_whole_are_decomposed_even_when_kept(form):
    """Attention with dropout (random) and attention whose operands broadcast batch dims against each
    other (a rank-3 query with rank-4 keys) decompose as usual, so the program still compiles and runs."""
    if form == "dropout":
        model, inputs = Attention(dropout_p=0.5), _qkv(1, 2, 8, 8, 16, 16)
    else:
        q, k, v = _qkv(2, 3, 5, 7, 8, 8)
        model, inputs = Attention(), (q[0], k, v)
    part = backends.partitioner("cpu")
    edge = etmlir.to_edge(etmlir.export(model, inputs), etmlir.EdgeCompileConfig(keep=part.ops_to_keep()))
    assert "edge.scaled_dot_product_attention" not in edge.op_histogram()
    got = np.asarray(rt.load(edge.to_backend(part).to_executorch().buffer).method("forward")(
        *[x.numpy() for x in inputs])[0])
    with torch.no_grad():
        want = model(*inputs).numpy()
    assert got.shape == want.shape
    if form == "batch_broadcast":
        np.testing.assert_allclose(got, want, atol=ATOL, rtol=ATOL)
