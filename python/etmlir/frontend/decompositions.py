"""Trace PyTorch's decomposition of one ATen op, for the operand types at one call site.

`et-decompose-to-core-aten` calls `trace_decomposition` for each non-core op:
the op's tensor operands become fake tensors (no memory is allocated; `?`
dims become symbolic sizes), its constant operands become Python values, and
`make_fx` runs the op under PyTorch's core decomposition table. The resulting
FX graph contains only ops the table leaves, and is imported with
torch-mlir's FX importer as a function whose arguments are the op's run-time
operands in order.

A decomposition may branch on a symbolic size (`if x.size(0) == 1`), which
would make the traced graph valid only for sizes like the trace's hint. Every
guard PyTorch records on a symbolic size is checked against sample sizes
across the dim's range; a guard that fails for any of them is reported as a
specialization, never silently accepted.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from etmlir.frontend.aten_ops import RuntimeValue
from etmlir.frontend.core_aten import core_aten_overloads
from etmlir.frontend.sym_calls import importable_sym_calls, wrap_numbers_as_tensors
from etmlir.lazy import lazy_module

torch = lazy_module("torch")
sympy = lazy_module("sympy")

# Size used to trace a dynamic dim, and the sizes every recorded guard must also hold for.
_TRACE_HINT = 8
_GUARD_SAMPLES = (2, 3, 5, 8, 17, 64, 255, 4096)

# Ops PyTorch's table has no entry for but that have an exact core spelling.
_SUBSTITUTES = {
    # The FX importer emits prims.convert_element_type for bool literals.
    "prims.convert_element_type.default":
        lambda x, dtype: torch.ops.aten._to_copy.default(x, dtype=dtype),
    # torch.sort(stable=...) has no decomposition; core aten::sort does not promise stability,
    # but the portable sort kernel is stable (equal keys keep their order), so both spellings run it.
    "aten.sort.stable":
        lambda x, stable=None, dim=-1, descending=False: torch.ops.aten.sort.default(x, dim, descending),
    # Full reductions (`x.max()`): amax/amin over every dim, NaN propagating alike.
    "aten.max.default": lambda x: torch.ops.aten.amax.default(x, []),
    "aten.min.default": lambda x: torch.ops.aten.amin.default(x, []),
    "aten.round.decimals": lambda x, decimals=0: _round_decimals(x, decimals),
    # BatchNorm in training mode (its running statistics are program state): the decomposition
    # PyTorch has outside its core table (batch statistics, and the updated running ones).
    "aten._native_batch_norm_legit_functional.default":
        lambda *args: torch._decomp.decomposition_table[
            torch.ops.aten._native_batch_norm_legit_functional.default](*args),
    # What that decomposition computes its batch statistics with: two core reductions.
    "aten.var_mean.correction": lambda x, dim=None, correction=None, keepdim=False: (
        torch.ops.aten.var.correction(x, dim, correction=correction, keepdim=keepdim),
        torch.ops.aten.mean.dim(x, dim, keepdim)),
    # torch.nn.utils.parametrizations.weight_norm (wav2vec2's positional conv), torch.norm, F.normalize.
    "aten.linalg_vector_norm.default":
        lambda x, ord=2, dim=None, keepdim=False, dtype=None: _vector_norm(x, ord, dim, keepdim, dtype),
}


def _vector_norm(x: torch.Tensor, ord: float, dim: Any, keepdim: bool, dtype: Any) -> torch.Tensor:
    """`torch.linalg.vector_norm` in Core ATen ops, for real inputs (PyTorch's table lacks it)."""
    aten = torch.ops.aten
    if dtype is not None:
        x = aten._to_copy.default(x, dtype=dtype)
    if isinstance(dim, int):
        dim = [dim]
    dims = list(range(x.dim())) if dim is None or len(dim) == 0 else list(dim)
    if x.dim() == 0:
        dims = []
    magnitude = aten.abs.default(x)
    if ord == float("inf"):
        return aten.amax.default(magnitude, dims, keepdim)
    if ord == float("-inf"):
        return aten.amin.default(magnitude, dims, keepdim)
    if ord == 0:
        nonzero = aten._to_copy.default(aten.ne.Scalar(x, 0), dtype=x.dtype)
        return aten.sum.dim_IntList(nonzero, dims, keepdim)
    if ord == 1:
        return aten.sum.dim_IntList(magnitude, dims, keepdim)
    if ord == 2:
        return aten.sqrt.default(aten.sum.dim_IntList(aten.mul.Tensor(x, x), dims, keepdim))
    powered = aten.sum.dim_IntList(aten.pow.Tensor_Scalar(magnitude, ord), dims, keepdim)
    return aten.pow.Tensor_Scalar(powered, 1.0 / ord)


def _round_decimals(x: torch.Tensor, decimals: int) -> torch.Tensor:
    """`torch.round(x, decimals=d)` the way PyTorch's kernel computes it, in x's dtype."""
    if decimals >= 0:
        scale = 10.0 ** decimals
        return torch.ops.aten.div.Scalar(torch.ops.aten.round.default(torch.ops.aten.mul.Scalar(x, scale)), scale)
    scale = 10.0 ** -decimals
    return torch.ops.aten.mul.Scalar(torch.ops.aten.round.default(torch.ops.aten.div.Scalar(x, scale)), scale)


class DecompositionError(Exception):
    """The op cannot be decomposed at this call site; the message says why."""


@dataclasses.dataclass
class TracedDecomposition:
    graph_module: torch.fx.GraphModule
    inputs: list[RuntimeValue]  # placeholder order


@functools.cache
def _base_table() -> dict:
    """PyTorch's core decomposition table without its entries for core ops themselves.

    The table also decomposes some ops that are Core ATen (`reflection_pad2d` into index
    arithmetic, `var.dim`, `col2im`, `squeeze.dim`, ...). Core ops are the level we lower to and
    the runtime has kernels for them, so tracing stops there.
    """
    core = set(core_aten_overloads())
    return {op: fn for op, fn in torch.export.default_decompositions().items() if _overload_name(op) not in core}


def decomposition_table(keep: frozenset[str]) -> dict:
    """PyTorch's core decomposition table minus the ops a backend wants kept."""
    return {op: fn for op, fn in _base_table().items() if _overload_name(op) not in keep}


def _overload_name(op: Any) -> str:
    return str(op) if "." in str(op).split("aten.", 1)[-1] else f"{op}.default"


def trace_decomposition(overload_name: str, overload: torch._ops.OpOverload, args: list[Any],
                        kwargs: dict[str, Any], table: dict) -> TracedDecomposition:
    from torch._dynamo.source import ConstantSource  # torch is imported when a decomposition is traced
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    shape_env = ShapeEnv()
    mode = FakeTensorMode(shape_env=shape_env)
    inputs: list[RuntimeValue] = []
    placeholders: list[Any] = []
    symbols: list[sympy.Symbol] = []

    def new_symint() -> torch.SymInt:
        source = ConstantSource(f"etmlir_dim{len(symbols)}")
        symbol = shape_env.create_symbol(_TRACE_HINT, source)
        symbols.append(symbol)
        return shape_env.create_symintnode(symbol, hint=_TRACE_HINT, source=source)

    def materialize(value: Any) -> Any:
        if isinstance(value, RuntimeValue):
            if value.tensor is not None:
                sizes = [new_symint() if d is None else d for d in value.tensor.sizes]
                with mode:
                    fake: Any = torch.empty(sizes, dtype=value.tensor.dtype, device="cpu")
            elif str(value.value.type) == "!torch.float":  # a float computed from sizes (n / m)
                fake = shape_env.create_unbacked_symfloat()
            else:
                fake = new_symint()
            inputs.append(value)
            placeholders.append(fake)
            return fake
        if isinstance(value, list):
            return [materialize(v) for v in value]
        return value

    call_args = [materialize(a) for a in args]
    call_kwargs = {k: materialize(v) for k, v in kwargs.items()}
    n_args = len(call_args)
    target = _SUBSTITUTES.get(overload_name, overload)

    def fn(*flat: Any) -> Any:
        # make_fx traces a function of placeholders; rebuild the call from them in order.
        it = iter(flat)

        def rebuild(value: Any) -> Any:
            if isinstance(value, list):
                return [rebuild(v) for v in value]
            return next(it) if _is_placeholder(value) else value

        rebuilt_args = [rebuild(a) for a in call_args[:n_args]]
        rebuilt_kwargs = {k: rebuild(v) for k, v in call_kwargs.items()}
        return target(*rebuilt_args, **rebuilt_kwargs)

    try:
        # With oneDNN enabled, PyTorch's LSTM decomposition picks `mkldnn_rnn_layer` (a CPU
        # library call, not Core ATen); disabled, it decomposes to matmuls and pointwise ops.
        with mode, torch.backends.mkldnn.flags(enabled=False):
            gm = make_fx(fn, decomposition_table=table, tracing_mode="symbolic",
                         _allow_non_fake_inputs=True)(*placeholders)
            if _mutates(gm):
                # The decomposition updates intermediates in place (gru_cell's add_, sigmoid_, ...):
                # functionalized, it traces to the functional core ops. (Only then: functionalization
                # specializes some symbolic sizes that the plain trace keeps.)
                gm = make_fx(torch.func.functionalize(fn, remove="mutations"), decomposition_table=table,
                             tracing_mode="symbolic", _allow_non_fake_inputs=True)(*placeholders)
    except Exception as exc:  # PyTorch's error text names the problem; keep it
        raise DecompositionError(f"tracing its decomposition failed: {type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
    _check_no_specialization(shape_env, symbols)
    # Size arithmetic the decomposition does (torch.sym_max, a size passed as a tensor) in the
    # spelling the FX importer takes (see etmlir.frontend.sym_calls).
    if importable_sym_calls(gm.graph) | wrap_numbers_as_tensors(gm.graph):
        gm.recompile()
    return TracedDecomposition(gm, inputs)


def _mutates(gm: torch.fx.GraphModule) -> bool:
    """Whether a traced graph calls an op that writes one of its arguments."""
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op == "call_function" and schema is not None and schema.is_mutable:
            return True
    return False


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, (torch.Tensor, torch.SymInt))


def _check_no_specialization(shape_env: torch.fx.experimental.symbolic_shapes.ShapeEnv, symbols: list[sympy.Symbol]) -> None:
    if not symbols:
        return
    guards = [g.expr for g in shape_env.guards] + list(shape_env.replacements.items())
    for guard in guards:
        if isinstance(guard, tuple):  # a replacement s -> expr pins a symbol
            symbol, expr = guard
            if symbol in symbols:
                raise DecompositionError(f"its decomposition pins dynamic size {symbol} to {expr}")
            continue
        free = [s for s in guard.free_symbols if s in symbols]
        if not free:
            continue
        for sample in _GUARD_SAMPLES:
            if not bool(guard.subs({s: sample for s in free})):
                raise DecompositionError(
                    f"its decomposition only holds when {guard} (false for a dynamic size of {sample})")
