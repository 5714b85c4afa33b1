"""Event traces of a method's runs: `Method.trace(...)`, `Trace.save(path)`, `load_trace(path)`.

    forward = etmlir.runtime.load("model.pte").method("forward")
    trace = forward.trace(image, runs=10)          # 10 runs, every event recorded
    for e in trace.events[:5]:
        print(e.kind, e.instruction, e.debug_handle, e.duration_ns)
    trace.save("model.ettrace")                     # runtime/schema/trace.fbs, as `et-run --trace` writes
    same = etmlir.runtime.load_trace("model.ettrace")

What an event is (include/etmlir/runtime/event_tracer.h): one per executed instruction of the
method ("instruction"; a delegate call is a "delegate" event), and inside a delegate call the
regions its backend timed ("delegate_op": a "cpu" delegate's fused loop nests and microkernel
calls) or, for a "nested" delegate, the steps of its inner method (kind "instruction" or
"delegate", one level deeper). `parent` is the index of the enclosing event in `events` (None at
the top), `depth` how deep it is (0: the method's own steps). `debug_handle` is what the .pte's
Method.debug_info maps to the op, its source line and module path (inner methods of nested
delegates use the outer program's handles); a delegate_op's `payload_id` is its region's id in the
payload header's debug_handle_map, which lists every edge op the region covers. `run` says which
of the traced runs (0 first).

Captures (numeric debugging): `capture=[(instruction, value), ...]` copies a method value right
after the instruction that writes it (arenas reuse memory, so it cannot be read later); a
kernel's or delegate's tensor arguments and a move's target can be captured. `trace.captures`
holds one `Capture(run, instruction, value, array)` per request per run.

The event buffer is allocated before the first run (the runtime allocates nothing while a method
runs). Its default size (`max_events=None`) is the runtime's `default_trace_events`: per run, two
events per instruction (room for loops) plus 4096 per delegate (a "cpu" delegate records one event
per fused region, a "nested" one its inner method's steps), at least 65,536 and at most 4,194,304
events (40 bytes each). A buffer that fills up keeps the events that fit: `trace()` then raises
`Error` with the tracer's message (which says how big a buffer would have held them all) unless
`allow_dropped=True`, which returns the partial trace with `dropped_events` > 0.

The file is one C++ writer's (runtime/devtools/trace_file.cpp, shared with et-run), read here
through the generated python/etmlir/trace_schema after the C++ FlatBuffers verifier.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from etmlir import _runtime

Error = _runtime.Error

# include/etmlir/runtime/event_tracer.h TraceEvent, field for field (40 bytes, little-endian).
EVENT_DTYPE = np.dtype([("start_ns", "<u8"), ("end_ns", "<u8"), ("debug_handle", "<u4"), ("payload_id", "<u4"),
                        ("instruction", "<u4"), ("run", "<u4"), ("parent", "<u4"), ("delegate", "<u2"),
                        ("kind", "u1"), ("depth", "u1")])
assert EVENT_DTYPE.itemsize == 40
KINDS = ("instruction", "delegate", "delegate_op")
NO_PARENT = 0xFFFFFFFF
NO_DELEGATE = 0xFFFF
FORMAT_VERSION = 1

# program.fbs ScalarType codes of capture arrays (bfloat16 comes as a torch tensor: numpy has none).
_SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
                 7: "float64", 11: "bool", 15: "bfloat16"}
_SCALAR_CODES = {name: code for code, name in _SCALAR_TYPES.items()}


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One timed event: an instruction, a delegate call, or a region inside a delegate (see the module doc)."""

    kind: str                 # "instruction", "delegate" or "delegate_op"
    start_ns: int
    end_ns: int               # 0: never closed (a run that failed inside it)
    debug_handle: int         # 0: none
    payload_id: int           # delegate_op: the region's id in its payload header; else 0
    instruction: int          # the pc of the method that ran it (a delegate_op's: its delegate call's)
    run: int
    parent: int | None        # index of the enclosing event in Trace.events
    delegate: int | None      # delegate and delegate_op: the delegate's index in its method
    depth: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns if self.end_ns else 0


@dataclass(frozen=True, eq=False)
class Capture:
    """A copy of method value `value`, made right after `instruction` ran in run `run`."""

    run: int
    instruction: int
    value: int
    array: Any  # numpy array (a torch tensor for bfloat16)

    def __eq__(self, other: object) -> bool:
        """Same place and the same dtype, shape and bits (NaNs equal themselves)."""
        if not isinstance(other, Capture):
            return NotImplemented
        if (self.run, self.instruction, self.value) != (other.run, other.instruction, other.value):
            return False
        a, b = _as_bits(self.array), _as_bits(other.array)
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)

    __hash__ = None  # type: ignore[assignment]  # holds an array


def _as_bits(array: Any) -> np.ndarray:
    """An array's elements as their raw bits (bfloat16 torch tensors as int16): what equality compares."""
    if type(array).__module__.startswith("torch"):
        import torch

        tensor = array.detach().cpu().contiguous()
        if tensor.dtype == torch.bfloat16:
            return tensor.view(torch.int16).numpy()
        array = tensor.numpy()
    array = np.ascontiguousarray(array)
    return array.view(f"u{array.dtype.itemsize}") if array.dtype.kind == "f" else array


@dataclass
class Trace:
    """The events (and captures) of one method's traced runs; `save` writes a trace file."""

    method: str
    events: list[TraceEvent]
    captures: list[Capture] = field(default_factory=list)
    runs: int = 1
    dropped_events: int = 0    # 0: every event is there; else the buffer was full and this many are missing
    dropped_captures: int = 0
    program_sha256: str = ""   # hex SHA-256 of the .pte the trace was taken from
    program_path: str = ""
    writer: str = "etmlir.runtime"
    backend_threads: int = 1
    cpu: str = ""
    # The last traced run's outputs (Method.trace only; not saved in the file).
    outputs: tuple = field(default=(), repr=False, compare=False)

    @property
    def complete(self) -> bool:
        """True when no event and no capture was dropped."""
        return self.dropped_events == 0 and self.dropped_captures == 0

    def children(self, index: int) -> list[int]:
        """Indices of the events whose parent is event `index` (a delegate call's ops, a nested method's steps)."""
        return [i for i, e in enumerate(self.events) if e.parent == index]

    def event_array(self) -> np.ndarray:
        """The events as a numpy structured array of EVENT_DTYPE (for fast aggregation)."""
        rows = [(e.start_ns, e.end_ns, e.debug_handle, e.payload_id, e.instruction, e.run,
                 NO_PARENT if e.parent is None else e.parent, NO_DELEGATE if e.delegate is None else e.delegate,
                 _kind_code(e.kind), e.depth) for e in self.events]
        return np.array(rows, dtype=EVENT_DTYPE) if rows else np.zeros(0, EVENT_DTYPE)

    def save(self, path: str | os.PathLike) -> None:
        """Writes the trace file (runtime/schema/trace.fbs) with the runtime's C++ writer; Error if it cannot."""
        path = os.fsdecode(os.fspath(path))
        captures = [_capture_record(c) for c in self.captures]
        method = (self.method, int(self.runs), self.event_array().tobytes(), captures, int(self.dropped_events),
                  int(self.dropped_captures))
        _runtime.write_trace(path, self.program_sha256, self.program_path, self.writer, int(self.backend_threads),
                             self.cpu, [method])

    def __repr__(self) -> str:
        state = "complete" if self.complete else f"{self.dropped_events} events dropped"
        return (f"Trace(method={self.method!r}, runs={self.runs}, events={len(self.events)}, "
                f"captures={len(self.captures)}, {state})")


def _kind_code(kind: str) -> int:
    try:
        return KINDS.index(kind)
    except ValueError:
        raise Error(f"a trace event's kind is one of {', '.join(KINDS)}, not {kind!r}") from None


def _events_from_array(array: np.ndarray) -> list[TraceEvent]:
    kinds = array["kind"]
    if len(kinds) and int(kinds.max()) >= len(KINDS):
        raise Error(f"a trace event has kind {int(kinds.max())} (known: 0 to {len(KINDS) - 1})")
    columns = [array[name].tolist() for name in EVENT_DTYPE.names]
    return [TraceEvent(KINDS[k], s, e, h, p, i, r, None if parent == NO_PARENT else parent,
                       None if d == NO_DELEGATE else d, depth)
            for s, e, h, p, i, r, parent, d, k, depth in zip(*columns)]


def _capture_record(c: Capture) -> tuple:
    """A capture as the extension's writer takes it: (run, instruction, value, scalar_type, sizes, bytes)."""
    array = c.array
    if type(array).__module__.startswith("torch"):
        import torch

        tensor = array.detach().cpu().contiguous()
        if tensor.dtype == torch.bfloat16:
            return (c.run, c.instruction, c.value, _SCALAR_CODES["bfloat16"], list(tensor.shape),
                    tensor.view(torch.int16).numpy().tobytes())
        array = tensor.numpy()
    array = np.asarray(array)
    name = array.dtype.name
    if name not in _SCALAR_CODES:
        raise Error(f"capture of value {c.value} at instruction {c.instruction}: dtype {array.dtype} is not a "
                    f"runtime dtype")
    array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    return (c.run, c.instruction, c.value, _SCALAR_CODES[name], list(array.shape), array.tobytes())


def _capture_array(scalar_type: int, sizes: list[int], data: bytes) -> Any:
    name = _SCALAR_TYPES.get(scalar_type)
    if name is None:
        raise Error(f"a capture has scalar type {scalar_type}, which this reader does not know")
    if name == "bfloat16":
        import torch

        flat = torch.frombuffer(bytearray(data), dtype=torch.int16) if data else torch.zeros(0, dtype=torch.int16)
        return flat.view(torch.bfloat16).reshape(sizes)
    array = np.frombuffer(data, dtype=np.dtype(name).newbyteorder("<")).astype(name, copy=True)
    return array.reshape(sizes)


def trace_method(method: Any, inputs: tuple, runs: int = 1, max_events: int | None = None,
                 capture: Any = None, allow_dropped: bool = False) -> Trace:
    """`Method.trace`: runs `method` `runs` times on `inputs` with a tracer attached (see the module doc)."""
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 1:
        raise Error(f"method '{method.name}': trace: runs must be an int >= 1, got {runs!r}")
    if max_events is not None and (isinstance(max_events, bool) or not isinstance(max_events, (int, np.integer))
                                   or max_events < 1):
        raise Error(f"method '{method.name}': trace: max_events must be None or an int >= 1, got {max_events!r}")
    if not isinstance(allow_dropped, bool):
        raise Error(f"method '{method.name}': trace: allow_dropped takes True or False, got {allow_dropped!r}")
    requests = _capture_requests(method.name, capture)
    structure = method.io_structure
    if structure is None or structure.flat_inputs(len(method.inputs)):
        flat = list(inputs)
    else:
        flat = method._flatten(structure, inputs, {})
    if len(flat) != len(method.inputs):
        expected = ", ".join(str(s) for s in method.inputs)
        raise Error(f"method '{method.name}' takes {len(method.inputs)} inputs ({expected}), got {len(flat)}")
    as_torch = any(type(x).__module__.startswith("torch") for x in flat)
    arrays = [method._as_array(i, x) for i, x in enumerate(flat)]
    with method._lock:
        raw = method._native.trace(arrays, int(runs), int(max_events or 0), requests)
    if raw["status"] is not None and not allow_dropped:
        raise Error(f"method '{method.name}': trace: {raw['status']}; pass max_events= a larger buffer, or "
                    f"allow_dropped=True to keep the partial trace")
    outputs = raw["outputs"]
    if as_torch:
        import torch

        outputs = [torch.from_numpy(o) if isinstance(o, np.ndarray) else o for o in outputs]
    events = _events_from_array(np.frombuffer(raw["events"], dtype=EVENT_DTYPE))
    return Trace(method=method.name, events=events,
                 captures=[Capture(int(r), int(i), int(v), a) for r, i, v, a in raw["captures"]],
                 runs=int(raw["runs"]), dropped_events=int(raw["dropped_events"]),
                 dropped_captures=int(raw["dropped_captures"]), program_sha256=raw["program_sha256"],
                 program_path=method.program.source, writer="etmlir.runtime",
                 backend_threads=int(raw["backend_threads"]), cpu=raw["cpu"], outputs=tuple(outputs))


def _capture_requests(method: str, capture: Any) -> list[tuple[int, int]]:
    if capture is None:
        return []
    try:
        pairs = [tuple(pair) for pair in capture]
    except TypeError:
        raise Error(f"method '{method}': trace: capture takes a list of (instruction, value) pairs, "
                    f"got {type(capture).__name__}") from None
    for pair in pairs:
        if len(pair) != 2 or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in pair):
            raise Error(f"method '{method}': trace: a capture request is an (instruction, value) pair of ints, "
                        f"got {pair!r}")
    return [(int(i), int(v)) for i, v in pairs]


def load_trace(path: str | os.PathLike, method: str | None = None) -> Trace:
    """Reads a trace file (`et-run --trace`, `Trace.save`): the trace of `method`, or of its only method
    (of "forward" when it holds several). Raises Error for a file that is not a trace or is damaged."""
    from etmlir.trace_schema.Trace import Trace as FbTrace

    path = os.fsdecode(os.fspath(path))
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise Error(f"cannot read trace file {path}: {error.strerror or error}") from None
    try:
        _runtime.verify_trace(data)
    except Error as error:
        raise Error(f"{path}: {error}") from None
    root = FbTrace.GetRootAs(data, 0)
    names = [root.Methods(i).Method().decode("utf-8", "replace") for i in range(root.MethodsLength())]
    if method is None:
        if len(names) == 1:
            index = 0
        elif "forward" in names:
            index = names.index("forward")
        else:
            raise Error(f"{path} holds the traces of methods {', '.join(names) or '(none)'}: pick one with method=")
    elif method in names:
        index = names.index(method)
    else:
        raise Error(f"{path} has no trace of method {method!r} (it has: {', '.join(names) or 'none'})")
    m = root.Methods(index)
    offset = m._tab.Offset(8)  # MethodTrace.events (vtable slot 2): a vector of 40-byte Event structs
    if offset:
        start = m._tab.Vector(offset)
        array = np.frombuffer(data, dtype=EVENT_DTYPE, count=m._tab.VectorLen(offset), offset=start)
    else:
        array = np.zeros(0, EVENT_DTYPE)
    captures = []
    for i in range(m.CapturesLength()):
        c = m.Captures(i)
        sizes = [int(s) for s in c.SizesAsNumpy()] if c.SizesLength() else []
        data_bytes = c.DataAsNumpy().tobytes() if c.DataLength() else b""
        captures.append(Capture(c.Run(), c.Instruction(), c.Value(), _capture_array(c.ScalarType(), sizes, data_bytes)))

    def text(value: bytes | None) -> str:
        return value.decode("utf-8", "replace") if value else ""

    return Trace(method=names[index], events=_events_from_array(array), captures=captures, runs=m.Runs(),
                 dropped_events=m.DroppedEvents(), dropped_captures=m.DroppedCaptures(),
                 program_sha256=text(root.ProgramSha256()), program_path=text(root.ProgramPath()),
                 writer=text(root.Writer()), backend_threads=root.BackendThreads(), cpu=text(root.Cpu()))
