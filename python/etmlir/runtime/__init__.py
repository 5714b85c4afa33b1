"""The C++ runtime from Python: load a `.pte`, run its methods.

    program = etmlir.runtime.load("model.pte")       # or the file's bytes
    forward = program.method("forward")
    (logits,) = forward(image)                        # numpy arrays or torch tensors

Inputs are checked against the method's signature (count, dtype, rank, and
sizes, which may vary within the upper bounds of a dynamic dim); a mismatch
raises `etmlir.runtime.Error` naming the input, what it expected and what it
got. Outputs come back as numpy arrays, or as torch tensors when the inputs
were torch tensors. numpy has no bfloat16: bfloat16 inputs must be torch
tensors, and bfloat16 outputs always come back as torch tensors (torch must
be installed to receive one). The extension module is `etmlir._runtime`.

Random ops (rand, randn, randperm, dropout) draw from the method's own
generator (Philox-4x32-10), seeded with `DEFAULT_SEED` at load; its stream
continues across calls, and `forward.set_seed(n)` restarts it:

    forward.set_seed(7)
    (a,) = forward(x)
    forward.set_seed(7)
    (b,) = forward(x)                                 # a == b

Delegates run on the backends the extension was built with (`compiled_backends()`:
"nested" and "cpu" by default, the CMake list ETMLIR_BACKENDS).
`set_backend_threads(n)` (alias `set_cpu_threads`) picks how many threads a
delegate call of methods loaded afterwards may use (the "cpu" backend's thread
pool); `backend_counter(backend, name)` reads a statistic a backend keeps
(`cpu_heap_fallbacks()` is the "cpu" backend's "heap_fallbacks").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from etmlir import _runtime

Error = _runtime.Error

# Scratch for kernels (im2col panels and the like), reset after each instruction.
DEFAULT_TEMP_BYTES = 64 << 20
# The seed of a method's random generator until set_seed (Generator::kDefaultSeed).
DEFAULT_SEED = _runtime.default_seed()

__all__ = ["DEFAULT_SEED", "Error", "Method", "Program", "TensorSpec", "backend_counter", "backend_threads",
           "compiled_backends", "cpu_heap_fallbacks", "cpu_threads", "load", "set_backend_threads", "set_cpu_threads"]


def set_backend_threads(n: int) -> None:
    """Threads one delegate call may run on, the calling thread included (1 to 256; default 1).

    Every compiled-in backend gets it (BackendOptions::threads); the "cpu" backend gives each
    delegate a pool of `n - 1` worker threads, backends that run on one thread ignore it. Read
    when a method is loaded: methods loaded after this call get `n`, methods already loaded keep theirs.

        etmlir.runtime.set_backend_threads(4)
        forward = etmlir.runtime.load("model.pte").method("forward")
    """
    _set_threads(n, "set_backend_threads")


def backend_threads() -> int:
    """The thread count methods loaded now give their delegates (see `set_backend_threads`)."""
    return _runtime.backend_threads()


def set_cpu_threads(n: int) -> None:
    """`set_backend_threads` under its older name: the "cpu" backend is what runs on those threads."""
    _set_threads(n, "set_cpu_threads")


def cpu_threads() -> int:
    """`backend_threads` under its older name."""
    return _runtime.backend_threads()


def _set_threads(n: int, name: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{name} takes an int, got {type(n).__name__}")
    getattr(_runtime, name)(n)  # its message names the function called


def compiled_backends() -> list[str]:
    """The ids of the backends this runtime was built with, in registration order."""
    return list(_runtime.compiled_backends())


def backend_counter(backend: str, name: str) -> int:
    """A statistic backend `backend` keeps over its delegates in this process (0 for a name it does not keep).

    Each backend's README lists its counters ("cpu": "heap_fallbacks"). Raises Error when this
    runtime was built without that backend.
    """
    return _runtime.backend_counter(backend, name)


def cpu_heap_fallbacks() -> int:
    """Allocations of "cpu" delegates, in this process so far, that did not fit their payload's arena.

    They went to the C heap: the results are right, but the payload's scratch_bytes (its arena) was
    too small for the sizes it ran at (0 when every payload was sized for its inputs, or the runtime
    has no "cpu" backend).
    """
    return backend_counter("cpu", "heap_fallbacks") if "cpu" in compiled_backends() else 0


@dataclass(frozen=True)
class TensorSpec:
    """A method input or output: dtype name, planned sizes (upper bounds on the dims that may vary)."""

    dtype: str
    sizes: tuple[int, ...]
    dynamic: bool
    planned: bool
    dynamic_dims: tuple[bool, ...] = ()

    def __str__(self) -> str:
        dims = ", ".join(f"<={s}" if varies else str(s) for s, varies in zip(self.sizes, self.dynamic_dims))
        return f"{self.dtype}[{dims}]"


def _spec(entry: dict | None) -> TensorSpec | None:
    if entry is None:
        return None
    return TensorSpec(entry["dtype"], tuple(entry["sizes"]), entry["dynamic"], entry["planned"],
                      tuple(entry["dynamic_dims"]))


class Method:
    """A loaded method: call it with its inputs, get its outputs."""

    def __init__(self, program: "Program", name: str, temp_bytes: int = DEFAULT_TEMP_BYTES):
        self.program = program
        self.name = name
        meta = program._native.method_meta(name)
        self.inputs: list[TensorSpec | None] = [_spec(e) for e in meta["inputs"]]
        self.outputs: list[TensorSpec | None] = [_spec(e) for e in meta["outputs"]]
        self.arenas: list[tuple[str, int]] = [tuple(a) for a in meta["arenas"]]
        self.operators: list[str] = list(meta["operators"])
        self._native = _runtime.Method(program._native, name, temp_bytes)

    def __call__(self, *inputs: Any) -> tuple:
        if len(inputs) != len(self.inputs):
            expected = ", ".join(str(s) for s in self.inputs)
            raise Error(f"method '{self.name}' takes {len(self.inputs)} inputs ({expected}), got {len(inputs)}")
        as_torch = any(_is_torch(x) for x in inputs)
        arrays = [self._as_array(i, x) for i, x in enumerate(inputs)]
        outputs = self._native.run(arrays)
        if as_torch:
            import torch

            outputs = [torch.from_numpy(o) if isinstance(o, np.ndarray) else o for o in outputs]
        return tuple(outputs)

    def set_seed(self, seed: int) -> None:
        """Restarts the generator the method's random ops draw from (like `torch.manual_seed`).

        `seed` is an int in [-2**63, 2**64); a negative one means `seed + 2**64`.
        """
        self._native.set_seed(_seed_value(seed, f"method '{self.name}': set_seed"))

    @property
    def seed(self) -> int:
        """The generator's seed (`DEFAULT_SEED` until `set_seed`)."""
        return self._native.seed()

    def _as_array(self, index: int, value: Any) -> Any:
        if not (_is_torch(value) or isinstance(value, np.ndarray)):
            raise Error(
                f"method '{self.name}' input {index}: expected a numpy array or torch tensor "
                f"({self.inputs[index]}), got {type(value).__name__}")
        return _to_array(value)

    def benchmark(self, *inputs: Any, iterations: int = 10, warmup: int = 2) -> list[float]:
        """Seconds per execute() on these inputs (the run loop is in C++)."""
        self(*inputs)
        if warmup:
            self._native.time_runs(warmup)
        return [ns * 1e-9 for ns in self._native.time_runs(iterations)]

    def profile(self, *inputs: Any) -> list[tuple[str, float]]:
        """(instruction name, seconds) for one execute() on these inputs."""
        self(*inputs)
        return [(name, ns * 1e-9) for name, ns in self._native.profile()]

    def __repr__(self) -> str:
        ins = ", ".join(str(s) for s in self.inputs)
        outs = ", ".join(str(s) for s in self.outputs)
        return f"Method({self.name}: ({ins}) -> ({outs}))"


class Program:
    """A verified `.pte` in memory (or mapped from its file)."""

    def __init__(self, native: Any, source: str):
        self._native = native
        self.source = source

    @property
    def method_names(self) -> list[str]:
        return list(self._native.method_names())

    def method(self, name: str = "forward", temp_bytes: int = DEFAULT_TEMP_BYTES) -> Method:
        return Method(self, name, temp_bytes)

    def __repr__(self) -> str:
        return f"Program({self.source}, methods={self.method_names})"


def load(path_or_bytes: str | os.PathLike | bytes | bytearray | memoryview) -> Program:
    """Loads and verifies a `.pte` from a path (memory-mapped) or from bytes."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return Program(_runtime.Program.from_bytes(bytes(path_or_bytes)), f"<{len(path_or_bytes)} bytes>")
    path = os.fspath(path_or_bytes)
    return Program(_runtime.Program.from_file(path), path)


def _is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "numpy")


def _seed_value(seed: Any, what: str) -> int:
    """A seed as the generator's uint64 (negative ints wrap, as in torch.manual_seed)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{what} takes an int seed, got {type(seed).__name__}")
    seed = int(seed)
    if not -(1 << 63) <= seed < (1 << 64):
        raise ValueError(f"{what}: seed {seed} is outside [-2**63, 2**64)")
    return seed % (1 << 64)


def _to_array(value: Any) -> Any:
    """What the extension takes for a tensor: a C-contiguous numpy view or copy of a numpy
    array or torch tensor, or for a bfloat16 torch tensor (numpy has no bfloat16) a
    contiguous CPU torch tensor, which the extension reads through DLPack."""
    if _is_torch(value):
        value = value.detach().cpu().contiguous()
        if str(value.dtype) == "torch.bfloat16":
            return value
        value = value.numpy()
    # np.require keeps 0-d arrays 0-d (np.ascontiguousarray makes them 1-d).
    return np.require(value, requirements="C")
