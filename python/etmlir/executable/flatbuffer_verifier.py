"""The FlatBuffers verifier for the `.pte` program, in Python, with the failing place named.

The flatc-generated Python reader (`etmlir.schema`) trusts every offset in the buffer: a flipped
byte sends it past the end (IndexError, struct.error) or into the middle of another table (silent
nonsense). The C++ runtime runs `flatbuffers::Verifier` before it reads anything; this module
runs the same checks, with the same limits, before Python reads anything:

- every offset is 4-byte aligned, non-zero, positive as a signed 32-bit value, in the buffer;
- every table starts 4-byte aligned, its vtable is 2-byte aligned, of even size, in the buffer;
- every scalar or struct field a vtable names lies in the buffer, aligned to its size;
- every vector's length word is aligned and its items (and a string's NUL) lie in the buffer;
- tables nest at most 64 deep and at most 1,000,000 are visited (shared ones once per visit).

One check more than C++: the Python reader copies what it reads, and a FlatBuffer is a DAG (a
few hundred bytes can describe 2^64 nodes, or name a megabyte string a million times), which
would take it forever or exhaust memory where C++ only counts visits. So every table (4 bytes),
vector and string visited is charged against the buffer's size: without sharing, objects are
disjoint and the charge stays within the size; a damaged buffer may overlap a few, so the limit
is COPY_FACTOR times the size, and only a buffer that shares objects many times over (which
etmlir's writer never does) runs over and is refused.

So a program this verifier accepts the C++ verifier accepts too, and the reverse (but for that
sharing); reading it with the generated Python code stays inside the buffer, in time and memory
proportional to its size. (The runtime's further checks, value indices and the like, are its
loader's; et-inspect shows such a file with `<bad ...>` markers.) A failure names the place as a
reader would, with the byte offset inside the FlatBuffer:

    method 0 ('forward') > value 0 > value (Tensor) > sizes: the sizes vector of 1,048,576 8-byte
    items at byte 3,812 (8,388,612 bytes) runs past the end of the program (3,848 bytes)

`TABLES` (with `STRUCTS`, `UNIONS`, `ENUMS`) mirrors runtime/schema/program.fbs field by field:
slot order is field order, a union field takes two slots (its type, then its value). A field
appended to the schema must be appended here too; test_et_inspect_fuzz.py checks that they agree.
"""

from __future__ import annotations

import struct

# -- the schema, as runtime/schema/program.fbs declares it ----------------------------------

SCALAR_SIZES = {"bool": 1, "byte": 1, "ubyte": 1, "short": 2, "ushort": 2, "int": 4, "uint": 4,
                "float": 4, "long": 8, "ulong": 8, "double": 8}
ENUMS = {"ScalarType": "byte", "Dynamism": "byte", "TreeKind": "byte"}
STRUCTS = {
    "Allocation": [("mem_id", "uint"), ("offset", "ulong")],
    "DataLocation": [("segment", "uint"), ("offset", "ulong"), ("size", "ulong")],
}
UNIONS = {
    "Value": ["Null", "Int", "Double", "Bool", "String", "Tensor", "IntList", "DoubleList", "BoolList",
              "TensorList", "OptionalTensorList"],
    "InstructionKind": ["KernelCall", "DelegateCall", "JumpFalse", "Move", "Free"],
}
TABLES = {
    "Tensor": [("dtype", "ScalarType"), ("sizes", "[long]"), ("dim_order", "[ubyte]"), ("dynamism", "Dynamism"),
               ("allocation", "Allocation"), ("constant", "DataLocation"), ("nbytes", "ulong"),
               ("dynamic_dims", "[bool]"), ("initial", "DataLocation")],
    "Int": [("value", "long")],
    "Double": [("value", "double")],
    "Bool": [("value", "bool")],
    "String": [("value", "string")],
    "Null": [],
    "IntList": [("items", "[int]")],
    "DoubleList": [("items", "[double]")],
    "BoolList": [("items", "[bool]")],
    "TensorList": [("items", "[int]")],
    "OptionalTensorList": [("items", "[int]")],
    "EValue": [("value", "Value")],
    "KernelCall": [("op", "uint"), ("args", "[int]")],
    "DelegateCall": [("delegate", "uint"), ("args", "[int]"), ("num_outputs", "uint")],
    "JumpFalse": [("cond", "int"), ("target", "uint")],
    "Move": [("from", "int"), ("to", "int")],
    "Free": [("value", "int")],
    "Instruction": [("kind", "InstructionKind"), ("debug_handle", "uint")],
    "Operator": [("name", "string"), ("overload", "string")],
    "CompileSpec": [("key", "string"), ("value", "[ubyte]")],
    "PayloadSignature": [("public_key", "[ubyte]"), ("signature", "[ubyte]")],
    "Delegate": [("backend", "string"), ("compile_specs", "[CompileSpec]"), ("payload", "DataLocation"),
                 ("signatures", "[PayloadSignature]")],
    "Arena": [("name", "string"), ("size", "ulong")],
    "DebugEntry": [("handle", "uint"), ("location", "string"), ("op", "string"), ("module_path", "string")],
    "TreeNode": [("kind", "TreeKind"), ("index", "int"), ("constant", "EValue"), ("keys", "[EValue]"),
                 ("type_name", "string"), ("children", "[TreeNode]")],
    "Method": [("name", "string"), ("values", "[EValue]"), ("inputs", "[int]"), ("outputs", "[int]"),
               ("instructions", "[Instruction]"), ("operators", "[Operator]"), ("delegates", "[Delegate]"),
               ("arenas", "[Arena]"), ("debug_info", "[DebugEntry]"), ("input_structure", "TreeNode"),
               ("output_structure", "TreeNode"), ("arg_names", "[string]"), ("state", "[State]")],
    "State": [("name", "string"), ("value", "int")],
    "Segment": [("offset", "ulong"), ("size", "ulong")],
    "BundledTensor": [("scalar_type", "ScalarType"), ("sizes", "[long]"), ("data", "DataLocation")],
    "BundledCase": [("method", "string"), ("name", "string"), ("inputs", "[BundledTensor]"),
                    ("expected_outputs", "[BundledTensor]"), ("atol", "double"), ("rtol", "double")],
    "Program": [("version", "uint"), ("methods", "[Method]"), ("segments", "[Segment]"),
                ("constant_segment", "uint"), ("bundled_cases", "[BundledCase]")],
}
ROOT = "Program"

# flatbuffers::Verifier's defaults (verifier.h), which the runtime's loader uses.
MAX_DEPTH = 64
MAX_TABLES = 1_000_000
MAX_BUFFER_SIZE = (1 << 31) - 1
MIN_BUFFER_SIZE = 12
# How many times its own size the Python reader may copy out of a program (module docstring).
COPY_FACTOR = 16

# How a vector of tables is named in a path: "method 0", "value 12", "instruction 3".
_ITEM_NAMES = {"methods": "method", "values": "value", "instructions": "instruction", "operators": "operator",
               "delegates": "delegate", "arenas": "arena", "debug_info": "debug entry", "segments": "segment",
               "compile_specs": "compile spec", "children": "child", "keys": "key", "state": "state entry",
               "arg_names": "arg name", "signatures": "signature"}


def _struct_layout(fields: list[tuple[str, str]]) -> tuple[int, int]:
    """(size, alignment) of a struct: fields at their natural alignment, the size padded to the largest."""
    size, align = 0, 1
    for _, kind in fields:
        width = SCALAR_SIZES[ENUMS.get(kind, kind)]
        size = (size + width - 1) // width * width + width
        align = max(align, width)
    return (size + align - 1) // align * align, align


_STRUCT_LAYOUTS = {name: _struct_layout(fields) for name, fields in STRUCTS.items()}


class FlatBufferError(ValueError):
    """The program FlatBuffer breaks a verifier rule; `where` is the path to the bad place, `what` the rule."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}" if where else what)
        self.where, self.what = where, what


class _Verifier:
    def __init__(self, buf: bytes | bytearray | memoryview, max_depth: int, max_tables: int) -> None:
        self.buf = buf
        self.size = len(buf)
        self.max_depth, self.max_tables = max_depth, max_tables
        self.depth = self.tables = 0
        self.budget = COPY_FACTOR * self.size  # bytes the reader may copy (see the module docstring)
        self.path: list[str] = []

    # -- primitives (flatbuffers::Verifier's, one for one) ------------------------------------

    def fail(self, what: str) -> FlatBufferError:
        return FlatBufferError(" > ".join(self.path), what)

    def in_bounds(self, pos: int, length: int, what: str) -> None:
        if not (0 <= pos and length < self.size and pos <= self.size - length):
            raise self.fail(f"{what} at byte {pos:,} ({length:,} bytes) runs past the end of the program "
                            f"({self.size:,} bytes)")

    def aligned(self, pos: int, alignment: int, what: str) -> None:
        if pos % alignment:
            raise self.fail(f"{what} at byte {pos:,} is not {alignment}-byte aligned")

    def charge(self, nbytes: int, what: str) -> None:
        self.budget -= nbytes
        if self.budget < 0:
            raise self.fail(f"{what}: reading the program would copy more than {COPY_FACTOR} times its "
                            f"{self.size:,} bytes (tables, vectors or strings shared many times over, as only "
                            f"a crafted file does)")

    def u32(self, pos: int) -> int:
        return struct.unpack_from("<I", self.buf, pos)[0]

    def offset(self, pos: int, what: str) -> int:
        """The position an offset at `pos` points to (VerifyOffset)."""
        self.aligned(pos, 4, f"offset to the {what}")
        self.in_bounds(pos, 4, f"offset to the {what}")
        o = self.u32(pos)
        if o == 0:
            raise self.fail(f"offset to the {what} at byte {pos:,} is 0")
        if o >= 1 << 31:
            raise self.fail(f"offset to the {what} at byte {pos:,} is {o:,}, negative as a signed offset")
        self.in_bounds(pos + o, 1, f"the {what} (offset {o:,} from byte {pos:,})")
        return pos + o

    def vector(self, pos: int, item_size: int, what: str) -> int:
        """The length of the vector (or string) at `pos`, its items checked to lie in the buffer."""
        self.aligned(pos, 4, f"length of {what}")
        self.in_bounds(pos, 4, f"length of {what}")
        n = self.u32(pos)
        if n >= MAX_BUFFER_SIZE // item_size:
            raise self.fail(f"{what} at byte {pos:,} claims {n:,} {item_size}-byte items, more than a FlatBuffer holds")
        self.in_bounds(pos, 4 + item_size * n, f"{what} of {n:,} {item_size}-byte items")
        self.charge(4 + item_size * n, what)
        return n

    def string(self, pos: int, what: str) -> None:
        n = self.vector(pos, 1, f"the {what} string")
        end = pos + 4 + n
        self.in_bounds(end, 1, f"the NUL terminator of the {what} string")
        if self.buf[end] != 0:
            raise self.fail(f"the {what} string at byte {pos:,} ({n:,} bytes) does not end in a NUL byte")

    # -- tables ------------------------------------------------------------------------------

    def table(self, pos: int, name: str) -> None:
        self.aligned(pos, 4, f"{name} table")
        self.in_bounds(pos, 4, f"{name} table")
        self.depth += 1
        self.tables += 1
        if self.depth > self.max_depth:
            raise self.fail(f"tables nest more than {self.max_depth} deep")
        if self.tables > self.max_tables:
            raise self.fail(f"more than {self.max_tables:,} tables to visit (shared subtrees count once per use)")
        self.charge(4, f"{name} table at byte {pos:,}")
        vtable = pos - struct.unpack_from("<i", self.buf, pos)[0]
        self.aligned(vtable, 2, f"vtable of the {name} table at byte {pos:,}")
        self.in_bounds(vtable, 2, f"vtable of the {name} table at byte {pos:,}")
        vsize = struct.unpack_from("<H", self.buf, vtable)[0]
        if vsize % 2:
            raise self.fail(f"vtable of the {name} table at byte {pos:,} has odd size {vsize}")
        self.in_bounds(vtable, vsize, f"vtable of the {name} table at byte {pos:,}")
        slot = 0
        for field, kind in TABLES[name]:
            if kind in UNIONS:
                self._union(pos, vtable, vsize, slot, field, kind)
                slot += 2
            else:
                self._field(pos, vtable, vsize, slot, field, kind, name)
                slot += 1
        self.depth -= 1

    def _field_pos(self, pos: int, vtable: int, vsize: int, slot: int) -> int | None:
        entry = 4 + 2 * slot
        if entry >= vsize:
            return None
        at = struct.unpack_from("<H", self.buf, vtable + entry)[0]
        return pos + at if at else None

    def _field(self, pos: int, vtable: int, vsize: int, slot: int, field: str, kind: str, table: str) -> None:
        at = self._field_pos(pos, vtable, vsize, slot)
        if at is None:
            return
        base = ENUMS.get(kind, kind)
        if base in SCALAR_SIZES or kind in STRUCTS:
            width, alignment = _STRUCT_LAYOUTS[kind] if kind in STRUCTS else (SCALAR_SIZES[base],) * 2
            self.aligned(at, alignment, f"field {field}")
            self.in_bounds(at, width, f"field {field}")
            return
        target = self.offset(at, field)
        self.path.append(field)
        if kind == "string":
            self.string(target, field)
            if table == "Method" and field == "name" and len(self.path) >= 2:  # "method 0 ('forward')"
                text = bytes(self.buf[target + 4:target + 4 + min(self.u32(target), 80)])
                self.path[-2] += f" ({text.decode(errors='backslashreplace')!r})"
        elif kind in TABLES:
            self.table(target, kind)
        elif kind.startswith("["):
            self._vector(target, field, kind[1:-1])
        else:  # pragma: no cover - a schema type this module does not know (the schema test catches it)
            raise self.fail(f"field {field} has unknown type {kind}")
        self.path.pop()

    def _vector(self, pos: int, field: str, item: str) -> None:
        base = ENUMS.get(item, item)
        if base in SCALAR_SIZES or item in STRUCTS:
            self.vector(pos, _STRUCT_LAYOUTS[item][0] if item in STRUCTS else SCALAR_SIZES[base],
                        f"the {field} vector")
            return
        n = self.vector(pos, 4, f"the {field} vector")
        self.path.pop()  # an item's path names the field itself: "value 12", not "values > value 12"
        for i in range(n):
            element = pos + 4 + 4 * i
            # VerifyVectorOfTables/Strings follow an item's offset unchecked; the table (string) checks its target.
            target = element + self.u32(element)
            self.path.append(f"{_ITEM_NAMES[field]} {i}" if field in _ITEM_NAMES else f"{field}[{i}]")
            if item == "string":
                self.string(target, _ITEM_NAMES.get(field, field))
            else:
                self.table(target, item)
            self.path.pop()
        self.path.append(field)

    def _union(self, pos: int, vtable: int, vsize: int, slot: int, field: str, union: str) -> None:
        type_at = self._field_pos(pos, vtable, vsize, slot)
        kind = 0
        if type_at is not None:
            self.in_bounds(type_at, 1, f"field {field}_type")
            kind = self.buf[type_at]
        value_at = self._field_pos(pos, vtable, vsize, slot + 1)
        if value_at is None:
            return
        target = self.offset(value_at, field)
        members = UNIONS[union]
        if 1 <= kind <= len(members):  # NONE and kinds this schema does not know are not followed (as in C++)
            self.path.append(f"{field} ({members[kind - 1]})")
            self.table(target, members[kind - 1])
            self.path.pop()


def verify(buf: bytes | bytearray | memoryview, identifier: bytes | None = b"ETX1",
           max_depth: int = MAX_DEPTH, max_tables: int = MAX_TABLES) -> None:
    """Raises FlatBufferError unless `buf` (the program FlatBuffer alone) passes the verifier's checks."""
    size = len(buf)
    if size >= MAX_BUFFER_SIZE:
        raise FlatBufferError("", f"program is {size:,} bytes, more than a FlatBuffer can address")
    if size < MIN_BUFFER_SIZE:
        raise FlatBufferError("", f"program is {size} bytes, shorter than the smallest FlatBuffer "
                                  f"({MIN_BUFFER_SIZE} bytes)")
    if identifier is not None and bytes(buf[4:8]) != identifier:
        raise FlatBufferError("", f"program FlatBuffer identifier is {bytes(buf[4:8])!r}, expected {identifier!r}")
    v = _Verifier(buf, max_depth, max_tables)
    v.table(v.offset(0, "root table"), ROOT)
