"""The program graph the HTML view draws, from a `.pte` or from the IR, with a layered layout.

    graph = graph_from_pte(data)                  # one MethodGraph per method of the .pte
    graph = graph_from_module(edge.module)        # or from the IR (delegation_info(...).to_html())
    layout(graph.methods[0])                      # x, y, width, height of every node

A node is a step of the method: an op on the portable kernels, or a delegate
call drawn as a box holding a cell per edge op it covers (from the payload
header's debug_handle_map in a `.pte`, from the outlined module in the IR).
Edges follow the data: a step that reads a value another step wrote. Method
inputs and outputs are nodes too; weights and other constants are not.

Layout (no graphviz): layers by longest path from the inputs, so a chain runs
straight down and parallel branches sit side by side; within a layer nodes
are ordered by the mean position of their predecessors (two sweeps), then
placed as close to that mean as the nodes beside them allow. Linear in the
edges, so a 1,000-op transformer lays out in well under a second.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from etmlir.devtools.pte_debug import MethodDebugInfo, OpInfo, expand_lists, flow_values, ints, read_debug_info

if TYPE_CHECKING:
    from torch_mlir import ir

# Drawing metrics (pixels), shared with graph_html.
CHAR_WIDTH = 7.0          # of the 12 px monospace label font
NODE_HEIGHT = 26.0
NODE_PAD = 10.0           # left and right of a label
MIN_NODE_WIDTH = 60.0
MAX_LABEL = 36            # characters of a label before it is cut
CELL_WIDTH = 118.0
CELL_HEIGHT = 20.0
CELL_GAP = 4.0
MAX_CELL_COLUMNS = 8
DELEGATE_HEADER = 24.0
H_GAP = 24.0
V_GAP = 34.0


@dataclasses.dataclass
class Cell:
    """An edge op inside a delegate."""

    id: str
    op: OpInfo
    share: float | None = None          # of the traced time (None: no trace)
    ms: float | None = None             # its median time per run, when traced
    x: float = 0.0
    y: float = 0.0


@dataclasses.dataclass
class Node:
    """A step of a method (or an input/output): what the view shows and where."""

    id: str                 # unique in the page, e.g. "forward-n12"
    kind: str               # "op", "delegate", "input", "output", "control"
    label: str
    backend: str = "portable"       # the backend that runs it ("portable": the portable kernels)
    handle: int = 0
    location: str = ""
    module_path: str = ""
    detail: str = ""                # more for the tooltip (the kernel, the delegate's op counts)
    cells: list[Cell] = dataclasses.field(default_factory=list)
    pc: int | None = None           # the instruction, for a .pte
    share: float | None = None
    ms: float | None = None
    layer: int = 0
    x: float = 0.0                  # left edge
    y: float = 0.0                  # top edge
    width: float = 0.0
    height: float = 0.0


@dataclasses.dataclass
class MethodGraph:
    name: str
    nodes: list[Node]
    edges: list[tuple[int, int]]    # (from, to) indices into nodes
    width: float = 0.0
    height: float = 0.0

    def node(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.id == node_id)


@dataclasses.dataclass
class ProgramGraph:
    title: str
    methods: list[MethodGraph]

    @property
    def backends(self) -> list[str]:
        """The backends of the program's delegates (and "portable" when some op runs there)."""
        found = {n.backend for m in self.methods for n in m.nodes if n.kind in ("op", "delegate")}
        return sorted(found, key=lambda b: (b != "portable", b))

    @property
    def num_nodes(self) -> int:
        return sum(len(m.nodes) + sum(len(n.cells) for n in m.nodes) for m in self.methods)


def _cut(label: str) -> str:
    return label if len(label) <= MAX_LABEL else label[:MAX_LABEL - 1] + "\u2026"


def _op_label(op: str) -> str:
    return op[5:] if op.startswith("edge.") else op


# ----------------------------------------------------------------------------- from a .pte


def graph_from_pte(data: bytes, title: str = "program") -> ProgramGraph:
    """The graph of every method of the `.pte` bytes (pte.PteError when they are not a `.pte`)."""
    methods = read_debug_info(data)
    return ProgramGraph(title, [pte_method_graph(m) for m in methods.values()])


def pte_method_graph(info: MethodDebugInfo) -> MethodGraph:
    """The graph of one method of a `.pte` (`pte_debug.read_debug_info`)."""
    method = info.table
    prefix = _id_prefix(info.name)
    nodes: list[Node] = []
    edges: set[tuple[int, int]] = set()
    flow = flow_values(method)
    writer: dict[int, int] = {}        # value -> node that wrote it (or the input node)
    values = method.values or []
    for position, index in enumerate(ints(method.inputs)):
        nodes.append(Node(f"{prefix}in{position}", "input", f"input {position}", backend="",
                          detail=_value_text(values, index)))
        writer[index] = len(nodes) - 1
    for state in method.state or []:   # state tensors start with their stored value
        writer.setdefault(int(state.value), -1)
    for ins in info.instructions:
        if ins.kind == "free":
            continue
        node = _pte_node(info, ins, prefix)
        nodes.append(node)
        me = len(nodes) - 1
        touched = [v for a in ins.args for v in expand_lists(method, a) if v in flow]
        written: set[int] = set()
        if ins.kind == "delegate" and ins.num_outputs:   # its live-outs are known: the last args
            written = {v for a in ins.args[len(ins.args) - ins.num_outputs:] for v in expand_lists(method, a)
                       if v in flow}
        if ins.kind == "move":
            written = {ins.args[1]} & flow
            touched = [ins.args[0]] if ins.args[0] in flow else []
        for value in touched:
            source = writer.get(value)
            if value in written:
                continue
            if source is None:          # first seen here: this step writes it (outputs come last)
                writer[value] = me
            elif source >= 0 and source != me:
                edges.add((source, me))
        for value in written:
            writer[value] = me
    for position, index in enumerate(ints(method.outputs)):
        nodes.append(Node(f"{prefix}out{position}", "output", f"output {position}", backend="",
                          detail=_value_text(values, index)))
        source = writer.get(index)
        if source is not None and source >= 0:
            edges.add((source, len(nodes) - 1))
    return MethodGraph(info.name, nodes, sorted(edges))


def _pte_node(info: MethodDebugInfo, ins: object, prefix: str) -> Node:
    op = info.op(ins.handle)
    where = dict(handle=ins.handle, location=op.location if op else "", module_path=op.module_path if op else "")
    if ins.kind == "delegate":
        delegate = info.delegates[ins.delegate] if ins.delegate is not None and ins.delegate < len(info.delegates) \
            else None
        backend = delegate.backend if delegate else "unknown"
        node = Node(f"{prefix}n{ins.pc}", "delegate", f"delegate {ins.delegate} [{backend}]", backend=backend,
                    pc=ins.pc, **where)
        if delegate is not None:
            for handle in delegate.handles:
                inner = info.op(handle) or OpInfo(handle, f"handle {handle}", "unknown")
                node.cells.append(Cell(f"{node.id}-h{handle}", inner))
            counts = _counts(c.op.op for c in node.cells)
            node.detail = (f"{len(node.cells)} ops: {counts}" if node.cells else "no ops listed") + \
                (f"; payload {delegate.payload_bytes:,} B" if delegate.payload_bytes else "") + \
                (f"; {delegate.problem}" if delegate.problem else "")
        return node
    if ins.kind == "kernel":
        label = _op_label(op.op) if op else ins.name.split("::")[-1]
        return Node(f"{prefix}n{ins.pc}", "op", label, pc=ins.pc, detail=ins.name, **where)
    return Node(f"{prefix}n{ins.pc}", "control", ins.name, backend="", pc=ins.pc, **where)


def _value_text(values: list, index: int) -> str:
    from etmlir.executable.dtypes import SCALAR_TYPE_NAMES
    from etmlir.schema.Value import Value
    if not 0 <= index < len(values):
        return f"%{index}"
    v = values[index]
    if v.valueType == Value.Tensor and v.value is not None:
        sizes = ", ".join(str(s) for s in (v.value.sizes if v.value.sizes is not None else []))
        return f"%{index} {SCALAR_TYPE_NAMES.get(v.value.dtype, v.value.dtype)}[{sizes}]"
    return f"%{index}"


def _counts(names: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{_op_label(k)} x{v}" for k, v in ordered[:6])
    return shown + (f", +{len(ordered) - 6} more kinds" if len(ordered) > 6 else "")


def _id_prefix(method: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in method) or "m"
    return f"{safe}-"


# ----------------------------------------------------------------------------- from the IR


def graph_from_module(module: ir.Operation, title: str = "program") -> ProgramGraph:
    """The graph of each top-level function with a body of a partitioned and/or outlined module."""
    from torch_mlir import ir

    body = module.regions[0].blocks[0]
    nested = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation for op in body.operations
              if op.operation.name == "builtin.module" and "sym_name" in op.operation.attributes}
    functions = [op.operation for op in body.operations
                 if op.operation.name == "func.func" and len(op.operation.regions[0].blocks) > 0]
    return ProgramGraph(title, [_ir_function(f, nested) for f in functions])


def _ir_op_info(op: ir.Operation) -> OpInfo:
    from etmlir.frontend.locations import module_path, source_line
    from etmlir.passes.assign_debug_handles import debug_handle
    return OpInfo(debug_handle(op) or 0, op.name, source_line(op.location), module_path(op.location) or "")


def _ir_function(function: ir.Operation, nested: dict[str, ir.Operation]) -> MethodGraph:
    from torch_mlir import ir

    from etmlir.delegation.partitioner import defining_op, delegate_callee, is_delegate_call, tag_backend
    from etmlir.dialects import attrs

    name = ir.StringAttr(function.attributes["sym_name"]).value
    prefix = _id_prefix(name)
    block = function.regions[0].blocks[0]
    nodes: list[Node] = []
    edges: set[tuple[int, int]] = set()
    index_of: dict[ir.Operation, int] = {}
    arguments: dict[int, int] = {}
    for position, argument in enumerate(block.arguments):
        nodes.append(Node(f"{prefix}in{position}", "input", f"input {position}", backend="",
                          detail=str(argument.type)))
        arguments[position] = len(nodes) - 1

    def source_of(value: ir.Value) -> int | None:
        owner = defining_op(value)
        if owner is None:
            return arguments.get(ir.BlockArgument(value).arg_number) if value.owner == block else None
        return index_of.get(owner)

    for position, top in enumerate(block.operations):
        op = top.operation
        if op.name == "edge.constant":
            continue
        if op.name == "func.return":
            for k, value in enumerate(op.operands):
                nodes.append(Node(f"{prefix}out{k}", "output", f"output {k}", backend="", detail=str(value.type)))
                source = source_of(value)
                if source is not None:
                    edges.add((source, len(nodes) - 1))
            continue
        info = _ir_op_info(op)
        where = dict(handle=info.handle, location=info.location, module_path=info.module_path)
        if is_delegate_call(op):
            callee = delegate_callee(op)
            backend = ir.StringAttr(op.attributes[attrs.BACKEND]).value
            node = Node(f"{prefix}n{position}", "delegate", f"{callee} [{backend}]", backend=backend, **where)
            inner_module = nested.get(callee)
            for inner in _walk(inner_module) if inner_module is not None else []:
                if inner.name.startswith("edge.") and inner.name != "edge.constant":
                    cell_info = _ir_op_info(inner)
                    suffix = f"h{cell_info.handle}" if cell_info.handle else f"c{len(node.cells)}"
                    node.cells.append(Cell(f"{node.id}-{suffix}", cell_info))
            node.detail = f"{len(node.cells)} ops: {_counts(c.op.op for c in node.cells)}"
        else:
            backend = "portable"
            detail = ""
            if attrs.DELEGATION_TAG in op.attributes:
                tag = ir.StringAttr(op.attributes[attrs.DELEGATION_TAG]).value
                backend, detail = tag_backend(tag), f"tagged {tag} (not outlined yet)"
            node = Node(f"{prefix}n{position}", "op", _op_label(op.name), backend=backend, detail=detail, **where)
        nodes.append(node)
        index_of[op] = len(nodes) - 1
        for value in op.operands:
            source = source_of(value)
            if source is not None:
                edges.add((source, len(nodes) - 1))
    return MethodGraph(name, nodes, sorted(edges))


def _walk(op: ir.Operation) -> list[ir.Operation]:
    found = []
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                found.append(inner.operation)
                found.extend(_walk(inner.operation))
    return found


# ----------------------------------------------------------------------------- layout


def delegate_header(node: Node) -> str:
    """A delegate box's title: `delegate 0 [cpu] · 12 ops · 31.2%, 0.412 ms` (the time when traced)."""
    ops = f"{len(node.cells)} op{'' if len(node.cells) == 1 else 's'}"
    timing = ""
    if node.share is not None:
        timing = f" \u00b7 {100 * node.share:.1f}%" + (f", {node.ms:.3f} ms" if node.ms is not None else "")
    return f"{_cut(node.label)} \u00b7 {ops}{timing}"


def _size(node: Node) -> None:
    if node.kind == "delegate":
        columns = max(1, min(MAX_CELL_COLUMNS, len(node.cells)))
        rows = (len(node.cells) + columns - 1) // columns
        cells_width = columns * CELL_WIDTH + (columns - 1) * CELL_GAP
        node.width = max(cells_width + 2 * CELL_GAP, len(delegate_header(node)) * CHAR_WIDTH + 2 * NODE_PAD)
        node.height = DELEGATE_HEADER + rows * (CELL_HEIGHT + CELL_GAP) + CELL_GAP
        for k, cell in enumerate(node.cells):
            cell.x = CELL_GAP + (k % columns) * (CELL_WIDTH + CELL_GAP)
            cell.y = DELEGATE_HEADER + (k // columns) * (CELL_HEIGHT + CELL_GAP)
    else:
        node.width = max(MIN_NODE_WIDTH, len(_cut(node.label)) * CHAR_WIDTH + 2 * NODE_PAD)
        node.height = NODE_HEIGHT


@dataclasses.dataclass
class _Block:
    """Consecutive nodes of a layer that `_place` moves as one."""

    first: int              # index of its first node
    last: int               # index of its last node
    offsets: float          # sum over members of (target - offset from the first node's centre)
    count: int
    span: float             # offset of the last node's centre from the first's

    @property
    def position(self) -> float:
        """The first node's centre: the least-squares fit of the members' targets."""
        return self.offsets / self.count


def _place(widths: list[float], targets: list[float]) -> list[float]:
    """Centres, in order and H_GAP apart at least, as close to `targets` as can be (least squares).

    Left to right, nodes that would overlap join a block that moves as one, to the mean of its
    members' targets less their offsets in it (pool-adjacent-violators): three branches that all
    want their parent's x sit centred under it, not to its right.
    """
    def gap(a: int, b: int) -> float:
        return (widths[a] + widths[b]) / 2 + H_GAP

    blocks: list[_Block] = []
    for i, t in enumerate(targets):
        blocks.append(_Block(i, i, t, 1, 0.0))
        while len(blocks) > 1:
            prev, last = blocks[-2], blocks[-1]
            distance = prev.span + gap(prev.last, last.first)    # last's first node, from prev's first
            if last.position >= prev.position + distance:
                break
            blocks[-2:] = [_Block(prev.first, last.last, prev.offsets + last.offsets - distance * last.count,
                                 prev.count + last.count, distance + last.span)]
    xs: list[float] = []
    for block in blocks:
        x = block.position
        for i in range(block.first, block.last + 1):
            if i > block.first:
                x += gap(i - 1, i)
            xs.append(x)
    return xs


def layout(graph: MethodGraph) -> None:
    """Give every node its x, y, width and height (and the graph its size); see the module docstring."""
    nodes = graph.nodes
    preds: list[list[int]] = [[] for _ in nodes]
    for a, b in graph.edges:
        if a < b:                   # nodes are in program order: a backward edge is a loop's, not a layer
            preds[b].append(a)
    for k, node in enumerate(nodes):
        _size(node)
        node.layer = 1 + max((nodes[p].layer for p in preds[k]), default=-1)
    # A step that reads nothing (a scalar_tensor, a full) goes just above its first reader, not at the
    # top with an edge down the whole page.
    succs: list[list[int]] = [[] for _ in nodes]
    for b, ps in enumerate(preds):
        for a in ps:
            succs[a].append(b)
    for k in range(len(nodes) - 1, -1, -1):
        node = nodes[k]
        if not preds[k] and succs[k] and node.kind != "input":
            node.layer = max(node.layer, min(nodes[s].layer for s in succs[k]) - 1)
    # Outputs go on the last layer, inputs stay on the first.
    last = max((n.layer for n in nodes), default=0)
    for node in nodes:
        if node.kind == "output":
            node.layer = last
    layers: list[list[int]] = [[] for _ in range(last + 1)]
    for k, node in enumerate(nodes):
        layers[node.layer].append(k)
    order = {k: i for layer in layers for i, k in enumerate(layer)}
    for _ in range(2):              # barycenter sweeps: a node goes where its predecessors are
        for layer in layers[1:]:
            layer.sort(key=lambda k: (sum(order[p] for p in preds[k]) / len(preds[k]) if preds[k] else order[k]))
            for i, k in enumerate(layer):
                order[k] = i
    y = 0.0
    centre: dict[int, float] = {}
    for layer in layers:
        want = []
        for k in layer:
            ps = [centre[p] for p in preds[k] if p in centre]
            want.append(sum(ps) / len(ps) if ps else None)
        # No predecessor placed (inputs): spread evenly around 0.
        total = sum(nodes[k].width for k in layer) + H_GAP * (len(layer) - 1)
        cursor = -total / 2
        targets = []
        for k, wanted in zip(layer, want):
            w = nodes[k].width
            targets.append(cursor + w / 2 if wanted is None else wanted)
            cursor += w + H_GAP
        xs = _place([nodes[k].width for k in layer], targets)
        height = max((nodes[k].height for k in layer), default=0.0)
        for k, cx in zip(layer, xs):
            node = nodes[k]
            centre[k] = cx
            node.x = cx - node.width / 2
            node.y = y + (height - node.height) / 2
        y += height + V_GAP
    left = min((n.x for n in nodes), default=0.0)
    right = max((n.x + n.width for n in nodes), default=0.0)
    for node in nodes:
        node.x -= left
    graph.width = right - left
    graph.height = max(0.0, y - V_GAP)


__all__ = ["Cell", "MethodGraph", "Node", "ProgramGraph", "graph_from_module", "graph_from_pte", "layout",
           "pte_method_graph"]
