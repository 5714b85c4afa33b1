"""The `cpu` payload: the shared payload header (`etmlir.backends.payload_header`), then the shared object.

    blob = write_payload(PayloadInfo(...), so_bytes)
    info, so_bytes = read_payload(blob)      # checks framing, versions, sizes and the checksum

`runtime/backends/cpu/PAYLOAD.md` says what the cpu backend puts in the header
(backend "cpu", body_format "elf-shared-object", body_version = ABI_VERSION,
entry points "forward" and "shapes", the arena as scratch_bytes); the runtime
backend (`runtime/backends/cpu/cpu_backend.cpp`) reads the same bytes. The
Python reader exists for tests and for tools that show what a payload holds.
"""

from __future__ import annotations

import dataclasses

from etmlir.backends import payload_header
from etmlir.backends.payload_header import TensorSpec

__all__ = ["ABI_VERSION", "BACKEND_ID", "BODY_FORMAT", "PayloadInfo", "TensorSpec", "read_payload", "write_payload"]

BACKEND_ID = "cpu"
BODY_FORMAT = "elf-shared-object"
ABI_VERSION = 1          # the header's body_version: the calling convention (PAYLOAD.md)
ENTRY = "forward"        # entry point names in the header
SHAPES_ENTRY = "shapes"


@dataclasses.dataclass(frozen=True)
class PayloadInfo:
    arch: str
    cpu_features: int
    arena_bytes: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    # payload id -> the edge ops it covers: id i >= 1 is the i-th timed region (et-cpu-trace-regions),
    # id 0 the ops compiled into no region of their own (views and copies that became no code).
    debug_handle_map: tuple[tuple[int, tuple[int, ...]], ...]
    entry: str
    shapes_entry: str = ""

    @property
    def debug_handles(self) -> tuple[int, ...]:
        """Every edge op compiled into the payload, ascending."""
        return tuple(sorted({h for _, handles in self.debug_handle_map for h in handles}))

    def header(self) -> payload_header.PayloadHeader:
        """The shared header of a payload with this info."""
        entries = ((ENTRY, self.entry),) + (((SHAPES_ENTRY, self.shapes_entry),) if self.shapes_entry else ())
        return payload_header.PayloadHeader(
            backend_id=BACKEND_ID, body_format=BODY_FORMAT, body_version=ABI_VERSION, arch=self.arch,
            cpu_features=self.cpu_features, inputs=tuple(self.inputs), outputs=tuple(self.outputs),
            entry_points=entries, debug_handle_map=tuple(self.debug_handle_map),
            scratch_bytes=self.arena_bytes)


def write_payload(info: PayloadInfo, so: bytes) -> bytes:
    return payload_header.write_payload(info.header(), so)


def read_payload(blob: bytes) -> tuple[PayloadInfo, bytes]:
    """Parse and check a cpu payload (ValueError naming what is wrong)."""
    header, so = payload_header.read_payload(blob, backend_id=BACKEND_ID)
    if header.body_format != BODY_FORMAT or header.body_version != ABI_VERSION:
        raise ValueError(f"cpu payload body is {header.body_format!r} version {header.body_version}; this reader "
                         f"knows {BODY_FORMAT!r} version {ABI_VERSION}")
    info = PayloadInfo(header.arch, header.cpu_features, header.scratch_bytes, header.inputs, header.outputs,
                       tuple(header.debug_handle_map),
                       header.entry_point(ENTRY) or "", header.entry_point(SHAPES_ENTRY) or "")
    return info, so
