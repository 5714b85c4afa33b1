"""Shape checks for edge ops whose operand shapes must agree, done at compile time on static shapes.

The dtype table says which element types an edge op takes; this module says
which shapes fit together, so that a program whose shapes cannot work is an
error at the op's source line instead of a `.pte` that fails in the kernel:

    %0 = "edge.add_tensor"(%x, %y, %one) : (tensor<2x3xf32>, tensor<4x5xf32>, tensor<i64>) -> tensor<2x3xf32>

    model.py:12:8: error: 'edge.add_tensor' (aten::add.Tensor): shapes do not broadcast:
        self [2, 3], other [4, 5] (dim 0: 2 vs 4)

Three families, each checked by one rule:

* broadcasting: every op PyTorch tags pointwise (`broadcast` in the generated
  op table: add, mul, where, comparisons, clamp with tensor bounds, ...) — all
  tensor operands broadcast together and the result has the broadcast shape;
* contractions: mm, bmm and addmm — the inner dims agree, batch dims agree,
  the result is [n, m] (addmm's bias broadcasts to it);
* concatenation: cat — every input has the same rank and the same size in
  every dim but the cat dim (legacy empty 1-D inputs aside), and the result's
  cat dim is the sum.

Dynamic dims (`?`) are not checked here: they are only known at run time, where
the kernels check them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch_mlir import ir

if TYPE_CHECKING:
    from etmlir.dialects.edge import EdgeOp

Shape = list  # of int, or None for a dynamic dim

# op mnemonic -> (lhs operand, rhs operand, batch rank, operand broadcast to the result or None)
_CONTRACTIONS = {
    "mm": ("self", "mat2", 0, None),
    "bmm": ("self", "mat2", 1, None),
    "addmm": ("mat1", "mat2", 0, "self"),
}


def _shape(value: ir.Value) -> Shape | None:
    """The value's dims (None for dynamic ones), or None if it is not a ranked tensor."""
    if not isinstance(value.type, ir.RankedTensorType):
        return None
    t = ir.RankedTensorType(value.type)
    return [None if t.is_dynamic_dim(i) else t.shape[i] for i in range(t.rank)]


def _show(shape: Shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def broadcast_shapes(shapes: list[Shape]) -> tuple[Shape | None, str | None]:
    """(broadcast shape, None), or (None, why not) for static dims that differ and are not 1."""
    rank = max((len(s) for s in shapes), default=0)
    out: Shape = []
    for axis in range(rank):  # axis counts from the left of the broadcast shape
        sizes = [s[axis - (rank - len(s))] for s in shapes if axis - (rank - len(s)) >= 0]
        static = {d for d in sizes if d is not None and d != 1}
        if len(static) > 1:
            a, b = sorted(static)[:2]
            return None, f"sizes {a} and {b} at dim {axis} of the broadcast shape"
        if static:
            out.append(static.pop())
        elif any(d is None for d in sizes):
            out.append(None)
        else:
            out.append(1)
    return out, None


def _result_problem(info: EdgeOp, op: ir.Operation, expected: Shape) -> str | None:
    actual = _shape(op.results[0]) if len(op.results) else None
    if actual is None:
        return None
    if len(actual) != len(expected) or any(a is not None and e is not None and a != e
                                           for a, e in zip(actual, expected)):
        return f"'{info.name}' ({info.aten}): result shape {_show(actual)} should be {_show(expected)}"
    return None


def _broadcast_problem(info: EdgeOp, op: ir.Operation, named: dict[str, list[ir.Value]]) -> str | None:
    kinds = {a["name"]: a["kind"] for a in info.args}
    shapes = [(name, _shape(v)) for name, values in named.items() if kinds.get(name) in ("tensor", "tensor?")
              for v in values]
    shapes = [(name, s) for name, s in shapes if s is not None]
    if len(shapes) < 1:
        return None
    out, why = broadcast_shapes([s for _, s in shapes])
    if out is None:
        listed = ", ".join(f"{name} {_show(s)}" for name, s in shapes)
        return f"'{info.name}' ({info.aten}): shapes do not broadcast: {listed} ({why})"
    return _result_problem(info, op, out)


def _contraction_problem(info: EdgeOp, op: ir.Operation, named: dict[str, list[ir.Value]]) -> str | None:
    lhs_name, rhs_name, batch, bias_name = _CONTRACTIONS[info.mnemonic]
    lhs, rhs = _shape(named[lhs_name][0]), _shape(named[rhs_name][0])
    if lhs is None or rhs is None:
        return None
    rank = batch + 2
    for name, shape in ((lhs_name, lhs), (rhs_name, rhs)):
        if len(shape) != rank:
            return f"'{info.name}' ({info.aten}): {name} must be {rank}-D, got {_show(shape)}"
    shown = f"{lhs_name} {_show(lhs)}, {rhs_name} {_show(rhs)}"
    for axis in range(batch):
        if None not in (lhs[axis], rhs[axis]) and lhs[axis] != rhs[axis]:
            return f"'{info.name}' ({info.aten}): batch sizes differ: {shown}"
    if None not in (lhs[-1], rhs[-2]) and lhs[-1] != rhs[-2]:
        return (f"'{info.name}' ({info.aten}): inner dims differ: {shown} "
                f"({lhs_name} has {lhs[-1]} columns, {rhs_name} {rhs[-2]} rows)")
    expected = lhs[:batch] + [lhs[-2], rhs[-1]]
    if bias_name is not None and named.get(bias_name):
        bias = _shape(named[bias_name][0])
        if bias is not None:
            out, _ = broadcast_shapes([bias, expected])
            if out is None or len(bias) > len(expected) or any(e is not None and o != e for o, e in zip(out, expected)):
                return (f"'{info.name}' ({info.aten}): {bias_name} {_show(bias)} does not broadcast to the "
                        f"product's shape {_show(expected)}")
    return _result_problem(info, op, expected)


def _cat_problem(info: EdgeOp, op: ir.Operation, named: dict[str, list[ir.Value]]) -> str | None:
    shapes = [s for s in (_shape(v) for v in named.get("tensors", [])) if s is not None]
    shapes = [s for s in shapes if s != [0]]  # legacy: an empty 1-D input is skipped
    if not shapes or "dim" not in op.attributes or not isinstance(op.attributes["dim"], ir.IntegerAttr):
        return None
    rank = len(shapes[0])
    dim = ir.IntegerAttr(op.attributes["dim"]).value
    if not -rank <= dim < rank:
        return f"'{info.name}' ({info.aten}): dim {dim} is out of range for {rank}-D inputs"
    dim %= rank
    for index, shape in enumerate(shapes):
        if len(shape) != rank:
            return (f"'{info.name}' ({info.aten}): inputs have different ranks: {_show(shapes[0])} and "
                    f"{_show(shape)}")
        for axis in range(rank):
            if axis != dim and None not in (shape[axis], shapes[0][axis]) and shape[axis] != shapes[0][axis]:
                return (f"'{info.name}' ({info.aten}): input {index} {_show(shape)} differs from input 0 "
                        f"{_show(shapes[0])} in dim {axis} (only the cat dim {dim} may differ)")
    expected = list(shapes[0])
    sizes = [s[dim] for s in shapes]
    expected[dim] = None if None in sizes else sum(sizes)
    return _result_problem(info, op, expected)


def shape_problem(op: ir.Operation, info: EdgeOp) -> str | None:
    """Why `op`'s static operand/result shapes cannot work together (None if they can, or are unknown)."""
    from etmlir.dialects.edge import named_operands

    if info.broadcast:
        return _broadcast_problem(info, op, named_operands(op, info))
    if info.mnemonic in _CONTRACTIONS:
        return _contraction_problem(info, op, named_operands(op, info))
    if info.mnemonic == "cat":
        return _cat_problem(info, op, named_operands(op, info))
    return None
