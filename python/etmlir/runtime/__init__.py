"""The C++ runtime from Python: load a `.pte`, run its methods.

    program = etmlir.runtime.load("model.pte")       # or the file's bytes
    forward = program.method("forward")
    (logits,) = forward(image)                        # numpy arrays or torch tensors

`load(path)` reads the file into memory, so the file may change or go away
afterwards; `load(path, loader="mmap")` maps it instead (no copy, pages shared
between processes), and then the file must not change or shrink while the
program is loaded.

A "cpu" delegate's payload is machine code that runs in this process. A `.pte`
from someone else is refused at `program.method(...)` unless you say you trust
it, `load(path, allow_native_code=True)`, or its payloads are signed (`et-sign`,
`etmlir.devtools.signing`) by a key you pass, `load(path, trusted_keys=["k.pub"])`.
A `.pte` this process compiled (`to_executorch`) is your own: its exact bytes
load without either (runtime/README.md, "Trust and native code").

Inputs are checked against the method's signature (count, dtype, rank, and
sizes, which may vary within the upper bounds of a dynamic dim); a mismatch
raises `etmlir.runtime.Error` naming the input, what it expected and what it
got. Any numpy array of the right dtype runs (read-only, strided, Fortran-order
and big-endian ones are copied first), as do torch tensors and numbers nested
in lists (converted to the input's dtype when that loses nothing but float
rounding); object arrays, masked arrays and anything else raise `Error`. Every
failure of this module (a damaged file, a bad input, memory a file asks for
that is not there) is an `Error`, a RuntimeError. Outputs come back as numpy arrays, or as torch tensors when the inputs
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

Threads: a `Method` runs one call at a time. Calls of one `Method` object from
several threads wait for each other (a lock per Method, held for the whole
call: inputs, execute, outputs; also `benchmark`, `profile`, `state`,
`reset_state`, `set_seed`), so each gets its own right answer; the GIL is
released while the method runs, so separate Method objects, even of the same
Program (`program.method("forward")` once per thread), run in parallel. The
C++ `etmlir::Method` itself refuses an overlapping call with an Error.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import stat
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from etmlir import _runtime
from etmlir.executable import pte
from etmlir.executable import io_structure as io
from etmlir.executable.io_structure import IOStructure, StructureError, read_structures
from etmlir.runtime.trace import Capture, Trace, TraceEvent, load_trace, trace_method

Error = _runtime.Error

# Scratch for kernels (im2col panels and the like), reset after each instruction.
DEFAULT_TEMP_BYTES = 64 << 20
# The seed of a method's random generator until set_seed (Generator::kDefaultSeed).
DEFAULT_SEED = _runtime.default_seed()

__all__ = ["CaseResult", "OutputCheck", "Capture", "DEFAULT_SEED", "Error", "Method", "Trace", "TraceEvent", "load_trace", "Program", "TensorSpec", "backend_counter", "backend_threads",
           "compiled_backends", "cpu_heap_fallbacks", "cpu_threads", "load", "manifest", "set_backend_threads",
           "set_cpu_threads", "shipped_manifest_path"]


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

    Each backend's README lists its counters ("cpu": "heap_fallbacks", "huge_page_bytes"). Raises Error when this
    runtime was built without that backend.
    """
    return _runtime.backend_counter(backend, name)


def backend_status(backend: str) -> dict[str, Any]:
    """Whether backend `backend` can run delegates in this process: {"available": bool, "reason": why not
    ("" when available), "device": what it runs on ("vulkan": the GPU's name; "" when it does not say)}.
    Raises Error when this runtime was built without that backend."""
    available, reason, device = _runtime.backend_status(backend)
    return {"available": bool(available), "reason": reason, "device": device}


def manifest() -> dict[str, Any]:
    """The runtime manifest of this process's runtime: its kernels (with dtypes), backends, the
    `.pte` schema versions and payload header format it reads, this machine's arch and CPU features.

    The same document `et-manifest` writes (tools/runtime_manifest.h), made from the registries
    this extension loads methods with. Check a program against it, or against another build's
    file, with `etmlir.devtools.check_loadable(pte, manifest)`.
    """
    import json

    return json.loads(_runtime.runtime_manifest_json())


def shipped_manifest_path() -> str:
    """Where the build installed `runtime-manifest.json` (et-manifest's, beside the extension)."""
    return os.path.join(os.path.dirname(os.path.abspath(_runtime.__file__)), "runtime-manifest.json")


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
    """A loaded method: call it with its inputs, get its outputs.

    One Method runs one call at a time: calls from several threads are serialized by a lock of
    this object (each returns its own, right outputs), because they share the method's planned
    arenas. For parallel calls make one Method per thread (`program.method(name)` each time loads
    a new one with its own memory); those run at the same time, the GIL released while they run.
    """

    def __init__(self, program: "Program", name: str, temp_bytes: int = DEFAULT_TEMP_BYTES):
        self.program = program
        self.name = name
        if not isinstance(name, str):
            raise Error(f"{program.source}: a method name is a str, got {type(name).__name__}")
        if isinstance(temp_bytes, bool) or not isinstance(temp_bytes, int) or temp_bytes < 0:
            raise Error(f"method '{name}': temp_bytes must be a non-negative int, got {temp_bytes!r}")
        # Held around every use of the native method (its arenas, inputs and outputs are shared).
        self._lock = threading.RLock()
        meta = program._native.method_meta(name)
        self.inputs: list[TensorSpec | None] = [_spec(e) for e in meta["inputs"]]
        self.outputs: list[TensorSpec | None] = [_spec(e) for e in meta["outputs"]]
        self.arenas: list[tuple[str, int]] = [tuple(a) for a in meta["arenas"]]
        self.operators: list[str] = list(meta["operators"])
        # How the model's call nests the flat inputs/outputs (None: flat; etmlir.executable.io_structure).
        self.io_structure: IOStructure | None = program._structure(name)
        if self.io_structure is not None:
            try:
                self.io_structure.check(len(self.inputs), len(self.outputs))
            except StructureError as error:
                raise Error(f"{program.source}: method '{name}': {error}") from None
        # The name errors give each flat input: its argument path in a recorded call ("inputs['a']").
        self._input_names = _input_names(self.io_structure, len(self.inputs))
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
        return [value for _, value in leaves]

    def call_flat(self, *inputs: Any) -> tuple:
        """Runs the method on its flat inputs (tensors, in order); returns its flat outputs as a tuple."""
        if len(inputs) != len(self.inputs):
            expected = ", ".join(str(s) for s in self.inputs)
            raise Error(f"method '{self.name}' takes {len(self.inputs)} inputs ({expected}), got {len(inputs)}")
        as_torch = any(_is_torch(x) for x in inputs)
        arrays = [self._as_array(i, x) for i, x in enumerate(inputs)]
        with self._lock:
            outputs = self._native.run(arrays)
        if as_torch:
            import torch

            outputs = [torch.from_numpy(o) if isinstance(o, np.ndarray) else o for o in outputs]
        return tuple(outputs)

    def set_seed(self, seed: int) -> None:
        """Restarts the generator the method's random ops draw from (like `torch.manual_seed`).

        `seed` is an int in [-2**63, 2**64); a negative one means `seed + 2**64`.
        """
        value = _seed_value(seed, f"method '{self.name}': set_seed")
        with self._lock:
            self._native.set_seed(value)

    @property
    def seed(self) -> int:
        """The generator's seed (`DEFAULT_SEED` until `set_seed`)."""
        with self._lock:
            return self._native.seed()

    @property
    def state_names(self) -> list[str]:
        """The method's state: buffers the model mutates (KV caches, counters), by fully qualified name."""
        return list(self._native.state_names())

    def state(self, name: str) -> np.ndarray:
        """A copy of state `name` as it is now (what the next call reads); raises Error for an unknown name."""
        if not isinstance(name, str):
            raise Error(f"method '{self.name}': a state name is a str, got {type(name).__name__}")
        with self._lock:
            return self._native.state(name)

    def reset_state(self) -> None:
        """Puts every state tensor back to its initial value (the buffer's value at export), as after loading."""
        with self._lock:
            self._native.reset_state()

    def _as_array(self, index: int, value: Any) -> Any:
        """Input `index` as the extension takes it, or Error naming the input and what is wrong."""
        name = self._input_names[index]
        where = f"method '{self.name}' input {index}" + (f" ('{name}')" if name else "")
        try:
            return _input_array(value, self.inputs[index])
        except _InputError as error:
            raise Error(f"{where}: {error}") from None

    def benchmark(self, *inputs: Any, iterations: int = 10, warmup: int = 2) -> list[float]:
        """Seconds per execute() on these inputs (the run loop is in C++)."""
        with self._lock:  # the timed runs reuse the inputs this call sets
            self(*inputs)
            if warmup:
                self._native.time_runs(warmup)
            return [ns * 1e-9 for ns in self._native.time_runs(iterations)]

    def trace(self, *inputs: Any, runs: int = 1, max_events: int | None = None, capture: Any = None,
              allow_dropped: bool = False) -> Trace:
        """Runs the method `runs` times on these inputs with an event tracer attached; returns the Trace.

        Every instruction, delegate call and op a backend reports inside one is an event (see
        etmlir.runtime.trace); `capture=[(instruction, value), ...]` also copies those values right
        after those instructions. A full event buffer (`max_events`; None: sized from the runs, the
        instructions and the delegates) raises Error with the tracer's message, unless
        `allow_dropped` returns the partial trace. `Trace.save(path)` writes it as `et-run --trace` does.
        """
        return trace_method(self, inputs, runs=runs, max_events=max_events, capture=capture,
                            allow_dropped=allow_dropped)

    def profile(self, *inputs: Any) -> list[tuple[str, float]]:
        """(instruction name, seconds) for one execute() on these inputs."""
        with self._lock:
            self(*inputs)
            return [(name, ns * 1e-9) for name, ns in self._native.profile()]

    def __repr__(self) -> str:
        ins = ", ".join(str(s) for s in self.inputs)
        outs = ", ".join(str(s) for s in self.outputs)
        return f"Method({self.name}: ({ins}) -> ({outs}))"


@dataclass(frozen=True)
class OutputCheck:
    """One output of a bundled test case against its expected value (bundled.h, BundledOutputCheck)."""

    passed: bool
    problem: str            # non-empty when it could not be compared (another dtype or shape)
    numel: int
    mismatched: int         # elements outside atol + rtol * |expected|
    max_abs_error: float
    worst_index: int        # flat index of the element furthest outside its tolerance
    worst_actual: float
    worst_expected: float
    actual: Any             # the output the method gave


@dataclass(frozen=True)
class CaseResult:
    """What one bundled test case gave (Program.verify)."""

    index: int
    method: str
    name: str
    atol: float
    rtol: float
    passed: bool
    error: str | None       # execute() failed: its message (outputs is then empty)
    outputs: tuple[OutputCheck, ...]

    def __str__(self) -> str:
        label = f"case {self.index}{f' {self.name!r}' if self.name else ''} (method '{self.method}')"
        if self.error is not None:
            return f"{label}: FAIL: {self.error}"
        lines = [f"{label}: {'pass' if self.passed else 'FAIL'} (atol {self.atol:g}, rtol {self.rtol:g})"]
        for i, o in enumerate(self.outputs):
            detail = o.problem or (f"max abs error {o.max_abs_error:.3g}, {o.mismatched:,} of {o.numel:,} elements "
                                   f"outside tolerance")
            if o.mismatched:
                detail += f"; worst at flat index {o.worst_index}: {o.worst_actual:.7g}, expected {o.worst_expected:.7g}"
            lines.append(f"  output {i}: {detail}")
        return "\n".join(lines)


class Program:
    """A verified `.pte` in memory (or mapped from its file)."""

    def __init__(self, native: Any, source: str, data: Any = None):
        self._native = native
        self.source = source
        # Call structures by method: read from `data` (the bytes loaded, or a map of the file) now,
        # without keeping it; without `data`, from the file at `source` when a method is first made.
        self._structures: dict[str, IOStructure | None] | None = None
        if data is not None:
            self._read_structures(data)

    @property
    def method_names(self) -> list[str]:
        return list(self._native.method_names())

    def method(self, name: str = "forward", temp_bytes: int = DEFAULT_TEMP_BYTES) -> Method:
        """Loads method `name` with its own memory (arenas, temp): a new Method on every call, so one
        per thread runs in parallel with the others."""
        return Method(self, name, temp_bytes)

    def verify(self, method: str | None = None) -> list[CaseResult]:
        """Runs the test cases a bundled program carries (etmlir.devtools.bundle), each on a freshly
        loaded method, as `et-run --verify` does (the C++ API of include/etmlir/runtime/bundled.h).

        Returns one CaseResult per case (of `method`, when given); `all(r.passed for r in ...)` says
        whether the program passed. Raises Error when it carries no cases (or none for `method`),
        or when they are malformed.
        """
        cases = list(self._native.bundled_cases())
        if not cases:
            raise Error(f"{self.source} carries no bundled test cases (add them with etmlir.devtools.bundle)")
        results: list[CaseResult] = []
        for index, case in enumerate(cases):
            if method is not None and case["method"] != method:
                continue
            outcome = self.method(case["method"])._native.verify_bundled(index)
            outputs = tuple(OutputCheck(**o) for o in outcome["outputs"])
            results.append(CaseResult(index, case["method"], case["name"], case["atol"], case["rtol"],
                                      outcome["passed"], outcome["error"], outputs))
        if not results:
            raise Error(f"{self.source} has no bundled test case for method '{method}'")
        return results

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
        except Exception as error:  # noqa: BLE001 - the Python FlatBuffer reader on a damaged table
            raise Error(f"{self.source}: cannot read the call structure: {type(error).__name__}: {error}") from None

    def __repr__(self) -> str:
        return f"Program({self.source}, methods={self.method_names})"


LOADERS = ("file", "mmap")


def load(path_or_bytes: str | os.PathLike | bytes | bytearray | memoryview, loader: str = "file", *,
         allow_native_code: bool = False, trusted_keys: Any = ()) -> Program:
    """Loads and verifies a `.pte` from a path or from bytes (which are copied).

    Native code: a delegate whose payload is machine code (the "cpu" backend's shared object) runs
    only if `allow_native_code` (you trust the file as you would a program you run) or it is signed
    by one of `trusted_keys` (public key files as paths, their text, or 32-byte keys; `et-sign
    keygen` makes them); else loading its method raises `Error` saying so. Bytes this process
    compiled (`to_executorch(...).buffer`, or a file holding exactly them read with the default
    loader) are the user's own and load as if `allow_native_code` were given. A damaged signed
    payload is refused even so; a damaged allowed one may crash the process (that is what allowing
    native code means).

    `loader` says how a path is read:
      - "file" (the default): the whole file is read into memory now (for a moment it is there
        twice, as Python bytes and in the runtime's aligned copy). The program never reads the
        file again: it may be overwritten, truncated or deleted while the program is loaded.
      - "mmap": the file is mapped read-only, not copied: constants are paged in on first use and
        shared between processes, so a large model costs no copy. The rule that comes with it:
        the file must not change or shrink while the program (or any of its methods) is loaded;
        a file rewritten in place gives wrong outputs, one truncated crashes the process (SIGBUS).
        Replace a mapped file by writing a new one and renaming it over the old name.
    Every failure (no such file, a damaged or unsupported `.pte`) raises `Error` naming the file.
    """
    if loader not in LOADERS:
        raise Error(f"load: loader must be 'file' (read the file into memory) or 'mmap' (map it; the file must "
                    f"then not change while loaded), got {loader!r}")
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        if loader != "file":
            raise Error(f"load: loader={loader!r} maps a file; bytes are always copied (leave loader out)")
        data = bytes(path_or_bytes)
        allow, keys = _trust(allow_native_code, trusted_keys, data)
        return Program(_runtime.Program.from_bytes(data, allow, keys), f"<{len(data)} bytes>", data)
    try:
        path = os.fspath(path_or_bytes)
    except TypeError:
        raise Error(f"load takes a path or the file's bytes, got {type(path_or_bytes).__name__}") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if "\0" in path:
        raise Error(f"load: the path {path!r} has a NUL character")
    if loader == "mmap":
        allow, keys = _trust(allow_native_code, trusted_keys, None)
        native = _load_native(path, lambda: _runtime.Program.from_file(path, allow, keys))
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return Program(native, path, data)
        except OSError as error:
            raise Error(f"{path}: cannot map the file to read its call structures: {error.strerror or error}") from None
    data = _read_file(path)
    allow, keys = _trust(allow_native_code, trusted_keys, data)
    return Program(_load_native(path, lambda: _runtime.Program.from_bytes(data, allow, keys)), path, data)


# SHA-256 of the .pte buffers this process compiled (to_executorch), the newest last: the user's
# own programs, whose native code needs no opt-in when exactly those bytes are loaded.
_COMPILED_HERE: dict[bytes, None] = {}
_COMPILED_HERE_MAX = 4096
_COMPILED_HERE_LOCK = threading.Lock()


def _note_compiled(buffer: bytes) -> None:
    """Records `buffer` as compiled by this process (called by `to_executorch`, nowhere else)."""
    digest = hashlib.sha256(buffer).digest()
    with _COMPILED_HERE_LOCK:
        _COMPILED_HERE.pop(digest, None)
        _COMPILED_HERE[digest] = None
        while len(_COMPILED_HERE) > _COMPILED_HERE_MAX:
            del _COMPILED_HERE[next(iter(_COMPILED_HERE))]


def _trust(allow_native_code: Any, trusted_keys: Any, data: bytes | None) -> tuple[bool, list[bytes]]:
    """load's native-code arguments as the extension takes them: (allow, 32-byte public keys)."""
    if not isinstance(allow_native_code, bool):
        raise Error(f"load: allow_native_code takes True or False, got {type(allow_native_code).__name__}")
    if isinstance(trusted_keys, (str, bytes, bytearray, memoryview, os.PathLike)):
        raise Error("load: trusted_keys takes a list of keys (paths of public key files, their text or 32-byte "
                    "keys), got a single one: wrap it in a list")
    try:
        keys = [_public_key(key) for key in trusted_keys]
    except TypeError:
        raise Error(f"load: trusted_keys takes a list of keys, got {type(trusted_keys).__name__}") from None
    if not allow_native_code and data is not None:
        with _COMPILED_HERE_LOCK:
            allow_native_code = hashlib.sha256(data).digest() in _COMPILED_HERE
    return allow_native_code, keys


def _public_key(key: Any) -> bytes:
    """One trusted key as its 32 bytes: a path of a public key file, the file's text, or the raw key."""
    if isinstance(key, (bytes, bytearray, memoryview)):
        key = bytes(key)
        return key if len(key) == 32 else _runtime.parse_trusted_key(key)
    if isinstance(key, str) and key.startswith("etmlir-ed25519-"):
        return _runtime.parse_trusted_key(key.encode())
    try:
        path = os.fsdecode(os.fspath(key))
    except TypeError:
        raise Error(f"load: a trusted key is a path, its text or 32 bytes, got {type(key).__name__}") from None
    try:
        with open(path, "rb") as f:
            text = f.read(4097)
    except OSError as error:
        raise Error(f"trusted key {path}: cannot read it: {error.strerror or error}") from None
    try:
        return _runtime.parse_trusted_key(text)
    except Error as error:
        raise Error(f"trusted key {path}: {error}") from None


def _read_file(path: str) -> bytes:
    """The bytes of regular file `path`, or Error saying why not (as the C++ loaders word it)."""
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise Error(f"{path} is not a regular file")
            return f.read()
    except IsADirectoryError:
        raise Error(f"{path} is not a regular file") from None
    except OSError as error:
        raise Error(f"cannot open {path}: {error.strerror or error}") from None
    except MemoryError:
        raise Error(f"cannot read {path} into memory: out of memory (load(path, loader='mmap') maps it "
                    "instead)") from None


def _load_native(path: str, load_native: Any) -> Any:
    """The extension's Program, its Error naming the file (the C++ loader's message may not)."""
    try:
        return load_native()
    except Error as error:
        message = str(error)
        raise Error(message if path in message else f"{path}: {message}") from None


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


class _InputError(Exception):
    """Why a value is not an input the method takes (Method._as_array adds which input)."""


# The runtime's dtypes that numpy has (bfloat16 has no numpy dtype: torch tensors only).
_NUMPY_DTYPES = frozenset(["uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "bool"])
_FLOAT_DTYPES = frozenset(["float16", "float32", "float64", "bfloat16"])


def _input_array(value: Any, spec: TensorSpec | None) -> Any:
    """`value` as the extension takes an input of `spec`: a C-contiguous, aligned, writable,
    native-endian numpy array (a view when the array is one already, else a copy) or a contiguous
    bfloat16 torch tensor; raises _InputError saying why `value` is not one."""
    if _is_torch(value):
        array = _torch_input(value)
    elif isinstance(value, np.ndarray) or isinstance(value, np.generic):
        if isinstance(value, np.ma.MaskedArray):
            raise _InputError("masked arrays are not tensors (fill the masked values first: a.filled(...))")
        array = np.asarray(value)
    elif isinstance(value, (bool, int, float, list, tuple)):
        array = _python_input(value, spec)
    elif hasattr(value, "__array__") and not isinstance(value, (str, bytes, dict)):
        try:
            array = np.asarray(value)
        except Exception as error:  # noqa: BLE001 - a foreign array type's own failure
            raise _InputError(f"cannot read {type(value).__name__} as an array: {error}") from None
    else:
        raise _InputError(f"expected a numpy array, torch tensor or (nested) list of numbers ({spec}), "
                          f"got {type(value).__name__}")
    if isinstance(array, np.ndarray):
        if array.dtype.hasobject:
            raise _InputError("object arrays are not tensors (give a numeric dtype: np.asarray(x, np.float32))")
        if not array.dtype.isnative:
            array = array.astype(array.dtype.newbyteorder("="))
        # C order, aligned, writable; np.require keeps 0-d arrays 0-d (np.ascontiguousarray makes them 1-d).
        array = np.require(array, requirements=["C", "A", "W"])
        dtype = array.dtype.name if array.dtype.name in _NUMPY_DTYPES else str(array.dtype)
    else:
        dtype = "bfloat16"
    if spec is not None and not _fits(spec, dtype, tuple(array.shape)):
        raise _InputError(f"expected {spec}, got {dtype}[{', '.join(str(s) for s in array.shape)}]")
    return array


def _torch_input(value: Any) -> Any:
    """A torch tensor as a numpy array, or a contiguous CPU tensor when it is bfloat16."""
    try:
        tensor = value.detach().cpu()
        if tensor.layout != _torch().strided:
            raise _InputError(f"{tensor.layout} tensors are not taken (make it dense: t.to_dense())")
        tensor = tensor.resolve_conj().resolve_neg().contiguous()
        if tensor.dtype == _torch().bfloat16:
            return tensor
        return tensor.numpy()
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as error:
        raise _InputError(f"cannot read this {getattr(value, 'dtype', '')} torch tensor: "
                          f"{str(error).splitlines()[0] if str(error) else type(error).__name__}") from None


def _torch() -> Any:
    import torch

    return torch


def _python_input(value: Any, spec: TensorSpec | None) -> Any:
    """Numbers (nested in lists/tuples) as an array of the input's dtype, like torch.tensor(value,
    dtype=...): ints and bools must keep their values exactly, floats round to the dtype."""
    try:
        raw = np.array(value)
    except (ValueError, TypeError, OverflowError) as error:
        raise _InputError(f"a {type(value).__name__} that is not a tensor ({spec}): "
                          f"{str(error).splitlines()[0]}") from None
    if raw.dtype.hasobject:
        raise _InputError(f"a {type(value).__name__} of items that are not numbers of one dtype (None, objects, "
                          f"ints past 64 bits) is not a tensor ({spec})")
    if raw.dtype.kind not in "biuf":
        raise _InputError(f"a {type(value).__name__} of {raw.dtype.name} is not a tensor of numbers ({spec})")
    if spec is None:
        return raw
    target, kind = spec.dtype, raw.dtype.kind
    fits = (target == "bool" and kind == "b") or (target in _FLOAT_DTYPES and kind in "iuf") or (
        target not in _FLOAT_DTYPES and target != "bool" and kind in "iu")
    what = {"b": "bools", "i": "ints", "u": "ints", "f": "floats"}[kind]
    if not fits:
        raise _InputError(f"expected {spec}, got a {type(value).__name__} of {what}")
    with np.errstate(over="ignore", invalid="ignore"):
        if target == "bfloat16":
            torch = _torch()
            converted = torch.from_numpy(raw.astype(np.float64)).to(torch.bfloat16)
            back = converted.to(torch.float64).numpy()
        else:
            converted = back = raw.astype(target)
    if kind in "iu" and not np.array_equal(back, raw):
        raise _InputError(f"a {type(value).__name__} of ints that {target} does not hold exactly ({spec})")
    return converted


def _fits(spec: TensorSpec, dtype: str, sizes: tuple[int, ...]) -> bool:
    """Whether an array of `dtype` and `sizes` is an input of `spec` (Method::set_input's rule)."""
    if dtype != spec.dtype or len(sizes) != len(spec.sizes):
        return False
    varies = spec.dynamic_dims or (spec.dynamic,) * len(spec.sizes)
    return all(0 <= s <= bound if dim_varies else s == bound for s, bound, dim_varies in zip(sizes, spec.sizes, varies))


def _input_names(structure: IOStructure | None, count: int) -> list[str | None]:
    """Per flat input, the argument path a call gives it ("x", "inputs['a']"; None without a structure)."""
    names: list[str | None] = [None] * count

    def walk(node: io.Node, path: str) -> None:
        if node.kind == io.LEAF:
            if 0 <= node.index < count and names[node.index] is None:
                names[node.index] = path
        elif node.kind in (io.TUPLE, io.LIST):
            for i, child in enumerate(node.children):
                walk(child, f"{path}[{i}]")
        elif node.kind == io.DICT:
            for key, child in zip(node.keys, node.children):
                walk(child, f"{path}[{key!r}]")
        elif node.kind == io.CUSTOM:
            for i, child in enumerate(node.children):
                walk(child, f"{path}.{node.keys[i]}" if i < len(node.keys) else f"{path}[{i}]")

    if structure is not None:
        for name, node in zip(structure.positional_names(), structure.positional.children):
            walk(node, name)
        for key, node in zip(structure.keywords.keys, structure.keywords.children):
            walk(node, str(key))
    return names


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
