"""The model's call structure, read from torch.export and recorded on the imported function.

torch.export flattens `model(*args, **kwargs)` by its pytree `in_spec` and the result by its
`out_spec`. Python scalars and None among the leaves are specialized: constants in the graph, yet
still placeholders and outputs of it, which the importer would make `!torch.int`/`!torch.none`
arguments and results that no later level has a form for. `take_call_structure` turns the specs
into an `IOStructure` (etmlir.executable.io_structure) and removes the constant placeholders and
outputs from the program (graph and signature), so the method takes and returns only tensors;
`record_call_structure` puts the structure on the imported function, where every later level
(and `et-opt` round trips) finds it:

    forward(x, n=3) -> (x * n, None)                       # the model, exported with n=3
    func.func @main(%arg0: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32>
        attributes {etmlir.io_structure = "<the structure as JSON>"}
    forward(x: in0, n=3) -> (out0, None)                  # the structure, as et-inspect prints it

A leaf's index counts the remaining user inputs (outputs): they are the function's first
arguments (results), before any state a later step appends (etmlir/frontend/state.py).
"""

from __future__ import annotations

import collections
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch_mlir import ir

from etmlir.dialects import attrs
from etmlir.executable.io_structure import (
    CUSTOM, DICT, LIST, TUPLE, IOStructure, Node, StructureError, class_name, constant, leaf)


def take_call_structure(exported: torch.export.ExportedProgram) -> IOStructure:
    """The call structure of `exported`, whose constant user inputs and outputs it removes (in place)."""
    signature = exported.graph_signature
    graph = exported.graph
    user_inputs = [spec.arg.name for spec in signature.input_specs
                   if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    placeholders = {node.name: node for node in graph.nodes if node.op == "placeholder"}
    input_values = [placeholders[name].meta.get("val") for name in user_inputs]
    output_node = next(node for node in graph.nodes if node.op == "output")
    all_outputs = list(output_node.args[0])
    user_positions = [i for i, spec in enumerate(signature.output_specs)
                      if spec.kind == torch.export.graph_signature.OutputKind.USER_OUTPUT]
    if len(all_outputs) != len(signature.output_specs):
        raise StructureError(f"torch.export's graph returns {len(all_outputs)} values for "
                             f"{len(signature.output_specs)} output specs")
    user_outputs = [all_outputs[i] for i in user_positions]

    in_spec, out_spec = exported.call_spec.in_spec, exported.call_spec.out_spec
    inputs_builder = _Builder([_is_constant_value(v) for v in input_values], input_values, "input")
    inputs = inputs_builder.node(in_spec)
    outputs_builder = _Builder([not isinstance(v, torch.fx.Node) for v in user_outputs], user_outputs, "output")
    outputs = outputs_builder.node(out_spec)
    for builder, count in ((inputs_builder, len(input_values)), (outputs_builder, len(user_outputs))):
        if builder.position != count:
            raise StructureError(f"torch.export's {builder.what} spec has {builder.position} leaves "
                                 f"for {count} user {builder.what}s")
    if inputs.kind != TUPLE or len(inputs.children) != 2:
        raise StructureError(f"torch.export's input spec is not (args, kwargs): {in_spec}")
    call_graph = exported.module_call_graph
    names = (list(call_graph[0].signature.forward_arg_names or ())
             if call_graph and call_graph[0].signature is not None else [])

    # The constants leave the program: placeholders (unused: torch.export specialized them) and
    # outputs, from the graph and from its signature alike.
    changed = False
    for position in inputs_builder.constants:
        node = placeholders[user_inputs[position]]
        if node.users:
            raise StructureError(f"user input '{node.name}' was specialized to a constant by torch.export "
                                 "but the graph still uses it")
        graph.erase_node(node)
        changed = True
    dropped_inputs = {user_inputs[p] for p in inputs_builder.constants}
    signature.input_specs[:] = [spec for spec in signature.input_specs
                                if getattr(spec.arg, "name", None) not in dropped_inputs
                                or spec.kind != torch.export.graph_signature.InputKind.USER_INPUT]
    dropped_outputs = {user_positions[p] for p in outputs_builder.constants}
    if dropped_outputs:
        kept = [v for i, v in enumerate(all_outputs) if i not in dropped_outputs]
        output_node.args = (tuple(kept),)
        signature.output_specs[:] = [spec for i, spec in enumerate(signature.output_specs)
                                     if i not in dropped_outputs]
        changed = True
    if changed:
        exported.graph_module.recompile()
    return IOStructure(inputs, outputs, tuple(names))


def record_call_structure(main: ir.Operation, structure: IOStructure) -> None:
    """Puts `structure` on the imported function (`etmlir.io_structure`), checked against its signature."""
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    for what, node, count in (("input", structure.inputs, len(ftype.inputs)),
                              ("output", structure.outputs, len(ftype.results))):
        beyond = [leaf.index for leaf in node.leaves() if leaf.index >= count]
        if beyond:
            raise StructureError(f"the call structure names {what}s {beyond} of a function with {count}")
    main.attributes[attrs.IO_STRUCTURE] = ir.StringAttr.get(structure.to_json())


def _is_constant_value(value: Any) -> bool:
    """A user input torch.export specialized (a Python scalar, str or None, not a SymInt)."""
    return value is None or isinstance(value, (bool, int, float, str))


class _Builder:
    """Walks a TreeSpec, numbering the non-constant leaves as the method's inputs (or outputs)."""

    def __init__(self, is_constant: list[bool], values: list[Any], what: str) -> None:
        self.is_constant = is_constant
        self.values = values
        self.what = what
        self.position = 0
        self.constants: list[int] = []
        self.next_index = 0

    def node(self, spec: pytree.TreeSpec) -> Node:
        if spec.is_leaf():
            position = self.position
            self.position += 1
            if position >= len(self.values):
                raise StructureError(f"torch.export's {self.what} spec has more leaves than user {self.what}s")
            if self.is_constant[position]:
                self.constants.append(position)
                try:
                    return constant(self.values[position])
                except StructureError as error:
                    raise StructureError(f"user {self.what} {position}: {error}") from None
            self.next_index += 1
            return leaf(self.next_index - 1)
        if spec.type is type(None):  # None as a node without children (older torch pytrees)
            return constant(None)
        kind, keys, type_name = _container(spec)
        children = [self.node(child) for child in spec.children()]
        if kind == CUSTOM and _none_fields(spec):  # a registered dataclass leaves its None fields out
            none_fields = _none_fields(spec)
            keys = keys + none_fields
            children += [constant(None)] * len(none_fields)
        return Node(kind, keys=keys, type_name=type_name, children=tuple(children))


def _container(spec: pytree.TreeSpec) -> tuple[str, tuple, str]:
    """(kind, keys, type name) of a TreeSpec node."""
    node_type, context = spec.type, spec.context
    count = len(spec.children())
    if node_type is tuple:
        return TUPLE, (), ""
    if node_type is list:
        return LIST, (), ""
    if node_type is dict or node_type is collections.OrderedDict:
        return DICT, _keys(list(context), node_type), "" if node_type is dict else class_name(node_type)
    if node_type is collections.defaultdict:  # context: [default_factory, keys]
        return DICT, _keys(list(context[1]), node_type), ""
    if node_type is collections.namedtuple or (isinstance(context, type) and hasattr(context, "_fields")):
        return CUSTOM, tuple(context._fields), class_name(context)
    name = class_name(node_type) if isinstance(node_type, type) else str(node_type)
    if _str_list(context) and len(context) == count:   # ModelOutput: the present field names
        return CUSTOM, tuple(context), name
    if isinstance(context, (list, tuple)) and len(context) == 2 and _str_list(context[0]) \
            and _str_list(context[1]) and len(context[0]) == count:   # register_dataclass
        return CUSTOM, tuple(context[0]), name
    return CUSTOM, (), name   # fields unknown: children by position


def _none_fields(spec: pytree.TreeSpec) -> tuple[str, ...]:
    context = spec.context
    if isinstance(context, (list, tuple)) and len(context) == 2 and _str_list(context[0]) \
            and _str_list(context[1]) and len(context[0]) == len(spec.children()):
        return tuple(context[1])
    return ()


def _str_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _keys(keys: list[Any], node_type: type) -> tuple:
    for key in keys:
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            raise StructureError(f"a {node_type.__name__} key {key!r} ({type(key).__name__}) cannot be "
                                 "recorded in the call structure (str and int keys can)")
    return tuple(keys)
