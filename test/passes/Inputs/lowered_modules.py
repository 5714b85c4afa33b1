"""Two live lowered modules for the et-link-lowered-modules lit test (loaded with `et-opt --load`).

    etmlir_lowered::m0   relu(Linear(8, 4)(x))     tensor<1x8xf32> -> tensor<1x4xf32>, debug handles 1-3
    etmlir_lowered::m1   sigmoid(Linear(4, 2)(x))  tensor<1x4xf32> -> tensor<1x2xf32>, debug handles 1-3

Both are lowered whole to the `nested` backend. The pass finds them by name in this process,
so they are kept alive (the table of lowered modules holds weak references) for the whole run.
"""

import sys
import types

import torch

import etmlir

torch.manual_seed(0)


def _lower(layer: torch.nn.Module, activation, in_features: int, name: str):
    class Inner(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = layer

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return activation(self.lin(x))

    edge = etmlir.to_edge(etmlir.export(Inner(), (torch.randn(1, in_features),)))
    lowered = etmlir.to_backend("nested", edge)
    # The test's IR calls them by these names: a fresh et-opt process numbers lowered modules from 0.
    assert lowered.qualified_name == name, lowered.qualified_name
    return lowered


_keep = types.ModuleType("etmlir_test_lowered_modules")
_keep.m0 = _lower(torch.nn.Linear(8, 4), torch.relu, 8, "etmlir_lowered::m0")
_keep.m1 = _lower(torch.nn.Linear(4, 2), torch.sigmoid, 4, "etmlir_lowered::m1")
sys.modules[_keep.__name__] = _keep
