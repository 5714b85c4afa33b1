"""The call structure of a method: how its flat inputs and outputs nest in the model's own call.

torch.export flattens `model(ids, {"a": x}, attention_mask=mask)` and what it returns (a dict, a
tuple of lists, a transformers `ModelOutput`) into lists of leaves; the compiled method takes and
returns only those leaves that are tensors. This module describes the nesting in etmlir's own
terms, not torch's pickled TreeSpec, so that every reader (the Python runtime, et-inspect, a C++
caller) can walk it:

    forward(ids: in0, inputs: {'a': in1, 'b': in2}, n: 3, mask=None)
        -> {'y': (out0, [out1, None]), 'n': 3}

A leaf is either a value of the method's flat list (`Leaf`, an index into its inputs or outputs)
or a `Constant` the export fixed (None, bool, int, float, str: torch.export specializes Python
scalars, so they are in the signature but not in the graph). Containers are tuples, lists, dicts
and `Custom` classes with named fields (namedtuple, dataclass, ModelOutput), recorded by qualified
name ("module:QualName") and field names.

One description, three forms:
- `IOStructure` / `Node` here (Python);
- JSON in the IR, the string attribute `etmlir.io_structure` on the function, so that it
  survives `et-opt` round trips (`to_json` / `from_json`);
- `TreeNode` tables in the `.pte` (`Method.input_structure`, `output_structure`, `arg_names`,
  runtime/schema/program.fbs; `to_flatbuffer` / `read_structures`).

The input root is a tuple of two: the positional arguments' tuple and the keyword arguments' dict
(as torch.export's in_spec). `flatten_call` binds a call to it (checking constants), `build`
rebuilds a result from the method's flat outputs.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import numbers
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from etmlir.schema.Bool import BoolT
from etmlir.schema.Double import DoubleT
from etmlir.schema.EValue import EValueT
from etmlir.schema.Int import IntT
from etmlir.schema.Null import NullT
from etmlir.schema.Program import Program as ProgramTable
from etmlir.schema.String import StringT
from etmlir.schema.TreeKind import TreeKind
from etmlir.schema.TreeNode import TreeNodeT
from etmlir.schema.Value import Value

LEAF, CONSTANT, TUPLE, LIST, DICT, CUSTOM = "leaf", "constant", "tuple", "list", "dict", "custom"
KINDS = (LEAF, CONSTANT, TUPLE, LIST, DICT, CUSTOM)
_KIND_CODES = {LEAF: TreeKind.Leaf, CONSTANT: TreeKind.Constant, TUPLE: TreeKind.Tuple, LIST: TreeKind.List,
               DICT: TreeKind.Dict, CUSTOM: TreeKind.Custom}
_KIND_NAMES = {code: name for name, code in _KIND_CODES.items()}

# The constants a `.pte` can hold (an EValue each); int is int64 there.
Constant = None | bool | int | float | str
Key = str | int
INT64 = (-(1 << 63), (1 << 63) - 1)


class StructureError(ValueError):
    """A call that does not fit the structure (the message names the argument), or a bad structure."""


@dataclasses.dataclass(frozen=True)
class Node:
    """One node of a call structure (see the module docstring for the kinds)."""

    kind: str
    index: int = -1                      # leaf: position in the method's inputs (or outputs)
    value: Constant = None               # constant
    keys: tuple[Key, ...] = ()           # dict: its keys; custom: field names (one per child)
    type_name: str = ""                  # custom (and dict subclasses): "module:QualName"
    children: tuple["Node", ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise StructureError(f"unknown structure node kind {self.kind!r} (expected one of {KINDS})")
        if self.kind == DICT and len(self.keys) != len(self.children):
            raise StructureError(f"a dict node has {len(self.keys)} keys for {len(self.children)} children")
        if self.kind == CUSTOM and self.keys and len(self.keys) != len(self.children):
            raise StructureError(f"{self.type_name} has {len(self.keys)} field names for "
                                 f"{len(self.children)} children")

    def leaves(self) -> list["Node"]:
        """The leaf nodes under this one, in order."""
        if self.kind == LEAF:
            return [self]
        return [leaf for child in self.children for leaf in child.leaves()]

    # -- JSON (the IR attribute) ------------------------------------------------------------
    # Compact, since it is printed on the function: a leaf is its index, a constant
    # {"const": v}, a container {"<kind>": [children], "keys": [...], "type": "module:Qual"}.

    def to_dict(self) -> int | dict[str, Any]:
        if self.kind == LEAF:
            return self.index
        if self.kind == CONSTANT:
            return {"const": self.value}
        out: dict[str, Any] = {self.kind: [child.to_dict() for child in self.children]}
        if self.keys:
            out["keys"] = list(self.keys)
        if self.type_name:
            out["type"] = self.type_name
        return out

    @staticmethod
    def from_dict(data: int | Mapping[str, Any]) -> "Node":
        if isinstance(data, int) and not isinstance(data, bool):
            return leaf(data)
        if not isinstance(data, Mapping):
            raise StructureError(f"malformed structure node {data!r}")
        if "const" in data:
            return Node(CONSTANT, value=data["const"])
        kinds = [k for k in (TUPLE, LIST, DICT, CUSTOM) if k in data]
        if len(kinds) != 1 or not isinstance(data[kinds[0]], list):
            raise StructureError(f"malformed structure node {str(dict(data))[:80]}")
        return Node(kinds[0], keys=tuple(data.get("keys", ())), type_name=data.get("type", ""),
                    children=tuple(Node.from_dict(c) for c in data[kinds[0]]))

    # -- FlatBuffer (the .pte) --------------------------------------------------------------

    def to_flatbuffer(self) -> TreeNodeT:
        table = TreeNodeT()
        table.kind = _KIND_CODES[self.kind]
        table.index = self.index
        if self.kind == CONSTANT:
            table.constant = _evalue(self.value)
        if self.keys:
            table.keys = [_evalue(k) for k in self.keys]
        if self.type_name:
            table.typeName = self.type_name
        if self.kind not in (LEAF, CONSTANT):
            table.children = [child.to_flatbuffer() for child in self.children]
        return table

    @staticmethod
    def from_flatbuffer(table: TreeNodeT) -> "Node":
        if table.kind not in _KIND_NAMES:
            raise StructureError(f"unknown TreeKind {table.kind} in the call structure")
        kind = _KIND_NAMES[table.kind]
        type_name = _text(table.typeName) if table.typeName is not None else ""
        return Node(kind=kind, index=table.index,
                    value=_constant(table.constant) if kind == CONSTANT else None,
                    keys=tuple(_constant(k) for k in (table.keys or ())), type_name=type_name,
                    children=tuple(Node.from_flatbuffer(c) for c in (table.children or ())))

    # -- text -------------------------------------------------------------------------------

    def describe(self, prefix: str) -> str:
        """`{'a': in0, 'b': [in1, None]}`: leaves as `<prefix><index>`, constants as their repr."""
        if self.kind == LEAF:
            return f"{prefix}{self.index}"
        if self.kind == CONSTANT:
            return repr(self.value)
        items = [c.describe(prefix) for c in self.children]
        if self.kind == TUPLE:
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if self.kind == LIST:
            return "[" + ", ".join(items) + "]"
        if self.kind == DICT:
            body = "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(self.keys, items)) + "}"
            return f"{_short(self.type_name)}({body})" if self.type_name else body
        fields = (", ".join(f"{k}={v}" for k, v in zip(self.keys, items)) if self.keys else ", ".join(items))
        return f"{_short(self.type_name)}({fields})"


def leaf(index: int) -> Node:
    return Node(LEAF, index=index)


def constant(value: Constant) -> Node:
    if not is_constant(value):
        raise StructureError(f"a {type(value).__name__} cannot be a recorded constant "
                             "(None, bool, int, float and str can)")
    if isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]:
        raise StructureError(f"constant {value} does not fit in int64")
    return Node(CONSTANT, value=value)


def is_constant(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


@dataclasses.dataclass(frozen=True)
class IOStructure:
    """The structure of a method's call: inputs (root: (positional tuple, keyword dict)), outputs,
    and the model's parameter names (positional ones first), used to bind keywords to positions."""

    inputs: Node
    outputs: Node
    arg_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        root = self.inputs
        if not (root.kind == TUPLE and len(root.children) == 2 and root.children[0].kind == TUPLE
                and root.children[1].kind == DICT):
            raise StructureError("the input structure's root must be (positional tuple, keyword dict)")

    @property
    def positional(self) -> Node:
        return self.inputs.children[0]

    @property
    def keywords(self) -> Node:
        return self.inputs.children[1]

    def positional_names(self) -> list[str]:
        count = len(self.positional.children)
        names = list(self.arg_names[:count])
        return names + [f"arg{i}" for i in range(len(names), count)]

    def flat_inputs(self, num_inputs: int) -> bool:
        """Whether a call is just the method's inputs in order (`forward(x, y)`, no constants)."""
        return (not self.keywords.children
                and [(c.kind, c.index) for c in self.positional.children] == [(LEAF, i) for i in range(num_inputs)])

    def flat_outputs(self, num_outputs: int) -> bool:
        """Whether the model returned one value or a tuple/list of the method's outputs in order."""
        root = self.outputs
        if root.kind == LEAF:
            return num_outputs == 1 and root.index == 0
        return (root.kind in (TUPLE, LIST)
                and [(c.kind, c.index) for c in root.children] == [(LEAF, i) for i in range(num_outputs)])

    def check(self, num_inputs: int, num_outputs: int) -> None:
        """Raises StructureError unless the leaves name each flat input and output exactly once."""
        for what, node, count in (("input", self.inputs, num_inputs), ("output", self.outputs, num_outputs)):
            indices = sorted(leaf.index for leaf in node.leaves())
            if indices != list(range(count)):
                raise StructureError(f"the {what} structure names the method's {what}s {indices}, "
                                     f"but the method has {count} {what}s")

    # -- calls ------------------------------------------------------------------------------

    def flatten_call(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """(argument path, value) of each flat input, in the method's input order.

        Binds `args`/`kwargs` like Python binds a call of the model's forward (a parameter the
        export passed by keyword may come by position and the reverse), checks every constant
        leaf against its exported value and every container against its recorded shape.
        """
        names = self.positional_names()
        keyword_keys = list(self.keywords.keys)
        positional: list[Any] = list(args[:len(names)])
        keywords: dict[Key, Any] = {}
        for i, value in enumerate(args[len(names):], start=len(names)):
            name = self.arg_names[i] if i < len(self.arg_names) else None
            if name is None or name not in keyword_keys:
                raise StructureError(f"takes {len(names)} positional arguments ({', '.join(names)}), "
                                     f"got {len(args)}")
            keywords[name] = value
        for name, value in kwargs.items():
            if name in keyword_keys:
                if name in keywords:
                    raise StructureError(f"got two values for argument '{name}'")
                keywords[name] = value
            elif name in names:
                at = names.index(name)
                if at < len(positional):
                    raise StructureError(f"got two values for argument '{name}'")
                positional.extend([_MISSING] * (at + 1 - len(positional)))
                positional[at] = value
            else:
                known = ", ".join(names + [str(k) for k in keyword_keys])
                raise StructureError(f"got an unexpected keyword argument '{name}' (exported with: {known})")
        positional.extend([_MISSING] * (len(names) - len(positional)))
        found: list[tuple[int, str, Any]] = []
        for name, node, value in zip(names, self.positional.children, positional):
            _flatten(node, value, name, found)
        for key, node in zip(keyword_keys, self.keywords.children):
            _flatten(node, keywords.get(key, _MISSING), str(key), found)
        found.sort(key=lambda item: item[0])
        return [(path, value) for _, path, value in found]

    def build(self, flat_outputs: Sequence[Any]) -> Any:
        """The model's result from the method's flat outputs (see `build`)."""
        return build(self.outputs, flat_outputs)

    def describe(self, method: str = "forward") -> str:
        """One line: `forward(ids: in0, mask=None) -> {'y': out0}`."""
        parts = [f"{name}: {node.describe('in')}" for name, node in zip(self.positional_names(),
                                                                      self.positional.children)]
        parts += [f"{key}={node.describe('in')}" for key, node in zip(self.keywords.keys, self.keywords.children)]
        return f"{method}({', '.join(parts)}) -> {self.outputs.describe('out')}"

    # -- serialized forms -------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps({"inputs": self.inputs.to_dict(), "outputs": self.outputs.to_dict(),
                           "arg_names": list(self.arg_names)}, separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> "IOStructure":
        try:
            data = json.loads(text)
            return IOStructure(Node.from_dict(data["inputs"]), Node.from_dict(data["outputs"]),
                               tuple(data.get("arg_names", ())))
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise StructureError(f"malformed call structure {text[:80]!r}: {error}") from None

    def to_flatbuffer(self) -> tuple[TreeNodeT, TreeNodeT, list[str]]:
        """(Method.input_structure, Method.output_structure, Method.arg_names)."""
        return self.inputs.to_flatbuffer(), self.outputs.to_flatbuffer(), list(self.arg_names)

    @staticmethod
    def from_flatbuffer(inputs: TreeNodeT | None, outputs: TreeNodeT | None,
                        arg_names: Sequence[str | bytes] | None) -> "IOStructure | None":
        """The structure a method's tables describe (None when it has none: a flat method)."""
        if inputs is None or outputs is None:
            return None
        names = tuple(_text(n) for n in (arg_names or ()))
        return IOStructure(Node.from_flatbuffer(inputs), Node.from_flatbuffer(outputs), names)


def read_structures(data: Any, program_offset: int) -> dict[str, IOStructure | None]:
    """The call structure of each method of a `.pte` (None for a method recorded without one).

    `data` is the file's bytes (or a memory map of it) and `program_offset` where its FlatBuffer
    starts; only the structure tables are read, not the methods' value tables.
    """
    program = ProgramTable.GetRootAs(data, program_offset)
    found: dict[str, IOStructure | None] = {}
    for i in range(program.MethodsLength()):
        method = program.Methods(i)
        name = _text(method.Name() or b"")
        inputs, outputs = method.InputStructure(), method.OutputStructure()
        found[name] = IOStructure.from_flatbuffer(
            None if inputs is None else TreeNodeT.InitFromObj(inputs),
            None if outputs is None else TreeNodeT.InitFromObj(outputs),
            [method.ArgNames(j) for j in range(method.ArgNamesLength())])
    return found


# -- flatten -------------------------------------------------------------------------------

class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _flatten(node: Node, value: Any, path: str, found: list[tuple[int, str, Any]]) -> None:
    if value is _MISSING:
        if node.kind == CONSTANT:  # a constant the caller leaves out: its exported value
            return
        raise StructureError(f"missing argument '{path}'")
    if node.kind == LEAF:
        found.append((node.index, path, value))
        return
    if node.kind == CONSTANT:
        if not same_constant(node.value, value):
            raise StructureError(f"{path} expected {node.value!r} (the value it was exported with), "
                                 f"got {_short_value(value)}")
        return
    if node.kind in (TUPLE, LIST):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            raise StructureError(f"{path} expected a {node.kind} of {len(node.children)}, got {_short_value(value)}")
        if len(value) != len(node.children):
            raise StructureError(f"{path} expected a {node.kind} of {len(node.children)}, "
                                 f"got one of {len(value)}")
        for i, (child, item) in enumerate(zip(node.children, value)):
            _flatten(child, item, f"{path}[{i}]", found)
        return
    if node.kind == DICT:
        if not isinstance(value, Mapping):
            raise StructureError(f"{path} expected a dict with keys {list(node.keys)}, got {_short_value(value)}")
        if set(value) != set(node.keys):
            raise StructureError(f"{path} expected a dict with keys {list(node.keys)}, got keys {list(value)}")
        for key, child in zip(node.keys, node.children):
            _flatten(child, value[key], f"{path}[{key!r}]", found)
        return
    # custom: by field name (attribute or mapping key), else by position
    for i, child in enumerate(node.children):
        if node.keys:
            key = node.keys[i]
            if isinstance(value, Mapping) and key in value:
                item = value[key]
            elif hasattr(value, str(key)):
                item = getattr(value, str(key))
            else:
                raise StructureError(f"{path} expected a {_short(node.type_name)} with field '{key}', "
                                     f"got {_short_value(value)}")
            _flatten(child, item, f"{path}.{key}", found)
        else:
            try:
                item = value[i]
            except (TypeError, IndexError, KeyError):
                raise StructureError(f"{path} expected a {_short(node.type_name)} of {len(node.children)} "
                                     f"items, got {_short_value(value)}") from None
            _flatten(child, item, f"{path}[{i}]", found)


def same_constant(expected: Constant, got: Any) -> bool:
    """Whether `got` is the constant `expected` (an int where a float was exported counts)."""
    if expected is None:
        return got is None
    got_bool = isinstance(got, bool) or type(got).__name__ == "bool_"  # numpy's bool too
    if isinstance(expected, bool):
        return got_bool and bool(got) == expected
    if got_bool:
        return False
    if isinstance(expected, int):
        return isinstance(got, numbers.Integral) and int(got) == expected
    if isinstance(expected, float):
        if not isinstance(got, numbers.Real):  # numpy scalars are Real, tensors are not
            return False
        return float(got) == expected or (expected != expected and float(got) != float(got))
    return isinstance(got, str) and got == expected


def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _short_value(value: Any) -> str:
    if _is_array(value):
        return f"{type(value).__name__} of shape {tuple(value.shape)}"
    if is_constant(value):
        return repr(value) if len(repr(value)) <= 40 else type(value).__name__
    return type(value).__name__


# -- build ---------------------------------------------------------------------------------

def build(node: Node, flat: Sequence[Any]) -> Any:
    """The value `node` describes, with its leaves taken from `flat`.

    Tuples, lists, dicts and constants come back as themselves. A custom class (a namedtuple,
    dataclass or transformers ModelOutput) is rebuilt as that class when its module imports and
    the class takes its fields (by position for a namedtuple, by keyword otherwise); when it
    cannot be (a class defined inside a function, a module not installed here), the value is a
    dict from field name to value (a tuple when the fields were not recorded).
    """
    if node.kind == LEAF:
        return flat[node.index]
    if node.kind == CONSTANT:
        return node.value
    values = [build(child, flat) for child in node.children]
    if node.kind == TUPLE:
        return tuple(values)
    if node.kind == LIST:
        return values
    if node.kind == DICT:
        cls = import_class(node.type_name) if node.type_name else None
        items = list(zip(node.keys, values))
        if cls is not None and issubclass(cls, dict):
            try:
                return cls(items)
            except Exception:  # a dict subclass that needs more (a defaultdict's factory)
                pass
        return dict(items)
    cls = import_class(node.type_name)
    if cls is not None:
        try:
            if issubclass(cls, tuple) and hasattr(cls, "_fields"):
                return cls(*values)
            return cls(**dict(zip(node.keys, values))) if node.keys else cls(*values)
        except Exception:  # a class whose constructor is not its fields: the fallback below
            pass
    return dict(zip(node.keys, values)) if node.keys else tuple(values)


def import_class(type_name: str) -> type | None:
    """The class "module:QualName" names, or None when it cannot be imported here."""
    module_name, _, qualname = type_name.partition(":")
    if not module_name or not qualname or "<locals>" in qualname:
        return None
    module = sys.modules.get(module_name)
    if module is None:
        try:
            module = importlib.import_module(module_name)
        except Exception:  # not installed, or fails to import: fall back to a dict
            return None
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if isinstance(obj, type) else None


def class_name(cls: type) -> str:
    """The "module:QualName" of `cls` (what `import_class` takes)."""
    return f"{cls.__module__}:{cls.__qualname__}"


def _short(type_name: str) -> str:
    return type_name.rpartition(":")[2] or type_name


# -- EValue constants --------------------------------------------------------------------------

def _evalue(value: Constant) -> EValueT:
    entry = EValueT()
    if value is None:
        entry.valueType, entry.value = Value.Null, NullT()
    elif isinstance(value, bool):
        entry.valueType, entry.value = Value.Bool, BoolT()
        entry.value.value = value
    elif isinstance(value, int):
        entry.valueType, entry.value = Value.Int, IntT()
        entry.value.value = value
    elif isinstance(value, float):
        entry.valueType, entry.value = Value.Double, DoubleT()
        entry.value.value = value
    elif isinstance(value, str):
        entry.valueType, entry.value = Value.String, StringT()
        entry.value.value = value
    else:
        raise StructureError(f"a {type(value).__name__} cannot be written as a structure constant")
    return entry


def _text(raw: str | bytes) -> str:
    """A FlatBuffer string as text; bytes that are not UTF-8 stay visible as escapes (a file may be damaged)."""
    return raw.decode(errors="backslashreplace") if isinstance(raw, bytes) else raw


def _constant(entry: EValueT | None) -> Constant:
    if entry is None or entry.valueType == Value.Null:
        return None
    if entry.value is None:  # a value kind this reader does not know, or the kind without its table
        raise StructureError(f"a structure constant of value kind {entry.valueType} has no value")
    if entry.valueType == Value.Bool:
        return bool(entry.value.value)
    if entry.valueType == Value.Int:
        return int(entry.value.value)
    if entry.valueType == Value.Double:
        return float(entry.value.value)
    if entry.valueType == Value.String:
        return _text(entry.value.value or b"")
    raise StructureError(f"a structure constant of value kind {entry.valueType} (not None/bool/int/float/str)")
