"""What a backend can run, op by op, with the reason when it cannot.

A partitioner asks one question of every edge op: can my backend run this?
`OperatorSupport` answers it from a declaration rather than code scattered
through a partitioner, and always says why not, because the delegation
report shows users that reason next to the op's source line.

    support = OperatorSupport(
        ops={"edge.convolution": not_transposed, "edge.relu": None, "edge.addmm": None},
        dtypes={"f32"},                 # every tensor operand and result
        max_rank=4,
        static_shapes=True,
    )
    support.refusal(op)   # None, or "edge.convolution: transposed convolution is not supported"

`ops` maps an edge op name to an optional predicate: a function of the op
that returns a reason (str) when this particular instance is refused (an
attribute value, a shape) and None when it is fine. `ops=None` accepts every
op name; `skip_ops` refuses names outright.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping

from torch_mlir import ir

from etmlir.dialects.sym_ops import SIZE_OPS

# A check of one op instance: a refusal reason, or None when the op is fine.
OpPredicate = Callable[[ir.Operation], "str | None"]

# Ops that are data or bookkeeping, never computation a partitioner takes: constants are
# copied into each delegate that reads them, size queries and the arithmetic on their results
# (`edge.sym_mul`, ...: SIZE_OPS) are recomputed where they are needed.
FREE_OPS = ("edge.constant", *sorted(SIZE_OPS))


def tensor_types(op: ir.Operation) -> list[tuple[str, ir.RankedTensorType]]:
    """("operand 0" / "result 0", type) for every ranked tensor the op reads or writes."""
    found = []
    for kind, values in (("operand", op.operands), ("result", op.results)):
        for i, value in enumerate(values):
            if isinstance(value.type, ir.RankedTensorType):
                found.append((f"{kind} {i}", ir.RankedTensorType(value.type)))
    return found


@dataclasses.dataclass(frozen=True)
class OperatorSupport:
    """Which edge ops a backend runs: op names with optional per-op predicates, dtypes, ranks, shapes.

    ops:           op name -> None or a predicate (reason or None); None means every op name
    dtypes:        element types allowed on every tensor operand and result (None: any)
    max_rank:      the largest tensor rank the backend handles (None: any)
    static_shapes: refuse ops with a dynamic dimension on any operand or result
    predicates:    checks run on every op after the ones above (reason or None)
    skip_ops:      op names refused outright (a user's choice, reported as such)
    """

    ops: Mapping[str, OpPredicate | None] | None = None
    dtypes: Collection[str] | None = None
    max_rank: int | None = None
    static_shapes: bool = False
    predicates: tuple[OpPredicate, ...] = ()
    skip_ops: Collection[str] = ()

    def refusal(self, op: ir.Operation) -> str | None:
        """Why the backend cannot run `op` (None when it can)."""
        name = op.name
        if name in self.skip_ops:
            return f"{name} is in skip_ops"
        if not name.startswith("edge.") or name in FREE_OPS:
            return f"{name} is not an edge computation"
        if self.ops is not None and name not in self.ops:
            return f"{name} is not an op the backend supports"
        for what, t in tensor_types(op):
            element = str(t.element_type)
            if self.dtypes is not None and element not in self.dtypes:
                return f"{name}: {what} has dtype {element}; the backend takes {', '.join(sorted(self.dtypes))}"
            if self.max_rank is not None and t.rank > self.max_rank:
                return f"{name}: {what} has rank {t.rank}; the backend takes at most {self.max_rank}"
            if self.static_shapes and not t.has_static_shape:
                return f"{name}: {what} has a dynamic shape ({t}); the backend needs static shapes"
        checks = [self.ops[name]] if self.ops is not None and self.ops.get(name) is not None else []
        for check in checks + list(self.predicates):
            reason = check(op)
            if reason:
                return reason if reason.startswith(name) else f"{name}: {reason}"
        return None

    def with_options(self, *, ops: Collection[str] | None = None, skip_ops: Collection[str] = ()) -> "OperatorSupport":
        """This support narrowed by a user: only `ops` (if given, a subset), minus `skip_ops`."""
        narrowed = self.ops
        if ops is not None:
            unknown = [o for o in ops if not o.startswith("edge.")]
            if unknown:
                raise ValueError(f"ops must be edge op names (edge.convolution, ...), got {', '.join(unknown)}")
            narrowed = {o: (self.ops.get(o) if self.ops is not None else None) for o in ops
                        if self.ops is None or o in self.ops}
        return dataclasses.replace(self, ops=narrowed, skip_ops=tuple(self.skip_ops) + tuple(skip_ops))
