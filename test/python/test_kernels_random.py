"""Random kernels (rand, randn, randperm, native_dropout) and the runtime's generator.

The runtime's generator is Philox-4x32-10, not PyTorch's mt19937, so nothing
here compares values with torch.rand; tests check distributions instead.
Statistical bounds are chosen so that a correct kernel fails with
probability below ~1e-6 per check (at least 5 standard errors): with n
samples, a uniform [0, 1) mean lies within 5 * sqrt(1/12/n) of 1/2, a
standard normal's mean within 5/sqrt(n) of 0 and its variance within
5 * sqrt(2/n) of 1; a dropout keep fraction within 5 * sqrt(p(1-p)/n) of 1 - p.
The seeds are fixed, so the tests are deterministic. Exact checks:
determinism for a seed, the generator's known-answer vectors, permutation
validity, dropout's output == (input * mask) * scale as PyTorch computes it.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from etmlir import _runtime
from etmlir.runtime import kernels
from etmlir.runtime.kernels import Out

FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def as_torch(x) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.from_numpy(x)


def call1(name, *args, seed=0):
    (result,) = kernels.call(name, *args, seed=seed)
    return as_torch(result)


def raises_naming(op: str, message: str = ""):
    return pytest.raises(Exception, match=re.escape(op) + ".*" + message)


# ---------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("ctr, key, want", [
    ([0, 0, 0, 0], [0, 0], [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]),
    ([0xffffffff] * 4, [0xffffffff] * 2, [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]),
    ([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0],
     [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]),
])
def test_generator_is_philox4x32_10(ctr, key, want):
    """Random123's known-answer vectors (kat_vectors, philox4x32 with 10 rounds)."""
    assert _runtime.philox4x32_10(ctr, key) == want


def test_rand_float32_is_the_top_24_bits_of_block_0():
    """Seed s, block 0: counter 0 under key s; value k is (word k >> 8) * 2^-24."""
    words = _runtime.philox4x32_10([0, 0, 0, 0], [0, 0])
    got = call1("aten::rand.out", [4], Out((4,), torch.float32), seed=0)
    assert got.tolist() == [(w >> 8) * 2.0 ** -24 for w in words]


# ---------------------------------------------------------------------------
# rand / randn
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_rand_is_uniform_in_0_1(dtype):
    n = 200_000
    x = call1("aten::rand.out", [n], Out((n,), dtype), seed=1)
    assert x.dtype == dtype and x.shape == (n,)
    x = x.double()
    assert x.min() >= 0 and x.max() < 1
    assert abs(x.mean().item() - 0.5) < 5 * math.sqrt(1 / 12 / n) + _quantum(dtype)
    assert abs(x.var().item() - 1 / 12) < 5 * math.sqrt(1 / 180 / n) + _quantum(dtype)
    # Every tenth of [0, 1) gets its share (a chi-square-ish check per bin).
    counts = torch.histc(x, bins=10, min=0, max=1)
    assert (counts - n / 10).abs().max() < 5 * math.sqrt(n / 10 * 0.9) + n * _quantum(dtype)


def _quantum(dtype) -> float:
    """Slack for the grid of a narrow dtype (uniform values are multiples of 2^-digits)."""
    return {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}.get(dtype, 0.0)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_randn_is_standard_normal(dtype):
    n = 200_000
    x = call1("aten::randn.out", [n], Out((n,), dtype), seed=2)
    assert x.dtype == dtype and torch.isfinite(x).all()
    x = x.double()
    assert abs(x.mean().item()) < 5 / math.sqrt(n)
    assert abs(x.var().item() - 1) < 5 * math.sqrt(2 / n) + (0.01 if dtype == torch.bfloat16 else 0)
    # Tails: P(|z| > 2) = 0.0455, P(|z| > 3) = 0.0027; the float Box-Muller bounds |z| by 5.8.
    for t, p in [(1, 0.3173), (2, 0.0455), (3, 0.0027)]:
        frac = (x.abs() > t).double().mean().item()
        assert abs(frac - p) < 5 * math.sqrt(p * (1 - p) / n) + (0.01 if dtype == torch.bfloat16 else 0), t
    assert x.abs().max() < 8.6


def test_randn_pairs_are_uncorrelated():
    n = 100_000
    x = call1("aten::randn.out", [n, 2], Out((n, 2), torch.float32), seed=3).double()
    corr = ((x[:, 0] * x[:, 1]).mean() / (x[:, 0].std() * x[:, 1].std())).item()
    assert abs(corr) < 5 / math.sqrt(n)
    lag = ((x.flatten()[:-1] * x.flatten()[1:]).mean()).item()
    assert abs(lag) < 5 / math.sqrt(2 * n)


@pytest.mark.parametrize("op", ["aten::rand.out", "aten::randn.out"])
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (5,), (2, 3, 4)], ids=str)
def test_random_fill_shapes(op, shape):
    x = call1(op, list(shape), Out(shape, torch.float32))
    assert tuple(x.shape) == shape


@pytest.mark.parametrize("op", ["aten::rand.out", "aten::randn.out"])
def test_random_fill_is_deterministic_for_a_seed_and_differs_across_seeds(op):
    a = call1(op, [7, 5], Out((7, 5), torch.float64), seed=11)
    b = call1(op, [7, 5], Out((7, 5), torch.float64), seed=11)
    c = call1(op, [7, 5], Out((7, 5), torch.float64), seed=12)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    # A seed above 2**32 and its low half give different streams (the whole seed keys Philox).
    d = call1(op, [7, 5], Out((7, 5), torch.float64), seed=11 + (1 << 40))
    assert not torch.equal(a, d)


def test_random_fill_resizes_a_dynamic_out():
    x = call1("aten::rand.out", [2, 3], Out((4, 8), torch.float32, dynamic=True))
    assert x.shape == (2, 3)


@pytest.mark.parametrize("op", ["aten::rand.out", "aten::randn.out"])
def test_random_fill_rejects_bad_dtype_size_and_missing_generator(op):
    with raises_naming(op, "out has dtype int64"):
        kernels.call(op, [3], Out((3,), torch.int64), seed=0)
    with raises_naming(op, "size must be non-negative"):
        kernels.call(op, [-1], Out((3,), torch.float32), seed=0)
    with raises_naming(op, "cannot resize out"):
        kernels.call(op, [4], Out((3,), torch.float32), seed=0)
    with raises_naming(op, "no generator"):
        kernels.call(op, [3], Out((3,), torch.float32))


# ---------------------------------------------------------------------------
# randperm
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.float32,
                                   torch.float64, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("n", [0, 1, 2, 17, 128])
def test_randperm_is_a_permutation(dtype, n):
    p = call1("aten::randperm.out", n, Out((n,), dtype), seed=n)
    assert p.dtype == dtype and p.shape == (n,)
    assert sorted(p.long().tolist()) == list(range(n))


def test_randperm_positions_are_uniform():
    """Over many shuffles of 4 elements, each value lands in each position 1/4 of the time
    and all 24 orders appear about equally often."""
    trials = 12_000
    seen = torch.zeros(4, 4)
    orders: dict[tuple, int] = {}
    for seed in range(trials):
        p = call1("aten::randperm.out", 4, Out((4,), torch.int64), seed=seed)
        seen[torch.arange(4), p] += 1
        orders[tuple(p.tolist())] = orders.get(tuple(p.tolist()), 0) + 1
    assert (seen - trials / 4).abs().max() < 5 * math.sqrt(trials * 0.25 * 0.75)
    assert len(orders) == 24
    assert max(abs(c - trials / 24) for c in orders.values()) < 5 * math.sqrt(trials / 24)


def test_randperm_large_is_valid_and_seeded():
    n = 100_000
    a = call1("aten::randperm.out", n, Out((n,), torch.int64), seed=5)
    assert torch.equal(a.sort().values, torch.arange(n))
    assert torch.equal(a, call1("aten::randperm.out", n, Out((n,), torch.int64), seed=5))
    assert not torch.equal(a, call1("aten::randperm.out", n, Out((n,), torch.int64), seed=6))
    # Few fixed points (Poisson(1) on average for a uniform permutation).
    assert (a == torch.arange(n)).sum() < 10


def test_randperm_rejects_bad_n_and_dtypes():
    with raises_naming("aten::randperm.out", "n must be non-negative"):
        kernels.call("aten::randperm.out", -1, Out((3,), torch.int64), seed=0)
    with raises_naming("aten::randperm.out", "n <= 257"):
        kernels.call("aten::randperm.out", 300, Out((300,), torch.bfloat16), seed=0)
    with raises_naming("aten::randperm.out", "n <= 128"):
        kernels.call("aten::randperm.out", 129, Out((129,), torch.int8), seed=0)
    with raises_naming("aten::randperm.out", "out has dtype bool"):
        kernels.call("aten::randperm.out", 2, Out((2,), torch.bool), seed=0)
    with raises_naming("aten::randperm.out", "no generator"):
        kernels.call("aten::randperm.out", 3, Out((3,), torch.int64))


# ---------------------------------------------------------------------------
# native_dropout
# ---------------------------------------------------------------------------


def dropout(x, p, train, seed=0):
    out, mask = kernels.call("aten::native_dropout.out", x, p, train, Out(tuple(x.shape), x.dtype),
                             Out(tuple(x.shape), torch.bool), seed=seed)
    return as_torch(out), as_torch(mask)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_keeps_1_minus_p_and_scales_like_pytorch(dtype, p):
    n = 100_000
    x = torch.randn(n, generator=torch.Generator().manual_seed(0)).to(dtype)
    x[:3] = torch.tensor([float("nan"), float("inf"), -0.0])
    out, mask = dropout(x, p, True, seed=4)
    assert out.dtype == dtype and mask.dtype == torch.bool
    keep = mask.double().mean().item()
    assert abs(keep - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n)
    # Exactly PyTorch's arithmetic for this mask: input.mul(mask).mul_(1 / (1 - p)).
    torch.testing.assert_close(out, x.mul(mask).mul_(1 / (1 - p)), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("train", [False, True, None])
def test_dropout_is_identity_in_eval_or_at_p_0(train):
    x = torch.randn(4, 5)
    p = 0.5 if train is False else 0.0
    out, mask = dropout(x, p, train)
    assert torch.equal(out, x) and mask.all()


def test_dropout_p_1_drops_everything_and_none_means_train():
    x = torch.randn(3, 4)
    out, mask = dropout(x, 1.0, True)
    assert not mask.any() and torch.equal(out, torch.zeros(3, 4))
    out, mask = dropout(torch.ones(1000), 0.5, None)  # train=None trains, as in PyTorch
    assert 0 < mask.sum() < 1000 and set(out.unique().tolist()) <= {0.0, 2.0}


def test_dropout_is_deterministic_for_a_seed():
    x = torch.randn(64)
    a, b, c = dropout(x, 0.5, True, seed=9), dropout(x, 0.5, True, seed=9), dropout(x, 0.5, True, seed=10)
    assert torch.equal(a[1], b[1]) and torch.equal(a[0], b[0])
    assert not torch.equal(a[1], c[1])


def test_dropout_shapes():
    for shape in [(), (0,), (2, 0, 3), (2, 3, 4)]:
        x = torch.randn(shape)
        out, mask = dropout(x, 0.3, True)
        assert out.shape == shape and mask.shape == shape


def test_dropout_rejects_bad_arguments():
    op = "aten::native_dropout.out"
    x = torch.randn(3)
    with raises_naming(op, r"p must be in \[0, 1\], got 1.5"):
        dropout(x, 1.5, True)
    with raises_naming(op, "input has dtype int64"):
        kernels.call(op, torch.ones(3, dtype=torch.int64), 0.5, True, Out((3,), torch.int64), Out((3,), torch.bool),
                     seed=0)
    with raises_naming(op, "out1 .the mask. has dtype float32; expected bool"):
        kernels.call(op, x, 0.5, True, Out((3,), torch.float32), Out((3,), torch.float32), seed=0)
    with raises_naming(op, "out0 has dtype float64"):
        kernels.call(op, x, 0.5, True, Out((3,), torch.float64), Out((3,), torch.bool), seed=0)
    with raises_naming(op, "no generator"):
        kernels.call(op, x, 0.5, True, Out((3,), torch.float32), Out((3,), torch.bool))
    # Without training no random numbers are needed: no generator is fine.
    out, mask = kernels.call(op, x, 0.5, False, Out((3,), torch.float32), Out((3,), torch.bool))
    assert np.array_equal(out, x.numpy()) and mask.all()


# ---------------------------------------------------------------------------
# Through a Method: the generator it owns, set_seed, and its stream across calls
# ---------------------------------------------------------------------------


class _Noise(torch.nn.Module):
    def forward(self, x):
        return x + torch.rand(2, 3), torch.randn(2, 3, dtype=torch.float64), torch.randperm(6)


@pytest.fixture(scope="module")
def noise_program():
    import etmlir

    return etmlir.to_edge(etmlir.export(_Noise(), (torch.zeros(2, 3),))).to_executorch()


@pytest.fixture
def noise_method(noise_program):
    import etmlir.runtime as rt

    return rt.load(noise_program.buffer).method("forward")


def test_method_seed_restarts_the_stream_and_the_stream_continues_across_calls(noise_method):
    import etmlir.runtime as rt

    x = torch.zeros(2, 3)
    assert noise_method.seed == rt.DEFAULT_SEED
    noise_method.set_seed(123)
    first = noise_method(x)
    second = noise_method(x)
    noise_method.set_seed(123)
    again = noise_method(x)
    assert noise_method.seed == 123
    for a, b, c in zip(first, again, second):
        assert torch.equal(a, b)  # same seed, same numbers
        assert not torch.equal(a, c)  # the next call draws new ones
    rand, randn, perm = first
    assert ((rand >= 0) & (rand < 1)).all() and randn.dtype == torch.float64
    assert sorted(perm.tolist()) == list(range(6))
    noise_method.set_seed(-1)  # wraps like torch.manual_seed
    assert noise_method.seed == 2 ** 64 - 1
    with pytest.raises(TypeError, match="int seed"):
        noise_method.set_seed(1.5)
    with pytest.raises(ValueError, match="outside"):
        noise_method.set_seed(2 ** 64)


def test_et_run_seed_fixes_the_method_generator(noise_program, noise_method, tmp_path):
    """et-run --seed N reseeds before every run: the printed outputs are one run's with seed N
    (whatever --iterations), the same numbers the Python Method draws after set_seed(N)."""
    import subprocess
    import sys
    from pathlib import Path

    et_run = Path(sys.executable).parent / "et-run"
    path = tmp_path / "noise.pte"
    noise_program.save(path)

    def printed(*args):
        result = subprocess.run([str(et_run), str(path), *map(str, args)], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        printed_outputs = result.stdout.split("\noutputs:\n", 1)[1]
        return [line for line in printed_outputs.splitlines() if line.startswith("  output ")]

    once = printed("--seed", 3, "--iterations", 1, "--warmup", 0)
    assert printed("--seed", 3, "--iterations", 3) == once
    assert printed("--seed", 4, "--iterations", 1, "--warmup", 0)[1:] != once[1:]
    noise_method.set_seed(3)
    _, randn, perm = noise_method(torch.zeros(2, 3))
    first_randn = [float(v) for v in once[1].split(": [", 1)[1].split("]")[0].split(", ") if v != "..."]
    np.testing.assert_allclose(first_randn, randn.flatten()[:len(first_randn)].numpy(), rtol=1e-3, atol=1e-3)
    assert str(perm.tolist()).replace(" ", "")[1:-1] in once[2].replace(" ", "")
