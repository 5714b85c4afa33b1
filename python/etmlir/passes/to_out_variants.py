"""et-to-out-variants: edge ops -> `etx` out-variant kernel calls writing into explicit allocations.

Each edge op becomes a call of its operator's out-variant kernel (the name
comes from the op's recorded ATen name: `edge.add_tensor` is
`aten::add.Tensor`, whose out variant is `aten::add.out`). Every argument
becomes a value in schema order (attributes turn into `etx.const` values,
absent optionals into `etx.none`, lists of run-time sizes into `etx.list`),
and every result becomes an `etx.alloc` the kernel writes:

    func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %0 = "edge.add_tensor"(%x, %x, %one) : (...) -> tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    }

becomes

    func.func @main() attributes {etx.method = "forward"} {
      %0 = "etx.input"() {index = 0 : i64, type = tensor<2x3xf32>} : () -> !etx.value
      %1 = "etx.const"() {value = 1 : i64} : () -> !etx.value
      %2 = "etx.alloc"() {type = tensor<2x3xf32>} : () -> !etx.value
      "etx.kernel_call"(%0, %0, %1, %2) {debug_handle = 1 : i64, etmlir.edge_op = "edge.add_tensor",
          kernel = "aten::add.out", operandSegmentSizes = array<i32: 3, 1>} : (...) -> ()
      "etx.output"(%2) : (!etx.value) -> ()
      return
    }

Dynamic dims keep `?` in `type` and get `upper_bounds` (from et-to-edge's
`etmlir.upper_bounds` and the inputs' `etmlir.dynamic_dims`), which is what
et-plan-memory reserves. Size queries (`edge.sym_size_int`) become
`etmlir_prim::` kernels writing an Int (`etx.alloc {type = i64}`), and lists
with run-time sizes refer to those Ints. Weights become `etx.constant` over the
same data. A state argument (`etmlir.state`, a buffer forward mutates) becomes
an `etx.state` and its state result a write into it: in place by the kernel
computing it when that is safe, else a copy at the end (`executable/state.py`).
Each call keeps the edge op's location and a debug handle (the
op's `etmlir.debug_handle` if set, else its position among the edge ops).

Control flow (`scf.if`, `scf.while` on `etcf.predicate`, and `arith.select` of
whole tensors) becomes `etx.jump_false` and `etx.move` in the method's one
block: each result or loop-carried value gets an `etx.alloc` slot that every
branch moves its value into, and a loop ends in a backward jump (see
`etmlir.executable.control_flow`). An op inside a branch that cannot be
lowered is reported at its own location.

An edge op whose operator has no out-variant kernel, or a Scalar argument
computed at run time by a tensor op, is an error at the op's location; the
module is left unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from torch_mlir import ir
from torch_mlir.dialects import func

from etmlir.dialects import attrs
from etmlir.dialects.edge import DYNAMIC, EdgeOp, edge_op_of, named_operands
from etmlir.dialects.etx import value_type
from etmlir.executable.control_flow import ControlFlowError, ControlFlowLowering, lowers, resolve_jumps
from etmlir.executable.dtypes import LAYOUTS, MEMORY_FORMATS, UnsupportedElementType, element_info
from etmlir.executable.out_variants import OutVariant, functional_schema, out_variant
from etmlir.executable.state import StateWrite, write_in_place, write_state
from etmlir.delegation.partitioner import delegate_callee, is_delegate_call
from etmlir.frontend.core_aten import is_core_overload
from etmlir.frontend.locations import module_path, source_line
from etmlir.frontend.shape_bounds import argument_max_sizes
from etmlir.frontend.state import state_arguments, state_initial, state_results
from etmlir.passes.preprocess_delegates import delegate_modules
from etmlir.passes.registry import Option, PassFailure, emit_error, register_pass
from etmlir.passes.to_edge import recorded_upper_bounds

METHOD_ATTR = "etx.method"
# Attributes of the edge function carried over to the etx function.
_KEEP_FUNC_ATTRS = ("sym_name", "sym_visibility", attrs.IO_STRUCTURE)


class _Unsupported(Exception):
    """Raised while converting one op; becomes an error at that op."""


def _not_delegated_hint(op: ir.Operation) -> str:
    """For an op only a backend runs (kept whole by `EdgeCompileConfig.keep`): what the partitioners said."""
    if "etmlir.not_delegated" not in op.attributes:
        return ("; an op kept from decomposition (EdgeCompileConfig.keep) has to be delegated to a backend "
                "that takes it (to_backend) or not kept")
    reasons = ir.DictAttr(op.attributes["etmlir.not_delegated"])
    said = "; ".join(f"{reasons[i].name}: {ir.StringAttr(reasons[i].attr).value}" for i in range(len(reasons)))
    return f"; it was kept from decomposition (EdgeCompileConfig.keep) but not delegated ({said})"


def _scalar_slot_type(t: ir.Type) -> ir.Type:
    """The value a scalar result is written to: Bool for i1, Double for floats, Int otherwise."""
    element = t.element_type if isinstance(t, ir.RankedTensorType) else t
    if isinstance(element, ir.IntegerType) and element.width == 1:
        return ir.IntegerType.get_signless(1)
    if isinstance(element, ir.FloatType):
        return ir.F64Type.get()
    return ir.IntegerType.get_signless(64)


def _i64(value: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def _input_bounds(func_op: ir.Operation, index: int, t: ir.RankedTensorType) -> list[int] | None:
    """Upper bounds of input `index` from its `etmlir.dynamic_dims` attribute (None: static)."""
    if t.has_static_shape:
        return None
    bounds = list(t.shape)
    maxes = argument_max_sizes(func_op, index)
    for dim, size in enumerate(bounds):
        if size == ir.ShapedType.get_dynamic_size():
            if dim not in maxes:
                raise _Unsupported(f"input {index} dim {dim} is dynamic with no upper bound "
                                   "(give the Dim a max when exporting)")
            bounds[dim] = maxes[dim]
    return bounds


class _MethodBuilder:
    """Builds the etx body of one function, op by op, at the insertion point."""

    def __init__(self, edge_func: ir.Operation) -> None:
        self.edge_func = edge_func
        self.tensors: dict[ir.Value, ir.Value] = {}      # edge tensor value -> etx value
        self.ints: dict[ir.Value, ir.Value] = {}         # edge 0-d value computed at run time -> Int value
        self.constants: dict[ir.Value, ir.Operation] = {}  # edge.constant results, converted on use
        self.consts: dict[str, ir.Value] = {}            # dedup of etx.const values
        self.none_value: ir.Value | None = None
        self.handle = 0
        # Ops that failed, with why; results of a failed op (and all computed from them) are poisoned.
        self.failures: list[tuple[ir.Operation, str]] = []
        self.poisoned: set[ir.Value] = set()
        self.control_flow = ControlFlowLowering(self)  # scf.if / scf.while -> jumps and moves
        self.states: dict[str, ir.Value] = {}            # state name -> its etx.state
        self.state_writes: list[StateWrite] = []

    # -- values ---------------------------------------------------------------------------

    def const(self, attr: ir.Attribute) -> ir.Value:
        key = f"{attr} {attr.type if hasattr(attr, 'type') else ''}"
        if key not in self.consts:
            op = ir.Operation.create("etx.const", results=[value_type()], attributes={"value": attr})
            self.consts[key] = op.result
        return self.consts[key]

    def none(self) -> ir.Value:
        if self.none_value is None:
            self.none_value = ir.Operation.create("etx.none", results=[value_type()]).result
        return self.none_value

    def tensor(self, value: ir.Value, what: str) -> ir.Value:
        if value in self.tensors:
            return self.tensors[value]
        if value in self.constants:
            edge_const = self.constants[value]
            # The constant's own (static) type: a tensor.cast in front of a variadic operand (edge.cat's)
            # may have made `value`'s type dynamic, and a constant has no run-time size.
            fields = {"type": ir.TypeAttr.get(edge_const.result.type), "value": edge_const.attributes["value"]}
            if attrs.PARAM in edge_const.attributes:
                fields[attrs.PARAM] = edge_const.attributes[attrs.PARAM]
            op = ir.Operation.create("etx.constant", results=[value_type()], attributes=fields,
                                     loc=edge_const.location)
            self.tensors[value] = op.result
            return op.result
        if value in self.ints:
            raise _Unsupported(f"{what} is a run-time size used as a tensor; the runtime keeps sizes as Ints")
        raise _Unsupported(f"{what} has no value at this level (produced by an unsupported op)")

    def scalar(self, value: ir.Value, what: str) -> ir.Value:
        """A Scalar argument: a constant, or an Int computed at run time by a size query."""
        if value in self.ints:
            return self.ints[value]
        if value in self.constants:
            attr = ir.DenseElementsAttr(self.constants[value].attributes["value"])
            if not attr.is_splat:
                raise _Unsupported(f"{what} is a non-scalar constant")
            splat = attr.get_splat_value()
            element = ir.RankedTensorType(value.type).element_type
            if str(element) == "i1":
                return self.const(ir.BoolAttr.get(bool(ir.IntegerAttr(splat).value)))
            if isinstance(element, ir.IntegerType):
                return self.const(_i64(ir.IntegerAttr(splat).value))
            return self.const(ir.FloatAttr.get(ir.F64Type.get(), ir.FloatAttr(splat).value))
        raise _Unsupported(f"{what} is a Scalar computed at run time by a tensor op; the runtime takes "
                           "Scalars as values (only constants and size queries are supported)")

    def alloc(self, t: ir.Type, bounds: list[int] | None, loc: ir.Location) -> ir.Value:
        fields: dict[str, ir.Attribute] = {"type": ir.TypeAttr.get(t)}
        if isinstance(t, ir.RankedTensorType):
            element_info(t.element_type)  # raises for element types the .pte cannot hold
            if not t.has_static_shape:
                if bounds is None:
                    raise _Unsupported(f"result type {t} is dynamic but has no `{attrs.UPPER_BOUNDS}` "
                                       "(run et-to-edge, which computes them)")
                fields["upper_bounds"] = ir.DenseI64ArrayAttr.get(bounds)
        return ir.Operation.create("etx.alloc", results=[value_type()], attributes=fields, loc=loc).result

    # -- ops ------------------------------------------------------------------------------

    def inputs(self, block: ir.Block) -> None:
        state = state_arguments(self.edge_func)
        for index, arg in enumerate(block.arguments):
            t = ir.RankedTensorType(arg.type)
            element_info(t.element_type)
            if index in state:  # program state: planned memory the method keeps, not an input
                if not t.has_static_shape:
                    raise _Unsupported(f"state '{state[index]}' has the dynamic type {t}; state has a static shape")
                self.tensors[arg] = self.states[state[index]] = ir.Operation.create(
                    "etx.state", results=[value_type()], loc=arg.location, attributes={
                        "name": ir.StringAttr.get(state[index]), "type": ir.TypeAttr.get(t),
                        "value": state_initial(self.edge_func, index)}).result
                continue
            fields: dict[str, ir.Attribute] = {"index": _i64(index), "type": ir.TypeAttr.get(t)}
            bounds = _input_bounds(self.edge_func, index, t)
            if bounds is not None:
                fields["upper_bounds"] = ir.DenseI64ArrayAttr.get(bounds)
            self.tensors[arg] = ir.Operation.create("etx.input", results=[value_type()], attributes=fields,
                                                    loc=arg.location).result

    def convert_ops(self, ops: list[ir.Operation]) -> None:
        """Convert `ops` in order at the insertion point, recording each failure at its op."""
        for op in ops:
            op = op.operation
            if any(v in self.poisoned for v in op.operands):
                self.poisoned.update(op.results)
                continue
            with op.location:
                try:
                    self.convert(op)
                except (_Unsupported, UnsupportedElementType, ControlFlowError) as error:
                    message = str(error)
                    self.failures.append((op, message if op.name in message else f"'{op.name}': {message}"))
                    self.poisoned.update(op.results)

    def convert(self, op: ir.Operation) -> None:
        name = op.name
        if lowers(op):  # control flow: jumps and moves in this block (etmlir.executable.control_flow)
            self.control_flow.lower(op)
            return
        if name == "edge.constant":
            self.constants[op.result] = op
            return
        if name == "tensor.cast":
            source = op.operands[0]
            if source in self.constants:
                self.constants[op.result] = self.constants[source]
            else:
                self.tensors[op.result] = self.tensor(source, "the cast's operand")
            return
        if name == "func.return":
            state = state_results(self.edge_func)
            outputs = [self.tensor(v, f"output {i}") for i, v in enumerate(op.operands) if i not in state]
            updates = []
            for i, value in enumerate(op.operands):
                if i in state:
                    if state[i] not in self.states:
                        raise _Unsupported(f"result {i} updates state '{state[i]}', which no argument reads")
                    updates.append((self.states[state[i]], self.tensor(value, f"the new value of '{state[i]}'")))
            if updates or self.states:
                outputs, self.state_writes = write_state(updates, outputs, self.none(), op.location)
            ir.Operation.create("etx.output", operands=outputs, loc=op.location)
            func.ReturnOp([], loc=op.location)
            return
        self.handle += 1
        handle = (ir.IntegerAttr(op.attributes[attrs.DEBUG_HANDLE]).value
                  if attrs.DEBUG_HANDLE in op.attributes else self.handle)
        if name == "edge.custom_op":
            self._custom(op, handle)
            return
        if is_delegate_call(op):
            self._delegate(op, handle)
            return
        info = edge_op_of(op)
        if info is None:
            raise _Unsupported(f"'{name}' is not an edge op (run et-to-edge and et-edge-verify first)")
        variant = out_variant(info.aten)
        if variant is None:
            raise _Unsupported(f"'{name}' ({info.aten}) has no out-variant kernel, so the runtime cannot run it"
                               + ("" if is_core_overload(info.aten) else _not_delegated_hint(op)))
        args = self._arguments(op, info, variant)
        self._call(op, variant, args, handle)

    def _arguments(self, op: ir.Operation, info: EdgeOp, variant: OutVariant) -> list[ir.Value]:
        operands = named_operands(op, info)
        sym_values = list(operands.get("sym_values", []))

        def next_sym(what: str) -> ir.Value:
            if not sym_values:
                raise _Unsupported(f"{what}: a dynamic size with no value in `sym_values`")
            return self.scalar(sym_values.pop(0), what)

        args: list[ir.Value] = []
        for arg in info.args:
            arg_name, kind = arg["name"], arg["kind"]
            if arg_name in variant.dropped:
                continue
            what = f"argument `{arg_name}` of '{op.name}'"
            if kind in ("tensor", "tensor?"):
                group = operands[arg_name]
                args.append(self.tensor(group[0], what) if group else self.none())
            elif kind == "tensor[]":
                items = [self.tensor(v, what) for v in operands[arg_name]]
                args.append(self._list("tensor", items, op.location))
            elif kind == "tensor?[]":
                present = list(ir.DenseBoolArrayAttr(op.attributes[f"{arg_name}_present"]))
                values = iter(operands[arg_name])
                items = [self.tensor(next(values), what) if p else self.none() for p in present]
                args.append(self._list("optional_tensor", items, op.location))
            elif kind in ("scalar", "scalar?"):
                group = operands[arg_name]
                args.append(self.scalar(group[0], what) if group else self.none())
            elif arg_name not in op.attributes:
                args.append(self.none())
            else:
                args.append(self._attribute(op.attributes[arg_name], kind, what, next_sym, op.location))
        return args

    def _attribute(self, attr: ir.Attribute, kind: str, what: str, next_sym: Callable[[str], ir.Value],
                   loc: ir.Location) -> ir.Value:
        if kind in ("symint", "symint?"):
            value = ir.IntegerAttr(attr).value
            return next_sym(what) if value == DYNAMIC else self.const(_i64(value))
        if kind in ("symint[]", "symint[]?"):
            sizes = list(ir.DenseI64ArrayAttr(attr))
            if DYNAMIC not in sizes:
                return self.const(attr)
            items = [next_sym(what) if s == DYNAMIC else self.const(_i64(s)) for s in sizes]
            return self._list("int", items, loc)
        if kind == "dtype?":
            return self.const(_i64(element_info(ir.TypeAttr(attr).value)[0]))
        if kind in ("memory_format", "memory_format?", "layout?"):
            text = ir.StringAttr(attr).value
            table = LAYOUTS if kind == "layout?" else MEMORY_FORMATS
            if text not in table:
                raise _Unsupported(f"{what}: unsupported value '{text}' (supported: {', '.join(table)})")
            return self.const(_i64(table[text]))
        if kind in ("float", "float?"):
            return self.const(ir.FloatAttr.get(ir.F64Type.get(), ir.FloatAttr(attr).value))
        # int, bool, str, int[], bool[], float[] and device: the attribute is the value.
        return self.const(attr)

    def _list(self, kind: str, items: list[ir.Value], loc: ir.Location) -> ir.Value:
        return ir.Operation.create("etx.list", results=[value_type()], operands=items,
                                   attributes={"kind": ir.StringAttr.get(kind)}, loc=loc).result

    def _tensor_outs(self, op: ir.Operation) -> list[ir.Value]:
        """An `etx.alloc` for each tensor result of `op`, at its recorded upper bounds."""
        outs = []
        for index, result in enumerate(op.results):
            outs.append(self.alloc(result.type, recorded_upper_bounds(op, index), op.location))
            self.tensors[result] = outs[-1]
        return outs

    def _outs(self, op: ir.Operation, variant: OutVariant) -> list[ir.Value]:
        if variant.scalar_result:
            outs = []
            for result in op.results:
                outs.append(self.alloc(_scalar_slot_type(result.type), None, op.location))
                self.ints[result] = outs[-1]
        else:
            outs = self._tensor_outs(op)
        if variant.out_is_list:
            return [self._list("tensor", outs, op.location)]
        if len(outs) != variant.num_outs:
            raise _Unsupported(f"'{op.name}' has {len(outs)} results but {variant.kernel} writes {variant.num_outs}")
        return outs

    def _call(self, op: ir.Operation, variant: OutVariant, args: list[ir.Value], handle: int) -> None:
        outs = self._outs(op, variant)
        ir.Operation.create(
            "etx.kernel_call", operands=args + outs, loc=op.location,
            attributes={"kernel": ir.StringAttr.get(variant.kernel), "debug_handle": _i64(handle),
                        attrs.EDGE_OP: ir.StringAttr.get(op.name),
                        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(args), len(outs)])})

    def _delegate(self, op: ir.Operation, handle: int) -> None:
        callee = delegate_callee(op)
        args = [self.tensor(v, f"live-in {i} of delegate {callee}") for i, v in enumerate(op.operands)]
        outs = self._tensor_outs(op)
        ir.Operation.create(
            "etx.delegate_call", operands=args + outs, loc=op.location,
            attributes={"backend": op.attributes[attrs.BACKEND], "payload": ir.StringAttr.get(callee),
                        "debug_handle": _i64(handle), attrs.EDGE_OP: ir.StringAttr.get(f"delegate {callee}"),
                        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(args), len(outs)])})

    def _custom(self, op: ir.Operation, handle: int) -> None:
        qualified = ir.StringAttr(op.attributes["op"]).value
        variant = out_variant(qualified)
        if variant is None:
            raise _Unsupported(f"custom op {qualified} has no out variant: register "
                               f"`{qualified}.out(..., *, Tensor(a!) out) -> Tensor(a!)` with torch.library")
        schema = functional_schema(qualified)
        constant_args = {entry.name: entry.attr for entry in ir.DictAttr(op.attributes["args"])}
        tensors = iter(op.operands)
        args: list[ir.Value] = []
        for argument in schema.arguments:
            what = f"argument `{argument.name}` of {qualified}"
            type_text = str(argument.type)
            if type_text in ("Tensor", "Optional[Tensor]") and argument.name not in constant_args:
                args.append(self.tensor(next(tensors), what))
            elif argument.name in constant_args:
                attr = constant_args[argument.name]
                args.append(self.const(ir.FloatAttr.get(ir.F64Type.get(), ir.FloatAttr(attr).value))
                            if isinstance(attr, ir.FloatAttr) else self.const(attr))
            else:
                args.append(self.none())
        self._call(op, variant, args, handle)


def _convert_function(edge_func: ir.Operation) -> None:
    name = ir.StringAttr(edge_func.attributes["sym_name"]).value
    # Created right before the old function so symbol order is kept.
    new_func = func.FuncOp(name, ir.FunctionType.get([], []), loc=edge_func.location,
                           ip=ir.InsertionPoint(edge_func))
    for attr_name in _KEEP_FUNC_ATTRS:
        if attr_name in edge_func.attributes:
            new_func.attributes[attr_name] = edge_func.attributes[attr_name]
    method = "forward" if name == "main" else name
    new_func.attributes[METHOD_ATTR] = ir.StringAttr.get(method)
    block = new_func.add_entry_block()
    builder = _MethodBuilder(edge_func)
    edge_block = edge_func.regions[0].blocks[0]
    failures = builder.failures
    with ir.InsertionPoint(block):
        try:
            builder.inputs(edge_block)
        except (_Unsupported, UnsupportedElementType) as error:
            failures.append((edge_func, str(error)))
        if not failures:
            builder.convert_ops(list(edge_block.operations))
    if failures:
        new_func.operation.erase()
        for op, message in failures:
            emit_error(op, message)
        raise PassFailure()
    # Jump targets become instruction indices first: write_in_place may then drop state copies,
    # which come after every jump target (they end the method), so no target moves.
    resolve_jumps(new_func.operation)
    write_in_place(new_func.operation, builder.state_writes)
    edge_func.erase()


@register_pass("et-to-out-variants", level="edge", options={
    "functions": Option(list, [], "only these functions (default: every function in the top module)")})
def to_out_variants(module: ir.Operation, *, functions: list[str]) -> None:
    """et-to-out-variants: edge ops -> etx out-variant kernel calls with explicit outputs."""
    edge_funcs = [op.operation for op in module.regions[0].blocks[0].operations
                  if op.operation.name == "func.func" and len(op.operation.regions[0].blocks) > 0
                  and (not functions or ir.StringAttr(op.operation.attributes["sym_name"]).value in functions)]
    defined = sorted(ir.StringAttr(op.operation.attributes["sym_name"]).value
                     for op in module.regions[0].blocks[0].operations
                     if op.operation.name == "func.func" and len(op.operation.regions[0].blocks) > 0)
    missing = [name for name in functions if name not in defined]
    if missing:
        emit_error(module, f"et-to-out-variants: functions={','.join(functions)}: no function @{missing[0]} with a "
                           f"body in the module (functions: {', '.join(defined) or 'none'})")
        raise PassFailure()
    failed = False
    for edge_func in edge_funcs:
        try:
            _convert_function(edge_func)
        except PassFailure:
            failed = True
    for nested in delegate_modules(module):
        try:
            _convert_delegate_module(nested)
        except PassFailure:
            failed = True
    for op in list(module.regions[0].blocks[0].operations):  # delegate declarations: now etx.payload
        op = op.operation
        if op.name == "func.func" and len(op.regions[0].blocks) == 0 and attrs.BACKEND in op.attributes:
            op.erase()
    if failed:
        raise PassFailure()


def _convert_delegate_module(nested: ir.Operation) -> None:
    """A compiled delegate (nested module with `etmlir.payload`) -> `etx.payload` with its debug info."""
    name = ir.StringAttr(nested.attributes["sym_name"]).value
    backend = nested.attributes[attrs.BACKEND]
    if attrs.PAYLOAD not in nested.attributes:
        emit_error(nested, f"delegate @{name} (backend {backend}) has no payload: run et-preprocess-delegates "
                           "(edge.to_backend does) before et-to-out-variants")
        raise PassFailure()
    entries: list[ir.Attribute] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if attrs.DEBUG_HANDLE in op.attributes:
            entry = {"handle": op.attributes[attrs.DEBUG_HANDLE],
                     "location": ir.StringAttr.get(source_line(op.location)),
                     "op": ir.StringAttr.get(op.name)}
            path = module_path(op.location)  # `layers.3.attn`; None when the import recorded none
            if path is not None:
                entry["module_path"] = ir.StringAttr.get(path)
            entries.append(ir.DictAttr.get(entry))
        return ir.WalkResult.ADVANCE

    nested.walk(visit)
    specs = nested.attributes[attrs.COMPILE_SPECS] if attrs.COMPILE_SPECS in nested.attributes else ir.DictAttr.get({})
    ir.Operation.create("etx.payload", loc=nested.location, ip=ir.InsertionPoint(nested), attributes={
        "sym_name": ir.StringAttr.get(name), "backend": backend, "data": nested.attributes[attrs.PAYLOAD],
        "compile_specs": specs, "debug_info": ir.ArrayAttr.get(entries)})
    nested.erase()
