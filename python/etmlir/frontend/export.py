"""`etmlir.export`: torch.export a model and import it as an ATen-level MLIR module.

The import uses torch-mlir's FX importer with two changes to its defaults:

* Weights are imported from numpy views of the model's tensors
  (`dense_resource` attributes that reference the buffer) instead of the
  importer's `tensor.tolist()` path, which takes 18 s and 3.4 GB for a
  160M-parameter model. Each weight literal is tagged with its fully
  qualified name (`etmlir.param`).
* Every op gets a location in the model's own source (see `locations`), and
  every dynamic input dim is recorded with its bounds on the function argument.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils._sympy.value_ranges import bound_sympy
from torch_mlir import ir
from torch_mlir.extras.fx_importer import (
    TORCH_DTYPE_TO_NPY_TYPE, FxImporter, FxImporterHooks, InputInfo, create_mlir_tensor_type)

from etmlir.dialects import attrs
from etmlir.dialects import new_context
from etmlir.frontend.aten_program import AtenProgram, DynamicDim
from etmlir.frontend.locations import anchor_locations



def export(model: torch.nn.Module, example_args: Sequence[Any],
           dynamic_shapes: Any = None) -> AtenProgram:
    """Export `model` called on `example_args` to an ATen-level program.

    `dynamic_shapes` is torch.export's (e.g. `{"idx": {1: torch.export.Dim("T", max=256)}}`);
    dims it names stay dynamic (`?`) in the module with their bounds recorded.
    The program's weights alias the model's tensors (no copy is made).
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"etmlir.export expects a torch.nn.Module, got {type(model).__name__}")
    example_args = tuple(example_args)
    exported = torch.export.export(model, example_args, dynamic_shapes=dynamic_shapes)
    prepare_for_import(exported)
    return import_exported_program(exported, example_args, _forward_location_text(model))


def prepare_for_import(exported: torch.export.ExportedProgram) -> None:
    """What `export` does to torch.export's program before importing it (in place)."""
    drop_runtime_assertions(exported)
    alias_listed_weights(exported)


# Nodes torch.export adds to assert facts about sizes (an unbacked size from
# nonzero is >= 0 and <= numel, ...). They compute nothing a kernel needs: the
# runtime checks sizes itself (a kernel's out never grows past its planned
# upper bound), so they are dropped before import, with the scalar arithmetic
# that only fed them.
RUNTIME_ASSERTIONS = ("aten._assert_scalar.default", "aten.sym_constrain_range_for_size.default",
                      "aten.sym_constrain_range.default", "aten._assert_tensor_metadata.default")


def drop_runtime_assertions(exported: torch.export.ExportedProgram) -> None:
    """Removes torch.export's size assertions (and what only they used) from `exported`'s graph, in place."""
    graph = exported.graph
    removed = False
    for node in list(graph.nodes):
        if node.op == "call_function" and str(node.target) in RUNTIME_ASSERTIONS:
            graph.erase_node(node)
            removed = True
    if removed:
        graph.eliminate_dead_code()
        exported.graph_module.recompile()


def alias_listed_weights(exported: torch.export.ExportedProgram) -> None:
    """Puts an `aten.alias` between each weight and a tensor list that holds it, in place.

    The importer freezes weights into literals, and a list operand mixing a literal with
    computed tensors (`einsum("bi,ijk", [x, self.w])`, a GRU's flat weights) is one it cannot
    import. Through the alias every list item is a computed value; the alias becomes a copy of a
    constant, which et-fold-constants folds away.
    """
    signature = exported.graph_signature
    weights = set(signature.inputs_to_parameters) | set(signature.inputs_to_buffers) | set(
        signature.inputs_to_lifted_tensor_constants)
    graph = exported.graph
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        aliases: dict[torch.fx.Node, torch.fx.Node] = {}

        def substitute(arg: Any) -> Any:
            nonlocal changed
            if not isinstance(arg, (list, tuple)):
                return arg
            items = []
            for item in arg:
                if isinstance(item, torch.fx.Node) and item.op == "placeholder" and item.name in weights:
                    if item not in aliases:
                        with graph.inserting_before(node):
                            aliases[item] = graph.call_function(torch.ops.aten.alias.default, (item,))
                            aliases[item].meta = dict(item.meta)
                    items.append(aliases[item])
                    changed = True
                else:
                    items.append(item)
            return type(arg)(items)

        node.args = tuple(substitute(a) for a in node.args)
        node.kwargs = {k: substitute(v) for k, v in node.kwargs.items()}
    if changed:
        exported.graph_module.recompile()


def import_exported_program(exported: torch.export.ExportedProgram, example_args: tuple[Any, ...],
                            fallback_location: tuple[str, int]) -> AtenProgram:
    """Import an ExportedProgram (consumed: the importer mutates it) into a fresh context."""
    context = new_context()
    dynamic_dims = _dynamic_dims(exported)
    hooks = _NumpyWeights(_weight_names(exported))
    importer = FxImporter(context=context, hooks=hooks)
    with context:
        importer.import_frozen_program(exported, func_name="main")
        module = importer.module
        main = _main_function(module)
        _record_dynamic_dims(main, dynamic_dims)
        anchor_locations(module, ir.Location.file(fallback_location[0], fallback_location[1], 0))
    return AtenProgram(module=module, example_args=example_args, dynamic_dims=dynamic_dims,
                       weight_buffers=hooks.buffers)


def _forward_location_text(model: torch.nn.Module) -> tuple[str, int]:
    forward = type(model).forward
    try:
        return inspect.getsourcefile(forward) or "<model>", inspect.getsourcelines(forward)[1]
    except (OSError, TypeError):
        return f"<{type(model).__qualname__}>", 0


def _main_function(module: ir.Module) -> ir.Operation:
    for op in module.body.operations:
        if op.operation.name == "func.func":
            return op.operation
    raise RuntimeError("the FX importer produced no function")


def _weight_names(exported: torch.export.ExportedProgram) -> dict[int, str]:
    """id(tensor) -> fully qualified name for every parameter, buffer and lifted constant.

    The frozen import hands the hook the state-dict tensors themselves, without
    their names, so identity is the link back to the FQN.
    """
    sig = exported.graph_signature
    names: dict[int, str] = {}
    for fqn in list(sig.inputs_to_parameters.values()) + list(sig.inputs_to_buffers.values()):
        names[id(exported.state_dict[fqn])] = fqn
    for fqn in sig.inputs_to_lifted_tensor_constants.values():
        names[id(exported.constants[fqn])] = fqn
    return names


class _NumpyWeights(FxImporterHooks):
    """Import tensor literals from numpy views of their buffers, named after their FQNs."""

    def __init__(self, names: dict[int, str]) -> None:
        self.names = names
        self.buffers: dict[str, np.ndarray] = {}
        # A parameter read by several ops is imported once per use; every use gets the same name
        # and blob (so canonicalization merges them into one constant, one weight). The tensor is
        # kept so that its id cannot be reused: id -> (name, attribute, tensor).
        self._imported: dict[int, tuple[str, ir.Attribute, torch.Tensor]] = {}

    def resolve_literal(self, gni: Any, literal: Any, info: InputInfo | None) -> ir.Value | None:
        if not isinstance(literal, torch.Tensor) or literal.numel() <= 1:
            return None  # scalars and splats: the importer's dense path is the better form
        if literal.dtype not in TORCH_DTYPE_TO_NPY_TYPE or literal.is_quantized:
            return None
        known = self._imported.get(id(literal))
        if known is not None:
            name, attr, _ = known
        else:
            name = self._unique(self.names.get(id(literal), "constant"))
            array = literal.detach().cpu().contiguous().numpy()
            self.buffers[name] = array
            attr = ir.DenseResourceElementsAttr.get_from_buffer(
                array, _resource_key(name), create_mlir_tensor_type(literal))
            self._imported[id(literal)] = (name, attr, literal)
        with ir.InsertionPoint(gni._b), ir.Location.unknown():
            op = ir.Operation.create(
                "torch.vtensor.literal", results=[gni._cc.tensor_to_vtensor_type(literal)],
                attributes={"value": attr, attrs.PARAM: ir.StringAttr.get(name)})
        return op.result

    def _unique(self, name: str) -> str:
        candidate, n = name, 1
        while candidate in self.buffers:
            candidate = f"{name}#{n}"
            n += 1
        return candidate


def _resource_key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", name)


def _dynamic_dims(exported: torch.export.ExportedProgram) -> list[DynamicDim]:
    """Dynamic dims of the user inputs with their bounds, read before the importer mutates the graph."""
    user_inputs = set(exported.graph_signature.user_inputs)
    ranges = exported.range_constraints
    dims: list[DynamicDim] = []
    index = 0
    for node in exported.graph.nodes:
        if node.op != "placeholder" or node.name not in user_inputs:
            continue
        value = node.meta.get("val")
        for d, size in enumerate(getattr(value, "shape", ())):
            if isinstance(size, torch.SymInt):
                expr = size.node.expr
                bounds = bound_sympy(expr, ranges)
                upper = bounds.upper
                dims.append(DynamicDim(index, d, str(expr), int(bounds.lower),
                                       int(upper) if upper.is_finite else None))
        index += 1
    return dims


def _record_dynamic_dims(main: ir.Operation, dims: list[DynamicDim]) -> None:
    if not dims:
        return
    n_args = len(main.regions[0].blocks[0].arguments)
    per_arg: list[dict[str, ir.Attribute]] = [{} for _ in range(n_args)]
    for dim in dims:
        fields = {"symbol": ir.StringAttr.get(dim.symbol),
                  "min": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim.min)}
        if dim.max is not None:
            fields["max"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim.max)
        per_arg[dim.input_index][str(dim.dim)] = ir.DictAttr.get(fields)
    main.attributes["arg_attrs"] = ir.ArrayAttr.get([
        ir.DictAttr.get({attrs.DYNAMIC_DIMS: ir.DictAttr.get(entries)} if entries else {})
        for entries in per_arg])
