"""Modules imported on first use, so that start-up pays only for what runs.

`import torch` costs about 2 s; `et-opt --list-passes`, a lit RUN line that
plans memory, or `import etmlir.passes` need none of it. A module that uses
torch only inside its functions names it through a proxy instead:

    from etmlir.lazy import lazy_module
    torch = lazy_module("torch")           # nothing imported yet

    def dtype_of(name: str) -> "torch.dtype":
        return getattr(torch, name)        # the first attribute access imports torch

The proxy imports the real module on the first attribute access and forwards
every access after that; a submodule (`torch.fx`) that the package does not
import itself is imported the same way. Module-level code must not touch a
proxy's attributes (that would import it at once): tables built from torch
objects are built on first use (`functools.cache`).
"""

from __future__ import annotations

import importlib
import types
from typing import Any


class _LazyModule:
    __slots__ = ("_name", "_module")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: types.ModuleType | None = None

    def _load(self) -> types.ModuleType:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return self._module

    def __getattr__(self, attr: str) -> Any:
        module = self._load()
        try:
            return getattr(module, attr)
        except AttributeError:
            try:
                return importlib.import_module(f"{self._name}.{attr}")
            except ImportError:
                raise AttributeError(f"module '{self._name}' has no attribute '{attr}'") from None

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy module '{self._name}' ({state})>"


def lazy_module(name: str) -> Any:
    """A proxy for the module `name` that imports it on the first attribute access."""
    return _LazyModule(name)
