"""Which out-variant kernel runs an operator.

The runtime executes every op as a call to a kernel that writes into memory
planned ahead of time, so each functional operator needs its out variant: the
overload of the same operator whose arguments are the functional ones plus
trailing keyword-only `Tensor(a!) out` arguments (`aten::add.Tensor` ->
`aten::add.out`). PyTorch registers those overloads itself; we find them by
matching schemas rather than by keeping a hand-written table.

Three kinds of kernels are not ATen out variants:
- `etmlir::_to_dim_order_copy.out`, our own declared operator (see the edge
  dialect's `to_dim_order_copy`);
- size queries (`aten::sym_size.int`, ...) that produce an Int at run time:
  the runtime's `etmlir_prim::` kernels, which write an Int value; also
  `aten::_local_scalar_dense` (`Tensor.item()`: a Scalar of the element's
  kind, Int, Double or Bool) and `aten::sym_is_contiguous` (always true for
  contiguous_format: runtime tensors are row-major), which write a Scalar
  slot of the kind the program planned; and the arithmetic on sizes
  (`etmlir::sym_mul`, `etmlir::sym_floordiv`, ...: `etmlir.dialects.sym_ops`),
  which reads and writes Int/Double/Bool values;
- custom ops registered with `torch.library`, whose author registers an
  `.out` overload the same way (`mylib::scale.out`).
"""

from __future__ import annotations

import dataclasses
import functools

from etmlir.dialects.sym_ops import SYM_OPS
from etmlir.lazy import lazy_module

torch = lazy_module("torch")



@dataclasses.dataclass(frozen=True)
class OutVariant:
    """The kernel for one functional operator."""

    kernel: str                 # "aten::add.out"
    schema: str                 # the kernel's schema, for messages and docs
    num_outs: int               # trailing out arguments
    out_is_list: bool = False   # `Tensor(a!)[] out` (split_with_sizes_copy.out)
    scalar_result: bool = False  # writes an Int value, not a tensor
    # Functional arguments the kernel does not take: the tensor options
    # (`dtype`, `layout`, `device`, `pin_memory`) of factory ops such as
    # `aten::full`, which the out tensor's own type already says.
    dropped: tuple[str, ...] = ()


# Declared by etmlir, implemented by the runtime (not in PyTorch).
DECLARED_KERNELS = {
    "etmlir::_to_dim_order_copy": OutVariant(
        "etmlir::_to_dim_order_copy.out",
        "etmlir::_to_dim_order_copy.out(Tensor self, *, ScalarType? dtype=None, bool non_blocking=False, "
        "int[]? dim_order=None, Tensor(a!) out) -> Tensor(a!)", 1),
}

# Size queries and scalar reads: the runtime's primitive kernels write a scalar value.
PRIM_KERNELS = {
    "aten::sym_size.int": "etmlir_prim::sym_size.int(Tensor self, int dim) -> int",
    "aten::sym_numel": "etmlir_prim::sym_numel(Tensor self) -> int",
    "aten::sym_stride.int": "etmlir_prim::sym_stride.int(Tensor self, int dim) -> int",
    "aten::sym_storage_offset": "etmlir_prim::sym_storage_offset(Tensor self) -> int",
    "aten::_local_scalar_dense": "etmlir_prim::_local_scalar_dense(Tensor self) -> Scalar",
    "aten::sym_is_contiguous":
        "etmlir_prim::sym_is_contiguous(Tensor self, MemoryFormat memory_format=contiguous_format) -> Scalar",
    **{f"etmlir::{op.name}": op.kernel_schema for op in SYM_OPS.values()},
}


# Factory-op keyword arguments that out variants leave out (the out tensor has them).
TENSOR_OPTIONS = ("dtype", "layout", "device", "pin_memory")


def _split(qualified: str) -> tuple[str, str, str]:
    """`aten::add.Tensor` -> ("aten", "add", "Tensor"); no overload -> "default"."""
    namespace, rest = qualified.split("::", 1)
    name, _, overload = rest.partition(".")
    return namespace, name, overload or "default"


def _signature(arguments: list[torch.Argument]) -> list[tuple[str, str]]:
    return [(a.name, str(a.type)) for a in arguments]


def _is_out(argument: torch.Argument) -> bool:
    return argument.alias_info is not None and argument.alias_info.is_write and argument.kwarg_only


def functional_schema(qualified: str) -> torch.FunctionSchema | None:
    """The registered schema of `qualified` (`aten::add.Tensor`, `mylib::scale`), or None."""
    namespace, name, overload = _split(qualified)
    packet = getattr(getattr(torch.ops, namespace, None), name, None)
    try:
        return getattr(packet, overload)._schema if packet is not None else None
    except AttributeError:
        return None


@functools.cache
def out_variant(qualified: str) -> OutVariant | None:
    """The out-variant kernel of the functional operator `qualified` (`aten::add.Tensor`), or None."""
    if qualified in DECLARED_KERNELS:
        return DECLARED_KERNELS[qualified]
    if qualified in PRIM_KERNELS:
        schema = PRIM_KERNELS[qualified]
        return OutVariant(schema.split("(", 1)[0], schema, 1, scalar_result=True)
    functional = functional_schema(qualified)
    if functional is None:
        return None
    namespace, name, _ = _split(qualified)
    packet = getattr(getattr(torch.ops, namespace), name)
    full = _signature(list(functional.arguments))
    options = tuple(a.name for a in functional.arguments if a.kwarg_only and a.name in TENSOR_OPTIONS)
    without_options = [arg for arg in full if arg[0] not in options]
    for candidate_name in sorted(packet.overloads()):
        schema = getattr(packet, candidate_name)._schema
        arguments = list(schema.arguments)
        outs = [a for a in arguments if _is_out(a)]
        if not outs or any(not _is_out(a) for a in arguments[len(arguments) - len(outs):]):
            continue  # not an out variant, or its outs are not trailing
        inputs = _signature(arguments[:len(arguments) - len(outs)])
        if inputs == full:
            dropped: tuple[str, ...] = ()
        elif options and inputs == without_options:
            dropped = options
        else:
            continue
        out_is_list = str(outs[0].type).startswith("List[")
        return OutVariant(f"{namespace}::{name}.{candidate_name}", str(schema), len(outs), out_is_list,
                          dropped=dropped)
    return None
