"""Weights out of the LLVM module: large constants become external symbols linked from raw bytes.

After bufferization every weight is a `memref.global ... constant` whose
initializer LLVM would carry through its whole pipeline as one huge array
(10 s for MobileNetV2's 14 MB). Instead each one above `MIN_BYTES` becomes
an external declaration the code reads through its symbol,

    memref.global "private" constant @__constant_32x16x1x1xf32 : memref<32x16x1x1xf32> = dense_resource<w7>
becomes
    memref.global @etmlir_w3 : memref<32x16x1x1xf32>

and its bytes are linked into the shared object's read-only data by an
assembler file (`.incbin`), 64-byte aligned. The weights live in the
payload only: et-outline-delegates keeps a weight that ops outside the
delegate read too in the outer program, as a live-in.
"""

from __future__ import annotations

import os

import numpy as np
from torch_mlir import ir

from etmlir.executable.serialize import resource_blobs, resource_key

MIN_BYTES = 4096


def _global_bytes(attr: ir.Attribute, blobs: dict[str, bytes] | None) -> bytes | None:
    key = resource_key(attr)
    if key is not None:
        return None if blobs is None else blobs.get(key)
    if isinstance(attr, ir.DenseElementsAttr) and not ir.DenseElementsAttr(attr).is_splat:
        return np.ascontiguousarray(np.array(ir.DenseElementsAttr(attr))).tobytes()
    return None


def externalize_weights(module: ir.Module) -> list[tuple[str, bytes]]:
    """Turn large constant globals into external symbols; returns (symbol, bytes) to link in."""
    candidates = []
    for op in module.body.operations:
        op = op.operation
        if op.name != "memref.global" or "constant" not in op.attributes or "initial_value" not in op.attributes:
            continue
        t = ir.MemRefType(ir.TypeAttr(op.attributes["type"]).value)
        count = int(np.prod(t.shape)) if t.rank else 1
        if count * 4 < MIN_BYTES:
            continue
        candidates.append(op)
    if not candidates:
        return []
    blobs = resource_blobs(module.operation) if any(
        resource_key(op.attributes["initial_value"]) for op in candidates) else None
    found: list[tuple[str, bytes]] = []
    with module.context:
        renames: dict[str, str] = {}
        for op in candidates:
            data = _global_bytes(op.attributes["initial_value"], blobs)
            if data is None:
                continue
            old = ir.StringAttr(op.attributes["sym_name"]).value
            new = f"etmlir_w{len(found)}"
            renames[old] = new
            op.attributes["sym_name"] = ir.StringAttr.get(new)
            del op.attributes["initial_value"]
            del op.attributes["constant"]
            if "sym_visibility" in op.attributes:
                del op.attributes["sym_visibility"]
            if "alignment" not in op.attributes:
                op.attributes["alignment"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)
            found.append((new, data))

        def rename(op: ir.Operation) -> ir.WalkResult:
            if op.name == "memref.get_global":
                name = ir.FlatSymbolRefAttr(op.attributes["name"]).value
                if name in renames:
                    op.attributes["name"] = ir.FlatSymbolRefAttr.get(renames[name])
            return ir.WalkResult.ADVANCE

        module.operation.walk(rename)
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
