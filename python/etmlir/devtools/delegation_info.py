"""The delegation report: what went to backends, what stayed on the portable path, and why.

    info = etmlir.devtools.delegation_info(edge)    # an EdgeProgram, ir.Module or module op
    print(info)                                     # summary, ops table, delegated graph, refusals
    info.op_counts["edge.addmm"]                    # (delegated, not delegated)

Like ExecuTorch's `get_delegation_info`, read from the IR that partitioning
(`et-partition`) and outlining (`et-outline-delegates`) leave behind:

    %0 = "edge.addmm"(...) {etmlir.delegation_tag = "nested_0"}          tagged, not outlined yet
    %1 = "edge.embedding"(...) {etmlir.not_delegated = {nested = "why"}}   refused, per backend
    %2:2 = call @nested_0.forward(...) {etmlir.backend = "nested"}         an outlined delegate:
    module @nested_0 attributes {etmlir.backend = "nested"} { func.func @forward ... }

A delegated subgraph is an outlined callee (counted once however often it is
called) or, before outlining, a distinct tag. `edge.constant` and the
function structure are not ops; everything else, `edge.sym_size_int`
included, is counted. `et-opt --et-delegation-report` prints this report.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tabulate import tabulate
from torch_mlir import ir

from etmlir.delegation.partitioner import defining_op, delegate_callee, is_delegate_call, tag_backend
from etmlir.dialects import attrs
from etmlir.frontend.locations import source_line
from etmlir.passes.assign_debug_handles import debug_handle
from etmlir.passes.preprocess_delegates import payload_size

if TYPE_CHECKING:
    from etmlir.devtools.inspector import Inspector
    from etmlir.devtools.program_graph import ProgramGraph
    from etmlir.program import Program

# Not ops of the model: structure, and constants (weights travel with whoever reads them).
_NOT_COUNTED = ("edge.constant", "func.return", "func.func", "builtin.module")
# Operand and result lists longer than this are shortened in the graph.
_MAX_NAMES = 8
# Op lines are padded to this width (at most) before their source line.
_MAX_LINE = 64
# A delegate's line names this many op kinds (the most frequent), then says how many more.
_MAX_KINDS = 6


@dataclasses.dataclass(frozen=True)
class DelegatedSubgraph:
    """One delegate: an outlined module `@<name>` or, before outlining, the ops tagged `<name>`."""

    name: str                       # "nested_0"
    backend: str                    # "nested"
    op_counts: dict[str, int]       # ops inside, by op name
    outlined: bool
    payload_bytes: int | None = None  # the backend's compiled blob (etmlir.payload), once preprocessed
    payload_summary: str | None = None  # what its payload header says (body format, TOSA profile and ops, ...)

    @property
    def num_ops(self) -> int:
        return sum(self.op_counts.values())


@dataclasses.dataclass(frozen=True)
class NotDelegatedOp:
    """An op left out of every delegate, with what each backend that looked at it said."""

    op: str                         # "edge.embedding"
    handle: int | None              # its etmlir.debug_handle
    location: str                   # "model.py:41" ("unknown" without a source location)
    reasons: dict[str, str]         # backend id -> why that backend did not take it


@dataclasses.dataclass(frozen=True)
class BackendCounts:
    """One backend's share of the program."""

    subgraphs: int
    delegated_ops: int
    refused_ops: int                # non-delegated ops this backend recorded a reason for


@dataclasses.dataclass
class DelegationInfo:
    """What `delegation_info` found; `str(info)` is the whole report."""

    subgraphs: list[DelegatedSubgraph]
    # op name -> (occurrences delegated, occurrences not delegated)
    op_counts: dict[str, tuple[int, int]]
    # non-delegated ops with a recorded reason, in program order
    not_delegated: list[NotDelegatedOp]
    # op name -> how many non-delegated ops of that name no partitioner gave a reason for
    unexplained: dict[str, int]
    graph_lines: list[str] = dataclasses.field(repr=False, default_factory=list)
    # The program graph the HTML view draws (program_graph.graph_from_module), made with the report.
    graph: ProgramGraph | None = dataclasses.field(repr=False, default=None, compare=False)

    @property
    def num_delegated_subgraphs(self) -> int:
        return len(self.subgraphs)

    @property
    def num_delegated_ops(self) -> int:
        return sum(d for d, _ in self.op_counts.values())

    @property
    def num_non_delegated_ops(self) -> int:
        return sum(n for _, n in self.op_counts.values())

    @property
    def num_unexplained(self) -> int:
        """Non-delegated ops without `etmlir.not_delegated`: no partitioner looked at them."""
        return sum(self.unexplained.values())

    @property
    def backends(self) -> dict[str, BackendCounts]:
        """Per backend id: its subgraphs and ops, and the ops it refused."""
        names = sorted({s.backend for s in self.subgraphs} | {b for r in self.not_delegated for b in r.reasons})
        return {name: BackendCounts(
            subgraphs=sum(1 for s in self.subgraphs if s.backend == name),
            delegated_ops=sum(s.num_ops for s in self.subgraphs if s.backend == name),
            refused_ops=sum(1 for r in self.not_delegated if name in r.reasons)) for name in names}

    def summary(self) -> str:
        total = self.num_delegated_ops + self.num_non_delegated_ops
        share = f" ({100 * self.num_delegated_ops / total:.1f}% of {total})" if total else ""
        reasons = f"{len(self.not_delegated)} with a recorded reason, {self.num_unexplained} without"
        lines = [f"delegated subgraphs: {self.num_delegated_subgraphs}",
                 f"delegated ops: {self.num_delegated_ops}{share}",
                 f"non-delegated ops: {self.num_non_delegated_ops} ({reasons})"]
        backends = self.backends
        if len(backends) > 1:
            for name, counts in backends.items():
                lines.append(f"  {name}: {_plural(counts.subgraphs, 'subgraph')}, "
                             f"{_plural(counts.delegated_ops, 'op')} delegated, {counts.refused_ops} refused")
        return "\n".join(lines)

    def table(self, tablefmt: str = "github") -> str:
        """One row per op name (sorted): occurrences delegated and not, then a total row."""
        rows: list[list[Any]] = [[name, d, n] for name, (d, n) in sorted(self.op_counts.items())]
        rows.append(["total", self.num_delegated_ops, self.num_non_delegated_ops])
        return tabulate(rows, headers=["op", "delegated", "not delegated"], tablefmt=tablefmt)

    def delegated_graph(self) -> str:
        """Each top-level function, one line per delegate call (or run of tagged ops) and per other op."""
        return "\n".join(self.graph_lines)

    def why_not_delegated(self) -> str:
        lines = []
        for entry in self.not_delegated:
            handle = f" #{entry.handle}" if entry.handle is not None else ""
            lines.append(f"{entry.op}{handle} at {entry.location}")
            lines.extend(f"    {backend}: {reason}" for backend, reason in entry.reasons.items())
        if self.unexplained:
            kinds = ", ".join(f"{name} x{count}" for name, count in sorted(self.unexplained.items()))
            them = "it" if self.num_unexplained == 1 else "them"
            lines.append(f"{_plural(self.num_unexplained, 'non-delegated op')} with no recorded reason "
                         f"(no partitioner looked at {them}): {kinds}")
        if not lines:
            return "no non-delegated ops"
        return "\n".join(lines)

    def to_html(self, path: str | None = None, *, inspector: Inspector | None = None,
                title: str = "delegation") -> str:
        """The report as a static, self-contained HTML graph view (`graph_html`): one node per op, each
        delegate a box in its backend's colour holding its ops, the source line and module path on
        hover; with `inspector` (a trace of the .pte this program became), ops coloured by their
        share of the time. Written to `path` when given; returns the page."""
        from etmlir.devtools.graph_html import render_html
        if self.graph is None:
            raise ValueError("delegation_info: this report has no graph (it was not made by delegation_info())")
        self.graph.title = title
        page = render_html(self.graph, inspector=inspector, summary=self.summary())
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(page)
        return page

    def __str__(self) -> str:
        sections = [("Delegation summary", self.summary()), ("Ops", self.table()),
                    ("Delegated graph", self.delegated_graph()), ("Why not delegated", self.why_not_delegated())]
        return "\n\n".join(f"== {title} ==\n{body}" for title, body in sections)


def delegation_info(program: Program | ir.Module | ir.Operation) -> DelegationInfo:
    """The delegation report of a partitioned and/or outlined program.

    `program` is an `EdgeProgram` (or any stage with a `.module`), an `ir.Module`
    or a `builtin.module` operation. Raises ValueError when it has no top-level
    function with a body to report on (a delegate's `@<tag>.forward` declaration
    is not one), or a delegate call names a module that is not there.
    """
    module = _module_op(program)
    body = module.regions[0].blocks[0]
    functions = [op.operation for op in body.operations
                 if op.operation.name == "func.func" and len(op.operation.regions[0].blocks) > 0]
    if not functions:
        held = ", ".join(_describe(op.operation) for op in body.operations) or "nothing"
        raise ValueError(f"delegation_info: the module has no top-level func.func with a body to report on "
                         f"(it holds: {held})")
    nested = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation for op in body.operations
              if op.operation.name == "builtin.module" and "sym_name" in op.operation.attributes}
    builder = _Builder(nested)
    for function in functions:
        builder.add_function(function)
    from etmlir.devtools.program_graph import graph_from_module
    info = builder.result()
    info.graph = graph_from_module(module)
    return info


def _module_op(program: Program | ir.Module | ir.Operation) -> ir.Operation:
    if isinstance(program, ir.Module):
        return program.operation
    if isinstance(program, (ir.Operation, ir.OpView)):
        op = program.operation
        if op.name != "builtin.module":
            raise ValueError(f"delegation_info: expected a builtin.module, got {op.name}")
        return op
    module = getattr(program, "module", None)
    if isinstance(module, ir.Module):
        return module.operation
    raise TypeError(f"delegation_info: expected an EdgeProgram, ir.Module or module operation, "
                    f"got {type(program).__name__}")


def _describe(op: ir.Operation) -> str:
    if "sym_name" in op.attributes:
        return f"{op.name} @{ir.StringAttr(op.attributes['sym_name']).value}"
    return op.name


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _counted(op: ir.Operation) -> bool:
    return op.name not in _NOT_COUNTED


def _walk(op: ir.Operation) -> list[ir.Operation]:
    """`op`'s nested ops in program order (not `op` itself)."""
    found: list[ir.Operation] = []
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                found.append(inner.operation)
                found.extend(_walk(inner.operation))
    return found


def _op_summary(counts: dict[str, int]) -> str:
    """`edge.addmm x3, edge.gelu x1`: most frequent first, at most `_MAX_KINDS` kinds named."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    named = [f"{name} x{count}" for name, count in ordered[:_MAX_KINDS]]
    if len(ordered) > _MAX_KINDS:
        named.append(f"+{len(ordered) - _MAX_KINDS} more kinds")
    return ", ".join(named)


def _short(location: str) -> str:
    """`model.py:41` for `/home/me/project/model.py:41`: the graph's column stays narrow."""
    return location.rsplit("/", 1)[-1]


class _Builder:
    """Collects counts, refusals and graph lines over the top-level functions."""

    def __init__(self, nested: dict[str, ir.Operation]) -> None:
        self.nested = nested
        self.subgraphs: dict[str, DelegatedSubgraph] = {}
        self.delegated: collections.Counter[str] = collections.Counter()
        self.kept: collections.Counter[str] = collections.Counter()
        self.not_delegated: list[NotDelegatedOp] = []
        self.unexplained: collections.Counter[str] = collections.Counter()
        self.lines: list[str] = []

    def result(self) -> DelegationInfo:
        names = sorted(set(self.delegated) | set(self.kept))
        return DelegationInfo(
            subgraphs=[dataclasses.replace(s, op_counts=dict(sorted(s.op_counts.items())))
                       for s in self.subgraphs.values()],
            op_counts={name: (self.delegated[name], self.kept[name]) for name in names},
            not_delegated=self.not_delegated, unexplained=dict(self.unexplained), graph_lines=self.lines)

    def add_function(self, function: ir.Operation) -> None:
        state = ir.AsmState(function)
        block = function.regions[0].blocks[0]
        ops = [op.operation for op in block.operations]
        self._count(function, ops)
        name = ir.StringAttr(function.attributes["sym_name"]).value
        arguments = ", ".join(a.get_name(state) for a in block.arguments)
        if self.lines:
            self.lines.append("")
        self.lines.append(f"func @{name}({arguments}):")
        rows: list[tuple[str, str]] = []
        index = 0
        while index < len(ops):
            op = ops[index]
            if op.name == "edge.constant":
                index += 1
            elif op.name == "func.return":
                rows.append((f"return {self._names(op.operands, state)}".rstrip(), ""))
                index += 1
            elif is_delegate_call(op):
                rows.append((self._call_line(op, state), ""))
                index += 1
            elif attrs.DELEGATION_TAG in op.attributes:
                tag = ir.StringAttr(op.attributes[attrs.DELEGATION_TAG]).value
                end = index
                while end < len(ops) and attrs.DELEGATION_TAG in ops[end].attributes \
                        and ir.StringAttr(ops[end].attributes[attrs.DELEGATION_TAG]).value == tag:
                    end += 1
                rows.append((self._tagged_line(tag, ops[index:end], state), ""))
                index = end
            else:
                results = self._results(op, state)
                rows.append((f"{results}{op.name}({self._names(op.operands, state)})",
                             _short(source_line(op.location))))
                index += 1
        width = min(_MAX_LINE, max((len(text) for text, where in rows if where), default=0))
        for text, where in rows:
            self.lines.append(f"  {text.ljust(width)}  {where}".rstrip() if where else f"  {text}")

    def _count(self, function: ir.Operation, ops: list[ir.Operation]) -> None:
        for op in [op for top in ops for op in [top, *_walk(top)]]:
            if is_delegate_call(op):
                self._outlined(op)
            elif not _counted(op):
                continue
            elif attrs.DELEGATION_TAG in op.attributes:
                tag = ir.StringAttr(op.attributes[attrs.DELEGATION_TAG]).value
                self.delegated[op.name] += 1
                previous = self.subgraphs.get(tag)
                counts = dict(previous.op_counts) if previous else {}
                counts[op.name] = counts.get(op.name, 0) + 1
                self.subgraphs[tag] = DelegatedSubgraph(tag, tag_backend(tag), counts, outlined=False)
            else:
                self.kept[op.name] += 1
                if attrs.NOT_DELEGATED in op.attributes:
                    reasons = {entry.name: ir.StringAttr(entry.attr).value if isinstance(entry.attr, ir.StringAttr)
                               else str(entry.attr) for entry in ir.DictAttr(op.attributes[attrs.NOT_DELEGATED])}
                    self.not_delegated.append(NotDelegatedOp(op.name, debug_handle(op), source_line(op.location),
                                                             reasons))
                else:
                    self.unexplained[op.name] += 1

    def _callee(self, call: ir.Operation) -> ir.Operation:
        callee = delegate_callee(call)
        if callee not in self.nested:
            called = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
            raise ValueError(f"delegation_info: the delegate call at {source_line(call.location)} calls @{called}, "
                             f"but the module holds no nested module @{callee}")
        return self.nested[callee]

    def _outlined(self, call: ir.Operation) -> None:
        module = self._callee(call)
        name = ir.StringAttr(module.attributes["sym_name"]).value
        if name in self.subgraphs:
            return  # called again: its ops are counted once
        counts: collections.Counter[str] = collections.Counter(op.name for op in _walk(module) if _counted(op))
        backend = ir.StringAttr(call.attributes[attrs.BACKEND]).value
        summary = (ir.StringAttr(module.attributes[attrs.PAYLOAD_SUMMARY]).value
                   if attrs.PAYLOAD_SUMMARY in module.attributes else None)
        self.subgraphs[name] = DelegatedSubgraph(name, backend, dict(sorted(counts.items())), outlined=True,
                                                 payload_bytes=payload_size(module), payload_summary=summary)
        self.delegated.update(counts)

    def _call_line(self, call: ir.Operation, state: ir.AsmState) -> str:
        subgraph = self.subgraphs[ir.StringAttr(self._callee(call).attributes["sym_name"]).value]
        payload = f", payload {subgraph.payload_bytes} B" if subgraph.payload_bytes is not None else ""
        if subgraph.payload_summary:
            payload += f" [{subgraph.payload_summary}]"
        return (f"{self._results(call, state)}delegate {subgraph.name} [{subgraph.backend}] "
                f"({self._names(call.operands, state)}): {_plural(subgraph.num_ops, 'op')} "
                f"({_op_summary(subgraph.op_counts)}){payload}")

    def _tagged_line(self, tag: str, run: list[ir.Operation], state: ir.AsmState) -> str:
        """A run of consecutive ops with one tag, as the call it will become: live-ins -> live-outs."""
        inside = set(run)
        inputs: list[ir.Value] = []
        for op in run:
            for value in op.operands:
                owner = defining_op(value)
                if owner in inside or (owner is not None and owner.name == "edge.constant") or value in inputs:
                    continue
                inputs.append(value)
        outputs = [r for op in run for r in op.results if any(use.owner.operation not in inside for use in r.uses)]
        counts = collections.Counter(op.name for op in run if _counted(op))
        results = f"{self._names(outputs, state)} = " if outputs else ""
        return (f"{results}tagged {tag} [{tag_backend(tag)}] ({self._names(inputs, state)}): "
                f"{_plural(sum(counts.values()), 'op')} ({_op_summary(counts)})")

    def _results(self, op: ir.Operation, state: ir.AsmState) -> str:
        results = list(op.results)
        if not results:
            return ""
        if len(results) == 1:
            return f"{results[0].get_name(state)} = "
        return f"{results[0].get_name(state).split('#')[0]}:{len(results)} = "

    def _names(self, values: Iterable[ir.Value], state: ir.AsmState) -> str:
        names = [self._name(v, state) for v in values]
        if len(names) > _MAX_NAMES:
            names = names[:_MAX_NAMES - 1] + [f"... {len(names) - _MAX_NAMES + 1} more"]
        return ", ".join(names)

    def _name(self, value: ir.Value, state: ir.AsmState) -> str:
        """SSA name; a weight by its parameter name, a scalar constant by its value."""
        owner = defining_op(value)
        if owner is not None and owner.name == "edge.constant":
            if attrs.PARAM in owner.attributes:
                return ir.StringAttr(owner.attributes[attrs.PARAM]).value
            attr = owner.attributes["value"]
            if isinstance(attr, ir.DenseElementsAttr) and attr.is_splat and ir.ShapedType(attr.type).rank == 0:
                scalar = attr.get_splat_value()
                if isinstance(scalar, ir.BoolAttr):
                    return str(scalar.value).lower()
                if isinstance(scalar, (ir.IntegerAttr, ir.FloatAttr)):
                    return repr(scalar.value)
        return value.get_name(state)
