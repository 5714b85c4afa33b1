"""Which edge ops the `cpu` backend compiles: the float ops on the hot paths and the ops around them.

The list is what a CNN or a transformer spends its time in (convolutions,
matrix products, normalizations, activations, pooling) plus the copy and
view ops between them and the ops that build masks, positions and padding,
so that a delegate spans a whole model instead of stopping at every
reshape or mask. What is left (gathers, scatters, cumsum, indexing by
computed tensors, and each refusal a predicate below states) stays on the portable
kernels, which the delegation report says op by op. The predicates come
from PyTorch's OpInfo samples (test_cpu_opinfo.py): each names what
torch-mlir's lowering gets wrong or cannot compile.

Every tensor a compute op reads or writes must be f32 (0-d constant Scalar
operands such as addmm's alpha aside): the code generator and its
microkernels are single precision. The ops that build masks and positions
around them (comparisons, logic, `any`, `full_like`, dtype conversions, integer
adds, and the copies and views) also take bool, int32 and int64 tensors
(`ANY_DTYPE_OPS`), so that a decoder's attention mask and rotary positions
do not cut its layers into separate delegates; creation ops (`full`,
`arange`, `scalar_tensor`) and constant padding likewise. Dynamic dimensions are fine
(the payload computes output shapes at run time), so nanoGPT's sequence
length stays dynamic inside a delegate. Tensors of rank up to 6 are taken
(grouped-query attention repeats its keys through rank-5 views).

`CPU_OPS` is the part of the table the vulkan backend shares; `CPU_ONLY_OPS`
is what only this backend compiles (transcendentals that the SPIR-V path
does not lower, and the non-f32 ops).
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.delegation.operator_support import OperatorSupport, OpPredicate
from etmlir.passes import fold_constants


def _not_transposed(op: ir.Operation) -> str | None:
    if "transposed" in op.attributes and ir.BoolAttr(op.attributes["transposed"]).value:
        return "transposed convolution is not compiled by the cpu backend"
    return None


def _conv2d_only(op: ir.Operation) -> str | None:
    reason = _not_transposed(op)
    if reason:
        return reason
    rank = ir.RankedTensorType(op.operands[0].type).rank
    if rank != 4:
        return f"only 2-d convolutions (4-d inputs) are compiled; this one has a rank-{rank} input"
    return None


def _max_pool_values_only(op: ir.Operation) -> str | None:
    """Max pooling whose indices nothing reads (inference): the values lower to a linalg pooling op."""
    if any(True for _ in op.results[1].uses):
        return "max pooling whose indices are used is not compiled by the cpu backend"
    rank = ir.RankedTensorType(op.operands[0].type).rank
    if rank != 4:
        return f"only 2-d max pooling (4-d inputs) is compiled; this one has a rank-{rank} input"
    return None


# Ops that only move elements: they take any dtype the backend does and empty tensors.
COPIES_AND_VIEWS = ("edge.view_copy", "edge.permute_copy", "edge.transpose_copy_int", "edge.expand_copy",
                    "edge.unsqueeze_copy", "edge.squeeze_copy_dims", "edge.squeeze_copy_dim", "edge.clone",
                    "edge.alias_copy", "edge.cat", "edge.slice_copy_tensor", "edge.split_with_sizes_copy")

# Op name -> None, or a check of one instance (a reason when refused).
CPU_OPS: dict[str, OpPredicate | None] = {
    # Contractions: microkernels.
    "edge.convolution": _conv2d_only,
    "edge.addmm": None,
    "edge.mm": None,
    "edge.bmm": None,
    # Normalization, reductions, pooling.
    "edge.native_batch_norm_legit_no_training": None,
    "edge.native_layer_norm": None,
    "edge.softmax": None,
    "edge.log_softmax": None,
    "edge.mean_dim": None,
    "edge.avg_pool2d": None,
    "edge.max_pool2d_with_indices": _max_pool_values_only,
    "edge.adaptive_avg_pool2d": None,
    # Elementwise arithmetic and activations.
    "edge.add_tensor": None,
    "edge.add_scalar": None,
    "edge.sub_tensor": None,
    "edge.sub_scalar": None,
    "edge.mul_tensor": None,
    "edge.mul_scalar": None,
    "edge.div_tensor": None,
    "edge.div_scalar": None,
    "edge.neg": None,
    "edge.exp": None,
    "edge.erf": None,
    "edge.rsqrt": None,
    "edge.relu": None,
    "edge.hardtanh": None,
    "edge.clamp": None,
    "edge.gelu": None,
    "edge.sigmoid": None,
    "edge.tanh": None,
    "edge.leaky_relu": None,
    "edge.where_self": None,
    # Copies and views between them.
    **dict.fromkeys(COPIES_AND_VIEWS),
}


def _contiguous_dim_order(op: ir.Operation) -> str | None:
    """A dtype conversion; a dim order other than the identity (channels-last) is a layout change."""
    if "dim_order" in op.attributes:
        order = list(ir.DenseI64ArrayAttr(op.attributes["dim_order"]))
        if order != sorted(order):
            return f"a copy to dim order {order} (not contiguous) is not compiled by the cpu backend"
    return None


def _conv1d_or_2d(op: ir.Operation) -> str | None:
    """2-d convolutions, and 1-d ones with static shapes (et-conv1d-to-conv2d gives them a unit height)."""
    reason = _not_transposed(op)
    if reason:
        return reason
    t = ir.RankedTensorType(op.operands[0].type)
    if t.rank == 3:
        if not (t.has_static_shape and ir.RankedTensorType(op.results[0].type).has_static_shape):
            return "a 1-d convolution is compiled with static shapes only"
        return None
    return _conv2d_only(op)


def _static_input(op: ir.Operation) -> str | None:
    """torch-mlir's group norm reshapes with an inferred dim, an integer division by N * groups: a dynamic batch
    of 0 would divide by zero (SIGFPE) at run time, so only static inputs are taken (and, as for every op, no
    empty tensor)."""
    if not ir.RankedTensorType(op.operands[0].type).has_static_shape:
        return "group norm is compiled for static input shapes only"
    return None


def _reduces_a_tensor(op: ir.Operation) -> str | None:
    """A reduction over a dim of a 0-d tensor has no torch-mlir lowering."""
    if ir.RankedTensorType(op.operands[0].type).rank == 0:
        return "a reduction of a 0-d tensor is left to the portable kernels"
    return None


def _result_dtype_in(*dtypes: str) -> OpPredicate:
    """A creation op whose result dtype torch-mlir lowers right (OpInfo: full(True) gave False, arange to
    int32 from float bounds does not compile)."""
    def check(op: ir.Operation) -> str | None:
        element = str(ir.RankedTensorType(op.results[0].type).element_type)
        if element not in dtypes:
            return f"{op.name.removeprefix('edge.')} making {element} is left to the portable kernels"
        return None
    return check


def _static_result(op: ir.Operation) -> str | None:
    """A result of static sizes: with dynamic ones, torch-mlir's embedding lowering leaves a computation in the
    delegate's shapes function, and an arange's length (from a sequence length) is a value that function
    cannot compute without running it."""
    if not ir.RankedTensorType(op.results[0].type).has_static_shape:
        return f"{op.name.removeprefix('edge.')} with sizes known only at run time is left to the portable kernels"
    return None


_ARANGE_DTYPES = _result_dtype_in("f32", "i64")


def _static_arange(op: ir.Operation) -> str | None:
    return _static_result(op) or _ARANGE_DTYPES(op)


def _constant_gather(op: ir.Operation) -> str | None:
    """Indexing by tensors whose table and indices are all constants (LeViT's and Swin's relative position
    biases: a learned table gathered through a fixed index map): et-fold-constants, the delegate's first
    step, computes it at compile time, so no gather is compiled and the model is not cut in two there."""
    if not fold_constants.is_candidate(op):
        return "indexing by tensors is compiled only when the table and the indices are constants that " \
               "et-fold-constants folds at compile time (this one reads a computed or too large tensor)"
    return None


def _non_negative_padding(op: ir.Operation) -> str | None:
    pads = list(ir.DenseI64ArrayAttr(op.attributes["pad"])) if "pad" in op.attributes else []
    if any(p < 0 for p in pads):
        return f"negative padding {pads} (a crop) is left to the portable kernels"
    return None


# Compiled by this backend only (not by vulkan, which shares CPU_OPS); an entry here replaces CPU_OPS's.
ATTENTION = "edge.scaled_dot_product_attention"


def _attention(op: ir.Operation) -> str | None:
    """Inference attention (no dropout) with a static head size: one call of the fused kernel
    (et-cpu-attention); grouped-query attention repeats its keys and values first (torch-mlir)."""
    if ir.FloatAttr(op.attributes["dropout_p"]).value != 0.0:
        return "attention with dropout (training) is not compiled by the cpu backend"
    for i, what in ((0, "query"), (1, "key"), (2, "value")):
        t = ir.RankedTensorType(op.operands[i].type)
        if t.rank not in (3, 4):
            return f"attention over a rank-{t.rank} {what} is not compiled (rank 3 or 4 is)"
        if t.is_dynamic_dim(t.rank - 1):
            return f"attention whose {what} has a dynamic head size is not compiled"
    return None


CPU_ONLY_OPS: dict[str, OpPredicate | None] = {
    "edge.convolution": _conv1d_or_2d,
    # Kept whole by to_edge when asked (CpuBackend.keep): the fused attention kernel.
    ATTENTION: _attention,
    # Transcendentals and powers (rotary embeddings, RMSNorm).
    "edge.cos": None,
    "edge.sin": None,
    "edge.pow_tensor_scalar": None,
    "edge.pow_tensor_tensor": None,
    "edge.sqrt": None,
    "edge.log": None,
    "edge.abs": None,
    "edge.maximum": None,
    "edge.minimum": None,
    "edge.sum_dim_intlist": _reduces_a_tensor,
    "edge.amax": _reduces_a_tensor,
    "edge.native_group_norm": _static_input,
    # Masks and positions: comparisons, logic, conversions.
    "edge.eq_scalar": None,
    "edge.eq_tensor": None,
    "edge.ne_scalar": None,
    "edge.ne_tensor": None,
    "edge.lt_scalar": None,
    "edge.le_scalar": None,
    "edge.gt_scalar": None,
    "edge.ge_scalar": None,
    "edge.lt_tensor": None,
    "edge.le_tensor": None,
    "edge.gt_tensor": None,
    "edge.ge_tensor": None,
    "edge.logical_not": None,
    "edge.logical_and": None,
    "edge.logical_or": None,
    "edge.bitwise_not": None,
    "edge.bitwise_and_tensor": None,
    "edge.bitwise_or_tensor": None,
    "edge.any_dim": _reduces_a_tensor,
    "edge.full_like": None,
    "edge.full": _result_dtype_in("f32", "i32", "i64"),
    "edge.scalar_tensor": None,
    "edge.arange_start_step": _static_arange,
    # Padding (TF-style "same" convolutions pad explicitly) and indexing by a constant.
    "edge.constant_pad_nd": _non_negative_padding,
    "edge.select_copy_int": None,
    "edge.index_tensor": _constant_gather,
    # Token and position lookups (an index out of range is an error naming the op, as in eager).
    "edge.embedding": _static_result,
    "edge.to_dim_order_copy": _contiguous_dim_order,
}

# Ops whose tensors may be bool, int32 or int64 as well as f32 (every other op is f32 only).
ANY_DTYPE_OPS = frozenset((
    "edge.eq_scalar", "edge.eq_tensor", "edge.ne_scalar", "edge.ne_tensor", "edge.lt_scalar", "edge.le_scalar", "edge.gt_scalar",
    "edge.ge_scalar", "edge.lt_tensor", "edge.le_tensor", "edge.gt_tensor", "edge.ge_tensor", "edge.logical_not",
    "edge.logical_and", "edge.logical_or", "edge.bitwise_not", "edge.bitwise_and_tensor", "edge.bitwise_or_tensor",
    "edge.any_dim", "edge.full_like", "edge.full", "edge.scalar_tensor", "edge.arange_start_step",
    "edge.to_dim_order_copy", "edge.where_self", "edge.constant_pad_nd", "edge.select_copy_int",
    "edge.maximum", "edge.minimum", "edge.abs", "edge.neg", "edge.embedding", "edge.index_tensor",
    "edge.add_tensor", "edge.add_scalar", "edge.sub_tensor", "edge.sub_scalar", "edge.mul_tensor", "edge.mul_scalar",
    *COPIES_AND_VIEWS,
))
_ANY_DTYPES = ("f32", "i1", "i32", "i64")



def float_tensors(op: ir.Operation) -> str | None:
    """Every tensor is f32, except 0-d Scalar operands (alpha, beta, sizes), where's boolean condition and
    max pooling's unused indices."""
    return _tensor_dtypes(op, ("f32",), "f32 tensors")


def _tensor_dtypes(op: ir.Operation, allowed: tuple[str, ...], what: str) -> str | None:
    """The first tensor whose dtype is not in `allowed` (with float_tensors' exceptions), said as a reason."""
    for kind, values in (("operand", op.operands), ("result", op.results)):
        for i, value in enumerate(values):
            if not isinstance(value.type, ir.RankedTensorType):
                continue
            t = ir.RankedTensorType(value.type)
            if kind == "operand" and t.rank == 0 and _is_constant_or_size(value):
                continue
            if kind == "operand" and i == 0 and op.name == "edge.where_self" and str(t.element_type) == "i1":
                continue
            if kind == "operand" and i == 3 and op.name == ATTENTION and str(t.element_type) == "i1":
                continue  # attention's boolean mask
            if kind == "result" and i == 1 and op.name == "edge.max_pool2d_with_indices" and not any(
                    True for _ in value.uses):
                continue  # indices nothing reads (the op's own predicate refuses the rest)
            if str(t.element_type) not in allowed:
                return f"{kind} {i} has dtype {t.element_type}; the cpu backend compiles {what}"
    return None


def _is_constant_or_size(value: ir.Value) -> bool:
    """A compile-time constant or a size query: both are copied into the delegate and read as scalars."""
    owner = value.owner
    return isinstance(owner, (ir.Operation, ir.OpView)) and owner.name in ("edge.constant", "edge.sym_size_int")


def _empty_tensor(op: ir.Operation) -> str | None:
    """An operand or a used result without elements (torch-mlir's group norm divides by zero on one)."""
    for kind, values in (("operand", op.operands), ("result", op.results)):
        for i, value in enumerate(values):
            if kind == "result" and not any(True for _ in value.uses):
                continue  # an unused placeholder (batch norm's saved mean and invstd are tensor<0xf32>)
            if isinstance(value.type, ir.RankedTensorType) and 0 in ir.RankedTensorType(value.type).shape:
                return f"{kind} {i} ({value.type}) has no elements; it is left to the portable kernels"
    return None


def cpu_tensors(op: ir.Operation) -> str | None:
    """float_tensors, except that ANY_DTYPE_OPS may also read and write bool, int32 and int64 tensors; and no
    empty tensor outside copies and views (phi3's partial rotary embedding slices and concatenates empty
    halves, which the copies handle)."""
    reason = None if op.name in COPIES_AND_VIEWS else _empty_tensor(op)
    if reason:
        return reason
    if op.name not in ANY_DTYPE_OPS:
        return float_tensors(op)
    return _tensor_dtypes(op, _ANY_DTYPES, f"{', '.join(_ANY_DTYPES)} tensors for this op")


MAX_RANK = 6
CPU_SUPPORT = OperatorSupport(ops={**CPU_OPS, **CPU_ONLY_OPS}, max_rank=MAX_RANK, predicates=(cpu_tensors,))
