"""Bundled programs: a `.pte` that carries test cases, so a device can check itself.

    data = etmlir.devtools.bundle(et_program, (x,), model(x), atol=1e-4, rtol=1e-4)
    open("model.pte", "wb").write(data)        # then, on the device: et-run model.pte --verify
    etmlir.runtime.load(data).verify()         # the same check from Python
    etmlir.devtools.bundled_cases(data)        # what the file carries, as numpy arrays

A case is a method's inputs and the outputs it should give, with tolerances:
an output passes when every element satisfies |actual - expected| <= atol +
rtol * |expected| (NaN matches NaN). The expected outputs are what the user
says they are, usually PyTorch eager's on the same inputs; bundling the
program's own outputs would only check that a device agrees with this host.

The file stays a normal `.pte` (schema: runtime/schema/program.fbs,
`BundledCase`): the tensors' bytes go into one data segment of their own
(64-byte aligned, so a runtime reads them in place), the cases into
`Program.bundled_cases`, a field appended to the schema, so a runtime that
predates it loads and runs the file as before. Bundling a bundled program
adds cases to those it has; the program itself (methods, weights, payloads
and their signatures) is copied unchanged.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from etmlir.executable import pte as pte_file
from etmlir.executable.dtypes import SCALAR_TYPE_NAMES

# numpy dtype name -> ScalarType code; bfloat16 comes from torch (numpy has none).
_CODES = {name: code for code, name in SCALAR_TYPE_NAMES.items()}
_NUMPY = {"uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
          "float16": np.float16, "float32": np.float32, "float64": np.float64, "bool": np.bool_}
_ALIGN = 64


class BundleError(ValueError):
    """Inputs or outputs that cannot be bundled, or a file whose cases cannot be read; names which."""


@dataclasses.dataclass(frozen=True)
class BundledCase:
    """One test case: `method` run on `inputs` must give `expected_outputs` within atol + rtol * |expected|.

    Arrays are numpy (a bfloat16 tensor as its raw uint16 bits, `dtypes` naming it)."""

    method: str
    name: str
    inputs: tuple[np.ndarray, ...]
    expected_outputs: tuple[np.ndarray, ...]
    atol: float
    rtol: float
    input_dtypes: tuple[str, ...] = ()
    output_dtypes: tuple[str, ...] = ()


def _array(value: Any, what: str) -> tuple[np.ndarray, str]:
    """(contiguous numpy array, dtype name) of a tensor or array."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency of the compiler side
        torch = None
    if torch is not None and isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        if tensor.dtype == torch.bfloat16:
            return tensor.view(torch.int16).numpy().view(np.uint16).copy(), "bfloat16"
        value = tensor.numpy()
    if isinstance(value, (bool, int, float)) or value is None:
        raise BundleError(f"{what} is a {type(value).__name__}; bundled test cases hold tensors only")
    array = np.ascontiguousarray(value)
    name = array.dtype.name
    if name not in _CODES:
        raise BundleError(f"{what} has dtype {array.dtype}, which a .pte cannot hold "
                          f"(supported: {', '.join(sorted(_CODES))})")
    return array, name


def _flat_outputs(expected: Any) -> list[Any]:
    """A tensor, or a (nested) tuple/list/dict of them, as a flat list in pytree order."""
    try:
        import torch.utils._pytree as pytree
        leaves, _ = pytree.tree_flatten(expected)
        return list(leaves)
    except ImportError:  # pragma: no cover
        return list(expected) if isinstance(expected, (list, tuple)) else [expected]


def _read(program: Any) -> bytes:
    if isinstance(program, (bytes, bytearray, memoryview)):
        return bytes(program)
    if isinstance(program, (str, os.PathLike)):
        with open(program, "rb") as f:
            return f.read()
    buffer = getattr(program, "buffer", None)  # an ExecutorchProgram
    if isinstance(buffer, (bytes, bytearray)):
        return bytes(buffer)
    raise BundleError(f"bundle takes an ExecutorchProgram, the .pte's bytes or its path, got {type(program).__name__}")


def bundle(program: Any, inputs: Sequence[Any], expected_outputs: Any, atol: float = 1e-5, rtol: float = 1e-5, *,
           method: str = "forward", name: str = "") -> bytes:
    """The `.pte` of `program` (an ExecutorchProgram, bytes or a path) with one more test case.

    `inputs`: the method's inputs, flat and in order, as `Method.call_flat` takes them (tensors or
    numpy arrays); a model whose forward takes nested structures takes them as
    `Method.__call__` would, flattened by the program's recorded call structure.
    `expected_outputs`: a tensor or a (nested) tuple/list/dict of tensors, usually eager's
    `model(*inputs)`. The case is checked here before it is written: the method must exist, take
    that many inputs of those dtypes and sizes (dynamic dims within their bounds), and return
    that many outputs of those dtypes.
    """
    if not (atol >= 0 and rtol >= 0):
        raise BundleError(f"atol and rtol must be >= 0, got atol={atol}, rtol={rtol}")
    data = _read(program)
    f = pte_file.read(data)
    methods = [m.name.decode() if isinstance(m.name, bytes) else m.name for m in f.program.methods or []]
    if method not in methods:
        raise BundleError(f"the program has no method '{method}' (methods: {', '.join(methods) or 'none'})")
    from etmlir import runtime
    loaded = runtime.load(data, allow_native_code=False)  # the signature and call structure, read once
    flat_inputs = _flat_inputs(loaded, method, inputs)
    arrays_in = [_array(v, f"input {i}") for i, v in enumerate(flat_inputs)]
    arrays_out = [_array(v, f"expected output {i}") for i, v in enumerate(_flat_outputs(expected_outputs))]
    _check_signature(loaded._native.method_meta(method), method, arrays_in, arrays_out)
    return _append_case(f, method, name, arrays_in, arrays_out, float(atol), float(rtol))


def _flat_inputs(loaded: Any, method: str, inputs: Sequence[Any]) -> list[Any]:
    """`inputs` flattened by the method's call structure (runtime.Program `loaded`), when it has one."""
    if not isinstance(inputs, (list, tuple)):
        raise BundleError(f"inputs are a tuple or list of the method's inputs, got {type(inputs).__name__}")
    structure = loaded._structure(method)
    meta = loaded._native.method_meta(method)
    if structure is None or structure.flat_inputs(len(meta["inputs"])):
        return list(inputs)
    try:
        return list(structure.flatten_call(tuple(inputs), {}))
    except Exception as error:  # the structure's own message says what does not match
        raise BundleError(f"inputs do not match method '{method}''s call structure: {error}") from None


def _check_signature(meta: dict[str, Any], method: str, arrays_in: list[tuple[np.ndarray, str]],
                     arrays_out: list[tuple[np.ndarray, str]]) -> None:
    """Each array against the method's signature (`meta`: the runtime's method_meta)."""
    for kind, arrays, specs in (("input", arrays_in, meta["inputs"]), ("output", arrays_out, meta["outputs"])):
        if len(arrays) != len(specs):
            raise BundleError(f"method '{method}' has {len(specs)} {kind}s; the case gives {len(arrays)}")
        for i, ((array, dtype), spec) in enumerate(zip(arrays, specs)):
            if spec is None:
                raise BundleError(f"method '{method}' {kind} {i} is not a tensor; bundled cases hold tensors only")
            shape = f"{dtype}{list(array.shape)}"
            if dtype != spec["dtype"] or array.ndim != len(spec["sizes"]):
                raise BundleError(f"{kind} {i} is {shape}; method '{method}' {kind} {i} is "
                                  f"{spec['dtype']}{spec['sizes']}")
            for d, (got, want, varies) in enumerate(zip(array.shape, spec["sizes"], spec["dynamic_dims"])):
                if (varies and got > want) or (not varies and got != want):
                    bound = f"at most {want}" if varies else f"{want}"
                    raise BundleError(f"{kind} {i} is {shape}; dim {d} of method '{method}' {kind} {i} is {bound}")


def _append_case(f: pte_file.PteFile, method: str, name: str, arrays_in: list[tuple[np.ndarray, str]],
                 arrays_out: list[tuple[np.ndarray, str]], atol: float, rtol: float) -> bytes:
    from etmlir.schema.BundledCase import BundledCaseT
    from etmlir.schema.BundledTensor import BundledTensorT
    from etmlir.schema.DataLocation import DataLocationT

    segments = [f.segment(i) for i in range(len(f.program.segments or []))]
    blob = bytearray()
    segment_index = len(segments)

    def tensor(array: np.ndarray, dtype: str) -> BundledTensorT:
        at = (len(blob) + _ALIGN - 1) // _ALIGN * _ALIGN
        blob.extend(bytes(at - len(blob)))
        raw = array.tobytes()
        blob.extend(raw)
        t = BundledTensorT()
        t.scalarType = _CODES[dtype]
        t.sizes = [int(s) for s in array.shape]
        t.data = DataLocationT()
        t.data.segment, t.data.offset, t.data.size = segment_index, at, len(raw)
        return t

    case = BundledCaseT()
    case.method, case.name = method, name
    case.inputs = [tensor(a, d) for a, d in arrays_in]
    case.expectedOutputs = [tensor(a, d) for a, d in arrays_out]
    case.atol, case.rtol = atol, rtol
    f.program.bundledCases = list(f.program.bundledCases or []) + [case]
    segments.append(bytes(blob) if blob else bytes(_ALIGN))
    return pte_file.pack(f.program, segments, f.header.segment_alignment)


def bundled_cases(program: Any) -> list[BundledCase]:
    """The test cases a `.pte` (ExecutorchProgram, bytes or path) carries, their tensors as numpy arrays."""
    data = _read(program)
    f = pte_file.read(data)
    out: list[BundledCase] = []
    for index, case in enumerate(f.program.bundledCases or []):
        def arrays(tensors: Any, kind: str) -> tuple[tuple[np.ndarray, ...], tuple[str, ...]]:
            got, names = [], []
            for i, t in enumerate(tensors or []):
                dtype = SCALAR_TYPE_NAMES.get(t.scalarType)
                if dtype is None or t.data is None:
                    raise BundleError(f"bundled test case {index}, {kind} {i}: scalar type {t.scalarType} or its "
                                      f"data location is not valid")
                try:
                    raw = f.segment(t.data.segment)[t.data.offset:t.data.offset + t.data.size]
                except pte_file.PteError as error:
                    raise BundleError(f"bundled test case {index}, {kind} {i}: {error}") from None
                element = np.dtype(np.uint16 if dtype == "bfloat16" else _NUMPY[dtype])
                sizes = [int(s) for s in (t.sizes if t.sizes is not None else [])]
                if len(raw) != t.data.size or t.data.size != int(np.prod(sizes, dtype=np.int64)) * element.itemsize:
                    raise BundleError(f"bundled test case {index}, {kind} {i}: {t.data.size} bytes do not hold "
                                      f"{dtype}{sizes}")
                got.append(np.frombuffer(raw, dtype=element).reshape(sizes).copy())
                names.append(dtype)
            return tuple(got), tuple(names)

        inputs, in_dtypes = arrays(case.inputs, "input")
        outputs, out_dtypes = arrays(case.expectedOutputs, "expected output")
        text = (lambda v: v.decode() if isinstance(v, bytes) else (v or ""))
        out.append(BundledCase(text(case.method), text(case.name), inputs, outputs, case.atol, case.rtol,
                               in_dtypes, out_dtypes))
    return out


__all__ = ["BundleError", "BundledCase", "bundle", "bundled_cases"]
