"""Call one runtime kernel on Python values, for kernel tests and debugging.

    from etmlir.runtime import kernels
    (y,) = kernels.call("aten::add.out", a, b, 1, kernels.Out(a.shape, np.float32))

Arguments map to EValues the way the `.pte` encodes them: arrays and torch
tensors become tensors, `Out(shape, dtype, dynamic=False)` an output tensor
planned at `shape` (an upper bound when dynamic), a list of `Out` an output
tensor list, int/float/bool/None/str the scalar kinds, and lists of ints,
floats, bools or tensors the list kinds. Returns every `Out`'s final
contents, resized, in order: numpy arrays, except bfloat16 ones, which come
back as torch tensors (numpy has no bfloat16; bfloat16 inputs and `Out`s
must be torch tensors and dtypes). The call goes through the same signature
check as method loading.

Random kernels draw from a generator seeded with `seed`; without one they
fail (a Method always has one: `Method.set_seed`):

    (x,) = kernels.call("aten::randn.out", [2, 3], kernels.Out((2, 3), torch.float32), seed=0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from etmlir import _runtime
from etmlir.runtime import _is_torch, _seed_value, _to_array

Error = _runtime.Error


@dataclass(frozen=True)
class Out:
    shape: Sequence[int]
    dtype: Any = np.float32
    dynamic: bool = False

    def buffer(self) -> Any:
        if _is_bfloat16(self.dtype):
            import torch

            return torch.zeros(tuple(self.shape), dtype=torch.bfloat16)
        return np.zeros(tuple(self.shape), dtype=_numpy_dtype(self.dtype))


def _is_bfloat16(dtype: Any) -> bool:
    return type(dtype).__module__ == "torch" and str(dtype) == "torch.bfloat16"


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
        return ("tensor", _to_array(arg))
    if isinstance(arg, (list, tuple)):
        items = list(arg)
        if items and all(isinstance(i, Out) for i in items):
            return ("out_list", [(i.buffer(), i.dynamic) for i in items])
        if items and any(_is_tensor(i) for i in items):
            if any(i is None for i in items):
                return ("optional_tensor_list", [None if i is None else _to_array(i) for i in items])
            return ("tensor_list", [_to_array(i) for i in items])
        if all(isinstance(i, (bool, np.bool_)) for i in items) and items:
            return ("bool_list", [bool(i) for i in items])
        if all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in items):
            return ("int_list", [int(i) for i in items])
        return ("double_list", [float(i) for i in items])
    raise TypeError(f"kernels.call: cannot pass a {type(arg).__name__}")


def _run(name: str, args: tuple, temp_bytes: int, seed: int | None) -> list:
    seed = None if seed is None else _seed_value(seed, f"kernels.call({name!r})")
    return _runtime.run_kernel(name, [_encode(a) for a in args], temp_bytes, seed)


def call(name: str, *args: Any, temp_bytes: int = 64 << 20, seed: int | None = None) -> tuple[Any, ...]:
    """Runs kernel `name` once; returns the outputs (see the module docstring)."""
    outs, _, _ = _run(name, args, temp_bytes, seed)
    return tuple(outs)


def call_ints(name: str, *args: Any) -> list[int]:
    """Runs a kernel that writes Int arguments (etmlir_prim::sym_size.int); returns every Int argument after the call."""
    _, ints, _ = _run(name, args, 64 << 20, None)
    return list(ints)


def call_scalars(name: str, *args: Any) -> list[int | float | bool]:
    """Runs a kernel that writes scalar outputs (etmlir_prim::_local_scalar_dense); returns them.

    Pass each result slot as a value of the kind the program would plan (0, 0.0 or False):

        kernels.call_scalars("etmlir_prim::_local_scalar_dense", torch.tensor(2.5), 0.0)  # [2.5]
    """
    _, _, scalars = _run(name, args, 64 << 20, None)
    return list(scalars)


def registered() -> list[str]:
    """Names of every kernel this runtime has registered."""
    return list(_runtime.registered_kernels())


def signature(name: str) -> str:
    """The registered signature string of a kernel (see include/etmlir/runtime/kernel.h)."""
    return _runtime.kernel_signature(name)
