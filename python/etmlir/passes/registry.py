"""The one registry of etmlir passes.

A pass is a Python function over a module, declared once with its flag, its
options and (from its docstring) its description. `et-opt`, `--list-passes`
and the Python API (`etmlir.passes.run_pipeline`, `AtenProgram.transform`)
all read this registry, so a pass cannot be reachable from one and not the
others.

    @register_pass("et-verify-core-aten", options={"keep": ListOption(...)})
    def verify_core_aten(module: ir.Operation, *, keep: list[str]) -> None: ...

A pass reports a user error by emitting diagnostics at the offending ops'
locations (`emit_error`) and raising `PassFailure`; the driver prints them as
`file:line:col: error: ...`, like any MLIR diagnostic.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.machinery
import importlib.util
import pkgutil
import re
from collections.abc import Callable
from typing import Any

from torch_mlir import ir

from etmlir.delegation.backend import backend_ids, backend_module


class PassFailure(Exception):
    """Raised by a pass after it has emitted diagnostics explaining why it failed."""


class PassOptionError(ValueError):
    """A pass option string that does not match the pass's declared options."""


@dataclasses.dataclass(frozen=True)
class Option:
    """One declared pass option: `kind` is int, bool, str or list (a list of str)."""

    kind: type
    default: Any
    help: str

    def parse(self, pass_flag: str, name: str, text: str) -> Any:
        if self.kind is list:
            return [item.strip() for item in text.split(",") if item.strip()]
        if self.kind is bool:
            if text in ("", "1", "true"):
                return True
            if text in ("0", "false"):
                return False
            raise PassOptionError(f"{pass_flag}: option '{name}' expects true or false, got '{text}'")
        if self.kind is int:
            try:
                return int(text)
            except ValueError:
                raise PassOptionError(f"{pass_flag}: option '{name}' expects an integer, got '{text}'") from None
        return text


@dataclasses.dataclass(frozen=True)
class PassInfo:
    flag: str
    run: Callable[..., None]
    options: dict[str, Option]

    @property
    def description(self) -> str:
        doc = (self.run.__doc__ or "").strip()
        first = doc.splitlines()[0] if doc else ""
        # The docstring starts "et-flag: what it does."; --list-passes shows the second half.
        return first.split(":", 1)[1].strip() if first.startswith(self.flag + ":") else first

    def parse_options(self, text: str) -> dict[str, Any]:
        """Parse MLIR-style options `a=1 b=x,y` into keyword arguments (defaults filled in)."""
        values = {name: opt.default for name, opt in self.options.items()}
        for item in _split_option_items(text):
            name, _, value = item.partition("=")
            name = name.strip()
            if name not in self.options:
                known = ", ".join(sorted(self.options)) or "none"
                raise PassOptionError(f"{self.flag}: unknown option '{name}' (options: {known})")
            values[name] = self.options[name].parse(self.flag, name, value.strip())
        # Options are spelled like MLIR's (`alloc-inputs`); the pass takes `alloc_inputs=`.
        return {name.replace("-", "_"): value for name, value in values.items()}


def _split_option_items(text: str) -> list[str]:
    """Split `a=1 b=x,y c="q r"` on top-level spaces."""
    items: list[str] = []
    current = ""
    quote = False
    for ch in text.strip():
        if ch == '"':
            quote = not quote
            continue
        if ch.isspace() and not quote:
            if current:
                items.append(current)
            current = ""
        else:
            current += ch
    if current:
        items.append(current)
    return items


_REGISTRY: dict[str, PassInfo] = {}


def register_pass(flag: str, options: dict[str, Option] | None = None) -> Callable:
    """Declare `fn(module_op, **options)` as the pass named `flag`."""

    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        if flag in _REGISTRY:
            raise ValueError(f"pass '{flag}' registered twice")
        _REGISTRY[flag] = PassInfo(flag, fn, dict(options or {}))
        return fn

    return wrap


def get_pass(flag: str) -> PassInfo | None:
    """The pass named `flag`, importing only the module that defines it (None: not an etmlir pass).

    A pass lives in the file named after its flag (`et-plan-memory` in
    `etmlir/passes/plan_memory.py`); a backend's pass `et-<id>-<name>` in
    `etmlir/backends/<id>/passes/<name>.py`. So a pipeline imports the passes
    it runs and no others: `et-plan-memory` never imports torch.
    """
    if flag not in _REGISTRY:
        for module in _modules_for(flag):
            if _find_spec(module) is not None:
                importlib.import_module(module)
                break
    return _REGISTRY.get(flag)


def all_passes() -> list[PassInfo]:
    """Every pass (imports every pass module: for --list-passes and error messages)."""
    for module in _all_pass_modules():
        importlib.import_module(module)
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def emit_error(op: ir.Operation | ir.OpView, message: str) -> None:
    """Report `message` as an error diagnostic at `op`'s location."""
    op.location.emit_error(message)


_CORE_PACKAGE = "etmlir.passes"
_NOT_PASSES = ("registry", "pipeline")  # the modules of this package that define no pass


def _find_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    try:
        return importlib.util.find_spec(name)
    except ModuleNotFoundError:  # a parent package that does not exist
        return None


def _modules_for(flag: str) -> list[str]:
    """Where the pass `flag` would be defined, by the naming rule (most specific first)."""
    if not flag.startswith("et-") or not re.fullmatch(r"[a-z0-9-]+", flag):
        return []
    words = flag[len("et-"):].split("-")
    candidates = []
    if len(words) > 1:  # et-<backend>-<name>: a backend's pass
        candidates.append(f"{_backend_package(words[0])}.passes.{'_'.join(words[1:])}")
    candidates.append(f"{_CORE_PACKAGE}.{'_'.join(words)}")
    return [c for c in candidates if _find_spec(c.rpartition(".")[0]) is not None]


def _backend_package(backend_id: str) -> str:
    return backend_module(backend_id) or f"etmlir.backends.{backend_id}"


def _all_pass_modules() -> list[str]:
    packages = [_CORE_PACKAGE] + [f"{backend_module(i)}.passes" for i in backend_ids() if backend_module(i)]
    modules = []
    for package in packages:
        spec = _find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        for info in pkgutil.iter_modules(list(spec.submodule_search_locations)):
            if not info.ispkg and not info.name.startswith("_") and info.name not in _NOT_PASSES:
                modules.append(f"{package}.{info.name}")
    return modules
