"""Element types as the `.pte` numbers them (c10::ScalarType) and their sizes."""

from __future__ import annotations

from torch_mlir import ir

# MLIR element type (as printed) -> (ScalarType number, bytes per element, name).
ELEMENT_TYPES: dict[str, tuple[int, int, str]] = {
    "ui8": (0, 1, "uint8"),
    "i8": (1, 1, "int8"),
    "i16": (2, 2, "int16"),
    "i32": (3, 4, "int32"),
    "i64": (4, 8, "int64"),
    "f16": (5, 2, "float16"),
    "f32": (6, 4, "float32"),
    "f64": (7, 8, "float64"),
    "i1": (11, 1, "bool"),
    "bf16": (15, 2, "bfloat16"),
}
SCALAR_TYPE_NAMES = {code: name for code, _, name in ELEMENT_TYPES.values()}

# `torch.contiguous_format` ... as c10 numbers them (MemoryFormat, Layout).
MEMORY_FORMATS = {"torch.contiguous_format": 0, "torch.preserve_format": 1, "torch.channels_last": 2,
                  "torch.channels_last_3d": 3}
LAYOUTS = {"torch.strided": 0, "torch.sparse_coo": 1}


class UnsupportedElementType(ValueError):
    pass


def element_info(element_type: ir.Type) -> tuple[int, int, str]:
    """(ScalarType number, element size, name) of an MLIR element type."""
    key = str(element_type)
    if key not in ELEMENT_TYPES:
        raise UnsupportedElementType(f"element type {key} has no .pte ScalarType "
                                     f"(supported: {', '.join(ELEMENT_TYPES)})")
    return ELEMENT_TYPES[key]


def nbytes(sizes: list[int], element_type: ir.Type) -> int:
    count = 1
    for s in sizes:
        count *= s
    return count * element_info(element_type)[1]
