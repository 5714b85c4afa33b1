"""Models in bfloat16, float16, int32, int64 and bool, end to end, against PyTorch eager.

Each model goes the way users compile one (`etmlir.export` -> `to_edge` ->
`to_executorch`), runs on the portable kernels through `etmlir.runtime` (torch
tensors in, so bfloat16 inputs work; numpy has no bfloat16) and is compared
with eager on the same inputs. Outputs must have eager's dtypes and shapes.

Tolerances, and why:

* LLaMA (Hugging Face `LlamaForCausalLM`, 2 layers, default SDPA attention) in
  bfloat16: rtol = atol = 2e-2, about 5 bfloat16 ulps at the logits' magnitude
  (0.4; one ulp there is 2^-9 ~ 0.002). Eager runs attention through
  PyTorch's fused CPU flash-attention kernel (online softmax, probabilities
  rounded to bfloat16 before they multiply V), while the exported graph holds
  PyTorch's own math decomposition of it (upcast to float32, softmax, two
  matmuls, one rounding). The two differ by about one ulp on ~40% of the
  logits. Neither is the "right" bfloat16 answer, so the test also checks that
  the runtime is no less accurate than eager against a float64 evaluation of
  the same bfloat16 weights.
* The same model with `attn_implementation="eager"` (explicit matmuls and a
  float32 softmax, no fused kernel) has the same graph in eager and in the
  program, and the kernels round like PyTorch's CPU kernels (matmul, mean and
  softmax accumulate in float32 and round once; Scalars round to the tensor's
  dtype where PyTorch's do): it matches bit for bit here. Allowed: one
  bfloat16 ulp of the largest logit, for CPUs where oneDNN sums the matmuls
  in another order.
* float16 LLaMA: rtol = atol = 2e-3 (about 8 float16 ulps at 0.4), same reason.
* The small float16/bfloat16 models: at most one ulp of the output's dtype
  (rtol 1e-3 for float16, 8e-3 for bfloat16) where PyTorch's own kernels are
  not consistent: its rsqrt rounds twice in the scalar tail of a vectorized
  loop and once elsewhere; its GELU loses digits to cancellation for x < -3
  that the portable kernel keeps.
* Integer and bool outputs (int32 masks and counts, int64 argmax/topk/sort
  indices, bool comparisons): exact.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import etmlir
import etmlir.runtime as rt

transformers = pytest.importorskip("transformers")


def compile_and_load(model: nn.Module, args: tuple) -> rt.Method:
    program = etmlir.to_edge(etmlir.export(model, args)).to_executorch()
    return rt.load(program.buffer).method("forward")


def run(method: rt.Method, args: tuple) -> list[torch.Tensor]:
    """The outputs as a flat list of tensors, whatever structure the method returns them in."""
    return [torch.as_tensor(value) for value in torch.utils._pytree.tree_leaves(method(*args))]


def check_outputs(got: list[torch.Tensor], want: tuple, rtol: dict | None = None) -> None:
    """dtypes and shapes as eager's; floats within rtol[dtype] (atol = rtol), the rest exact."""
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert (g.dtype, g.shape) == (w.dtype, w.shape), f"output {i}: {g.dtype}{list(g.shape)} vs eager's " \
                                                         f"{w.dtype}{list(w.shape)}"
        if w.dtype.is_floating_point:
            tol = (rtol or {}).get(w.dtype, 0.0)
            torch.testing.assert_close(g, w, rtol=tol, atol=tol, msg=lambda m: f"output {i}: {m}")
        else:
            assert torch.equal(g, w), f"output {i} ({w.dtype}): {g} vs {w}"


# ---------------------------------------------------------------------------
# LLaMA
# ---------------------------------------------------------------------------


class Logits(nn.Module):
    """A causal LM returning its logits tensor (the model's output is a dataclass)."""

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.lm = lm

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm(ids).logits


def llama(dtype: torch.dtype, attention: str = "sdpa") -> Logits:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, attn_implementation=attention)
    return Logits(transformers.LlamaForCausalLM(config).eval().to(dtype)).eval()


IDS = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def llama_runs():
    """(dtype, attention) -> (model, runtime logits), each compiled once."""
    cache: dict = {}

    def get(dtype: torch.dtype, attention: str = "sdpa"):
        key = (dtype, attention)
        if key not in cache:
            model = llama(dtype, attention)
            (logits,) = run(compile_and_load(model, (IDS,)), (IDS,))
            cache[key] = model, logits
        return cache[key]

    return get


def test_bfloat16_llama_matches_eager(llama_runs):
    model, got = llama_runs(torch.bfloat16)
    with torch.no_grad():
        want = model(IDS)
        exact = copy.deepcopy(model).double()(IDS)  # the same bfloat16 weights, evaluated in float64
    assert got.dtype == torch.bfloat16 and got.shape == (1, 8, 128)
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
    ours, eager = (got.double() - exact).abs().max(), (want.double() - exact).abs().max()
    assert ours <= 1.5 * eager, f"runtime error vs float64 {ours:.3g}, eager's {eager:.3g}"


def test_bfloat16_llama_with_eager_attention_matches_bit_for_bit(llama_runs):
    model, got = llama_runs(torch.bfloat16, "eager")
    with torch.no_grad():
        want = model(IDS)
    ulp = 2.0 ** (torch.floor(torch.log2(want.abs().max().float())).item() - 7)  # bfloat16: 8 significant bits
    torch.testing.assert_close(got, want, rtol=0, atol=ulp)


def test_float16_llama_matches_eager(llama_runs):
    model, got = llama_runs(torch.float16)
    with torch.no_grad():
        want = model(IDS)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)


# ---------------------------------------------------------------------------
# Hand-written half-precision models
# ---------------------------------------------------------------------------

HALF_RTOL = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 1e-6}


class HalfConvNet(nn.Module):
    """Weights and activations in the half dtype, with a float32 output cast in the graph."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3, padding=1)
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor):
        h = self.conv(x).transpose(1, 2)
        h = F.gelu(self.norm(h))
        return self.fc(h).softmax(-1), h.mean(1), (h * 2).to(torch.float32).sum(-1)


class HalfScalars(nn.Module):
    """One-element weights, scalar constants and Python scalars in the half dtype (each rounds to
    the dtype where PyTorch's kernels round it), a causal mask with -inf, half-dtype factories."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype
        self.scale = nn.Parameter(torch.tensor([1.25], dtype=dtype))
        self.register_buffer("causal", torch.ones(4, 4, dtype=torch.bool).tril())

    def forward(self, x: torch.Tensor):
        y = (x * self.scale + torch.tensor(0.3, dtype=self.dtype)).masked_fill(~self.causal, float("-inf"))
        return (y.softmax(-1), (x * 0.1 + 0.7) / 3.0 - 0.2, F.layer_norm(x, (4,)), x.cumsum(-1),
                torch.arange(4, dtype=self.dtype) * x, x.var(-1), F.gelu(x, approximate="tanh"),
                x.clamp(-0.5, 0.5), x.pow(2).mean(-1, keepdim=True).rsqrt(), torch.add(x, x.flip(-1), alpha=0.3))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_conv_net_matches_eager(dtype):
    torch.manual_seed(0)
    model = HalfConvNet().eval().to(dtype)
    args = (torch.randn(2, 4, 6).to(dtype),)
    with torch.no_grad():
        check_outputs(run(compile_and_load(model, args), args), model(*args), HALF_RTOL)


def test_bfloat16_weights_are_imported_bit_for_bit():
    model = HalfConvNet().eval().to(torch.bfloat16)
    weights = etmlir.export(model, (torch.randn(2, 4, 6).to(torch.bfloat16),)).weights()
    assert set(weights) == set(model.state_dict())
    for name, value in model.state_dict().items():
        assert weights[name].dtype == torch.bfloat16 and torch.equal(weights[name], value), name


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_scalars_and_constants_match_eager(dtype):
    torch.manual_seed(0)
    model = HalfScalars(dtype).eval()
    args = (torch.randn(2, 4, 4).to(dtype),)
    with torch.no_grad():
        check_outputs(run(compile_and_load(model, args), args), model(*args), HALF_RTOL)


# ---------------------------------------------------------------------------
# Integer and bool inputs and outputs
# ---------------------------------------------------------------------------


class IntBoolNet(nn.Module):
    """int32 indices and a bool mask in; int32, int64, bool and float outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(16, 6)

    def forward(self, idx: torch.Tensor, mask: torch.Tensor, x: torch.Tensor, h: torch.Tensor):
        e = torch.where(mask.unsqueeze(-1), self.emb(idx), torch.zeros(()))   # int32 indices
        positive = e > 0                                                   # bool
        count = positive.sum(-1, dtype=torch.int32)                        # int32
        top_values, top_indices = torch.topk(x, 3, dim=-1)                 # int64 indices
        sorted_h, order = torch.sort(h, dim=-1, descending=True)           # bfloat16 values, int64 indices
        h_max, h_argmax = h.max(-1)
        return (positive, count, e.argmax(-1), top_indices, top_values, torch.gather(x, 1, top_indices),
                idx * 3 + count, mask & (idx > 4), (~mask).to(torch.int32), torch.where(mask, idx, -1),
                torch.div(idx * 7, idx.clamp(min=1), rounding_mode="floor"), torch.remainder(idx, 4),
                idx.cumsum(-1), (idx & 5) | (idx ^ 2), mask.any(-1), mask.all(-1), sorted_h, order, h_max,
                h_argmax, h.argmin(-1), idx.clamp(2, 10), torch.eq(idx, idx.flip(-1)).int(), idx.max(),
                x.masked_fill(~mask, 0.5).to(torch.float16))


def test_int_and_bool_model_matches_eager_exactly():
    torch.manual_seed(0)
    model = IntBoolNet().eval()
    gen = torch.Generator().manual_seed(2)
    args = (torch.randint(0, 16, (3, 5), dtype=torch.int32, generator=gen), torch.rand(3, 5, generator=gen) > 0.5,
            torch.randn(3, 5, generator=gen), torch.randn(3, 5, generator=gen).to(torch.bfloat16))
    with torch.no_grad():
        want = model(*args)
    got = run(compile_and_load(model, args), args)
    check_outputs(got, want, {torch.float32: 1e-6})
    assert {w.dtype for w in want} >= {torch.int32, torch.int64, torch.bool, torch.bfloat16, torch.float16}
