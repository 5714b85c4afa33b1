"""The host side of a lowered vulkan delegate -> its dispatch graph (runtime/schema/vulkan.fbs).

A payload's body is a dispatch module: one graph per compiled size (pipeline.py
compiles a dynamic delegate once per entry of the compile spec `sizes`) and the
weights once, shared by the graphs (`DispatchModule.add_constants`).

After the pipeline, `@forward` holds only buffers, views of them and kernel
launches (et-vulkan-outline-kernels refuses anything else). This module reads
it in order:

- arguments: the delegate's live-ins, then its live-outs (out-parameters);
- `memref.get_global`: a weight, its bytes stored once;
- `memref.alloc`: an intermediate buffer;
- views (`expand_shape`, `collapse_shape`, `subview`, `cast`, `reshape`): the buffer they view
  (a kernel's argument type carries a view's offset and strides, so the shader
  indexes the whole buffer it is bound to);
- `gpu.launch_func`: a dispatch of the kernel's shader with its buffers bound in
  argument order and its grid as the workgroup counts.

Then the memory plan gives intermediates whose lifetimes (first to last
dispatch that touches them) do not overlap the same slot, and each dispatch
gets a barrier when it touches memory that a dispatch since the last barrier
wrote, or writes memory one read (all of a kernel's buffers count as read,
its written ones from the kernel's stores).
"""

from __future__ import annotations

import dataclasses

import flatbuffers
import numpy as np
from torch_mlir import ir

from etmlir.backends.cpu.passes.externalize_weights import global_bytes
from etmlir.backends.vulkan.passes.outline_kernels import VIEW_OPS
from etmlir.delegation.backend import BackendError
from etmlir.executable.serialize import resource_blobs
from etmlir.program import find_function
from etmlir.vulkan_schema.Buffer import BufferT
from etmlir.vulkan_schema.BufferKind import BufferKind
from etmlir.vulkan_schema.Constant import ConstantT
from etmlir.vulkan_schema.Dispatch import DispatchT
from etmlir.vulkan_schema.Graph import GraphT
from etmlir.vulkan_schema.Module import Module, ModuleT
from etmlir.vulkan_schema.Shader import ShaderT

GRAPH_VERSION = 1
FILE_IDENTIFIER = b"ETVK"
KIND_NAMES = {BufferKind.Intermediate: "intermediate", BufferKind.Input: "input", BufferKind.Output: "output",
              BufferKind.Weight: "weight"}


@dataclasses.dataclass
class Buffer:
    kind: int
    index: int
    size: int
    slot: int = 0


@dataclasses.dataclass
class Dispatch:
    shader: int
    buffers: list[int]
    workgroups: tuple[int, int, int]
    written: set[int]
    debug_handle: int = 0
    barrier: bool = False


@dataclasses.dataclass
class Shader:
    name: str
    code: bytes
    workgroup_size: tuple[int, int, int]
    num_bindings: int


@dataclasses.dataclass
class DispatchGraph:
    """The graph of one set of input sizes (buffers of kind Weight index the module's constants)."""
    input_sizes: list[int]
    output_sizes: list[int]
    size: int
    pinned_inputs: list[int]
    shaders: list[Shader]
    buffers: list[Buffer]
    dispatches: list[Dispatch]
    slot_sizes: list[int]


@dataclasses.dataclass
class DispatchModule:
    graphs: list[DispatchGraph]
    constants: list[bytes]

    def add_constants(self, graph: DispatchGraph, constants: list[bytes]) -> None:
        """Append `graph`, its weights shared with the graphs already here (the same bytes stored once)."""
        index = {data: i for i, data in enumerate(self.constants)}
        remap = []
        for data in constants:
            if data not in index:
                index[data] = len(self.constants)
                self.constants.append(data)
            remap.append(index[data])
        for buffer in graph.buffers:
            if buffer.kind == BufferKind.Weight:
                buffer.index = remap[buffer.index]
        self.graphs.append(graph)

    def counts(self) -> dict[str, int]:
        """What et-inspect and the delegation report show: graphs, dispatches, barriers, memory."""
        return {"graphs": len(self.graphs), "dispatches": sum(len(g.dispatches) for g in self.graphs),
                "barriers": sum(d.barrier for g in self.graphs for d in g.dispatches),
                "weights_bytes": sum(len(c) for c in self.constants),
                "intermediate_bytes": max((sum(g.slot_sizes) for g in self.graphs), default=0)}


def _bytes_of(t: ir.MemRefType) -> int:
    width = getattr(t.element_type, "width", 32)
    return int(np.prod(t.shape)) * max(1, width // 8) if t.rank else max(1, width // 8)


def _constant(value: ir.Value) -> int:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        raise BackendError("vulkan backend: a kernel launch's grid is not a constant")
    return ir.IntegerAttr(owner.attributes["value"]).value


def read_host(module: ir.Operation, num_inputs: int, shader_index: dict[str, int],
              written_by_kernel: dict[str, list[int]], handles: dict[str, int]
              ) -> tuple[list[Buffer], list[Dispatch], list[bytes]]:
    """Buffers, dispatches and weight bytes from the lowered module's @forward (its first `num_inputs`
    arguments are the live-ins, the rest the live-outs)."""
    forward = find_function(module, "forward")
    if forward is None:
        raise BackendError("vulkan backend: the lowered module has no @forward")
    buffers: list[Buffer] = []
    root: dict[ir.Value, int] = {}
    block = forward.regions[0].blocks[0]
    for i, argument in enumerate(block.arguments):
        kind, index = (BufferKind.Input, i) if i < num_inputs else (BufferKind.Output, i - num_inputs)
        root[argument] = len(buffers)
        buffers.append(Buffer(kind, index, _bytes_of(ir.MemRefType(argument.type))))
    globals_ = {ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
                for op in module.regions[0].blocks[0].operations if op.operation.name == "memref.global"}
    blobs = resource_blobs(module)
    constants: list[bytes] = []
    weight_of: dict[str, int] = {}
    dispatches: list[Dispatch] = []
    for op in block.operations:
        op = op.operation
        if op.name == "memref.get_global":
            symbol = ir.FlatSymbolRefAttr(op.attributes["name"]).value
            if symbol not in weight_of:
                data = _weight_bytes(globals_[symbol], blobs)
                weight_of[symbol] = len(buffers)
                buffers.append(Buffer(BufferKind.Weight, len(constants), len(data)))
                constants.append(data)
            root[op.results[0]] = weight_of[symbol]
        elif op.name == "memref.alloc":
            root[op.results[0]] = len(buffers)
            buffers.append(Buffer(BufferKind.Intermediate, 0, _bytes_of(ir.MemRefType(op.results[0].type))))
        elif op.name in VIEW_OPS:
            root[op.results[0]] = root[op.operands[0]]
        elif op.name == "gpu.launch_func":
            name = ir.SymbolRefAttr(op.attributes["kernel"]).value[0]
            operands = list(op.operands)
            grid = tuple(_constant(v) for v in operands[:3])
            bound = [root[v] for v in operands[-len(operands) + 6:]] if len(operands) > 6 else []
            written = {bound[i] for i in written_by_kernel.get(name, []) if i < len(bound)}
            dispatches.append(Dispatch(shader_index[name], bound, grid, written, handles.get(name, 0)))
    return buffers, dispatches, constants


def _weight_bytes(op: ir.Operation, blobs: dict[str, bytes]) -> bytes:
    t = ir.MemRefType(ir.TypeAttr(op.attributes["type"]).value)
    value = op.attributes["initial_value"] if "initial_value" in op.attributes else None
    if value is not None and isinstance(value, ir.DenseElementsAttr) and ir.DenseElementsAttr(value).is_splat:
        return np.full(t.shape, np.array(ir.DenseElementsAttr(value)).reshape(-1)[0],
                       dtype=np.array(ir.DenseElementsAttr(value)).dtype).tobytes()
    data = global_bytes(value, blobs) if value is not None else None
    if data is None:
        raise BackendError(f"vulkan backend: no bytes for the weight {ir.StringAttr(op.attributes['sym_name']).value}")
    return data


def plan_memory(buffers: list[Buffer], dispatches: list[Dispatch]) -> list[int]:
    """Give intermediates slots by lifetime (greedy, first fit by size); the slots' sizes."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for step, dispatch in enumerate(dispatches):
        for b in dispatch.buffers:
            first.setdefault(b, step)
            last[b] = step
    order = sorted((first.get(i, 0), i) for i, b in enumerate(buffers) if b.kind == BufferKind.Intermediate)
    slot_sizes: list[int] = []
    busy_until: list[int] = []
    for start, i in order:
        free = [s for s in range(len(slot_sizes)) if busy_until[s] < start]
        if free:
            slot = min(free, key=lambda s: abs(slot_sizes[s] - buffers[i].size))
        else:
            slot = len(slot_sizes)
            slot_sizes.append(0)
            busy_until.append(-1)
        buffers[i].slot = slot
        slot_sizes[slot] = max(slot_sizes[slot], buffers[i].size)
        busy_until[slot] = last.get(i, start)
    return slot_sizes


def place_barriers(buffers: list[Buffer], dispatches: list[Dispatch]) -> None:
    """A barrier before each dispatch that touches memory written, or writes memory read, since the last one."""
    def memory(b: int) -> tuple[str, int]:
        buffer = buffers[b]
        return ("slot", buffer.slot) if buffer.kind == BufferKind.Intermediate else ("buffer", b)

    written: set[tuple[str, int]] = set()
    read: set[tuple[str, int]] = set()
    for dispatch in dispatches:
        touched = {memory(b) for b in dispatch.buffers}
        writes = {memory(b) for b in dispatch.written}
        if touched & written or writes & read:
            dispatch.barrier = True
            written, read = set(), set()
        written |= writes
        read |= touched - writes


def _graph_table(graph: DispatchGraph) -> GraphT:
    table = GraphT()
    table.inputSizes, table.outputSizes = list(graph.input_sizes), list(graph.output_sizes)
    table.size, table.pinnedInputs = graph.size, list(graph.pinned_inputs)
    table.shaders = []
    for shader in graph.shaders:
        s = ShaderT()
        s.name, s.entry = shader.name, shader.name
        s.code = list(np.frombuffer(shader.code, dtype="<u4"))
        s.workgroupSize = list(shader.workgroup_size)
        s.numBindings = shader.num_bindings
        table.shaders.append(s)
    table.buffers = []
    for buffer in graph.buffers:
        b = BufferT()
        b.kind, b.index, b.size, b.slot = buffer.kind, buffer.index, buffer.size, buffer.slot
        table.buffers.append(b)
    table.dispatches = []
    for dispatch in graph.dispatches:
        d = DispatchT()
        d.shader, d.buffers, d.workgroups = dispatch.shader, list(dispatch.buffers), list(dispatch.workgroups)
        d.barrier, d.debugHandle = dispatch.barrier, dispatch.debug_handle
        table.dispatches.append(d)
    table.numSlots = len(graph.slot_sizes)
    table.slotSizes = list(graph.slot_sizes)
    return table


def serialize_module(module: DispatchModule) -> bytes:
    table = ModuleT()
    table.version = GRAPH_VERSION
    table.graphs = [_graph_table(g) for g in module.graphs]
    table.constants = []
    for data in module.constants:
        c = ConstantT()
        c.data = np.frombuffer(data, dtype=np.uint8)
        table.constants.append(c)
    builder = flatbuffers.Builder(1 << 16)
    builder.Finish(table.Pack(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


def read_module(body: bytes) -> Module:
    """The Module table of a payload body (no verifier in Python: for tools and tests)."""
    return Module.GetRootAs(body, 0)
