"""Shared fixtures: zoo models are exported once per test session (export is the slow part); the cpu
backend's microkernel calls recorded per test (`kernel_calls`)."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

import etmlir
from etmlir import models


@pytest.fixture(scope="session", autouse=True)
def single_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def zoo():
    """name -> (model, example_args, dynamic_shapes)."""
    return {name: models.build(name) for name in models.ZOO}


def export_zoo(zoo, name: str) -> etmlir.AtenProgram:
    model, args, dynamic = zoo[name]
    return etmlir.export(model, args, dynamic)


@pytest.fixture(scope="session")
def edge_zoo(zoo) -> dict[str, etmlir.EdgeProgram]:
    """name -> EdgeProgram, shared by the edge and executable-level tests (treat as read-only)."""
    return {name: etmlir.to_edge(export_zoo(zoo, name)) for name in models.ZOO}


@pytest.fixture(scope="session")
def pte_zoo(edge_zoo) -> dict[str, etmlir.ExecutorchProgram]:
    """name -> ExecutorchProgram (default config: one arena, inputs and outputs planned)."""
    return {name: edge_zoo[name].to_executorch() for name in models.ZOO}


def assert_runner_matches_eager(runner, model, args, dynamic, atol: float, rtol: float) -> None:
    """Compare a compiled function with eager on the example inputs, and for a model with a
    dynamic sequence dim (nanoGPT) also at other lengths, all through the same compiled function."""
    samples = [args]
    if dynamic is not None:
        samples += [(torch.randint(0, 65, (1, t)),) for t in (2, 17)]
    for sample in samples:
        with torch.no_grad():
            expected = model(*sample).numpy()
        actual = runner(*[a.numpy() for a in sample])
        assert actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, atol=atol, rtol=rtol)


@pytest.fixture
def kernel_calls(monkeypatch) -> collections.Counter:
    """Microkernel calls (name -> count) of every cpu delegate compiled while the test runs."""
    from etmlir.backends.cpu import pipeline

    calls: collections.Counter = collections.Counter()

    original = pipeline.compile_delegate

    def recording(*args, **kwargs):
        result = original(*args, **kwargs)
        calls.update(result.microkernel_calls)
        return result

    monkeypatch.setattr(pipeline, "compile_delegate", recording)
    return calls
