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
import difflib
import importlib
import importlib.machinery
import importlib.util
import pkgutil
import re
from collections.abc import Callable, Sequence
from typing import Any

from torch_mlir import ir

from etmlir.delegation.backend import backend_ids, backend_module
from etmlir.passes.levels import LEVELS


class PassFailure(Exception):
    """Raised by a pass after it has emitted diagnostics explaining why it failed."""


class PassOptionError(ValueError):
    """A pass option string that does not match the pass's declared options."""


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclasses.dataclass(frozen=True)
class Option:
    """One declared pass option: `kind` is int, bool, str or list (a list of str).

    The declaration also says which values are valid, so every pass's options are
    checked here, once, before any pass runs (a bad value is a command-line error
    naming the option and the expected form, never a crash deep inside the pass):

        Option(int, 16, "byte alignment", minimum=1, check=power_of_two)
        Option(str, "auto", "placement algorithm", choices=("auto", "best-fit"))
        Option(list, [], "ATen ops to keep", check=each(aten_op_name))

    `choices` (str: the value, list: every item) may be a function returning them, for
    sets known only at run time (registered backends). Integers are limited to int64
    (they end up in IR attributes) unless `minimum`/`maximum` say less. `check(value)`
    returns why a parsed value is wrong, or None.
    """

    kind: type
    default: Any
    help: str
    choices: tuple[str, ...] | Callable[[], Sequence[str]] | None = None
    minimum: int | None = None
    maximum: int | None = None
    check: Callable[[Any], str | None] | None = None

    def form(self) -> str:
        """The expected form, for --list-passes and error messages: `int >= 0`, `a | b`."""
        if self.choices is not None:
            shown = " | ".join(self._choices())
            return f"list of ({shown})" if self.kind is list else shown
        if self.kind is int:
            low, high = self.minimum, self.maximum
            if low is not None and high is not None:
                return f"int in [{low}, {high}]"
            return f"int >= {low}" if low is not None else (f"int <= {high}" if high is not None else "int")
        if self.kind is bool:
            return "true | false"
        return "comma-separated list" if self.kind is list else "string"

    def _choices(self) -> tuple[str, ...]:
        choices = self.choices() if callable(self.choices) else self.choices
        return tuple(choices or ())

    def parse(self, pass_flag: str, name: str, text: str) -> Any:
        """`text` as this option's kind, checked against the declaration (PassOptionError if not)."""
        value = self._convert(pass_flag, name, text)
        problem = self._problem(value)
        if problem:
            raise PassOptionError(f"{pass_flag}: option {name}={_short(text)}: {problem}")
        return value

    def _convert(self, pass_flag: str, name: str, text: str) -> Any:
        if self.kind is list:
            return [item.strip() for item in text.split(",") if item.strip()]
        if self.kind is bool:
            if text in ("", "1", "true"):
                return True
            if text in ("0", "false"):
                return False
            raise PassOptionError(f"{pass_flag}: option '{name}' expects true or false, got '{_short(text)}'")
        if self.kind is int:
            # Plain decimal only: int() would also take '1_000' and non-ASCII digits.
            if not re.fullmatch(r"[+-]?[0-9]{1,100}", text.strip()):
                raise PassOptionError(f"{pass_flag}: option '{name}' expects an integer, got '{_short(text)}'")
            return int(text)
        return text

    def _problem(self, value: Any) -> str | None:
        if self.kind is int:
            low = INT64_MIN if self.minimum is None else self.minimum
            high = INT64_MAX if self.maximum is None else self.maximum
            if value < low:
                return f"must be >= {low}"
            if value > high:
                return f"must be <= {high}"
        if self.choices is not None:
            choices = self._choices()
            for item in (value if self.kind is list else [value]):
                if item not in choices:
                    return f"unknown value '{_short(item)}'{_close(item, choices)} (one of: {', '.join(choices)})"
        return self.check(value) if self.check is not None else None


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _close(word: str, choices: Sequence[str]) -> str:
    """`; did you mean 'x'?` when `word` is a likely typo of one of `choices`."""
    match = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean '{match[0]}'?" if match else ""


def each(check: Callable[[str], str | None]) -> Callable[[list[str]], str | None]:
    """A list option's check from a check of one item (the first bad item is reported)."""

    def check_all(items: list[str]) -> str | None:
        for item in items:
            problem = check(item)
            if problem:
                return problem
        return None

    return check_all


def power_of_two(value: int) -> str | None:
    return None if value > 0 and value & (value - 1) == 0 else "must be a power of two (1, 2, 4, 8, 16, ...)"


def aten_op_name(name: str) -> str | None:
    """Why `name` is not an operator PyTorch knows (`aten.linear.default`, `aten::linear`), or None."""
    from etmlir.frontend.aten_ops import canonical_op_name, lookup_overload  # imports torch: only when used

    parts = canonical_op_name(name).split(".")
    if len(parts) == 3 and all(parts) and lookup_overload(name) is not None:
        return None
    return (f"unknown op '{_short(name)}' (ops are named like aten.linear.default or aten::add.Tensor; "
            "custom ops must be registered first, e.g. with --load)")


def edge_op_name(name: str) -> str | None:
    """Why `name` is not an edge op name (`edge.add_tensor`), or None."""
    from etmlir.dialects.edge import edge_ops

    known = [f"edge.{m}" for m in edge_ops()] + ["edge.constant", "edge.custom_op"]
    if name in known:
        return None
    return f"unknown op '{_short(name)}'{_close(name, known)} (edge ops are named like edge.add_tensor, edge.mm)"


@dataclasses.dataclass(frozen=True)
class PassInfo:
    flag: str
    run: Callable[..., None]
    options: dict[str, Option]
    # The IR level the pass takes ("torch", "edge" or "etx"; None: any). The pipeline checks it
    # before the pass runs, so a module of another level is a diagnostic naming the op found
    # and the pass to run first, not a crash inside the pass (etmlir.passes.levels).
    level: str | None = None

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
                if not self.options:
                    raise PassOptionError(
                        f"{self.flag}: unknown option '{_short(name)}' ({self.flag} takes no options)")
                known = ", ".join(f"{n}=<{o.form()}>" for n, o in sorted(self.options.items()))
                raise PassOptionError(f"{self.flag}: unknown option '{_short(name)}'{_close(name, list(self.options))} "
                                      f"(options: {known})")
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


def register_pass(flag: str, options: dict[str, Option] | None = None, level: str | None = None) -> Callable:
    """Declare `fn(module_op, **options)` as the pass named `flag`, taking modules at `level`."""

    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        if flag in _REGISTRY:
            raise ValueError(f"pass '{flag}' registered twice")
        if level is not None and level not in LEVELS:
            raise ValueError(f"pass '{flag}': level '{level}' is not one of {', '.join(LEVELS)}")
        _REGISTRY[flag] = PassInfo(flag, fn, dict(options or {}), level)
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
_NOT_PASSES = ("registry", "pipeline", "levels")  # the modules of this package that define no pass


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
