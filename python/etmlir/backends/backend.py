"""The backend interface and the registry that finds backends by id.

A backend is what a `.pte` names in its delegate table ("nested", "cpu", ...)
and what the runtime's BackendRegistry holds under the same id. Ahead of
time it provides two things:

    class MyBackend(Backend):
        id = "mine"
        def partitioner(self, **options) -> Partitioner: ...     # which ops it takes
        def preprocess(self, module, compile_specs) -> PreprocessResult: ...   # the payload

`preprocess` receives one outlined delegate (a module holding `func.func
@forward` with the group's edge ops, their locations and debug handles) and
returns the bytes the runtime backend's `init` gets, plus a debug-handle map:
payload-internal id -> the edge ops' debug handles it covers, so a failure
or a profile event inside the payload maps back to source lines.
"""

from __future__ import annotations

import abc
import dataclasses
import re
from collections.abc import Mapping

from torch_mlir import ir

from etmlir.backends.partitioner import Partitioner


class BackendError(Exception):
    """A backend refused or failed to compile a delegate; the message names the delegate and why."""


@dataclasses.dataclass(frozen=True)
class PreprocessResult:
    """A compiled delegate: the payload bytes and payload id -> the edge debug handles it covers."""

    payload: bytes
    debug_handle_map: Mapping[int, tuple[int, ...]]


class Backend(abc.ABC):
    """An ahead-of-time backend: a partitioner and a compiler from an outlined module to bytes."""

    id: str = ""
    description: str = ""

    @abc.abstractmethod
    def partitioner(self, **options: object) -> Partitioner:
        """This backend's partitioner, configured by `options` (see the backend's documentation)."""

    @abc.abstractmethod
    def preprocess(self, module: ir.Module, compile_specs: Mapping[str, str]) -> PreprocessResult:
        """Compile one outlined delegate (`func.func @forward` in `module`) into payload bytes."""


_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Make `backend` findable by its id (the id the runtime's BackendRegistry uses too)."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", backend.id or ""):
        raise ValueError(f"backend id '{backend.id}' must be an identifier (letters, digits, _)")
    if backend.id in _BACKENDS and type(_BACKENDS[backend.id]) is not type(backend):
        raise ValueError(f"a different backend is already registered as '{backend.id}'")
    _BACKENDS[backend.id] = backend
    return backend


def get_backend(backend_id: str) -> Backend:
    """The backend registered as `backend_id` (a KeyError lists the registered ones)."""
    try:
        return _BACKENDS[backend_id]
    except KeyError:
        known = ", ".join(sorted(_BACKENDS)) or "none"
        raise KeyError(f"no backend '{backend_id}' is registered (registered: {known})") from None


def backend_ids() -> list[str]:
    return sorted(_BACKENDS)


def partitioner(backend_id: str, **options: object) -> Partitioner:
    """The partitioner of the backend registered as `backend_id`, configured by `options`.

        edge.to_backend(etmlir.backends.partitioner("nested", skip_ops=["edge.embedding"]))
    """
    return get_backend(backend_id).partitioner(**options)
