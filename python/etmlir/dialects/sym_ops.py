"""Scalar arithmetic on sizes: the edge ops `edge.sym_*` and the runtime kernels `etmlir_prim::sym_*`.

Models with dynamic shapes compute with sizes (`x.reshape(x.shape[0] * x.shape[1])`,
`x[:, : n // 2]`, `torch.full((torch.sym_max(n, 3),), 1.0)`); torch.export keeps that
arithmetic as Python operators on SymInts, which the importer spells as scalar
torch-dialect ops (`torch.aten.mul.int`, `torch.aten.floordiv.int`, `torch.prim.max.int`,
...). Each op family here is one etmlir operator with a PyTorch-style schema:

    etmlir::sym_mul(Scalar a, Scalar b) -> Scalar

`scripts/gen_edge_dialect.py` declares it as an edge op (`edge.sym_mul`, Scalar
operands as 0-d tensors like every edge Scalar), et-to-edge converts the torch ops
listed in `torch_ops` to it, and et-to-out-variants turns it into a call of the
runtime kernel `etmlir_prim::sym_mul`, which reads Int/Double/Bool values and
writes one (the slot kind the program planned from the result type: i64 -> Int,
f64 -> Double, i1 -> Bool), so a size computed at run time flows into later
IntLists like a size query's.

Semantics are Python's, which is what the exported program meant: `//` and `%`
floor (towards negative infinity), `/` is true division, ints are 64-bit and an
overflow, a division by zero or a float that has no int value is an error naming
the op (never undefined behaviour). `fold` is that semantics in Python; it folds
ops whose operands are all constants, and it also runs on SymInts when
et-to-edge computes upper bounds (so it avoids Python's `max`, `int`, `float`,
which would specialize a symbolic size).
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable
from typing import Any

from etmlir.lazy import lazy_module

torch = lazy_module("torch")


@dataclasses.dataclass(frozen=True)
class SymOp:
    """One scalar op family: its etmlir name, signature, the torch-dialect ops it stands for, its semantics."""

    name: str                      # "sym_mul": edge.sym_mul, etmlir::sym_mul, etmlir_prim::sym_mul
    signature: str                 # "(Scalar a, Scalar b) -> Scalar"
    torch_ops: tuple[str, ...]     # overload names, as `aten.mul.int` / `prim.max.int` / `aten.__not__.default`
    fold: Callable[..., Any]

    @property
    def schema(self) -> str:
        """The operator's schema, declared to the edge dialect generator."""
        return f"etmlir::{self.name}{self.signature}"

    @property
    def kernel_schema(self) -> str:
        """The runtime kernel's schema: the same operator in the `etmlir_prim` namespace."""
        return f"etmlir_prim::{self.name}{self.signature}"

    @property
    def edge_name(self) -> str:
        return f"edge.{self.name}"


def _max(a: Any, b: Any) -> Any:
    return torch.sym_max(a, b)


def _min(a: Any, b: Any) -> Any:
    return torch.sym_min(a, b)


def _to_int(a: Any) -> Any:
    """`int(a)` (truncation towards zero) that keeps a symbolic value symbolic."""
    if isinstance(a, torch.SymFloat):
        return torch.sym_int(a)
    if isinstance(a, torch.SymBool):
        return torch.sym_ite(a, 1, 0)
    return int(a)


def _to_float(a: Any) -> Any:
    return torch.sym_float(a) if isinstance(a, (torch.SymInt, torch.SymFloat)) else float(a)


def _not(a: Any) -> Any:
    return torch.sym_not(a)


_BINARY = "(Scalar a, Scalar b) -> Scalar"
_COMPARE = "(Scalar a, Scalar b) -> bool"


def _overloads(packet: str, *suffixes: str) -> tuple[str, ...]:
    return tuple(f"{packet}.{s}" for s in suffixes)


_MIXED = ("int", "float", "float_int", "int_float")

SYM_OPS: dict[str, SymOp] = {op.name: op for op in (
    SymOp("sym_add", _BINARY, _overloads("aten.add", *_MIXED), operator.add),
    SymOp("sym_sub", _BINARY, _overloads("aten.sub", *_MIXED), operator.sub),
    SymOp("sym_mul", _BINARY, _overloads("aten.mul", *_MIXED), operator.mul),
    SymOp("sym_truediv", "(Scalar a, Scalar b) -> float", _overloads("aten.div", "int", "float"), operator.truediv),
    SymOp("sym_floordiv", _BINARY, _overloads("aten.floordiv", *_MIXED), operator.floordiv),
    SymOp("sym_mod", _BINARY, _overloads("aten.remainder", "int", "float"), operator.mod),
    SymOp("sym_pow", _BINARY, _overloads("aten.pow", *_MIXED), operator.pow),
    SymOp("sym_max", _BINARY, _overloads("prim.max", "int", "float"), _max),
    SymOp("sym_min", _BINARY, _overloads("prim.min", "int", "float"), _min),
    SymOp("sym_neg", "(Scalar a) -> Scalar", _overloads("aten.neg", "int", "float"), operator.neg),
    SymOp("sym_eq", _COMPARE, _overloads("aten.eq", "int", "float", "float_int", "bool"), operator.eq),
    SymOp("sym_ne", _COMPARE, _overloads("aten.ne", "int", "float", "float_int", "bool"), operator.ne),
    SymOp("sym_lt", _COMPARE, _overloads("aten.lt", "int", "float", "float_int"), operator.lt),
    SymOp("sym_le", _COMPARE, _overloads("aten.le", "int", "float", "float_int"), operator.le),
    SymOp("sym_gt", _COMPARE, _overloads("aten.gt", "int", "float", "float_int"), operator.gt),
    SymOp("sym_ge", _COMPARE, _overloads("aten.ge", "int", "float", "float_int"), operator.ge),
    SymOp("sym_int", "(Scalar a) -> int", _overloads("aten.Int", "bool", "float", "Scalar"), _to_int),
    SymOp("sym_float", "(Scalar a) -> float", _overloads("aten.Float", "int", "bool", "Scalar"), _to_float),
    SymOp("sym_floor", "(Scalar a) -> int", ("aten.floor.float",), math.floor),
    SymOp("sym_ceil", "(Scalar a) -> int", ("aten.ceil.float",), math.ceil),
    SymOp("sym_not", "(Scalar a) -> bool", ("aten.__not__.default",), _not),
)}

# Overload name (`aten.mul.int`) -> the op family it belongs to.
SYM_OPS_BY_TORCH_OP: dict[str, SymOp] = {name: op for op in SYM_OPS.values() for name in op.torch_ops}

# Edge ops that compute sizes: the size query and the arithmetic on its results.
# Partitioners copy them into each delegate that reads them (see etmlir.delegation).
SIZE_OPS: frozenset[str] = frozenset({"edge.sym_size_int"} | {op.edge_name for op in SYM_OPS.values()})
