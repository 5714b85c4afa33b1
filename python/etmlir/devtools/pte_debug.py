"""What the developer tools know about a `.pte`'s methods: ops by debug handle, steps, delegates.

    methods = read_debug_info(open("model.pte", "rb").read())
    forward = methods["forward"]
    forward.op(12)                        # OpInfo(12, "edge.addmm", "model.py:41", "layers.3.attn")
    forward.instructions[4]               # InstructionInfo(pc=4, kind="delegate", delegate=0, ...)
    forward.delegates[0].regions          # {payload id: (debug handles,)}: what a DelegateOp event covers

The Inspector joins trace events with this (an event names a debug handle, an
instruction, a delegate and a payload id), and the HTML graph view draws it.
Everything comes from the one file: Method.debug_info (handle -> op, source
line, module path; a delegate's inner ops are listed there too, because the
runtime reports a delegate's failure through the outer program), and each
delegate payload's header (`backends/payload_header.py`), whose
debug_handle_map expands a backend's region id to the edge ops it covers. A
`nested` delegate's body is itself a `.pte`: its methods are read as well, so
events of its inner steps and of its own delegates resolve.

A damaged `.pte` raises `pte.PteError`; a payload whose header cannot be read
is described (`DelegateInfo.problem`), not fatal, so the rest still resolves.
"""

from __future__ import annotations

import dataclasses
import hashlib

from etmlir.backends.payload_header import read_payload
from etmlir.executable import pte
from etmlir.schema.InstructionKind import InstructionKind
from etmlir.schema.Value import Value

# How deep nested payloads (a nested delegate's program with its own nested delegates) are read.
_MAX_NESTING = 8


def text(s: object) -> str:
    """A FlatBuffer string as text (bytes that are not UTF-8 as escapes; None as '')."""
    if s is None:
        return ""
    return s.decode(errors="backslashreplace") if isinstance(s, bytes) else str(s)


@dataclasses.dataclass(frozen=True)
class OpInfo:
    """One edge op, as Method.debug_info records it."""

    handle: int
    op: str                 # "edge.addmm"
    location: str           # "model.py:41" ("unknown" when the op had no source location)
    module_path: str = ""   # "layers.3.attn" ("" for the root module, or files without module paths)

    @property
    def short_location(self) -> str:
        """`model.py:41` for `/home/me/model.py:41`."""
        return self.location.rsplit("/", 1)[-1]


@dataclasses.dataclass(frozen=True)
class InstructionInfo:
    """One step of a method."""

    pc: int
    kind: str               # "kernel", "delegate", "jump_false", "move", "free"
    name: str               # "aten::addmm.out", "delegate 0", "move", ...
    handle: int             # 0: none
    args: tuple[int, ...] = ()
    delegate: int | None = None
    num_outputs: int = 0    # a delegate call's live-outs (the last args)


@dataclasses.dataclass
class DelegateInfo:
    """A delegate of a method: its backend and what its payload header says it covers."""

    index: int
    backend: str
    regions: dict[int, tuple[int, ...]]     # payload id -> edge debug handles (the header's debug_handle_map)
    payload_bytes: int = 0
    inner: dict[str, MethodDebugInfo] | None = None   # a "nested" delegate's program
    problem: str = ""                        # why the payload could not be read ("" when it was)

    @property
    def handles(self) -> tuple[int, ...]:
        """Every edge op the delegate covers, each once, in region order."""
        seen: dict[int, None] = {}
        for _, handles in sorted(self.regions.items()):
            seen.update((h, None) for h in handles)
        if not seen and self.inner:
            for method in self.inner.values():
                for ins in method.instructions:
                    if ins.kind == "kernel" and ins.handle:
                        seen[ins.handle] = None
                    elif ins.kind == "delegate" and ins.delegate is not None \
                            and ins.delegate < len(method.delegates):
                        seen.update((h, None) for h in method.delegates[ins.delegate].handles)
        return tuple(seen)


@dataclasses.dataclass
class MethodDebugInfo:
    """One method of a `.pte`, for the tools."""

    name: str
    ops: dict[int, OpInfo]
    instructions: list[InstructionInfo]
    delegates: list[DelegateInfo]
    table: object = dataclasses.field(repr=False, default=None)   # the schema's MethodT (values, inputs, ...)

    def op(self, handle: int) -> OpInfo | None:
        """The op a debug handle names here or inside one of the method's nested delegates."""
        found = self.ops.get(handle)
        if found is not None or not handle:
            return found
        for delegate in self.delegates:
            for inner in (delegate.inner or {}).values():
                found = inner.op(handle)
                if found is not None:
                    return found
        return None


def ints(vector: object) -> tuple[int, ...]:
    """A FlatBuffer int vector (a numpy array, a list or None) as a tuple of ints."""
    return tuple(int(x) for x in vector) if vector is not None else ()


def sha256_hex(data: bytes) -> str:
    """The hex SHA-256 of a `.pte`'s bytes, as a trace file's program_sha256 records it."""
    return hashlib.sha256(data).hexdigest()


def read_debug_info(data: bytes, _depth: int = 0) -> dict[str, MethodDebugInfo]:
    """Every method of the `.pte` bytes `data`, by name (pte.PteError when they are not a `.pte`)."""
    f = pte.read(data)
    methods: dict[str, MethodDebugInfo] = {}
    for method in f.program.methods or []:
        info = _method(f, method, _depth)
        methods[info.name] = info
    return methods


def _method(f: pte.PteFile, method: object, depth: int) -> MethodDebugInfo:
    ops = {}
    for entry in method.debugInfo or []:
        path = text(getattr(entry, "modulePath", None))   # absent in files without module paths
        ops[entry.handle] = OpInfo(entry.handle, text(entry.op), text(entry.location) or "unknown", path)
    operators = method.operators or []
    instructions = []
    for pc, ins in enumerate(method.instructions or []):
        instructions.append(_instruction(pc, ins, operators))
    delegates = [_delegate(f, index, delegate, depth) for index, delegate in enumerate(method.delegates or [])]
    return MethodDebugInfo(text(method.name), ops, instructions, delegates, method)


def _instruction(pc: int, ins: object, operators: list) -> InstructionInfo:
    kind, body, handle = ins.kindType, ins.kind, ins.debugHandle
    if body is None:
        return InstructionInfo(pc, "unknown", f"instruction kind {kind}", handle)
    if kind == InstructionKind.KernelCall:
        operator = operators[body.op] if body.op < len(operators) else None
        name = f"{text(operator.name)}.{text(operator.overload)}" if operator else f"<bad operator {body.op}>"
        return InstructionInfo(pc, "kernel", name, handle, ints(body.args))
    if kind == InstructionKind.DelegateCall:
        args = ints(body.args)
        return InstructionInfo(pc, "delegate", f"delegate {body.delegate}", handle, args, int(body.delegate),
                               int(body.numOutputs) if body.numOutputs <= len(args) else 0)
    if kind == InstructionKind.JumpFalse:
        return InstructionInfo(pc, "jump_false", "jump_false", handle, (int(body.cond),))
    if kind == InstructionKind.Move:
        return InstructionInfo(pc, "move", "move", handle, (int(body.from_), int(body.to)))
    if kind == InstructionKind.Free:
        return InstructionInfo(pc, "free", "free", handle, (int(body.value),))
    return InstructionInfo(pc, "unknown", f"instruction kind {kind}", handle)


def _delegate(f: pte.PteFile, index: int, delegate: object, depth: int) -> DelegateInfo:
    backend = text(delegate.backend)
    info = DelegateInfo(index, backend, {})
    location = delegate.payload
    if location is None:
        info.problem = "no payload"
        return info
    try:
        blob = f.segment(location.segment)[location.offset:location.offset + location.size]
    except pte.PteError as error:
        info.problem = str(error)
        return info
    info.payload_bytes = len(blob)
    try:
        header, body = read_payload(blob)
    except ValueError as error:
        info.problem = f"payload header: {error}"
        return info
    info.regions = {payload_id: handles for payload_id, handles in header.debug_handle_map}
    if header.body_format == "pte" and depth < _MAX_NESTING:
        try:
            info.inner = read_debug_info(body, depth + 1)
        except pte.PteError as error:
            info.problem = f"inner program: {error}"
    return info


def flow_values(method: object) -> set[int]:
    """Value indices that carry data between steps: tensors that are not constants, and scalars
    computed at run time (those a prim kernel writes: its last argument)."""
    values = method.values or []
    flow = set()
    for index, v in enumerate(values):
        if v.valueType == Value.Tensor and v.value is not None and v.value.constant is None:
            flow.add(index)
    operators = method.operators or []
    for ins in method.instructions or []:
        if ins.kindType == InstructionKind.KernelCall and ins.kind is not None and ins.kind.op < len(operators):
            args = list(ints(ins.kind.args))
            if text(operators[ins.kind.op].name).startswith("etmlir_prim::") and args:
                flow.add(args[-1])
    return flow


def expand_lists(method: object, index: int) -> list[int]:
    """`index`, or the items of the tensor/int list it names (lists hold value indices)."""
    values = method.values or []
    if not 0 <= index < len(values):
        return []
    v = values[index]
    if v.valueType in (Value.TensorList, Value.OptionalTensorList, Value.IntList) and v.value is not None:
        return [i for i in ints(v.value.items) if i >= 0]
    return [index]
