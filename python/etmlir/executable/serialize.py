"""etx module -> `.pte` bytes.

Every value-defining etx op becomes one entry of the method's value table,
every call one instruction, in program order; constants are copied once
(deduplicated by content) into the constant segment, and delegate payloads
each into a segment of their own (also deduplicated). Program state
(`etx.state`) is a planned tensor whose initial value goes into the constant
segment too (`Tensor.initial`), listed by name in `Method.state`; a file with
state is `Program.version` 2. The FlatBuffer is built with the
flatc-generated object API (`etmlir.schema`), never by hand.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

import numpy as np
from torch_mlir import ir

from etmlir.dialects import attrs
from etmlir.dialects.etx import method_functions, output_owners, tensor_type, upper_bounds
from etmlir.executable import pte
from etmlir.executable.dtypes import element_info, nbytes
from etmlir.executable.io_structure import IOStructure, StructureError
from etmlir.frontend.locations import module_path, source_line
from etmlir.schema.Allocation import AllocationT
from etmlir.schema.Arena import ArenaT
from etmlir.schema.Bool import BoolT
from etmlir.schema.BoolList import BoolListT
from etmlir.schema.CompileSpec import CompileSpecT
from etmlir.schema.DataLocation import DataLocationT
from etmlir.schema.DebugEntry import DebugEntryT
from etmlir.schema.Delegate import DelegateT
from etmlir.schema.DelegateCall import DelegateCallT
from etmlir.schema.Double import DoubleT
from etmlir.schema.DoubleList import DoubleListT
from etmlir.schema.Dynamism import Dynamism
from etmlir.schema.EValue import EValueT
from etmlir.schema.Free import FreeT
from etmlir.schema.Instruction import InstructionT
from etmlir.schema.InstructionKind import InstructionKind
from etmlir.schema.Int import IntT
from etmlir.schema.IntList import IntListT
from etmlir.schema.JumpFalse import JumpFalseT
from etmlir.schema.KernelCall import KernelCallT
from etmlir.schema.Method import MethodT
from etmlir.schema.Move import MoveT
from etmlir.schema.Null import NullT
from etmlir.schema.Operator import OperatorT
from etmlir.schema.OptionalTensorList import OptionalTensorListT
from etmlir.schema.Program import ProgramT
from etmlir.schema.State import StateT
from etmlir.schema.String import StringT
from etmlir.schema.Tensor import TensorT
from etmlir.schema.TensorList import TensorListT
from etmlir.schema.Value import Value

CONSTANT_ALIGNMENT = 16
_NUMPY_TYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32,
                "i16": np.int16, "i8": np.int8, "ui8": np.uint8, "i1": np.bool_}


class SerializeError(ValueError):
    """The module cannot be written as a `.pte`; the message names the op."""


_RESOURCE_KEY = re.compile(r"dense_resource<([^>]+)>")
_BLOB = re.compile(r'^\s*"?([^":\s]+)"?: "0x([0-9A-Fa-f]*)"', re.MULTILINE)


def resource_blobs(module: ir.Operation) -> dict[str, bytes]:
    """Every dense_resource blob of `module` by key (read from its printed form: the bindings give no bytes)."""
    text = module.get_asm(large_elements_limit=None)
    start = text.find("dialect_resources")
    return {m.group(1): bytes.fromhex(m.group(2))[4:]  # 4 bytes of alignment first
            for m in _BLOB.finditer(text, start if start >= 0 else len(text))}


def resource_key(attr: ir.Attribute) -> str | None:
    """The blob key of a `dense_resource<...>` attribute (None for any other attribute)."""
    text = str(attr)
    return _RESOURCE_KEY.search(text).group(1).strip('"') if text.startswith("dense_resource<") else None


class _ConstantData:
    """Finds the bytes of constants: the caller's weight buffers, else the module's resource blobs."""

    def __init__(self, module: ir.Operation, weights: Mapping[str, np.ndarray] | None) -> None:
        self.module = module
        self.weights = weights or {}
        self._blobs: dict[str, bytes] | None = None

    def _blob(self, key: str) -> bytes | None:
        if self._blobs is None:
            self._blobs = resource_blobs(self.module)
        return self._blobs.get(key)

    def payload_bytes(self, op: ir.Operation) -> bytes:
        """The bytes of an `etx.payload`: a string attribute, a dense_resource blob or dense elements."""
        attr = op.attributes["data"]
        if isinstance(attr, ir.StringAttr):
            return attr.value_bytes
        if str(attr).startswith("dense_resource<"):
            key = _RESOURCE_KEY.search(str(attr)).group(1).strip('"')
            data = self._blob(key)
            if data is None:
                raise SerializeError(f"payload: resource '{key}' has no data in the module")
            return data
        if isinstance(attr, ir.DenseElementsAttr):
            return _dense_bytes(ir.DenseElementsAttr(attr), ir.RankedTensorType(attr.type))
        raise SerializeError(f"payload: data {str(attr)[:60]} is not bytes")

    def bytes_of(self, op: ir.Operation, t: ir.RankedTensorType) -> bytes:
        """The data of an `etx.constant`, or the initial value of an `etx.state`."""
        expected = nbytes(list(t.shape), t.element_type)
        param = ir.StringAttr(op.attributes[attrs.PARAM]).value if attrs.PARAM in op.attributes else None
        if op.name == "etx.state":
            param = ir.StringAttr(op.attributes["name"]).value
        attr = op.attributes["value"]
        if param is not None and param in self.weights:
            data = np.ascontiguousarray(self.weights[param]).tobytes()
        elif str(attr).startswith("dense_resource<"):  # the bindings do not downcast this attribute
            key = _RESOURCE_KEY.search(str(attr)).group(1).strip('"')
            data = self._blob(key)
            if data is None:
                raise SerializeError(f"constant {param or key}: resource '{key}' has no data in the module "
                                     "(the weights were elided when it was printed?)")
        elif isinstance(attr, ir.DenseElementsAttr):
            data = _dense_bytes(ir.DenseElementsAttr(attr), t)
        else:
            raise SerializeError(f"constant {param or ''}: value {str(attr)[:60]} is not tensor data")
        if len(data) != expected:
            raise SerializeError(f"constant {param or ''}: {len(data)} bytes of data for {t} ({expected} bytes)")
        return data


def _dense_bytes(attr: ir.DenseElementsAttr, t: ir.RankedTensorType) -> bytes:
    key = str(t.element_type)
    if key == "bf16":
        return _bfloat16_bytes(attr, t)
    if key not in _NUMPY_TYPES:
        raise SerializeError(f"constant of element type {key} cannot be serialized")
    dtype = _NUMPY_TYPES[key]
    if attr.is_splat:
        splat = attr.get_splat_value()
        scalar = ir.FloatAttr(splat).value if isinstance(splat, ir.FloatAttr) else ir.IntegerAttr(splat).value
        return np.full(t.shape, scalar, dtype=dtype).tobytes()
    if key == "i1":
        return np.array([bool(v) for v in ir.DenseIntElementsAttr(attr)], dtype=np.bool_).tobytes()
    typed = ir.DenseFPElementsAttr(attr) if key.startswith("f") else ir.DenseIntElementsAttr(attr)
    return np.array(typed, dtype=dtype).reshape(t.shape).tobytes()


# An element of a printed bf16 elements attribute: a decimal, or a bit pattern (NaN, inf) in hex.
_BF16_ELEMENT = re.compile(r"0x[0-9A-Fa-f]+|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _bfloat16_bytes(attr: ir.DenseElementsAttr, t: ir.RankedTensorType) -> bytes:
    """The bytes of a dense bf16 constant (e.g. a bfloat16 splat such as `torch.tensor(0.5, dtype=bf16)`).

    The bindings give bf16 elements neither as a buffer nor one by one; a splat's value is a
    FloatAttr, and other values are read from the attribute's text, where each element is a
    decimal with enough digits to round back to its bf16 value, or its bits in hex.
    """
    if attr.is_splat:
        values = [ir.FloatAttr(attr.get_splat_value()).value]
    else:
        text = str(attr)  # dense<[[1.500000e+00, 0x7FC0], ...]> : tensor<2x2xbf16>
        body = text[text.index("<") + 1:text.rindex("> :")]
        if body.lstrip().startswith('"0x'):  # the raw little-endian bytes in hex
            data = bytes.fromhex(body.strip().strip('"')[2:])
            if len(data) == 2 * int(np.prod(t.shape)):
                return data
            raise SerializeError(f"constant {text[:60]}: {len(data)} bytes of data for {t}")
        values = _BF16_ELEMENT.findall(body)
    bits = np.empty(len(values), dtype=np.uint16)
    for i, v in enumerate(values):
        if isinstance(v, str) and v.startswith("0x"):
            bits[i] = int(v, 16)
        else:
            f32 = np.array(float(v), dtype=np.float32).view(np.uint32)
            bits[i] = (int(f32) + 0x7FFF + ((int(f32) >> 16) & 1)) >> 16  # round to nearest even
    count = int(np.prod(t.shape))
    if attr.is_splat:
        bits = np.full(count, bits[0], dtype=np.uint16)
    if len(bits) != count:
        raise SerializeError(f"constant {str(attr)[:60]}: read {len(bits)} bf16 values for {t}")
    return bits.tobytes()


def _evalue(kind: int, table: object) -> EValueT:
    value = EValueT()
    value.valueType, value.value = kind, table
    return value


def _scalar(table_type: type, v: object) -> object:
    table = table_type()
    table.value = v
    return table


def _items(table_type: type, items: list) -> object:
    table = table_type()
    table.items = items
    return table


def _int_attr(op: ir.Operation, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def _io_structure(func_op: ir.Operation, num_inputs: int, num_outputs: int) -> tuple:
    """The method's call structure tables (`etmlir.io_structure`), checked against its inputs and outputs."""
    try:
        structure = IOStructure.from_json(ir.StringAttr(func_op.attributes[attrs.IO_STRUCTURE]).value)
        structure.check(num_inputs, num_outputs)
    except StructureError as error:
        raise SerializeError(f"{attrs.IO_STRUCTURE} of method "
                             f"'{ir.StringAttr(func_op.attributes['etx.method']).value}': {error}") from None
    return structure.to_flatbuffer()


class _MethodWriter:
    def __init__(self, func_op: ir.Operation, module: ir.Operation, constants: _ConstantData,
                 constant_segment: bytearray, constant_index: dict[str, int],
                 payloads: list[bytes], payload_index: dict[str, int]) -> None:
        self.func_op = func_op
        self.module = module
        self.constants = constants
        self.constant_segment = constant_segment
        self.constant_index = constant_index
        self.payloads = payloads
        self.payload_index = payload_index
        self.values: list[EValueT] = []
        self.index: dict[ir.Value, int] = {}
        self.ints: dict[int, int] = {}  # boxed Int values of constant int lists
        self.operators: list[tuple[str, str]] = []
        self.delegates: list[DelegateT] = []
        self.instructions: list[InstructionT] = []
        self.outputs = output_owners(func_op)
        self.debug_entries: list[DebugEntryT] = []

    def add(self, value: EValueT, result: ir.Value | None = None) -> int:
        self.values.append(value)
        if result is not None:
            self.index[result] = len(self.values) - 1
        return len(self.values) - 1

    def boxed_int(self, v: int) -> int:
        if v not in self.ints:
            self.ints[v] = self.add(_evalue(Value.Int, _scalar(IntT, v)))
        return self.ints[v]

    def tensor(self, op: ir.Operation) -> EValueT:
        t = tensor_type(op)
        code, _, _ = element_info(t.element_type)
        sizes = upper_bounds(op)
        table = TensorT()
        table.dtype = code
        table.sizes = sizes
        table.dimOrder = list(range(len(sizes)))
        table.dynamism = Dynamism.Static if t.has_static_shape else Dynamism.Bounded
        if not t.has_static_shape:
            table.dynamicDims = [t.is_dynamic_dim(d) for d in range(t.rank)]
        table.nbytes = nbytes(sizes, t.element_type)
        if "mem_id" in op.attributes:
            table.allocation = AllocationT()
            table.allocation.memId = _int_attr(op, "mem_id")
            table.allocation.offset = _int_attr(op, "offset")
        elif op.name == "etx.alloc" and op not in self.outputs:  # outputs may be left to the caller
            raise SerializeError(f"{op.name} {t} at {source_line(op.location)} has no planned memory "
                                 "(run et-plan-memory)")
        if op.name == "etx.constant":
            table.constant = self.place_constant(self.constants.bytes_of(op, t))
        elif op.name == "etx.state":
            if "mem_id" not in op.attributes:
                raise SerializeError(f"state '{ir.StringAttr(op.attributes['name']).value}' has no planned memory "
                                     "(run et-plan-memory)")
            table.initial = self.place_constant(self.constants.bytes_of(op, t))
        return _evalue(Value.Tensor, table)

    def place_constant(self, data: bytes) -> DataLocationT:
        """Where `data` is in the constant segment (appended unless the same bytes are there)."""
        digest = hashlib.sha256(data).hexdigest()
        if digest not in self.constant_index:
            offset = (len(self.constant_segment) + CONSTANT_ALIGNMENT - 1) // CONSTANT_ALIGNMENT \
                * CONSTANT_ALIGNMENT
            self.constant_segment.extend(bytes(offset - len(self.constant_segment)))
            self.constant_index[digest] = offset
            self.constant_segment.extend(data)
        location = DataLocationT()
        location.segment = 0
        location.offset = self.constant_index[digest]
        location.size = len(data)
        return location

    def const(self, op: ir.Operation) -> EValueT:
        attr = op.attributes["value"]
        if isinstance(attr, ir.BoolAttr):
            return _evalue(Value.Bool, _scalar(BoolT, bool(attr.value)))
        if isinstance(attr, ir.IntegerAttr):
            return _evalue(Value.Int, _scalar(IntT, attr.value))
        if isinstance(attr, ir.FloatAttr):
            return _evalue(Value.Double, _scalar(DoubleT, attr.value))
        if isinstance(attr, ir.StringAttr):
            return _evalue(Value.String, _scalar(StringT, attr.value))
        if isinstance(attr, ir.DenseI64ArrayAttr):
            return _evalue(Value.IntList, _items(IntListT, [self.boxed_int(v) for v in attr]))
        if isinstance(attr, ir.DenseF64ArrayAttr):
            return _evalue(Value.DoubleList, _items(DoubleListT, list(attr)))
        if isinstance(attr, ir.DenseBoolArrayAttr):
            return _evalue(Value.BoolList, _items(BoolListT, [bool(v) for v in attr]))
        raise SerializeError(f"etx.const at {source_line(op.location)}: value {attr} has no .pte representation")

    def scalar_slot(self, op: ir.Operation) -> EValueT:
        t = ir.TypeAttr(op.attributes["type"]).value
        if str(t) == "i1":
            return _evalue(Value.Bool, _scalar(BoolT, False))
        if isinstance(t, ir.IntegerType):
            return _evalue(Value.Int, _scalar(IntT, 0))
        if isinstance(t, ir.FloatType):
            return _evalue(Value.Double, _scalar(DoubleT, 0.0))
        raise SerializeError(f"etx.alloc at {source_line(op.location)}: type {t} is not a tensor or scalar")

    def operator(self, kernel: str) -> int:
        name, _, overload = kernel.partition(".")
        key = (name, overload)
        if key not in self.operators:
            self.operators.append(key)
        return self.operators.index(key)

    def delegate(self, op: ir.Operation) -> int:
        symbol = ir.StringAttr(op.attributes["payload"]).value
        payload_op = None
        for candidate in self.module.regions[0].blocks[0].operations:
            candidate = candidate.operation
            if candidate.name == "etx.payload" and ir.StringAttr(candidate.attributes["sym_name"]).value == symbol:
                payload_op = candidate
        if payload_op is None:
            raise SerializeError(f"etx.delegate_call at {source_line(op.location)}: no etx.payload @{symbol}")
        data = self.constants.payload_bytes(payload_op)
        digest = hashlib.sha256(data).hexdigest()
        if digest not in self.payload_index:
            self.payloads.append(data)
            self.payload_index[digest] = len(self.payloads)  # segment 0 holds the constants
        delegate = DelegateT()
        delegate.backend = ir.StringAttr(payload_op.attributes["backend"]).value
        delegate.compileSpecs = []
        for entry in ir.DictAttr(payload_op.attributes["compile_specs"]):
            spec = CompileSpecT()
            spec.key = entry.name
            spec.value = list(ir.StringAttr(entry.attr).value.encode() if isinstance(entry.attr, ir.StringAttr)
                              else str(entry.attr).encode())
            delegate.compileSpecs.append(spec)
        delegate.payload = DataLocationT()
        delegate.payload.segment = self.payload_index[digest]
        delegate.payload.offset = 0
        delegate.payload.size = len(data)
        self.delegates.append(delegate)
        # The ops inside the delegate: their handles map to source lines here, in the outer method,
        # because the runtime reports a delegate's failure through the outer program.
        if "debug_info" in payload_op.attributes:
            known = {entry.handle for entry in self.debug_entries}
            for item in ir.ArrayAttr(payload_op.attributes["debug_info"]):
                item = ir.DictAttr(item)
                handle = ir.IntegerAttr(item["handle"]).value
                if handle in known:
                    continue
                entry = DebugEntryT()
                entry.handle = handle
                entry.location = ir.StringAttr(item["location"]).value
                entry.op = ir.StringAttr(item["op"]).value
                if "module_path" in item:
                    entry.modulePath = ir.StringAttr(item["module_path"]).value
                self.debug_entries.append(entry)
                known.add(handle)
        return len(self.delegates) - 1

    def write(self) -> MethodT:
        method = MethodT()
        method.name = ir.StringAttr(self.func_op.attributes["etx.method"]).value
        inputs: list[tuple[int, int]] = []
        outputs: list[int] = []
        state: list[StateT] = []
        for op in self.func_op.regions[0].blocks[0].operations:
            op = op.operation
            name = op.name
            if name in ("etx.input", "etx.constant", "etx.state") or (
                    name == "etx.alloc" and tensor_type(op) is not None):
                index = self.add(self.tensor(op), op.result)
                if name == "etx.input":
                    inputs.append((_int_attr(op, "index"), index))
                elif name == "etx.state":
                    entry = StateT()
                    entry.name, entry.value = ir.StringAttr(op.attributes["name"]).value, index
                    state.append(entry)
            elif name == "etx.alloc":
                self.add(self.scalar_slot(op), op.result)
            elif name == "etx.const":
                self.add(self.const(op), op.result)
            elif name == "etx.none":
                self.add(_evalue(Value.Null, NullT()), op.result)
            elif name == "etx.list":
                kind = ir.StringAttr(op.attributes["kind"]).value
                items = [self.index[v] for v in op.operands]
                if kind == "optional_tensor":
                    items = [-1 if self.values[i].valueType == Value.Null else i for i in items]
                table = {"int": IntListT, "tensor": TensorListT, "optional_tensor": OptionalTensorListT}[kind]
                value_kind = {"int": Value.IntList, "tensor": Value.TensorList,
                              "optional_tensor": Value.OptionalTensorList}[kind]
                self.add(_evalue(value_kind, _items(table, items)), op.result)
            elif name in ("etx.kernel_call", "etx.delegate_call"):
                args = [self.index[v] for v in op.operands]
                if name == "etx.kernel_call":
                    call = KernelCallT()
                    call.op = self.operator(ir.StringAttr(op.attributes["kernel"]).value)
                    kind = InstructionKind.KernelCall
                else:
                    call = DelegateCallT()
                    call.delegate = self.delegate(op)
                    call.numOutputs = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[1]
                    kind = InstructionKind.DelegateCall
                call.args = args
                self.instruction(kind, call, op)
            elif name == "etx.jump_false":
                jump = JumpFalseT()
                jump.cond, jump.target = self.index[op.operands[0]], _int_attr(op, "target")
                self.instruction(InstructionKind.JumpFalse, jump, op)
            elif name == "etx.move":
                move = MoveT()
                move.from_ = self.index[op.operands[0]]
                move.to = self.index[op.operands[1]]
                self.instruction(InstructionKind.Move, move, op)
            elif name == "etx.free":
                free = FreeT()
                free.value = self.index[op.operands[0]]
                self.instruction(InstructionKind.Free, free, op)
            elif name == "etx.output":
                outputs = [self.index[v] for v in op.operands]
            elif name != "func.return":
                raise SerializeError(f"'{name}' at {source_line(op.location)} is not an etx op "
                                     "(run et-to-out-variants first)")
        method.values = self.values
        method.inputs = [index for _, index in sorted(inputs)]
        method.outputs = outputs
        method.state = state
        method.operators = []
        for op_name, overload in self.operators:
            entry = OperatorT()
            entry.name, entry.overload = op_name, overload
            method.operators.append(entry)
        method.delegates = self.delegates
        method.instructions = self.instructions
        method.debugInfo = self.debug_entries
        method.arenas = []
        if "etx.arenas" in self.func_op.attributes:
            for arena_attr in ir.ArrayAttr(self.func_op.attributes["etx.arenas"]):
                arena_attr = ir.DictAttr(arena_attr)
                arena = ArenaT()
                arena.name = ir.StringAttr(arena_attr["name"]).value
                arena.size = ir.IntegerAttr(arena_attr["size"]).value
                method.arenas.append(arena)
        if attrs.IO_STRUCTURE in self.func_op.attributes:
            method.inputStructure, method.outputStructure, method.argNames = _io_structure(
                self.func_op, len(method.inputs), len(method.outputs))
        return method

    def instruction(self, kind: int, table: object, op: ir.Operation) -> None:
        instruction = InstructionT()
        instruction.kindType, instruction.kind = kind, table
        handle = _int_attr(op, "debug_handle") if "debug_handle" in op.attributes else 0
        instruction.debugHandle = handle
        self.instructions.append(instruction)
        if handle:
            entry = DebugEntryT()
            entry.handle = handle
            entry.location = source_line(op.location)
            entry.op = (ir.StringAttr(op.attributes[attrs.EDGE_OP]).value
                        if attrs.EDGE_OP in op.attributes else op.name)
            entry.modulePath = module_path(op.location)  # None (absent) when the import recorded none
            self.debug_entries.append(entry)


def serialize(module: ir.Module | ir.Operation, weights: Mapping[str, np.ndarray] | None = None,
              segment_alignment: int = 4096) -> bytes:
    """The `.pte` bytes of a planned etx module (every method it holds)."""
    operation = module.operation if isinstance(module, ir.Module) else module
    functions = method_functions(operation)
    if not functions:
        raise SerializeError("no etx method in the module (run et-to-out-variants and et-plan-memory first)")
    constants = _ConstantData(operation, weights)
    constant_segment = bytearray()
    constant_index: dict[str, int] = {}
    payloads: list[bytes] = []
    payload_index: dict[str, int] = {}
    program = ProgramT()
    program.methods = []
    for func_op in functions:
        writer = _MethodWriter(func_op, operation, constants, constant_segment, constant_index, payloads,
                               payload_index)
        program.methods.append(writer.write())
    # The lowest version whose runtimes read the file right (a version-1 runtime would not fill state).
    program.version = pte.STATE_VERSION if any(m.state for m in program.methods) else 1
    if any(i.kindType in (InstructionKind.JumpFalse, InstructionKind.Move)
           for m in program.methods for i in m.instructions or []):
        program.version = pte.CONTROL_FLOW_VERSION
    names = [m.name for m in program.methods]
    if len(set(names)) != len(names):
        raise SerializeError(f"two methods share a name: {names}")
    program.constantSegment = 0
    return pte.pack(program, [bytes(constant_segment)] + payloads, segment_alignment)
