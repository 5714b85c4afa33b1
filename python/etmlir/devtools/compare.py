"""Numeric debugging: the first op where a compiled program's numbers leave PyTorch eager's.

    edge = etmlir.to_edge(etmlir.export(model, (x,))).to_backend(etmlir.backends.partitioner("cpu"))
    result = etmlir.devtools.compare(edge, (x,))        # or compare(edge.to_executorch(), (x,))
    print(result)                 # the aligned ops in program order, the first divergence marked
    result.first_divergence       # op, debug handle, source line, module path, delegate, errors

Two runs on the same inputs, aligned by debug handle (the edge op id that
the `.pte`'s instructions and a delegate's ops keep):

- The program: its `.pte` runs on the runtime with intermediate capture
  (`Method.trace(capture=...)`): a copy of every tensor each kernel call
  writes (a KernelCall's outputs are its last arguments, as many as the edge
  op has results) and of each delegate call's live-outs (its last
  `num_outputs` arguments). A delegate's inner values never reach the
  runtime: only the inner ops whose results are live-outs are visible.
- The reference: the edge module itself, interpreted op by op with PyTorch
  eager (each edge op runs as its ATen operator, `run_eagerly`, the same
  reading of its arguments et-fold-constants uses), descending into each
  delegate's outlined module (the delegated edge program keeps the ops it
  compiled). Weights are the program's own buffers (`weight_buffers`, which
  the `.pte`'s constants are written from), so the two runs differ only in
  what the compiler and the runtime did.

Each visible op gets two errors. The *cumulative* one compares the runtime's
value with the reference's (the reference fed by its own values), which is
what a user sees. The *local* one compares it with the op's eager result on
the runtime's own inputs: it tells an op that computes wrongly ("diverged")
from one that only passes on an error it was given ("inherited"). A check
passes when every element satisfies |actual - reference| <= atol + rtol * |reference|
(NaN equals NaN). The first divergence is the first op in program order
that fails both checks; if only inherited failures exist (small errors grown
past the tolerance), the first of those is reported and says so.

A delegate whose live-outs fail locally (its inputs as the runtime gave them,
its outputs wrong) is bisected: prefixes of its outlined edge function (the
first k of its ops, returning every value the rest still needs and the k-th
op's results) are compiled with the same backend and compile specs into a
small `.pte`, run on the delegate's captured inputs and checked against the
eager values; a binary search finds the smallest wrong prefix, whose last op
is the culprit. Cost: about log2(n) + 1 extra backend compiles for a
delegate of n ops (each a full `preprocess`, seconds for the cpu backend)
plus one eager run of the delegate; only the one delegate where the first
divergence lies is bisected. The runtime side costs one traced run with a
copy of every tensor the method writes (memory: the sum of those tensors'
sizes), the reference one eager run.

Limits: straight-line methods (control flow, `scf.if`/`scf.while`, is
refused with the op's location); the method named `forward`; ops inside a
delegate's own nested delegates are not bisected.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import func as func_dialect

from etmlir import compile_progress, runtime
from etmlir.backends.lowering import lower_whole_program
from etmlir.delegation.operator_support import FREE_OPS
from etmlir.delegation.partitioner import defining_op, is_delegate_call
from etmlir.dialects import attrs
from etmlir.dialects.sym_ops import SYM_OPS
from etmlir.edge_program import EdgeProgram
from etmlir.executable import pte
from etmlir.executable.io_structure import StructureError
from etmlir.executorch_program import ExecutorchConfig, ExecutorchProgram, to_executorch
from etmlir.frontend import locations
from etmlir.frontend.state import state_arguments
from etmlir.lazy import lazy_module
from etmlir.passes.edge_to_torch import run_eagerly, torch_dtype
from etmlir.passes.fold_constants import constant_tensor
from etmlir.passes.preprocess_delegates import compile_specs
from etmlir.schema.InstructionKind import InstructionKind
from etmlir.schema.Value import Value

torch = lazy_module("torch")

METHOD = "forward"


class CompareError(ValueError):
    """compare() cannot run this program or these inputs; the message says why."""


# -- results ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OpComparison:
    """One edge op, in program order: where it ran and how far its values are from the reference.

    status: "ok", "diverged" (wrong on the runtime's own inputs), "inherited" (right on its
    inputs, wrong only because they were), "hidden" (inside a delegate, not a live-out: the
    runtime never sees it), "folded" (computed at compile time: no instruction), or
    "bisected" (found wrong by compiling prefixes of its delegate).
    """

    index: int                    # position in program order (delegate ops at their call)
    handle: int
    op: str                       # "edge.tanh"
    source: str                   # "model.py:12"
    module_path: str | None       # "layers.3.attn" when debug_info records it
    delegate: str | None          # "cpu_1" for an op inside a delegate
    backend: str | None           # that delegate's backend
    instruction: int | None       # the .pte instruction that ran it (a delegate op: its call)
    status: str
    max_abs: float | None = None  # cumulative: runtime vs reference
    max_rel: float | None = None  # max_abs / the reference's largest magnitude
    local_abs: float | None = None  # runtime vs this op's eager result on the runtime's inputs
    local_rel: float | None = None


@dataclasses.dataclass(frozen=True)
class Divergence:
    """Where the numbers first go wrong: the op, its source, the delegate it sits in, its errors."""

    op: str
    handle: int
    source: str
    module_path: str | None
    delegate: str | None
    backend: str | None
    max_abs: float
    max_rel: float
    found_by: str                 # "capture", "bisection" or "accumulation"
    note: str = ""

    def __str__(self) -> str:
        where = f" in delegate {self.delegate} ({self.backend})" if self.delegate else " (portable kernel)"
        path = f" [{self.module_path}]" if self.module_path else ""
        text = (f"{self.op} (debug handle {self.handle}){where} at {self.source}{path}: "
                f"max abs error {self.max_abs:.3g}, max rel error {self.max_rel:.3g}")
        return text + (f"; {self.note}" if self.note else "")


@dataclasses.dataclass
class Comparison:
    """The aligned ops of one compare() run; `str()` prints the table and the first divergence."""

    ops: list[OpComparison]
    first_divergence: Divergence | None
    atol: float
    rtol: float
    output_max_abs: float
    bisection_compiles: int = 0
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def diverged(self) -> bool:
        return self.first_divergence is not None

    def table(self, max_rows: int | None = 40) -> str:
        """The aligned ops in program order (at most `max_rows`, around the first divergence)."""
        rows = self.ops
        marked = self.first_divergence.handle if self.first_divergence else None
        if max_rows is not None and len(rows) > max_rows:
            centre = next((i for i, r in enumerate(rows) if r.handle == marked), 0)
            start = max(0, min(centre - max_rows // 2, len(rows) - max_rows))
            rows = rows[start:start + max_rows]
        with_paths = any(r.module_path for r in rows)
        header = ["", "#", "handle", "op", "delegate", "source"] + (["module"] if with_paths else []) + [
            "max abs", "max rel", "local abs", "status"]
        lines = [header]
        for r in rows:
            line = [">" if r.handle == marked else "", str(r.index), str(r.handle), r.op,
                    f"{r.delegate} ({r.backend})" if r.delegate else "-", r.source]
            if with_paths:
                line.append(r.module_path or "-")
            line += [_number(r.max_abs), _number(r.max_rel), _number(r.local_abs), r.status]
            lines.append(line)
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines]
        if len(rows) < len(self.ops):
            text.append(f"({len(self.ops) - len(rows)} of {len(self.ops)} ops not shown; table(max_rows=None) "
                        "shows all)")
        return "\n".join(text)

    def __str__(self) -> str:
        visible = sum(r.max_abs is not None for r in self.ops)
        head = (f"compare: {len(self.ops)} ops, {visible} seen by the runtime; atol={self.atol:g} rtol={self.rtol:g}; "
                f"outputs' max abs error {self.output_max_abs:.3g}")
        if self.first_divergence is None:
            verdict = "no divergence found"
        else:
            verdict = f"first divergence: {self.first_divergence}"
            if self.bisection_compiles:
                verdict += f" ({self.bisection_compiles} compiles to bisect the delegate)"
        return "\n".join([head, self.table(), verdict, *self.notes])


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}"


# -- errors between two tensors -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Error:
    max_abs: float
    max_rel: float
    ok: bool


def _error(actual: Any, expected: Any, atol: float, rtol: float) -> _Error:
    """How far `actual` is from `expected` (torch tensors): max abs, max abs / max |expected|, allclose."""
    if tuple(actual.shape) != tuple(expected.shape):
        return _Error(math.inf, math.inf, False)
    if actual.numel() == 0:
        return _Error(0.0, 0.0, True)
    a, e = actual.detach().to(torch.float64), expected.detach().to(torch.float64)
    same = (a == e) | (torch.isnan(a) & torch.isnan(e))  # NaN equals NaN, inf equals inf of its sign
    diff = torch.where(same, torch.zeros_like(a), (a - e).abs())
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
    max_abs = float(diff.max())
    scale = float(torch.where(torch.isfinite(e), e.abs(), torch.zeros_like(e)).max())
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    ok = bool((diff <= atol + rtol * e.abs().nan_to_num(0.0)).all())
    return _Error(max_abs, max_rel, ok)


def _worst(errors: list[_Error]) -> _Error:
    if not errors:
        return _Error(0.0, 0.0, True)
    return _Error(max(e.max_abs for e in errors), max(e.max_rel for e in errors), all(e.ok for e in errors))


# -- the reference: the edge module, op by op, with PyTorch eager ---------------------------------


def _block(func_op: ir.Operation) -> ir.Block:
    return func_op.regions[0].blocks[0]


def _handle(op: ir.Operation) -> int | None:
    return ir.IntegerAttr(op.attributes[attrs.DEBUG_HANDLE]).value if attrs.DEBUG_HANDLE in op.attributes else None


def _is_computation(op: ir.Operation) -> bool:
    """An op the table lists: an edge op that is not a constant or a size query, or a delegate call."""
    return (op.name.startswith("edge.") and op.name not in FREE_OPS) or is_delegate_call(op)


class _Reference:
    """Runs edge functions with PyTorch eager; delegate calls run their outlined edge function."""

    def __init__(self, module: ir.Module, weights: dict[str, Any]) -> None:
        self.weights = weights
        self.delegates: dict[str, tuple[ir.Operation, ir.Operation]] = {}  # "cpu_1.forward" -> (module, forward)
        for op in module.body.operations:
            op = op.operation
            if op.name == "builtin.module" and attrs.BACKEND in op.attributes:
                tag = ir.StringAttr(op.attributes["sym_name"]).value
                for inner in _block(op).operations:
                    inner = inner.operation
                    if inner.name == "func.func":
                        name = ir.StringAttr(inner.attributes["sym_name"]).value
                        self.delegates[f"{tag}.{name}"] = (op, inner)

    def delegate(self, call: ir.Operation) -> tuple[str, ir.Operation, ir.Operation]:
        """The tag, nested module and outlined function a delegate call runs."""
        symbol = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
        if symbol not in self.delegates:
            raise CompareError(f"delegate call of @{symbol} at {locations.source_line(call.location)}: the program "
                               "has no outlined module for it")
        nested, function = self.delegates[symbol]
        return symbol.rsplit(".", 1)[0], nested, function

    def run(self, func_op: ir.Operation, args: Sequence[Any],
            on_call: Callable[[ir.Operation, list[Any]], list[Any]] | None = None) -> tuple[list[Any], dict]:
        """The function's results and every value it computed (edge value -> torch tensor)."""
        block = _block(func_op)
        values: dict[ir.Value, Any] = dict(zip(block.arguments, args))
        for op in block.operations:
            op = op.operation
            if op.name == "func.return":
                return [values[v] for v in op.operands], values
            if is_delegate_call(op):
                inputs = [values[v] for v in op.operands]
                results = on_call(op, inputs) if on_call else self.run(self.delegate(op)[2], inputs)[0]
            else:
                results = self.evaluate(op, values)
            for result, tensor in zip(op.results, results):
                values[result] = tensor
        raise CompareError(f"function at {locations.source_line(func_op.location)} has no return")

    def evaluate(self, op: ir.Operation, values: dict[ir.Value, Any]) -> list[Any]:
        name = op.name
        if name == "edge.constant":
            return [self.constant(op)]
        if name == "edge.sym_size_int":
            dim = ir.IntegerAttr(op.attributes["dim"]).value
            return [torch.tensor(values[op.operands[0]].shape[dim], dtype=torch.int64)]
        if name.startswith("edge.sym_") and name[len("edge."):] in SYM_OPS:
            folded = SYM_OPS[name[len("edge."):]].fold(*[values[v].item() for v in op.operands])
            return [torch.tensor(folded, dtype=torch_dtype(op.results[0].type))]
        if not name.startswith("edge."):
            raise CompareError(f"compare() runs straight-line edge methods; '{name}' at "
                               f"{locations.source_line(op.location)} is not an edge op (control flow is not "
                               "compared yet)")
        try:
            results = run_eagerly(op, lambda v: values[v])
        except (ValueError, RuntimeError, TypeError) as error:
            raise CompareError(f"the eager reference cannot run '{name}' at {locations.source_line(op.location)}: "
                               f"{error}") from None
        return [r.contiguous() for r in results]

    def constant(self, op: ir.Operation) -> Any:
        expected = ir.RankedTensorType(op.results[0].type)
        if attrs.PARAM in op.attributes:
            name = ir.StringAttr(op.attributes[attrs.PARAM]).value
            if name in self.weights:
                value = self.weights[name]
                if list(value.shape) == list(expected.shape):
                    return value
        value = constant_tensor(op)
        if value is None:
            raise CompareError(f"edge.constant at {locations.source_line(op.location)}: its data is neither a "
                               "program weight nor in the module")
        return value


# -- the program: which value each instruction writes ------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Step:
    """One KernelCall or DelegateCall of the method, as the .pte stores it."""

    instruction: int
    handle: int
    delegate: bool
    outputs: tuple[int, ...]      # the method's value indices it writes (tensors or not)


@dataclasses.dataclass(frozen=True)
class _DebugEntry:
    source: str
    module_path: str | None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _read_method(buffer: bytes, result_counts: dict[int, int]) -> tuple[list[_Step], set[int], dict[int, _DebugEntry]]:
    """The method's kernel and delegate calls (by debug handle), its tensor values, its debug info."""
    program = pte.read(buffer).program
    method = next((m for m in program.methods or [] if _text(m.name) == METHOD), None)
    if method is None:
        raise CompareError(f"the .pte has no method '{METHOD}'")
    tensors = {i for i, v in enumerate(method.values or []) if v.valueType == Value.Tensor}
    steps: list[_Step] = []
    for index, instruction in enumerate(method.instructions or []):
        kind = instruction.kindType
        if kind in (InstructionKind.JumpFalse, InstructionKind.Move):
            raise CompareError("compare() runs straight-line methods; this one has control flow "
                               f"(instruction {index} is a {'jump' if kind == InstructionKind.JumpFalse else 'move'})")
        handle = instruction.debugHandle
        if kind == InstructionKind.KernelCall and handle in result_counts:
            count = result_counts[handle]  # out variants: the op's results are its last arguments
        elif kind == InstructionKind.DelegateCall:
            count = instruction.kind.numOutputs
        else:
            continue
        args = [] if instruction.kind.args is None else [int(a) for a in instruction.kind.args]
        steps.append(_Step(index, handle, kind == InstructionKind.DelegateCall,
                           tuple(args[len(args) - count:]) if count else ()))
    debug = {e.handle: _DebugEntry(_text(e.location) or "unknown", _text(getattr(e, "modulePath", None)) or None)
             for e in method.debugInfo or []}
    return steps, tensors, debug


def _to_torch(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value, order="C"))  # (not ascontiguousarray: it makes a 0-d array 1-d)
    return value if isinstance(value, torch.Tensor) else torch.as_tensor(value)


def _run_traced(buffer: bytes, inputs: list[Any], requests: list[tuple[int, int]]) -> dict[tuple[int, int], Any]:
    """The captured tensors, (instruction, value) -> torch tensor, of one traced run of the .pte."""
    method = runtime.load(buffer).method(METHOD)
    trace = method.trace(*inputs, capture=sorted(requests))
    captured = {(c.instruction, c.value): _to_torch(c.array) for c in trace.captures if c.run == 0}
    missing = [r for r in requests if r not in captured]
    if missing:
        raise CompareError(f"the runtime captured {len(captured)} of {len(requests)} requested values "
                           f"(first missing: instruction {missing[0][0]}, value {missing[0][1]})")
    return captured


# -- compare ------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Row:
    """One op's values while comparing (made into an OpComparison at the end)."""

    op: ir.Operation
    handle: int
    reference: list[Any]
    delegate_call: ir.Operation | None = None   # the call an inner op sits under
    runtime: list[Any | None] = dataclasses.field(default_factory=list)  # per result; None: not seen
    local: list[Any | None] = dataclasses.field(default_factory=list)
    instruction: int | None = None


def compare(program: EdgeProgram | ExecutorchProgram, inputs: Sequence[Any], *, atol: float = 1e-4,
            rtol: float = 1e-3, bisect: bool = True, config: ExecutorchConfig | None = None) -> Comparison:
    """Run `program`'s `.pte` with intermediate capture and its edge ops with PyTorch eager on `inputs`;
    report the first op where they disagree beyond `atol`/`rtol` (see the module docstring).

    program: an edge program (delegated or not; its `.pte` is made with `to_executorch(config)`), or
             an ExecutorchProgram made by `to_executorch` (its own `.pte`, and the edge program it
             came from as the reference).
    inputs:  the model's positional arguments (as for the exported call).
    bisect:  compile prefixes of a delegate whose outputs are wrong on right inputs (log2(n) compiles).
    """
    if isinstance(program, ExecutorchProgram):
        edge = program.edge_program
        if edge is None:
            raise CompareError("this ExecutorchProgram does not keep the edge program it came from; pass the edge "
                               "program to compare() instead")
        buffer = program.buffer
    else:
        edge = program
        buffer = to_executorch(edge, config).buffer
    return _Comparer(edge, buffer, atol, rtol).run(_flat_inputs(edge, inputs), bisect)


def _flat_inputs(edge: EdgeProgram, inputs: Sequence[Any]) -> list[Any]:
    if not isinstance(inputs, (tuple, list)):
        inputs = (inputs,)
    structure = edge.io_structure
    try:
        leaves = [value for _, value in structure.flatten_call(tuple(inputs), {})] if structure else list(inputs)
    except StructureError as error:
        raise CompareError(f"the inputs do not fit the program's call: {error}") from None
    return [_to_torch(value) for value in leaves]


class _Comparer:
    def __init__(self, edge: EdgeProgram, buffer: bytes, atol: float, rtol: float) -> None:
        self.edge = edge
        self.buffer = buffer
        self.atol, self.rtol = atol, rtol
        self.function = edge.function
        self.reference = _Reference(edge.module, edge.weights())
        self.compiles = 0
        self.notes: list[str] = []
        self.debug: dict[int, _DebugEntry] = {}  # the .pte's debug_info by handle

    # The arguments of the edge function: the flat inputs, and the state (which starts at its initial value).
    def _arguments(self, flat: list[Any]) -> list[Any]:
        state = state_arguments(self.function)
        count = len(_block(self.function).arguments)
        if len(flat) != count - len(state):
            raise CompareError(f"the program takes {count - len(state)} inputs, got {len(flat)}")
        weights = self.reference.weights
        inputs = iter(flat)
        args = []
        for index in range(count):
            if index in state:
                if state[index] not in weights:
                    raise CompareError(f"no initial value for state '{state[index]}'")
                args.append(weights[state[index]].clone())
            else:
                args.append(next(inputs))
        return args

    def run(self, flat: list[Any], bisect: bool) -> Comparison:
        args = self._arguments(flat)
        with self.edge.context:
            # 1. The reference, keeping each delegate call's inner values.
            inner: dict[ir.Operation, dict] = {}

            def on_call(call: ir.Operation, call_inputs: list[Any]) -> list[Any]:
                results, values = self.reference.run(self.reference.delegate(call)[2], call_inputs)
                inner[call] = values
                return results

            _, ref_values = self.reference.run(self.function, args, on_call)
            rows = self._rows(ref_values, inner)
            # 2. The program, capturing what each kernel and delegate call writes.
            runtime_of = self._capture(rows, flat)

            def actual(value: ir.Value) -> Any:  # the runtime's value where it has one (else exact: an input,
                return runtime_of.get(value, ref_values[value])  # a constant, a fold made at compile time)

            # 3. Align: runtime values, and each op's eager result on the runtime's own inputs.
            local_inner = self._align(rows, runtime_of, actual)
            ops, divergence = self._judge(rows, local_inner, actual, bisect)
            outputs = [_error(actual(v), ref_values[v], self.atol, self.rtol) for v in _returned(self.function)]
        return Comparison(ops, divergence, self.atol, self.rtol, _worst(outputs).max_abs, self.compiles, self.notes)

    def _capture(self, rows: list[_Row], flat: list[Any]) -> dict[ir.Value, Any]:
        """One traced run of the `.pte`: outer edge value -> the tensor the runtime wrote for it."""
        outer = {row.handle: row for row in rows if row.delegate_call is None}
        steps, tensors, self.debug = _read_method(self.buffer, {h: len(r.op.results) for h, r in outer.items()})
        requests, wanted = [], []
        for step in steps:
            row = outer.get(step.handle)
            if row is None or row.instruction is not None:
                continue  # an instruction no listed op made (or a later copy of one)
            row.instruction = step.instruction
            for result, value in zip(row.op.results, step.outputs):
                if value in tensors:
                    requests.append((step.instruction, value))
                    wanted.append((result, (step.instruction, value)))
        captured = _run_traced(self.buffer, flat, requests)
        return {result: captured[key] for result, key in wanted}

    def _align(self, rows: list[_Row], runtime_of: dict[ir.Value, Any],
               actual: Callable[[ir.Value], Any]) -> dict[ir.Operation, dict]:
        """Fill each row's runtime and local values; returns each delegate call's inner eager values on the
        runtime's inputs."""
        local_inner: dict[ir.Operation, dict] = {}
        for row in rows:
            if row.delegate_call is not None:
                continue
            row.runtime = [runtime_of.get(r) for r in row.op.results]
            if row.instruction is None:
                continue
            if is_delegate_call(row.op):
                call_inputs = [actual(v) for v in row.op.operands]
                row.local, local_inner[row.op] = self.reference.run(self.reference.delegate(row.op)[2], call_inputs)
            else:
                row.local = self.reference.evaluate(row.op, _Lookup(actual))
        calls = {row.op: row for row in rows if is_delegate_call(row.op)}
        for row in rows:
            if row.delegate_call is None:
                continue
            call = row.delegate_call
            row.instruction = calls[call].instruction
            row.runtime = [None] * len(row.op.results)
            row.local = [None] * len(row.op.results)
            # A live-out: the call's result at the position the outlined function returns it.
            for position, value in enumerate(_returned(self.reference.delegate(call)[2])):
                for i, result in enumerate(row.op.results):
                    if value == result:
                        row.runtime[i] = runtime_of.get(call.results[position])
                        if call in local_inner:
                            row.local[i] = local_inner[call][result]
        return local_inner

    def _rows(self, ref_values: dict, inner: dict) -> list[_Row]:
        rows: list[_Row] = []
        for op in _block(self.function).operations:
            op = op.operation
            if not _is_computation(op) or _handle(op) is None:
                continue
            if is_delegate_call(op):
                for inner_op in _block(self.reference.delegate(op)[2]).operations:
                    inner_op = inner_op.operation
                    if _is_computation(inner_op) and _handle(inner_op) is not None:
                        rows.append(_Row(inner_op, _handle(inner_op), [inner[op][r] for r in inner_op.results],
                                         delegate_call=op))
            rows.append(_Row(op, _handle(op), [ref_values[r] for r in op.results]))
        return rows

    def _describe(self, row: _Row) -> tuple[str, str | None, str | None, str | None]:
        """(source, module path, delegate tag, backend) of a row's op."""
        entry = self.debug.get(row.handle)
        source = entry.source if entry and entry.source != "unknown" else locations.source_line(row.op.location)
        path = entry.module_path if entry and entry.module_path else _module_path(row.op.location)
        if row.delegate_call is None:
            return source, path, None, None
        tag, nested, _ = self.reference.delegate(row.delegate_call)
        return source, path, tag, ir.StringAttr(nested.attributes[attrs.BACKEND]).value

    def _judge(self, rows: list[_Row], local_inner: dict, actual: Callable[[ir.Value], Any],
               bisect: bool) -> tuple[list[OpComparison], Divergence | None]:
        records: list[OpComparison] = []
        first: tuple[_Row, _Error, str] | None = None        # the first "diverged" row
        first_inherited: tuple[_Row, _Error] | None = None
        index = 0
        for row in rows:
            if is_delegate_call(row.op):
                continue  # its live-outs are listed as the inner ops that compute them
            index += 1
            source, path, tag, backend = self._describe(row)
            local_values = row.local or [None] * len(row.reference)
            seen = [(rt, ref, lo) for rt, ref, lo in zip(row.runtime, row.reference, local_values) if rt is not None]
            if not seen:
                status = "hidden" if row.delegate_call is not None else "folded"
                records.append(OpComparison(index, row.handle, row.op.name, source, path, tag, backend,
                                            row.instruction, status))
                continue
            cumulative = _worst([_error(rt, ref, self.atol, self.rtol) for rt, ref, _ in seen])
            local = _worst([_error(rt, lo, self.atol, self.rtol) for rt, _, lo in seen if lo is not None])
            status = "ok" if cumulative.ok else ("inherited" if local.ok else "diverged")
            records.append(OpComparison(index, row.handle, row.op.name, source, path, tag, backend, row.instruction,
                                        status, cumulative.max_abs, cumulative.max_rel, local.max_abs,
                                        local.max_rel))
            if status == "diverged" and first is None:
                first = (row, cumulative, "capture")
            elif status == "inherited" and first_inherited is None:
                first_inherited = (row, cumulative)

        if first is None:
            if first_inherited is None:
                return records, None
            row, error = first_inherited
            source, path, tag, backend = self._describe(row)
            return records, Divergence(row.op.name, row.handle, source, path, tag, backend, error.max_abs,
                                       error.max_rel, "accumulation",
                                       "every op is within tolerance on the runtime's own inputs: small errors "
                                       "grew past atol/rtol (loosen them, or look where the error grows fastest)")
        row, error, _ = first
        source, path, tag, backend = self._describe(row)
        if row.delegate_call is None:
            return records, Divergence(row.op.name, row.handle, source, path, None, None, error.max_abs,
                                       error.max_rel, "capture")
        # Inside a delegate: the live-out is wrong on right inputs. Which of the delegate's ops?
        call = row.delegate_call
        live_out = Divergence(row.op.name, row.handle, source, path, tag, backend, error.max_abs, error.max_rel,
                              "capture", f"a live-out of delegate {tag}; its inner ops are not visible to the "
                              "runtime" + ("" if bisect else " (bisect=True compiles prefixes to find the op)"))
        if not bisect:
            return records, live_out
        found = self._bisect(call, [actual(v) for v in call.operands], local_inner[call])
        if found is None:
            return records, live_out
        culprit, culprit_error = found
        for i, record in enumerate(records):
            if record.handle == _handle(culprit) and record.delegate == tag:
                records[i] = dataclasses.replace(record, status="bisected", local_abs=culprit_error.max_abs,
                                                 local_rel=culprit_error.max_rel)
        culprit_row = _Row(culprit, _handle(culprit), [], delegate_call=call)
        source, path, tag, backend = self._describe(culprit_row)
        note = (f"the first wrong prefix of {tag} ends at this op (errors against eager on the delegate's "
                "captured inputs)")
        if row.op != culprit:
            note = f"its delegate's live-out {row.op.name} (handle {row.handle}) is off by {error.max_abs:.3g}; " + note
        return records, Divergence(culprit.name, _handle(culprit), source, path, tag, backend,
                                   culprit_error.max_abs, culprit_error.max_rel, "bisection", note)

    def _bisect(self, call: ir.Operation, call_inputs: list[Any],
                expected: dict[ir.Value, Any]) -> tuple[ir.Operation, _Error] | None:
        """The first op of the delegate whose prefix, compiled alone, is wrong; None if none is."""
        tag, nested, function = self.reference.delegate(call)
        backend = ir.StringAttr(nested.attributes[attrs.BACKEND]).value
        specs = compile_specs(nested)
        ops = [op.operation for op in _block(function).operations]
        candidates = [op for op in ops if _is_computation(op) and not is_delegate_call(op)]
        tried: dict[int, _Error | None] = {}

        def wrong(count: int) -> bool:
            if count not in tried:
                try:
                    tried[count] = self._run_prefix(function, candidates[count - 1], backend, specs, call_inputs,
                                                    expected)
                except Exception as error:  # a backend that cannot compile this prefix: say so, stop
                    self.notes.append(f"bisecting delegate {tag} stopped: its first {count} ops did not compile "
                                      f"or run alone ({type(error).__name__}: {error})")
                    tried[count] = None
                    raise _Stop() from None
            return not tried[count].ok

        low, high = 1, len(candidates)
        try:
            if not wrong(high):
                self.notes.append(f"delegate {tag}: compiled alone, all its ops match eager; the error appears "
                                  "only when it runs inside the program")
                return None
            while low < high:
                middle = (low + high) // 2
                if wrong(middle):
                    high = middle
                else:
                    low = middle + 1
        except _Stop:
            return None
        return candidates[low - 1], tried[low]

    def _run_prefix(self, function: ir.Operation, last: ir.Operation, backend: str, specs: dict[str, str],
                    call_inputs: list[Any], expected: dict[ir.Value, Any]) -> _Error:
        """Compile the delegate's ops up to `last` alone, run them on `call_inputs`; the error of `last`'s results
        (of every prefix output if another one is wrong)."""
        module, outputs = _prefix_module(function, last)
        prefix = EdgeProgram(module=module, example_args=(), dynamic_dims=[], weight_buffers=self.edge.weight_buffers)
        with compile_progress.progress(False):  # one bar per bisection step would only be noise
            buffer = to_executorch(lower_whole_program(backend, prefix, specs)).buffer
        self.compiles += 1
        method = runtime.load(buffer).method(METHOD)
        results = method.call_flat(*call_inputs)
        errors = [_error(_to_torch(r), expected[v], self.atol, self.rtol) for r, v in zip(results, outputs)]
        own = _worst([e for e, v in zip(errors, outputs) if defining_op(v) == last])
        every = _worst(errors)
        return own if not own.ok or every.ok else every  # `last`'s own error, unless only another output is off


class _Stop(Exception):
    """Bisection cannot go on (the reason is in the notes)."""


class _Lookup(dict):
    """A values mapping that asks a function (the runtime's value, else the reference's)."""

    def __init__(self, get: Callable[[ir.Value], Any]) -> None:
        super().__init__()
        self._get = get

    def __getitem__(self, key: ir.Value) -> Any:
        return self._get(key)


def _returned(func_op: ir.Operation) -> list[ir.Value]:
    return list(_block(func_op).operations[-1].operands) if len(_block(func_op).operations) else []


def _module_path(location: ir.Location) -> str | None:
    find = getattr(locations, "module_path", None)  # recorded by export when the model's modules are known
    return find(location) if find else None


def _prefix_module(function: ir.Operation, last: ir.Operation) -> tuple[ir.Module, list[ir.Value]]:
    """A module whose `main` runs `function`'s ops up to `last` and returns what the rest of `function`
    still reads from them plus `last`'s results; the returned values are `function`'s own (for the
    reference), in the order `main` returns their copies."""
    ops = [op.operation for op in _block(function).operations]
    cut = ops.index(last)
    kept, rest = ops[:cut + 1], ops[cut + 1:]
    outputs: list[ir.Value] = []
    for op in kept:
        if not _is_computation(op):
            continue
        for result in op.results:
            used_later = any(use.owner.operation in rest for use in result.uses)
            if (op == last or used_later) and result not in outputs:
                outputs.append(result)
    with function.context, function.location:
        module = ir.Module.create()
        clone = function.clone(ip=ir.InsertionPoint(module.body))
        clone_ops = [op.operation for op in _block(clone).operations]
        mapping = {}
        for original, copy in zip(ops, clone_ops):
            for a, b in zip(original.results, copy.results):
                mapping[a] = b
        copies = [mapping[v] for v in outputs]
        for op in reversed(clone_ops[cut + 1:]):
            op.erase()
        # Constants and size queries only the dropped ops read.
        for op in reversed(clone_ops[:cut + 1]):
            if op.name in FREE_OPS and all(not list(r.uses) for r in op.results):
                op.erase()
        with ir.InsertionPoint(_block(clone)):
            func_dialect.ReturnOp(copies)
        arguments = [a.type for a in _block(clone).arguments]
        clone.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(arguments, [v.type for v in copies]))
        clone.attributes["sym_name"] = ir.StringAttr.get("main")
        if "res_attrs" in clone.attributes:
            del clone.attributes["res_attrs"]
    return module, outputs
