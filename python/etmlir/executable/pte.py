"""The `.pte` container: a 64-byte header, the FlatBuffer program, then aligned data segments.

    [0, 64)                       header (below)
    [program_offset, +size)       FlatBuffer, root etmlir.schema.Program, identifier "ETX1"
    [segment_base_offset, ...)    segments (constants, delegate payloads), each aligned
                                  to segment_alignment so a loader can mmap them

Header, little-endian: magic "ETXH", u32 header_version, u32 header_size,
u32 segment_alignment, u64 program_offset, u64 program_size,
u64 segment_base_offset, u64 segment_data_size, u64 file_size, 8 reserved
zero bytes. The C++ side (`et-verify-pte`, the runtime) checks the same
rules; see runtime/schema/README.md.
"""

from __future__ import annotations

import dataclasses
import struct

import flatbuffers

from etmlir.executable import flatbuffer_verifier
from etmlir.schema.Program import Program, ProgramT

MAGIC = b"ETXH"
FILE_IDENTIFIER = b"ETX1"
HEADER_VERSION = 1
HEADER_SIZE = 64
# The newest Program.version this package writes and reads. A file gets the lowest version
# whose runtimes read it right: 1, or STATE_VERSION when a method has state (Method.state,
# Tensor.initial), which a version-1 runtime would leave unfilled.
SCHEMA_VERSION = 3
STATE_VERSION = 2
# JumpFalse on a bool tensor or backward (loops), Move as a copy into the target: a version-2
# runtime refuses the first two and would alias where it must copy.
CONTROL_FLOW_VERSION = 3
_HEADER = struct.Struct("<4sIIIQQQQQ8s")
assert _HEADER.size == HEADER_SIZE


class PteError(ValueError):
    """A `.pte` file that cannot be read, with what is wrong and where."""


@dataclasses.dataclass(frozen=True)
class Header:
    segment_alignment: int
    program_offset: int
    program_size: int
    segment_base_offset: int
    segment_data_size: int
    file_size: int
    header_version: int = HEADER_VERSION


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def pack(program: ProgramT, segments: list[bytes], segment_alignment: int = 4096) -> bytes:
    """The file bytes of `program` with `segments` (its `segments` table is filled in here)."""
    if segment_alignment < 8 or segment_alignment & (segment_alignment - 1):
        raise ValueError(f"segment alignment must be a power of two >= 8, got {segment_alignment}")
    from etmlir.schema.Segment import SegmentT
    offsets, cursor = [], 0
    for data in segments:
        cursor = _align(cursor, segment_alignment)
        offsets.append(cursor)
        cursor += len(data)
    program.segments = []
    for offset, data in zip(offsets, segments):
        entry = SegmentT()
        entry.offset, entry.size = offset, len(data)
        program.segments.append(entry)
    builder = flatbuffers.Builder(1 << 16)
    builder.Finish(program.Pack(builder), file_identifier=FILE_IDENTIFIER)
    flat = bytes(builder.Output())
    program_offset = HEADER_SIZE
    segment_base = _align(program_offset + len(flat), segment_alignment)
    total = segment_base + cursor
    header = _HEADER.pack(MAGIC, HEADER_VERSION, HEADER_SIZE, segment_alignment, program_offset, len(flat),
                          segment_base, cursor, total, bytes(8))
    out = bytearray(total)
    out[:HEADER_SIZE] = header
    out[program_offset:program_offset + len(flat)] = flat
    for offset, data in zip(offsets, segments):
        out[segment_base + offset:segment_base + offset + len(data)] = data
    return bytes(out)


def read_header(data: bytes) -> Header:
    """The header of a `.pte`, checked against the file's size."""
    if len(data) < HEADER_SIZE:
        raise PteError(f"file is {len(data)} bytes, shorter than the {HEADER_SIZE}-byte .pte header")
    magic, version, size, alignment, p_off, p_size, s_base, s_size, f_size, _ = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise PteError(f"not a .pte file: header magic is {magic!r}, expected {MAGIC!r}")
    if version != HEADER_VERSION or size != HEADER_SIZE:
        raise PteError(f"header version {version} (size {size}) is not supported (this reader knows "
                       f"version {HEADER_VERSION}, size {HEADER_SIZE})")
    if f_size != len(data):
        raise PteError(f"header says the file is {f_size} bytes but it is {len(data)} (truncated or padded?)")
    if p_off < HEADER_SIZE or p_off + p_size > len(data):
        raise PteError(f"program bytes [{p_off}, {p_off + p_size}) are outside the file ({len(data)} bytes)")
    if s_base < p_off + p_size or s_base + s_size > len(data):
        raise PteError(f"segment data [{s_base}, {s_base + s_size}) is outside the file or overlaps the program")
    return Header(alignment, p_off, p_size, s_base, s_size, f_size, version)


@dataclasses.dataclass
class PteFile:
    """A parsed `.pte`: header, program (object API) and the raw bytes for segment access."""

    data: bytes
    header: Header
    program: ProgramT

    def segment(self, index: int) -> bytes:
        if not 0 <= index < len(self.program.segments or []):
            raise PteError(f"segment {index} does not exist ({len(self.program.segments or [])} segments)")
        entry = self.program.segments[index]
        start = self.header.segment_base_offset + entry.offset
        if entry.offset + entry.size > self.header.segment_data_size:
            raise PteError(f"segment {index} [{entry.offset}, {entry.offset + entry.size}) lies outside the "
                           f"segment data ({self.header.segment_data_size} bytes)")
        return self.data[start:start + entry.size]


def read(data: bytes) -> PteFile:
    """Parse a `.pte` (header checks, identifier, version); raises PteError when it is not one."""
    header = read_header(data)
    flat = data[header.program_offset:header.program_offset + header.program_size]
    if not Program.ProgramBufferHasIdentifier(flat, 0):
        raise PteError(f"program FlatBuffer identifier is {bytes(flat[4:8])!r}, expected {FILE_IDENTIFIER!r}")
    try:  # the generated reader trusts every offset: verify first, as the C++ loader does
        flatbuffer_verifier.verify(flat, FILE_IDENTIFIER)
    except flatbuffer_verifier.FlatBufferError as error:
        raise PteError(f"malformed program: {error}") from None
    program = ProgramT.InitFromObj(Program.GetRootAs(flat, 0))
    if program.version > SCHEMA_VERSION:
        raise PteError(f"program schema version {program.version} is newer than this reader ({SCHEMA_VERSION})")
    return PteFile(data, header, program)
