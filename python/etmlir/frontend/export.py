"""`etmlir.export`: torch.export a model and import it as an ATen-level MLIR module.

The import uses torch-mlir's FX importer with two changes to its defaults:

* Weights are imported from numpy views of the model's tensors
  (`dense_resource` attributes that reference the buffer) instead of the
  importer's `tensor.tolist()` path, which takes 18 s and 3.4 GB for a
  160M-parameter model. Each weight literal is tagged with its fully
  qualified name (`etmlir.param`).
* Every op gets a location in the model's own source (see `locations`) that
  also names the nn.Module it came from (see `module_paths`), and every
  dynamic input dim is recorded with its bounds on the function argument.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils._sympy.value_ranges import bound_sympy
from torch_mlir import ir
from torch_mlir.extras.fx_importer import FxImporter, FxImporterHooks, InputInfo

from etmlir import compile_progress
from etmlir.dialects import attrs
from etmlir.dialects import new_context
from etmlir.frontend.aten_program import AtenProgram, DynamicDim
from etmlir.frontend.call_structure import record_call_structure, take_call_structure
from etmlir.frontend.control_flow import ControlFlowImporter, erase_inlined_functions, unroll_maps
from etmlir.frontend.literals import literal_array, literal_attribute, splat_literal
from etmlir.frontend.locations import anchor_locations
from etmlir.frontend.module_paths import record_module_paths
from etmlir.frontend.state import SignatureWithoutState, StateBuffer, exported_tensor, lift_state, mark_state
from etmlir.frontend.sym_calls import make_sym_calls_importable



def export(model: torch.nn.Module, example_args: Sequence[Any],
           dynamic_shapes: Any = None, kwargs: Mapping[str, Any] | None = None) -> AtenProgram:
    """Export `model` called on `example_args` (and keyword arguments `kwargs`) to an ATen-level program.

    Arguments and results may nest (tuples, lists, dicts, dataclasses, ModelOutputs) and hold
    None/int/float/bool/str constants: the program records the structure (`io_structure`) and
    the runtime's methods take and return it (see `etmlir.executable.io_structure`).

    `dynamic_shapes` is torch.export's (e.g. `{"idx": {1: torch.export.Dim("T", max=256)}}`);
    dims it names stay dynamic (`?`) in the module with their bounds recorded.
    The program's weights alias the model's tensors (no copy is made).
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"etmlir.export expects a torch.nn.Module, got {type(model).__name__}")
    example_args = tuple(example_args)
    with compile_progress.stage("export", total=2) as bar:  # a bar on a terminal
        bar.status("torch.export")
        # Under preserve_node_meta, torch traces the branches of torch.cond / while_loop through an
        # interpreter that keeps each op's stack trace: their ops get the branch's source line.
        with torch.fx.traceback.preserve_node_meta():
            exported = torch.export.export(model, example_args, kwargs=dict(kwargs) if kwargs else None,
                                           dynamic_shapes=dynamic_shapes)
        bar.advance()
        bar.status("import")
        exported = prepare_for_import(exported)
        program = import_exported_program(exported, example_args, _forward_location_text(model))
        bar.advance()
    return program


def prepare_for_import(exported: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """What `export` does to torch.export's program before importing it; returns the program to import."""
    exported = functionalize(exported)
    unroll_maps(exported)  # before the assertions go: a map body's are then dropped too
    drop_runtime_assertions(exported)
    drop_legacy_empty_cat_inputs(exported)
    alias_listed_weights(exported)
    make_sym_calls_importable(exported.graph_module)  # torch.sym_max(n, 3) -> prim.max.int, n % 3 -> remainder
    return exported


# Higher-order ops the importer takes as control flow; any other (autograd or autocast
# wrappers such as `wrap_with_set_grad_enabled`) is inlined by functionalization.
CONTROL_FLOW_HOPS = ("cond", "while_loop", "map_impl")


def needs_functionalization(exported: torch.export.ExportedProgram) -> bool:
    """Whether torch.export's graph still has in-place ops or wrapper higher-order ops.

    `torch.export.export` returns the training-level graph: `x.add_(1)`, `cache.index_copy_(...)`
    and `with torch.no_grad():` blocks (a rotary embedding's) survive in it as written.
    """
    for node in exported.graph.nodes:
        if node.op != "call_function":
            continue
        target = node.target
        if isinstance(target, torch._ops.HigherOrderOperator):
            if target.name() not in CONTROL_FLOW_HOPS:
                return True
        elif isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
            return True
    return False


def functionalize(exported: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """`exported` without in-place ops, mutations or wrapper higher-order ops.

    `run_decompositions({})` retraces the graph functionally and decomposes nothing (Core ATen
    decomposition is our own pass, with its keep list): `x.add_(1)` becomes `add`, a mutated
    buffer becomes an extra output that the signature marks as a BUFFER_MUTATION, and
    `wrap_with_set_grad_enabled` regions are inlined. Graphs that need none of it are returned
    as they are (the retrace costs about a second on nanoGPT).
    """
    if not needs_functionalization(exported):
        return exported
    return exported.run_decompositions({})


def drop_legacy_empty_cat_inputs(exported: torch.export.ExportedProgram) -> None:
    """Removes 1-D empty tensors from `aten.cat` lists whose other items have a higher rank, in place.

    `torch.cat([torch.tensor([]), x])` is legal for any `x` (PyTorch skips 1-D empty inputs, a
    legacy rule that Hugging Face's key/value caches start from). The rule exists nowhere below
    ATen, so the empty items go before import; a cat left with one input becomes that input's clone.
    """
    graph = exported.graph
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not torch.ops.aten.cat.default:
            continue
        items = list(node.args[0])
        metas = [getattr(item, "meta", {}).get("val") for item in items]
        if not any(isinstance(m, torch.Tensor) and m.dim() > 1 for m in metas):
            continue
        kept = [item for item, m in zip(items, metas)
                if not (isinstance(m, torch.Tensor) and m.dim() == 1 and _is_zero(m.shape[0]))]
        if len(kept) == len(items) or not kept:
            continue
        changed = True
        if len(kept) == 1:
            with graph.inserting_before(node):
                clone = graph.call_function(torch.ops.aten.clone.default, (kept[0],))
                clone.meta = dict(node.meta)
            node.replace_all_uses_with(clone)
            graph.erase_node(node)
        else:
            node.args = (kept, *node.args[1:])
    if changed:
        graph.eliminate_dead_code()
        exported.graph_module.recompile()


def _is_zero(size: Any) -> bool:
    return isinstance(size, int) and size == 0


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
    structure = take_call_structure(exported)  # constant inputs/outputs leave the graph
    dynamic_dims = _dynamic_dims(exported)
    state = lift_state(exported)  # mutated buffers: trailing arguments and results, not literals
    hooks = _NumpyWeights(_weight_names(exported))
    importer = FxImporter(context=context, hooks=hooks, graph_node_importer_cls=ControlFlowImporter)
    record_module_paths(importer)  # each op's location also names its nn.Module (`layers.3.attn`)
    with context:
        importer.import_frozen_program(_WithAllState(exported, state), func_name="main")
        module = importer.module
        erase_inlined_functions(module)  # torch.cond's branches, while_loop's bodies: now regions
        main = _main_function(module)
        _record_dynamic_dims(main, dynamic_dims)
        record_call_structure(main, structure)
        mark_state(main, state, hooks.buffers)
        anchor_locations(module, ir.Location.file(fallback_location[0], fallback_location[1], 0))
    return AtenProgram(module=module, example_args=example_args, dynamic_dims=dynamic_dims,
                       weight_buffers=hooks.buffers)


class _WithAllState:
    """`exported` as the FX importer reads it, with non-persistent buffers in its state dict.

    torch.export keeps a non-persistent buffer (a rotary embedding's `inv_freq`, BERT's
    `position_ids`, Swin's `relative_position_index`) in `constants`, not in `state_dict`, while
    the importer looks every buffer up in `state_dict`. Program state (buffers forward mutates)
    is left out of its buffers, so that the importer keeps them as function arguments.
    """

    def __init__(self, exported: torch.export.ExportedProgram, state: Sequence[StateBuffer] = ()) -> None:
        self._exported = exported
        self.graph_signature = SignatureWithoutState(exported.graph_signature, state)
        self.state_dict = dict(exported.state_dict)
        for fqn in exported.graph_signature.inputs_to_buffers.values():
            tensor = exported_tensor(exported, fqn)
            if fqn not in self.state_dict and tensor is not None:
                self.state_dict[fqn] = tensor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._exported, name)


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
    for fqn in (list(sig.inputs_to_parameters.values()) + list(sig.inputs_to_buffers.values())
                + list(sig.inputs_to_lifted_tensor_constants.values())):
        tensor = exported_tensor(exported, fqn)
        if isinstance(tensor, torch.Tensor):
            names[id(tensor)] = fqn
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
        if not isinstance(literal, torch.Tensor):
            return None
        if literal.numel() <= 1:  # scalars and splats: the importer's dense form (ours for bfloat16)
            return splat_literal(gni, literal)
        known = self._imported.get(id(literal))
        if known is not None:
            name, attr, _ = known
        else:
            array = literal_array(literal)  # bfloat16: a tagged int16 view of its bits
            if array is None:
                return None  # quantized and other dtypes numpy cannot hold: the importer's path
            name = self._unique(self.names.get(id(literal), "constant"))
            self.buffers[name] = array
            attr = literal_attribute(literal, array, _resource_key(name))
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
