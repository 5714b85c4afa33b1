"""Tensor values as numpy arrays and MLIR attributes, bit for bit, bfloat16 included.

Weights, lifted constants and program state reach the IR as `dense_resource`
attributes over numpy arrays (`export._NumpyWeights`, `state.mark_state`), and
the serializer writes those arrays' bytes into the `.pte`. numpy has no
bfloat16, and `Tensor.numpy()` refuses one; torch-mlir's importer falls back to
`tolist()` and needs the `ml_dtypes` package for it. A bfloat16 tensor's bits
are 16-bit integers, so its array here is an `int16` view of the same bytes,
and the attribute takes its element type (bf16) from the tensor, not from the
array:

    literal_array(torch.tensor([1.5, -2.0], dtype=torch.bfloat16))
        -> array([16320, -16384], dtype=int16)         # 0x3FC0, 0xC000
    literal_attribute(t, array, "w")
        -> dense_resource<w> : tensor<2xbf16>

The int16 array's dtype carries `{"etmlir.dtype": "bfloat16"}` as numpy dtype
metadata (kept by views, slices and copies), so that `tensor_of_array` can hand
the values back as the bfloat16 tensor they are, not as integers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch_mlir import ir

from etmlir.lazy import lazy_module

torch = lazy_module("torch")

# Tensor dtypes numpy lacks -> the integer dtype of the same width whose view holds their bits.
_BIT_VIEWS = {"torch.bfloat16": "int16"}
_METADATA_KEY = "etmlir.dtype"


def literal_array(tensor: Any) -> np.ndarray | None:
    """`tensor`'s values as a contiguous numpy array with the same bytes.

    bfloat16 comes back as an int16 view of its bits. None for what numpy cannot
    hold bit for bit (quantized and complex-half tensors, float8 types): the
    caller leaves those to torch-mlir's importer, which names the dtype it refuses.
    """
    from torch_mlir.extras.fx_importer import TORCH_DTYPE_TO_NPY_TYPE

    if tensor.is_quantized:
        return None
    value = tensor.detach().cpu().contiguous()
    view = _BIT_VIEWS.get(str(tensor.dtype))
    if view is not None:
        tagged = np.dtype(view, metadata={_METADATA_KEY: str(tensor.dtype).removeprefix("torch.")})
        return value.view(getattr(torch, view)).numpy().view(tagged)
    if tensor.dtype not in TORCH_DTYPE_TO_NPY_TYPE:
        return None
    return value.numpy()


def tensor_of_array(array: np.ndarray) -> Any:
    """The torch tensor (sharing memory) whose values `array` holds: a `literal_array` result is
    read back in its tensor's dtype (an int16 array tagged bfloat16 as bfloat16)."""
    tensor = torch.from_numpy(array)
    name = (array.dtype.metadata or {}).get(_METADATA_KEY)
    return tensor.view(getattr(torch, name)) if name is not None else tensor


def mlir_tensor_type(tensor: Any) -> ir.RankedTensorType:
    """The builtin tensor type of `tensor` (shape and element type), in the current context."""
    from torch_mlir.extras.fx_importer import create_mlir_tensor_type

    return create_mlir_tensor_type(tensor)


def literal_attribute(tensor: Any, array: np.ndarray, resource_key: str) -> ir.Attribute:
    """A `dense_resource` attribute over `array` (from `literal_array(tensor)`) typed like `tensor`.

    The blob refers to `array`'s memory: keep the array alive as long as the module.
    """
    return ir.DenseResourceElementsAttr.get_from_buffer(array, resource_key, mlir_tensor_type(tensor))


def splat_attribute(tensor: Any) -> ir.Attribute | None:
    """A `dense<...>` attribute for a tensor of at most one element (the form torch-mlir's importer
    gives scalars and splats), or None for what `literal_array` cannot hold."""
    array = literal_array(tensor)
    if array is None:
        return None
    return ir.DenseElementsAttr.get(np.ascontiguousarray(array), type=mlir_tensor_type(tensor))


def splat_literal(gni: Any, tensor: Any) -> ir.Value | None:
    """A `torch.vtensor.literal` for a bfloat16 tensor of at most one element, built the way
    torch-mlir's importer builds one for other dtypes (`dense<...>`, no weight name), or None for
    any other tensor, which the importer's own path takes. `gni` is the importer's graph node
    importer, as `FxImporterHooks.resolve_literal` receives it."""
    if str(tensor.dtype) not in _BIT_VIEWS or tensor.numel() > 1:
        return None
    attr = splat_attribute(tensor)
    if attr is None:
        return None
    with ir.InsertionPoint(gni._b), ir.Location.unknown():
        op = ir.Operation.create("torch.vtensor.literal", results=[gni._cc.tensor_to_vtensor_type(tensor)],
                                 attributes={"value": attr})
    return op.result
