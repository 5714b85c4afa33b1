"""Kernel signature strings, derived from the operators' PyTorch schemas.

A runtime kernel is registered with one character per argument (the table in
include/etmlir/runtime/kernel.h) and a '|' before its outputs; the method
loader checks every call against it. This module computes the string a
kernel must have from the schema its out variant has in PyTorch (or in
`etmlir.executable.out_variants` for etmlir's own kernels):
`scripts/gen_kernels.py` writes it into the portable kernels' generated
registration, and a test checks every registered kernel against it.

    expected_signature("aten::add.out")  ==  "TTs|T"
"""

from __future__ import annotations

from etmlir.executable import out_variants
from etmlir.lazy import lazy_module

torch = lazy_module("torch")

# Schema type (str(arg.type), after stripping alias annotations) -> kind.
_KINDS = {
    "Tensor": "T", "Tensor?": "t",
    "int": "i", "SymInt": "i", "int?": "I", "SymInt?": "I",
    "float": "f", "float?": "F",
    "Scalar": "s", "Scalar?": "S", "number": "s", "number?": "S",
    "bool": "b", "bool?": "B",
    "int[]": "L", "SymInt[]": "L", "int[]?": "M", "SymInt[]?": "M",
    "float[]": "D", "float[]?": "G",
    "bool[]": "E",
    "str": "Q", "str?": "R",
    "Tensor[]": "X", "Tensor?[]": "Y", "List[Tensor]": "X", "List[Optional[Tensor]]": "Y",
    "ScalarType": "i", "ScalarType?": "I", "MemoryFormat": "i", "MemoryFormat?": "I",
    "Layout?": "I", "Device?": "?", "Generator?": "?",
}


class UnknownSchemaType(ValueError):
    pass


def _kind(arg: torch._C.Argument) -> str:
    text = str(arg.type)
    # int[1]? and friends: the declared length is not part of the type.
    normalized = text.replace("List[int]", "int[]").replace("List[SymInt]", "SymInt[]")
    normalized = normalized.replace("Optional[int[]]", "int[]?").replace("Optional[SymInt[]]", "SymInt[]?")
    normalized = normalized.replace("List[float]", "float[]").replace("Optional[float[]]", "float[]?")
    normalized = normalized.replace("List[bool]", "bool[]")
    if normalized.startswith("Optional[") and normalized.endswith("]"):
        normalized = normalized[len("Optional["):-1] + "?"
    if normalized not in _KINDS:
        raise UnknownSchemaType(f"no signature kind for schema type {text!r} (argument {arg.name})")
    return _KINDS[normalized]


def schema_of(kernel: str) -> torch._C.FunctionSchema:
    """The schema of a runtime kernel name ("aten::add.out", "etmlir::_to_dim_order_copy.out", ...)."""
    for variant in out_variants.DECLARED_KERNELS.values():
        if variant.kernel == kernel:
            return torch._C.parse_schema(variant.schema)
    for schema in out_variants.PRIM_KERNELS.values():
        if schema.split("(", 1)[0] == kernel:
            return torch._C.parse_schema(schema)
    namespace, rest = kernel.split("::", 1)
    name, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, namespace), name)
    return getattr(packet, overload or "default")._schema


def expected_signature(kernel: str) -> str:
    schema = schema_of(kernel)
    inputs, outputs = [], []
    for arg in schema.arguments:
        info = arg.alias_info
        (outputs if info is not None and info.is_write else inputs).append(_kind(arg))
    if kernel.startswith("etmlir_prim::"):
        # The result is an Int argument the kernel writes.
        outputs = [_kind(r) for r in schema.returns]
    return "".join(inputs) + "|" + "".join(outputs)
