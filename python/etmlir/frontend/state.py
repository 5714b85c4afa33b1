"""Program state: the buffers `forward` mutates (KV caches, step counters, running statistics).

After functionalization (`export.functionalize`) torch.export's program reads a
mutated buffer through a placeholder (`inputs_to_buffers`) and returns its new
value as an extra output of kind BUFFER_MUTATION (`buffers_to_mutate`). Frozen
like a weight, such a buffer would be a constant that never changes while the
program returns its new value to the caller. Instead it becomes *state*: a
function argument and a function result, both named by `etmlir.state`, the
argument also carrying the value the state starts from:

    func.func @main(%x: !torch.vtensor<[4],f32>,
                    %n: !torch.vtensor<[4],f32> {etmlir.state = "n",
                                                 etmlir.state_initial = dense_resource<n> : tensor<4xf32>})
        -> (!torch.vtensor<[4],f32>, !torch.vtensor<[4],f32> {etmlir.state = "n"}) {
      %1 = torch.aten.add.Scalar %n, %int1, %int1 : ...      // self.n.add_(1)
      %2 = torch.aten.mul.Tensor %x, %1 : ...                // return x * self.n
      return %2, %1 : ...
    }

Why arguments and results rather than marked ops: every pass between import
and et-to-out-variants already treats an argument as a run-time value and a
result as a use that keeps its producer alive. A literal of the initial value
would be folded (et-fold-constants would make `n + 1` the constant 1 forever),
merged with a weight of the same bytes by CSE, and the update would be dead
code. As an argument and a result nothing needs to know about state until
et-to-out-variants, which makes the argument an `etx.state` (planned memory the
runtime fills from the initial value at load and keeps across calls) and the
result a write into it. A partitioner may put the updating op in a delegate:
its result is a live-out like any other, copied into the state afterwards.

State arguments follow the user inputs and state results the user outputs, in
the same order, so user input i is still argument i and user output j result
j: dynamic-dim records, `EdgeProgram.inputs`/`outputs` and the runtime's input
and output numbering stay the user's. The initial value is a copy of the
buffer taken at export (the eager model goes on mutating its own).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from torch_mlir import ir

from etmlir.dialects import attrs
from etmlir.frontend.literals import literal_array, literal_attribute, tensor_of_array
from etmlir.lazy import lazy_module

torch = lazy_module("torch")

# The output kinds torch.export gives the new value of a mutated buffer or parameter.
_MUTATION_KINDS = ("BUFFER_MUTATION", "PARAMETER_MUTATION")


@dataclasses.dataclass(frozen=True)
class StateBuffer:
    """One mutated buffer: its FQN, the FX placeholder that reads it, and its value at export."""

    fqn: str
    placeholder: str
    initial: np.ndarray = dataclasses.field(repr=False, compare=False)


def lift_state(exported: Any) -> list[StateBuffer]:
    """The mutated buffers of a functionalized ExportedProgram, with its graph reordered for import.

    Their placeholders move after the user inputs and their BUFFER_MUTATION outputs after the
    user outputs (in the same order), which is the order the frozen importer gives the function's
    arguments and results. Reads the buffers' values (copies) before the importer mutates the graph.
    """
    signature = exported.graph_signature
    updates: dict[str, str] = {}  # FQN -> the node producing its new value
    for spec in signature.output_specs:
        if spec.kind.name in _MUTATION_KINDS:
            updates[spec.target] = spec.arg.name
    if not updates:
        return []
    placeholders = {spec.target: spec.arg.name for spec in signature.input_specs
                    if spec.kind.name in ("BUFFER", "PARAMETER") and spec.target in updates}
    state = [StateBuffer(fqn, placeholders[fqn], _initial_value(exported, fqn)) for fqn in updates]

    graph = exported.graph
    nodes = {node.name: node for node in graph.nodes if node.op == "placeholder"}
    lifted = {s.placeholder for s in state}
    anchor = None
    for node in graph.nodes:
        if node.op == "placeholder" and node.name not in lifted:
            anchor = node
    for s in state:  # after the last other placeholder, in state order
        node = nodes[s.placeholder]
        if anchor is not None:
            anchor.append(node)
        anchor = node
    output = next(node for node in graph.nodes if node.op == "output")
    values = list(output.args[0])
    kinds = [spec.kind.name for spec in signature.output_specs]
    if len(values) != len(kinds):
        raise RuntimeError(f"internal: the graph returns {len(values)} values but its signature lists {len(kinds)}")
    kept = [v for v, kind in zip(values, kinds) if kind not in _MUTATION_KINDS]
    by_name = {getattr(v, "name", None): v for v, kind in zip(values, kinds) if kind in _MUTATION_KINDS}
    output.args = (tuple(kept + [by_name[updates[s.fqn]] for s in state]),)
    exported.graph_module.recompile()
    return state


def exported_tensor(exported: Any, fqn: str) -> Any:
    """The tensor an exported program holds under `fqn`, or None.

    Parameters and persistent buffers are in `state_dict`; non-persistent buffers (a rotary
    embedding's `inv_freq`, BERT's `position_ids`) and lifted constants are in `constants`.
    """
    tensor = exported.state_dict.get(fqn)
    return exported.constants.get(fqn) if tensor is None else tensor


def _initial_value(exported: Any, fqn: str) -> np.ndarray:
    tensor = exported_tensor(exported, fqn)
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"state buffer '{fqn}' has no value in the exported program")
    array = literal_array(tensor)  # bfloat16: a tagged int16 view of its bits
    if array is None:
        raise ValueError(f"state buffer '{fqn}' has dtype {tensor.dtype}, which program state does not "
                         "support yet (use a float, integer or bool buffer)")
    # A copy: the eager model keeps mutating its own buffer after export.
    return np.array(array, copy=True)


class SignatureWithoutState:
    """A graph signature as the frozen importer reads it: state buffers are not listed as buffers,
    so their placeholders stay function arguments instead of becoming literals."""

    def __init__(self, signature: Any, state: Sequence[StateBuffer]) -> None:
        self._signature = signature
        lifted = {s.placeholder for s in state}
        self.inputs_to_buffers = {k: v for k, v in signature.inputs_to_buffers.items() if k not in lifted}
        self.inputs_to_parameters = {k: v for k, v in signature.inputs_to_parameters.items() if k not in lifted}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._signature, name)


def mark_state(main: ir.Operation, state: Sequence[StateBuffer], buffers: dict[str, np.ndarray]) -> None:
    """Name the trailing arguments and results of `main` after the state they read and write.

    Each initial value becomes a `dense_resource` over its array, which goes into `buffers`
    (the program's weight buffers) so that it lives as long as the module.
    """
    if not state:
        return
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    n_args, n_results = len(ftype.inputs), len(ftype.results)
    if n_args < len(state) or n_results < len(state):
        raise RuntimeError(f"internal: {len(state)} state buffers but the function has {n_args} arguments "
                           f"and {n_results} results")
    with ir.Location.unknown():
        _mark(main, state, buffers, n_args, n_results)


def _mark(main: ir.Operation, state: Sequence[StateBuffer], buffers: dict[str, np.ndarray], n_args: int,
          n_results: int) -> None:
    arg_attrs = _attr_dicts(main, "arg_attrs", n_args)
    res_attrs = _attr_dicts(main, "res_attrs", n_results)
    for i, s in enumerate(state):
        name = ir.StringAttr.get(s.fqn)
        if s.fqn in buffers:  # the serializer finds the initial value by the state's name
            raise RuntimeError(f"internal: state buffer '{s.fqn}' has the name of an imported weight")
        buffers[s.fqn] = s.initial
        initial = literal_attribute(tensor_of_array(s.initial), s.initial, re.sub(r"[^A-Za-z0-9_.]", "_", s.fqn))
        arg_attrs[n_args - len(state) + i].update({attrs.STATE: name, attrs.STATE_INITIAL: initial})
        res_attrs[n_results - len(state) + i][attrs.STATE] = name
    main.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in arg_attrs])
    main.attributes["res_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in res_attrs])


def _attr_dicts(func_op: ir.Operation, name: str, count: int) -> list[dict[str, ir.Attribute]]:
    if name not in func_op.attributes:
        return [{} for _ in range(count)]
    return [{entry.name: entry.attr for entry in ir.DictAttr(d)} for d in ir.ArrayAttr(func_op.attributes[name])]


# ---------------------------------------------------------------------------------------------- reading

def _named(func_op: ir.Operation, name: str) -> dict[int, str]:
    if name not in func_op.attributes:
        return {}
    found = {}
    for index, entry in enumerate(ir.ArrayAttr(func_op.attributes[name])):
        entry = ir.DictAttr(entry)
        if attrs.STATE in entry:
            found[index] = ir.StringAttr(entry[attrs.STATE]).value
    return found


def state_arguments(func_op: ir.Operation) -> dict[int, str]:
    """Argument index -> the state (FQN) it reads, for the arguments of `func_op` that are state."""
    return _named(func_op, "arg_attrs")


def state_results(func_op: ir.Operation) -> dict[int, str]:
    """Result index -> the state (FQN) it writes, for the results of `func_op` that are state updates."""
    return _named(func_op, "res_attrs")


def state_initial(func_op: ir.Operation, index: int) -> ir.Attribute:
    """The initial value of state argument `index`."""
    return ir.DictAttr(ir.ArrayAttr(func_op.attributes["arg_attrs"])[index])[attrs.STATE_INITIAL]
