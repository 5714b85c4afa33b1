"""The `cpu` payload: a header (PAYLOAD.md) followed by the shared object.

    blob = write_payload(PayloadInfo(...), so_bytes)
    info, so_bytes = read_payload(blob)      # checks magic, sizes and the checksum

The format is specified in `runtime/backends/cpu/PAYLOAD.md`; the runtime
backend (`runtime/backends/cpu/cpu_backend.cpp`) reads the same bytes. The
Python reader exists for tests and for tools that show what a payload holds.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib

MAGIC = b"ETMLCPU1"
FORMAT_VERSION = 1
ABI_VERSION = 1
_FIXED = struct.Struct("<8sII16sQQQQIIII64s64s")  # 208 bytes
assert _FIXED.size == 208


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    dtype: int                   # runtime ScalarType code
    sizes: tuple[int, ...]       # -1: dynamic


@dataclasses.dataclass(frozen=True)
class PayloadInfo:
    arch: str
    cpu_features: int
    arena_bytes: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    debug_handles: tuple[int, ...]
    entry: str
    shapes_entry: str = ""


def write_payload(info: PayloadInfo, so: bytes) -> bytes:
    specs = b"".join(struct.pack("<ii", t.dtype, len(t.sizes)) + struct.pack(f"<{len(t.sizes)}q", *t.sizes)
                     for t in info.inputs + info.outputs)
    handles = struct.pack(f"<{len(info.debug_handles)}I", *info.debug_handles)
    header_bytes = _FIXED.size + len(specs) + len(handles)
    header_bytes = (header_bytes + 63) // 64 * 64
    fixed = _FIXED.pack(MAGIC, header_bytes, FORMAT_VERSION, info.arch.encode(), info.cpu_features, len(so),
                        zlib.crc32(so), info.arena_bytes, len(info.inputs), len(info.outputs), len(info.debug_handles),
                        ABI_VERSION, info.entry.encode(), info.shapes_entry.encode())
    header = fixed + specs + handles
    return header + bytes(header_bytes - len(header)) + so


def read_payload(blob: bytes) -> tuple[PayloadInfo, bytes]:
    """Parse and check a payload (ValueError naming what is wrong)."""
    if len(blob) < _FIXED.size:
        raise ValueError(f"payload of {len(blob)} bytes is shorter than the {_FIXED.size}-byte header")
    (magic, header_bytes, version, arch, features, so_bytes, checksum, arena, n_in, n_out, n_handles, abi,
     entry, shapes_entry) = _FIXED.unpack_from(blob)
    if magic != MAGIC:
        raise ValueError(f"not a cpu payload (magic {magic!r}, expected {MAGIC!r})")
    if version != FORMAT_VERSION or abi != ABI_VERSION:
        raise ValueError(f"payload format {version} / abi {abi}; this reader knows {FORMAT_VERSION} / {ABI_VERSION}")
    if header_bytes + so_bytes != len(blob):
        raise ValueError(f"payload is {len(blob)} bytes; its header says {header_bytes} + {so_bytes}")
    so = blob[header_bytes:]
    if zlib.crc32(so) != checksum:
        raise ValueError("payload checksum mismatch: the shared object is corrupt")
    offset = _FIXED.size
    specs = []
    for _ in range(n_in + n_out):
        dtype, rank = struct.unpack_from("<ii", blob, offset)
        sizes = struct.unpack_from(f"<{rank}q", blob, offset + 8)
        specs.append(TensorSpec(dtype, tuple(sizes)))
        offset += 8 + 8 * rank
    handles = struct.unpack_from(f"<{n_handles}I", blob, offset)
    info = PayloadInfo(arch.rstrip(b"\0").decode(), features, arena, tuple(specs[:n_in]), tuple(specs[n_in:]),
                       tuple(handles), entry.rstrip(b"\0").decode(), shapes_entry.rstrip(b"\0").decode())
    return info, so
