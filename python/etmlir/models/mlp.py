"""A three-layer MLP classifier (MNIST-sized)."""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, sizes: tuple[int, ...] = (784, 512, 256, 10)) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
            layers.append(nn.Linear(n_in, n_out))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def example_inputs() -> tuple[torch.Tensor]:
    return (torch.randn(8, 784),)
