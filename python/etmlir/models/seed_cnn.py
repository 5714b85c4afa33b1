"""The seeds' worked example: interpolate -> conv2d -> relu -> softmax."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SeedCNN(nn.Module):
    def __init__(self, in_channels: int = 3, out_channels: int = 8) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        x = self.conv(x)
        x = F.relu(x)
        return F.softmax(x, dim=1)


def example_inputs() -> tuple[torch.Tensor]:
    return (torch.randn(1, 3, 16, 16),)
