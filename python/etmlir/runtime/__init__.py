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

A method takes the arguments the model took and returns what it returned, when
the `.pte` records the call structure (`etmlir.export` does):

    out = forward(ids, attention_mask=mask)          # nested, keyword, as exported
    out.last_hidden_state                            # a ModelOutput rebuilt
    (y,) = forward.call_flat(x)                      # the flat tensors, as et-run sees them

Constants the export fixed (None, ints, floats, bools, strings) must be passed
with the same value (or left out); a wrong one raises `Error` naming the
argument (`inputs['mask'] expected None ...`). A model that returned one tensor
or a flat tuple/list of tensors still comes back as a tuple (see `Method.__call__`).

A model's mutated buffers (a KV cache, a step counter) are the method's state:
filled from their exported values when the method loads, updated in place by
every call, read with `forward.state("cache")` (a copy) and restarted with
`forward.reset_state()`.

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

import mmap
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from etmlir import _runtime
from etmlir.executable import pte
from etmlir.executable.io_structure import IOStructure, StructureError, read_structures

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
        # How the model's call nests the flat inputs/outputs (None: flat; etmlir.executable.io_structure).
        self.io_structure: IOStructure | None = program._structure(name)
        self._native = _runtime.Method(program._native, name, temp_bytes)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Runs the method on a call shaped like the model's, returns a result shaped like the model's.

        With a recorded call structure, `args`/`kwargs` are bound like a call of the model's forward
        (nested tuples, lists, dicts; constants checked against their exported values) and the
        result is rebuilt: tuples, lists, dicts and constants as themselves, and a custom class
        (namedtuple, dataclass, transformers ModelOutput) as that class when its module imports
        here, else as a dict from field name to value. A model that returned one tensor or a flat
        tuple/list of tensors comes back as a tuple of outputs, as from `call_flat`; so does every
        method of a `.pte` without a structure, which takes its tensors positionally.
        """
        structure = self.io_structure
        if structure is None or (not kwargs and structure.flat_inputs(len(self.inputs))):
            if kwargs:
                raise Error(f"method '{self.name}' takes its {len(self.inputs)} inputs positionally "
                            f"(the .pte records no call structure), got keyword arguments {sorted(kwargs)}")
            outputs = self.call_flat(*args)
        else:
            outputs = self.call_flat(*self._flatten(structure, args, kwargs))
        if structure is None or structure.flat_outputs(len(self.outputs)):
            return outputs
        return structure.build(outputs)

    def _flatten(self, structure: IOStructure, args: tuple, kwargs: dict[str, Any]) -> list[Any]:
        try:
            leaves = structure.flatten_call(args, kwargs)
        except StructureError as error:
            raise Error(f"method '{self.name}': {error}") from None
        if len(leaves) != len(self.inputs):
            raise Error(f"method '{self.name}' takes {len(self.inputs)} inputs, its call structure names "
                        f"{len(leaves)}")
        for index, (path, value) in enumerate(leaves):
            if not (_is_torch(value) or isinstance(value, np.ndarray)):
                raise Error(f"method '{self.name}': {path} expected a numpy array or torch tensor "
                            f"({self.inputs[index]}), got {type(value).__name__}")
        return [value for _, value in leaves]

    def call_flat(self, *inputs: Any) -> tuple:
        """Runs the method on its flat inputs (tensors, in order); returns its flat outputs as a tuple."""
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

    @property
    def state_names(self) -> list[str]:
        """The method's state: buffers the model mutates (KV caches, counters), by fully qualified name."""
        return list(self._native.state_names())

    def state(self, name: str) -> np.ndarray:
        """A copy of state `name` as it is now (what the next call reads); raises Error for an unknown name."""
        return self._native.state(name)

    def reset_state(self) -> None:
        """Puts every state tensor back to its initial value (the buffer's value at export), as after loading."""
        self._native.reset_state()

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

    def __init__(self, native: Any, source: str, data: bytes | None = None):
        self._native = native
        self.source = source
        # Call structures by method: read from `data` now when loaded from memory (no copy is kept),
        # from the file at `source` when a method is first made.
        self._structures: dict[str, IOStructure | None] | None = None
        if data is not None:
            self._read_structures(data)

    @property
    def method_names(self) -> list[str]:
        return list(self._native.method_names())

    def method(self, name: str = "forward", temp_bytes: int = DEFAULT_TEMP_BYTES) -> Method:
        return Method(self, name, temp_bytes)

    def _structure(self, method: str) -> IOStructure | None:
        """The call structure of `method` (None: flat), read once per program from the FlatBuffer."""
        if self._structures is None:
            with open(self.source, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                self._read_structures(data)
        return self._structures.get(method)

    def _read_structures(self, data: Any) -> None:
        try:
            self._structures = read_structures(data, pte.read_header(data).program_offset)
        except (StructureError, pte.PteError) as error:
            raise Error(f"{self.source}: cannot read the call structure: {error}") from None

    def __repr__(self) -> str:
        return f"Program({self.source}, methods={self.method_names})"


def load(path_or_bytes: str | os.PathLike | bytes | bytearray | memoryview) -> Program:
    """Loads and verifies a `.pte` from a path (memory-mapped) or from bytes."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
        return Program(_runtime.Program.from_bytes(data), f"<{len(data)} bytes>", data)
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
