"""The backend interface and the registry that finds backends by id.

A backend is what a `.pte` names in its delegate table ("nested", "cpu", ...)
and what the runtime's BackendRegistry holds under the same id. Ahead of
time it provides two things:

    class MyBackend(Backend):
        id = "mine"
        support = OperatorSupport(ops={"edge.relu": None})       # which ops it takes
        def preprocess(self, module, compile_specs) -> PreprocessResult: ...   # the payload

(a backend whose grouping differs overrides `partitioner` instead of setting `support`).

`preprocess` receives one outlined delegate (a module holding `func.func
@forward` with the group's edge ops, their locations and debug handles) and
returns the bytes the runtime backend's `init` gets, plus a debug-handle map:
payload-internal id -> the edge ops' debug handles it covers, so a failure
or a profile event inside the payload maps back to source lines.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import importlib
import importlib.metadata
import pkgutil
import re
from collections.abc import Collection, Mapping

from torch_mlir import ir

from etmlir.delegation.operator_support import OperatorSupport
from etmlir.delegation.partitioner import Partitioner


class BackendError(Exception):
    """A backend refused or failed to compile a delegate; the message names the delegate and why."""


@dataclasses.dataclass(frozen=True)
class PreprocessResult:
    """A compiled delegate: the payload bytes and payload id -> the edge debug handles it covers."""

    payload: bytes
    debug_handle_map: Mapping[int, tuple[int, ...]]
    summary: str | None = None  # one line on what the payload holds, for the delegation report


class Backend(abc.ABC):
    """An ahead-of-time backend: a partitioner and a compiler from an outlined module to bytes."""

    id: str = ""
    description: str = ""
    support: OperatorSupport | None = None  # the ops the default partitioner offers this backend
    # ATen ops outside Core ATen the backend runs whole (e.g. aten.scaled_dot_product_attention):
    # what its partitioner's ops_to_keep() asks `to_edge` not to decompose.
    keep: tuple[str, ...] = ()

    def partitioner(self, *, ops: Collection[str] | None = None, skip_ops: Collection[str] = (),
                    min_group_size: int = 1, compile_specs: Mapping[str, str] | None = None) -> Partitioner:
        """A partitioner over `support`, narrowed to `ops`, without `skip_ops`; groups of at least
        `min_group_size` ops become delegates compiled with `compile_specs`."""
        if self.support is None:
            raise NotImplementedError(f"backend '{self.id}' sets no `support` and does not override partitioner()")
        return Partitioner(self.id, self.support.with_options(ops=ops), min_group_size=min_group_size,
                           skip_ops=tuple(skip_ops), compile_specs=dict(compile_specs or {}), keep=self.keep)

    @abc.abstractmethod
    def preprocess(self, module: ir.Module, compile_specs: Mapping[str, str]) -> PreprocessResult:
        """Compile one outlined delegate (`func.func @forward` in `module`) into payload bytes."""


_BACKENDS: dict[str, Backend] = {}
# Where backends come from, besides register_backend() calls: each package under
# etmlir/backends/ whose __init__ registers one (`etmlir/backends/<id>/`), and
# out-of-tree packages that declare an `etmlir.backends` entry point (`<id> = "pkg.module"`).
# A backend's module is imported when its id is first asked for, not before: the passes,
# et-opt and the other backends never pay for a backend's compiler they do not use.
BACKENDS_PACKAGE = "etmlir.backends"
ENTRY_POINT_GROUP = "etmlir.backends"


@functools.cache
def _discovered() -> dict[str, str]:
    """backend id -> the module that registers it (not imported here)."""
    found: dict[str, str] = {}
    # The package's live search path (a plugin lookup by name: this layer does not depend on the backends).
    package = importlib.import_module(BACKENDS_PACKAGE)
    for info in pkgutil.iter_modules(list(package.__path__)):
        if info.ispkg and not info.name.startswith("_"):
            found[info.name] = f"{BACKENDS_PACKAGE}.{info.name}"
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(entry.name, entry.value)
    return found


def register_backend(backend: Backend) -> Backend:
    """Make `backend` findable by its id (the id the runtime's BackendRegistry uses too)."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", backend.id or ""):
        raise ValueError(f"backend id '{backend.id}' must be an identifier (letters, digits, _)")
    if backend.id in _BACKENDS and type(_BACKENDS[backend.id]) is not type(backend):
        raise ValueError(f"a different backend is already registered as '{backend.id}'")
    _BACKENDS[backend.id] = backend
    return backend


def get_backend(backend_id: str) -> Backend:
    """The backend registered as `backend_id`, importing its module on first use (KeyError lists the known ids)."""
    if backend_id not in _BACKENDS and backend_id in _discovered():
        importlib.import_module(_discovered()[backend_id])
        if backend_id not in _BACKENDS:
            raise KeyError(f"module '{_discovered()[backend_id]}' registers no backend '{backend_id}'")
    try:
        return _BACKENDS[backend_id]
    except KeyError:
        raise KeyError(f"no backend '{backend_id}' is registered (registered: {', '.join(backend_ids()) or 'none'})") \
            from None


def backend_module(backend_id: str) -> str | None:
    """The package that defines backend `backend_id` (its passes live in `<package>.passes`); None if unknown."""
    if backend_id in _discovered():
        return _discovered()[backend_id]
    backend = _BACKENDS.get(backend_id)
    return type(backend).__module__ if backend is not None else None


def backend_ids() -> list[str]:
    """Every backend id that get_backend() can find (registered or discoverable; none is imported)."""
    return sorted(set(_BACKENDS) | set(_discovered()))


def partitioner(backend_id: str, **options: object) -> Partitioner:
    """The partitioner of the backend registered as `backend_id`, configured by `options`.

        edge.to_backend(etmlir.backends.partitioner("nested", skip_ops=["edge.embedding"]))
    """
    return get_backend(backend_id).partitioner(**options)
