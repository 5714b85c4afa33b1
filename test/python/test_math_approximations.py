"""exp, tanh, erf and what is built on them, as the cpu backend computes them (et-cpu-approximate-math).

The cpu backend replaces libm's scalar calls by polynomials so that the loops
around them vectorize (etmlir.backends.math_approximations). Here a model
applies each function to a dense sweep of f32 values (every region the
expansions treat differently: the Taylor range of tanh, exp's limits, the
subnormal cut-off) plus the specials (+-0, +-inf, NaN); the delegate's
results are compared with float64 torch, rounded to f32.

Tolerances, per function: exp within 4 ulp (relative 4.8e-7) where the
result is a normal f32, exactly 0 where the true value is below 2.4e-38,
inf above ln(FLT_MAX); tanh within 6e-7 relative (the result's magnitude
or 1e-30, whichever is larger); erf within 2e-7 absolute (Abramowitz &
Stegun 7.1.26); sigmoid, SiLU, GELU and tanh-GELU against torch f32 at
atol 1e-6 / rtol 1e-5 on finite inputs;
NaN stays NaN everywhere.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import etmlir
import etmlir.runtime as rt
from etmlir import backends
from etmlir.devtools import delegation_info
from etmlir.backends.math_approximations import EXP_MAX, EXP_MIN


class Functions(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.exp(x), torch.tanh(x), torch.erf(x), torch.sigmoid(x), torch.nn.functional.silu(x),
                torch.nn.functional.gelu(x), torch.nn.functional.gelu(x, approximate="tanh"))


def _sweep() -> np.ndarray:
    parts = [np.linspace(-120, 120, 200_001), np.linspace(-1, 1, 20_001), np.linspace(-0.3, 0.3, 6_001),
             np.linspace(EXP_MIN - 0.01, EXP_MIN + 0.01, 2_001), np.linspace(EXP_MAX - 0.01, EXP_MAX + 0.01, 2_001),
             np.geomspace(1e-30, 1e-3, 1_001), -np.geomspace(1e-30, 1e-3, 1_001),
             np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.25, -0.25, 88.0, -88.0, 1e30, -1e30])]
    values = np.concatenate(parts).astype(np.float32)
    return np.concatenate([values, np.zeros((-len(values)) % 64, np.float32)])


@pytest.fixture(scope="module")
def results() -> tuple[np.ndarray, list[np.ndarray]]:
    x = _sweep()
    edge = etmlir.to_edge(etmlir.export(Functions(), (torch.from_numpy(x),)))
    program = edge.to_backend(backends.partitioner("cpu"))
    info = delegation_info(program)
    assert info.num_non_delegated_ops == 0, info.why_not_delegated()  # every function runs in the cpu delegate
    method = rt.load(program.to_executorch().buffer).method("forward")
    return x, [np.asarray(out) for out in method(x)]


def _nan_kept(x: np.ndarray, got: np.ndarray) -> None:
    assert np.isnan(got[np.isnan(x)]).all()


def test_exp_within_4_ulp_and_its_limits(results):
    x, outs = results
    got = outs[0]
    _nan_kept(x, got)
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64))
    normal = np.isfinite(x) & (x >= EXP_MIN) & (x <= EXP_MAX - 1e-3)
    ulp = np.spacing(want[normal].astype(np.float32)).astype(np.float64)
    assert (np.abs(got[normal] - want[normal]) <= 4 * ulp).all(), np.max(np.abs(got[normal] - want[normal]) / ulp)
    assert (got[x < EXP_MIN] == 0).all()
    assert np.isposinf(got[x > EXP_MAX]).all()


def test_tanh_relative_error(results):
    x, outs = results
    got = outs[1]
    _nan_kept(x, got)
    ok = ~np.isnan(x)
    want = np.tanh(x[ok].astype(np.float64))
    scale = np.maximum(np.abs(want), 1e-30)
    assert (np.abs(got[ok] - want) <= 6e-7 * scale).all(), np.max(np.abs(got[ok] - want) / scale)
    assert np.signbit(got[x == 0]).tolist() == np.signbit(x[x == 0]).tolist()


def test_erf_absolute_error(results):
    x, outs = results
    got = outs[2]
    _nan_kept(x, got)
    ok = ~np.isnan(x)
    want = np.array([math.erf(v) for v in x[ok].astype(np.float64)])
    assert np.max(np.abs(got[ok] - want)) <= 2e-7


# tanh-GELU: torch-mlir's lowering uses 0.797724 for sqrt(2 / pi) = 0.7978846 (up to 5.2e-5 off); et-torch-to-linalg
# decomposes it with PyTorch's reference instead, so it is held to the same tolerance as the others.
@pytest.mark.parametrize("index,name,atol", [(3, "sigmoid", 1e-6), (4, "silu", 1e-6), (5, "gelu", 1e-6),
                                             (6, "gelu tanh", 1e-6)])
def test_activations_built_on_them_match_torch(results, index, name, atol):
    x, outs = results
    want = Functions()(torch.from_numpy(x))[index].numpy()
    # At +-inf the lowered formulas give x * 0 = NaN where eager gives 0 or inf (libm's erf or not).
    finite = np.isfinite(x)
    np.testing.assert_allclose(outs[index][finite], want[finite], atol=atol, rtol=1e-5, err_msg=name)
