"""et-emit: write the planned etx module as a `.pte` file (FlatBuffer program + aligned segments).

The module must be at the etx level with every intermediate tensor planned:

    et-opt model.edge.mlir --et-to-out-variants --et-plan-memory --et-emit=model.pte

Each etx method becomes a method of the program; its value table is the
values its etx ops define, in order, and its instructions are its calls
(see `etmlir.executable.serialize`). Constant data comes from the module's
own `dense_resource` blobs, so the input must not have been printed with
elided weights. The module itself is left unchanged. `et-inspect` reads the
file back; `et-verify-pte` runs the FlatBuffers verifier on it.
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.executable.dtypes import UnsupportedElementType
from etmlir.executable.serialize import SerializeError, serialize
from etmlir.passes.registry import Option, PassFailure, emit_error, power_of_two, register_pass


@register_pass("et-emit", level="etx", options={
    "output": Option(str, "", "the .pte file to write (`--et-emit=PATH` is short for output=PATH)"),
    "segment-alignment": Option(int, 4096, "byte alignment of each data segment (for mmap)", minimum=1,
                                maximum=1 << 30, check=power_of_two),
})
def emit(module: ir.Operation, *, output: str, segment_alignment: int) -> None:
    """et-emit: serialize the planned etx module to a .pte file."""
    if not output:
        emit_error(module, "et-emit: no output file (use --et-emit=PATH or et-emit{output=PATH})")
        raise PassFailure()
    try:
        data = serialize(module, segment_alignment=segment_alignment)
    except (SerializeError, UnsupportedElementType, ValueError) as error:
        emit_error(module, f"et-emit: {error}")
        raise PassFailure() from None
    try:
        with open(output, "wb") as f:
            f.write(data)
    except OSError as error:
        emit_error(module, f"et-emit: cannot write '{output}': {error.strerror}")
        raise PassFailure() from None
