"""The model zoo used by examples, tests and benchmarks.

Each entry builds a model (eval mode, seeded weights unless real weights
exist), example inputs and the dynamic shapes to export it with:

    model, args, dynamic_shapes = etmlir.models.build("nanogpt")
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from etmlir.models import mlp, mobilenet_v2, nanogpt, seed_cnn


@dataclasses.dataclass(frozen=True)
class ZooEntry:
    name: str
    description: str
    make: Callable[[], tuple[torch.nn.Module, tuple[Any, ...], Any]]


def _seeded(make_model: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    torch.manual_seed(0)
    return make_model().eval()


ZOO: dict[str, ZooEntry] = {e.name: e for e in [
    ZooEntry("seed_cnn", "the seeds' example: interpolate -> conv2d -> relu -> softmax",
             lambda: (_seeded(seed_cnn.SeedCNN), seed_cnn.example_inputs(), None)),
    ZooEntry("mlp", "MLP 784-512-256-10",
             lambda: (_seeded(mlp.MLP), mlp.example_inputs(), None)),
    ZooEntry("mobilenet_v2", "MobileNetV2 224x224 with torchvision's ImageNet weights",
             lambda: (mobilenet_v2.pretrained(), mobilenet_v2.example_inputs(), None)),
    ZooEntry("nanogpt", "nanoGPT 6 layers x 384, dynamic sequence length 2..256",
             lambda: (_seeded(nanogpt.NanoGPT), nanogpt.example_inputs(), nanogpt.dynamic_shapes())),
]}


def build(name: str) -> tuple[torch.nn.Module, tuple[Any, ...], Any]:
    """(model, example_args, dynamic_shapes) for a zoo model; weights and inputs are seeded."""
    if name not in ZOO:
        raise KeyError(f"no zoo model '{name}'; available: {', '.join(ZOO)}")
    return ZOO[name].make()
