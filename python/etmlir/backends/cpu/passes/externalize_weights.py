"""et-cpu-externalize-weights: large constant globals become external symbols, linked from raw bytes.

After bufferization every weight is a `memref.global ... constant` whose
initializer LLVM would carry through its whole pipeline as one huge array
(10 s for MobileNetV2's 14 MB). Instead each one above `MIN_BYTES` becomes
an external declaration the code reads through its symbol,

    memref.global "private" constant @__constant_32x16x1x1xf32 : memref<32x16x1x1xf32> = dense_resource<w7>
becomes
    memref.global @etmlir_w3 : memref<32x16x1x1xf32>

recorded in the module attribute `etmlir.cpu.external_weights`
({etmlir_w3 = dense_resource<w7> : tensor<32x16x1x1xf32>}); the pipeline
links their bytes into the shared object's read-only data with an assembler
file (`.incbin`), 64-byte aligned, and drops the attribute before LLVM. The weights live in the
payload only: et-outline-delegates keeps a weight that ops outside the
delegate read too in the outer program, as a live-in.
"""

from __future__ import annotations

import os

import numpy as np
from torch_mlir import ir

from etmlir.dialects import attrs
from etmlir.executable.serialize import resource_blobs, resource_key
from etmlir.passes.registry import Option, register_pass

MIN_BYTES = 4096


def global_bytes(attr: ir.Attribute, blobs: dict[str, bytes] | None) -> bytes | None:
    """The bytes of a memref.global's initial value (a dense constant or a resource in `blobs`); None for a
    splat or a resource not given (the vulkan backend reads its weights with it too)."""
    key = resource_key(attr)
    if key is not None:
        return None if blobs is None else blobs.get(key)
    if isinstance(attr, ir.DenseElementsAttr) and not ir.DenseElementsAttr(attr).is_splat:
        return np.ascontiguousarray(np.array(ir.DenseElementsAttr(attr))).tobytes()
    return None


@register_pass("et-cpu-externalize-weights", options={
    "min-bytes": Option(int, MIN_BYTES, "smallest weight moved out of the IR (smaller ones stay LLVM constants)",
                        minimum=0)})
def externalize_weights(module: ir.Operation, *, min_bytes: int = MIN_BYTES) -> None:
    """et-cpu-externalize-weights: large constant memref.globals become external symbols (bytes kept aside)."""
    candidates = []
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "memref.global" or "constant" not in op.attributes or "initial_value" not in op.attributes:
            continue
        t = ir.MemRefType(ir.TypeAttr(op.attributes["type"]).value)
        count = int(np.prod(t.shape)) if t.rank else 1
        value = op.attributes["initial_value"]
        splat = isinstance(value, ir.DenseElementsAttr) and ir.DenseElementsAttr(value).is_splat
        element_bytes = (getattr(t.element_type, "width", 32) + 7) // 8
        if count * element_bytes >= min_bytes and not splat:
            candidates.append(op)
    if not candidates:
        return
    recorded = dict(_recorded(module))
    renames: dict[str, str] = {}
    for op in candidates:
        old = ir.StringAttr(op.attributes["sym_name"]).value
        new = f"etmlir_w{len(recorded)}"
        renames[old] = new
        recorded[new] = op.attributes["initial_value"]
        op.attributes["sym_name"] = ir.StringAttr.get(new)
        del op.attributes["initial_value"]
        del op.attributes["constant"]
        if "sym_visibility" in op.attributes:
            del op.attributes["sym_visibility"]
        if "alignment" not in op.attributes:
            op.attributes["alignment"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)
    module.attributes[attrs.CPU_EXTERNAL_WEIGHTS] = ir.DictAttr.get(recorded)

    def rename(op: ir.Operation) -> ir.WalkResult:
        if op.name == "memref.get_global":
            name = ir.FlatSymbolRefAttr(op.attributes["name"]).value
            if name in renames:
                op.attributes["name"] = ir.FlatSymbolRefAttr.get(renames[name])
        return ir.WalkResult.ADVANCE

    module.walk(rename)


def _recorded(module: ir.Operation) -> list[tuple[str, ir.Attribute]]:
    if attrs.CPU_EXTERNAL_WEIGHTS not in module.attributes:
        return []
    return [(named.name, named.attr) for named in ir.DictAttr(module.attributes[attrs.CPU_EXTERNAL_WEIGHTS])]


def take_external_weights(module: ir.Operation) -> list[tuple[str, bytes]]:
    """The (symbol, bytes) the pass set aside, removing its record from `module` (before LLVM)."""
    recorded = _recorded(module)
    if not recorded:
        return []
    blobs = resource_blobs(module) if any(resource_key(value) for _, value in recorded) else None
    found = []
    for symbol, value in recorded:
        data = global_bytes(value, blobs)
        if data is None:
            raise ValueError(f"et-cpu-externalize-weights: no bytes for weight {symbol} ({str(value)[:80]})")
        found.append((symbol, data))
    del module.attributes[attrs.CPU_EXTERNAL_WEIGHTS]
    return found


def write_weights_assembly(weights: list[tuple[str, bytes]], directory: str) -> str:
    """An assembler file that defines each weight symbol as its bytes (read-only, 64-byte aligned)."""
    lines = ['.section .rodata.etmlir_weights,"a"']
    for symbol, data in weights:
        path = os.path.join(directory, f"{symbol}.bin")
        with open(path, "wb") as f:
            f.write(data)
        lines += [".balign 64", f".globl {symbol}", f".type {symbol}, @object",
                  f".size {symbol}, {len(data)}", f"{symbol}:", f'.incbin "{path}"']
    lines.append('.section .note.GNU-stack,"",@progbits')
    asm = os.path.join(directory, "weights.s")
    with open(asm, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return asm
