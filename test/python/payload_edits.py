"""Rewriting a delegate payload inside a `.pte`, for the backends' bad-payload tests.

The payload is replaced in place: the same header (ForceDefaults keeps its size) around a changed
body of the same size, with the body's CRC-32 recomputed, so the changed bytes reach the backend's
own checks instead of stopping at the checksum.
"""

from __future__ import annotations

import etmlir.runtime as rt
from etmlir.backends.payload_header import write_payload


def replace_payload(data: bytes, payload: bytes, header, body: bytes) -> bytes:
    """`data` (a .pte) with `payload` replaced by `header` around `body` (the same size)."""
    new = write_payload(header, body)
    assert len(new) == len(payload)
    at = data.index(payload)
    return data[:at] + new + data[at + len(payload):]


def load_error(data: bytes) -> str:
    """The error loading method 'forward' of `data` gives ("" when it loads)."""
    try:
        rt.load(data).method("forward")
    except rt.Error as error:
        return str(error)
    return ""
