"""Shared fixtures: zoo models are exported once per test session (export is the slow part)."""

from __future__ import annotations

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
