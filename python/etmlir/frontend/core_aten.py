"""The Core ATen contract: which torch-dialect ops may appear after `et-decompose-to-core-aten`.

An op is Core ATen when it is
  * a PyTorch operator tagged `torch.Tag.core` (read from the installed
    PyTorch, so the set always matches the pinned version: 193 overloads in
    torch 2.13.0), or one a backend asked to keep (`keep=`);
  * an ATen overload the edge dialect declares (`aten.view_copy.default`,
    the `*_copy` variants of non-core views such as `aten.unfold_copy.default`)
    or a view whose `*_copy` variant it declares (`aten.unfold.default`,
    `aten.unbind.int`, `aten.narrow.default`) that PyTorch has no
    decomposition for: et-to-edge converts these as they are (a view to its
    copy variant);
  * one of the size queries PyTorch's own core decomposition leaves in an
    exported graph; torch-mlir imports `aten.sym_size.int` as
    `torch.aten.size.int`, so the alias table maps it back;
  * scalar arithmetic on symbolic sizes (`torch.aten.mul.int`,
    `torch.aten.Int.bool`, `torch.prim.max.int`, ...): ops with no tensor
    operand or result, which torch.export keeps as Python `operator.*` calls
    on SymInts (the families of `etmlir.dialects.sym_ops`), and
    `torch.prim.NumToTensor.Scalar`, a number where a tensor is expected;
  * structure, not computation: constants, list construction, weight
    literals, symbolic-shape bookkeeping, functions and modules, and
    control flow (`scf.if`/`scf.while` with `etcf.predicate`);
  * custom ops (a namespace other than aten/prims, registered with
    `torch.library`): opaque to etmlir, passed through to the edge level
    as `edge.custom_op` for a backend or kernel library to provide.
"""

from __future__ import annotations

import functools

from torch_mlir import ir

from etmlir.dialects.edge import edge_ops_by_aten
from etmlir.dialects.sym_ops import SYM_OPS_BY_TORCH_OP, SymOp
from etmlir.frontend.aten_ops import canonical_op_name, is_tensor_type, op_overload_name, parse_vtensor_type
from etmlir.lazy import lazy_module

torch = lazy_module("torch")

STRUCTURAL_OPS = frozenset({
    "builtin.module", "func.func", "func.return", "func.call",
    "torch.constant.int", "torch.constant.float", "torch.constant.bool", "torch.constant.str",
    "torch.constant.none", "torch.constant.number", "torch.constant.device",
    "torch.prim.ListConstruct", "torch.prim.ListUnpack", "torch.prim.TupleConstruct",
    "torch.prim.TupleUnpack", "torch.vtensor.literal", "torch.symbolic_int",
    "torch.bind_symbolic_shape", "torch.tensor_static_info_cast", "torch.derefine",
    "torch.runtime.assert",
    # Control flow (see etmlir.dialects.control_flow): torch.cond and while_loop.
    "scf.if", "scf.while", "scf.yield", "scf.condition", "etcf.predicate",
})

# A Python number where a tensor is expected (`2 - x` decomposes to `sub.Tensor(2, x)`, a size
# passed as a tensor operand): the importer wraps it into a 0-d tensor; et-to-edge makes it an
# `edge.scalar_tensor`.
NUM_TO_TENSOR = "torch.prim.NumToTensor.Scalar"


def size_arithmetic(op: ir.Operation) -> SymOp | None:
    """The size-arithmetic family `op` belongs to (`torch.aten.mul.int` -> sym_mul), or None.

    torch.export keeps arithmetic on SymInts as Python operators, which the importer spells as
    scalar torch ops; those torch-mlir does not register arrive as `torch.operator`
    (`"torch.aten.floordiv.float"`, `"torch.prim.max.float"`) and are found too.
    """
    op = op.operation
    name = ir.StringAttr(op.attributes["name"]).value if op.name == "torch.operator" else op.name
    if not name.startswith("torch."):
        return None
    name = name[len("torch."):]
    return SYM_OPS_BY_TORCH_OP.get(name if name.count(".") == 2 else f"{name}.default")

# torch-mlir spelling -> the Core ATen overload it stands for.
SIZE_QUERY_ALIASES = {
    "aten.size.int": "aten.sym_size.int",
    "aten.numel.default": "aten.sym_numel.default",
    "aten.stride.int": "aten.sym_stride.int",
}


@functools.cache
def core_aten_overloads() -> frozenset[str]:
    """Names (`aten.add.Tensor`) of every overload the installed PyTorch tags `core`.

    Read from the dispatcher's full list of registered operators: iterating
    `torch.ops.aten` would only see the packets something has touched so far.
    """
    names = set()
    for qualified in torch._C._dispatch_get_all_op_names():
        if not qualified.startswith("aten::"):
            continue
        packet_name, _, overload = qualified[len("aten::"):].partition(".")
        packet = getattr(torch.ops.aten, packet_name)
        if torch.Tag.core in getattr(packet, overload or "default").tags:
            names.add(f"aten.{packet_name}.{overload or 'default'}")
    return frozenset(names)


@functools.cache
def edge_declared_overloads() -> frozenset[str]:
    """ATen overloads with an edge op beyond the core ones: the edge dialect's `aten` names and
    the views whose `*_copy` variant it declares (`aten.unfold.default` -> `edge.unfold_copy`).

    Those PyTorch's core decomposition table decomposes (`split.Tensor` -> `split_with_sizes`)
    keep decomposing, so programs keep the core spelling delegates and the reference path know.
    """
    decomposed = set()
    for op in torch.export.default_decompositions():
        name = str(op)
        decomposed.add(name if "." in name.split("aten.", 1)[-1] else f"{name}.default")
    return frozenset(name for name in edge_ops_by_aten() if name.startswith("aten.") and name not in decomposed)


def normalize_keep(keep: list[str] | tuple[str, ...]) -> frozenset[str]:
    return frozenset(canonical_op_name(k) for k in keep)


def is_scalar_only(op: ir.Operation) -> bool:
    return not any(is_tensor_type(v.type) for v in list(op.operands) + list(op.results))


def is_custom_op(overload_name: str) -> bool:
    """`mylib.scale.default` is a custom op; `aten.*` and `prims.*` are PyTorch's own."""
    return overload_name.split(".", 1)[0] not in ("aten", "prims", "prim")


def is_core_overload(name: str) -> bool:
    """`aten::softmax`, `aten.add.Tensor`, ... names a Core ATen overload (not one only kept whole for a
    backend, such as `aten::scaled_dot_product_attention`)."""
    return canonical_op_name(name) in core_aten_overloads()


def _whole_attention(op: ir.Operation) -> bool:
    """Attention a kernel runs whole: dropout_p the constant 0 (inference), and query, key, value and
    mask of one rank (no batch broadcasting between them)."""
    if len(op.operands) < 5:
        return False
    owner = op.operands[4].owner
    if isinstance(owner, ir.Block) or owner.name not in ("torch.constant.float", "torch.constant.int"):
        return False
    value = owner.attributes["value"]
    if (ir.FloatAttr(value).value if owner.name == "torch.constant.float" else ir.IntegerAttr(value).value) != 0:
        return False
    types = [parse_vtensor_type(v.type) for v in list(op.operands)[:4]]
    ranks = {len(t.sizes) for t in types if t is not None}
    return types[0] is not None and len(ranks) == 1


# Kept ops (`keep=`) stay whole only where a kernel can run them whole; elsewhere they decompose as
# usual: attention with dropout is random (no backend's attention kernel draws random numbers), and
# one whose operands broadcast batch dims against each other is not a form torch-mlir lowers whole.
KEEP_ONLY_WHERE = {"aten.scaled_dot_product_attention.default": _whole_attention}


def is_core_aten(op: ir.Operation, keep: frozenset[str] = frozenset()) -> bool:
    """True if `op` may appear in a Core ATen module (see the module docstring)."""
    if op.name in STRUCTURAL_OPS or op.name == NUM_TO_TENSOR or size_arithmetic(op) is not None:
        return True
    overload = op_overload_name(op)
    if overload is None:
        return False
    if overload in keep and KEEP_ONLY_WHERE.get(overload, lambda _: True)(op):
        return True
    if is_custom_op(overload):
        return True
    overload = SIZE_QUERY_ALIASES.get(overload, overload)
    if overload in core_aten_overloads() or overload in edge_declared_overloads():
        return True
    return op.name.startswith("torch.aten.") and is_scalar_only(op)
