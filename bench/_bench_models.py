"""The latency benchmarks' models: etmlir's zoo plus two the zoo does not have.

    model, args, dynamic_shapes = build("llama")      # like etmlir.models.build, any name in MODELS

  llama     `transformers.LlamaForCausalLM` (rotary, GQA, RMSNorm, SwiGLU) with a small config and seeded
            random weights (nothing is downloaded): hidden 256, 4 layers, 8 heads (4 key/value heads), MLP
            768, vocabulary 2048; token ids in, logits out (the model's `logits` field, as
            etmlir.models.architectures wraps it); exported with a dynamic sequence dim 2..256, so one
            program serves every sequence length, as nanogpt's does
  resnet18  ResNet-18's shape, written out here (torchvision's wheel does not import with the CPU torch):
            7x7/2 stem, max pool, BasicBlock x [2, 2, 2, 2] at 64/128/256/512 channels, batch norm, ReLU,
            global average pool, 1000-way linear; 1x3x224x224 input; seeded fan-in-scaled weights and
            non-trivial batch-norm statistics (as etmlir.models.architectures re-initialises its CNNs)

Token-id models (TOKEN_MODELS) get one benchmark case per sequence length. Imports torch and
`etmlir.models` only (pure Python), so the benchmark workers can build the same models in the bench
environment; `transformers` is imported when llama is built.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from etmlir import models
from etmlir.models.architectures import seeded_init

LLAMA_CONFIG = dict(vocab_size=2048, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                    num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512)
LLAMA_MAX_SEQ = 256
RESNET18_IMAGE = 224


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convs with batch norm, and a 1x1 projection on the skip path where the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.downsample = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                           if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + self.downsample(x))


class ResNet18(nn.Module):
    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


def _seeded_resnet18() -> ResNet18:
    model = ResNet18().eval()
    seeded_init(model)  # the same seeded weights and batch-norm statistics as the test architectures
    return model


class Logits(nn.Module):
    """A `transformers` causal LM's `logits` field (the model's other outputs, e.g. its cache, dropped)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids).logits


def _llama() -> tuple[nn.Module, tuple[Any, ...], Any]:
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(**LLAMA_CONFIG)
    model = Logits(transformers.LlamaForCausalLM(config).eval()).eval()
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (1, 64), generator=generator)
    return model, (ids,), ({1: torch.export.Dim("seq", min=2, max=LLAMA_MAX_SEQ)},)


EXTRA = {
    "llama": ("LlamaForCausalLM 4 layers x 256 (GQA 8/4 heads), vocab 2048, dynamic sequence length 2..256",
              _llama),
    "resnet18": (f"ResNet-18 (BasicBlock x [2,2,2,2], batch norm) {RESNET18_IMAGE}x{RESNET18_IMAGE}",
                 lambda: (_seeded_resnet18(), (torch.randn(1, 3, RESNET18_IMAGE, RESNET18_IMAGE,
                                                           generator=torch.Generator().manual_seed(0)),), None)),
}
MODELS: dict[str, str] = {**{name: entry.description for name, entry in models.ZOO.items()},
                          **{name: description for name, (description, _) in EXTRA.items()}}
TOKEN_MODELS = ("nanogpt", "llama")  # token ids in, a dynamic sequence dim: one case per sequence length


def build(name: str) -> tuple[nn.Module, tuple[Any, ...], Any]:
    """(model in eval mode, example args, dynamic shapes) of a zoo model or one of EXTRA; seeded."""
    if name in EXTRA:
        return EXTRA[name][1]()
    if name in models.ZOO:
        return models.build(name)
    raise KeyError(f"no benchmark model '{name}'; available: {', '.join(MODELS)}")


def vocab_size(model: nn.Module) -> int:
    """The token-id range of a TOKEN_MODELS model."""
    if isinstance(model, Logits):
        return model.model.config.vocab_size
    return model.cfg.vocab_size
