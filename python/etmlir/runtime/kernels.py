"""Call one runtime kernel on Python values, for kernel tests and debugging.

    from etmlir.runtime import kernels
    (y,) = kernels.call("aten::add.out", a, b, 1, kernels.Out(a.shape, np.float32))

Arguments map to EValues the way the `.pte` encodes them: arrays and torch
tensors become tensors, `Out(shape, dtype, dynamic=False)` an output tensor
planned at `shape` (an upper bound when dynamic), a list of `Out` an output
tensor list, int/float/bool/None/str the scalar kinds, and lists of ints,
floats, bools or tensors the list kinds. Returns every `Out`'s final
contents, resized, in order. The call goes through the same signature check
as method loading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from etmlir import _runtime
from etmlir.runtime import _is_torch, _to_numpy

Error = _runtime.Error


@dataclass(frozen=True)
class Out:
    shape: Sequence[int]
    dtype: Any = np.float32
    dynamic: bool = False

    def buffer(self) -> np.ndarray:
        return np.zeros(tuple(self.shape), dtype=_numpy_dtype(self.dtype))


def _numpy_dtype(dtype: Any) -> np.dtype:
    if type(dtype).__module__ == "torch":
        import torch

        return np.dtype(torch.empty((), dtype=dtype).numpy().dtype)
    return np.dtype(dtype)


def _is_tensor(value: Any) -> bool:
    return isinstance(value, np.ndarray) or _is_torch(value)


def _encode(arg: Any) -> tuple:
    if isinstance(arg, Out):
        return ("out", arg.buffer(), arg.dynamic)
    if arg is None:
        return ("none",)
    if isinstance(arg, (bool, np.bool_)):
        return ("bool", bool(arg))
    if isinstance(arg, (int, np.integer)):
        return ("int", int(arg))
    if isinstance(arg, (float, np.floating)):
        return ("double", float(arg))
    if isinstance(arg, str):
        return ("str", arg)
    if _is_tensor(arg):
        return ("tensor", _to_numpy(arg))
    if isinstance(arg, (list, tuple)):
        items = list(arg)
        if items and all(isinstance(i, Out) for i in items):
            return ("out_list", [(i.buffer(), i.dynamic) for i in items])
        if items and any(_is_tensor(i) for i in items):
            if any(i is None for i in items):
                return ("optional_tensor_list", [None if i is None else _to_numpy(i) for i in items])
            return ("tensor_list", [_to_numpy(i) for i in items])
        if all(isinstance(i, (bool, np.bool_)) for i in items) and items:
            return ("bool_list", [bool(i) for i in items])
        if all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in items):
            return ("int_list", [int(i) for i in items])
        return ("double_list", [float(i) for i in items])
    raise TypeError(f"kernels.call: cannot pass a {type(arg).__name__}")


def call(name: str, *args: Any, temp_bytes: int = 64 << 20) -> tuple[np.ndarray, ...]:
    """Runs kernel `name` once; returns the outputs (see the module docstring)."""
    outs, _ = _runtime.run_kernel(name, [_encode(a) for a in args], temp_bytes)
    return tuple(outs)


def call_ints(name: str, *args: Any) -> list[int]:
    """Runs a kernel that writes Int arguments (etmlir_prim::sym_size.int); returns every Int argument after the call."""
    _, ints = _runtime.run_kernel(name, [_encode(a) for a in args])
    return list(ints)


def registered() -> list[str]:
    """Names of every kernel this runtime has registered."""
    return list(_runtime.registered_kernels())


def signature(name: str) -> str:
    """The registered signature string of a kernel (see include/etmlir/runtime/kernel.h)."""
    return _runtime.kernel_signature(name)
