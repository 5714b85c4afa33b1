"""et-inspect and etmlir-demo under misuse: damaged `.pte` files and bad arguments end in one line.

Three small programs like the demo's are compiled once (plain portable kernels with state and a
nested call structure; the same with a `cpu` delegate; with `nested` delegates) and mutated:
byte flips, bytes set to edge values, 32-bit words overwritten, truncations (raw, and with the
header fixed so that the FlatBuffer itself is cut), splices from the other files, bytes inserted
or deleted, header fields changed, and FlatBuffer-aware changes found by walking the valid
buffer: table offsets, vtable entries, a table's vtable offset, vector and string lengths,
union types, value/operator/segment indices, string bytes (non-UTF-8, NUL, newline). Stacks of
two to four come too. `et_inspect.main` runs in-process on each with `--values --instructions -1`
and one of the other flag sets; it must exit 0 (a summary on stdout) or 1 (exactly one line
"et-inspect: error: FILE: ..." on stderr, a summary before it when only the runtime refuses the
file), never 2 (an internal error), never with a traceback or an exception out of main.

Each case also checks that the Python verifier and the runtime's C++ one (`etmlir._runtime`
loading the bytes) agree on whether the FlatBuffer is sound.

The case count is ETMLIR_FUZZ_CASES (default 1,500, about 10 s on 2 idle cores); a longer run:

    ETMLIR_FUZZ_CASES=20000 .venv/bin/pytest test/python/test_et_inspect_fuzz.py -x -q -s -k mutated

prints its counts (cases, clean errors by kind, successes, findings). The seed is fixed, so a
finding reproduces with the same count. A few subprocess runs check the `et-inspect` console
script too, and etmlir-demo's bad arguments are checked without running the (slow) demo.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import os
import random
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import etmlir
from etmlir.executable import flatbuffer_verifier as fv
from etmlir.executable import pte
from etmlir.schema.Value import Value
from etmlir.tools import demo, et_inspect

CASES = int(os.environ.get("ETMLIR_FUZZ_CASES", "1500"))
SEED = 22
SCHEMA = Path(__file__).resolve().parents[2] / "runtime" / "schema" / "program.fbs"
FLAG_SETS = ([], ["--instructions", "0"], ["--values", "--instructions", "2"], ["--instructions", "1"])
FULL = ["--values", "--instructions", "-1"]


class Demo(nn.Module):
    """Small, but with what a demo `.pte` holds: weights, state, a dict input, constants, nested outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)
        self.register_buffer("steps", torch.zeros(3))

    def forward(self, x: torch.Tensor, extra: dict, scale: float = 2.0, mask: None = None) -> dict:
        self.steps.add_(1)
        h = torch.relu(self.linear(x)) + extra["b"].sum()
        return {"a": h * self.steps, "b": (x * scale, None), "n": torch.cat([x, x], dim=0).view(-1, 2)}


class Small(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2.0 + 1.0)


@pytest.fixture(scope="module")
def programs() -> dict[str, bytes]:
    """name -> `.pte` bytes: portable only, a `cpu` delegate (native code), `nested` delegates."""
    torch.manual_seed(0)
    edge = etmlir.to_edge(etmlir.export(Demo().eval(), (torch.randn(2, 4), {"b": torch.randn(3)}),
                                        kwargs={"scale": 2.0, "mask": None}))
    small = etmlir.to_edge(etmlir.export(Small().eval(), (torch.randn(2, 3),)))
    return {
        "plain": edge.to_executorch().buffer,
        "cpu": small.to_backend(etmlir.backends.partitioner("cpu")).to_executorch().buffer,
        "nested": edge.to_backend(etmlir.backends.partitioner("nested", skip_ops=["edge.relu"])).to_executorch().buffer,
    }


# -- the walk of a valid FlatBuffer: where its offsets, lengths and indices are ----------------

@dataclasses.dataclass
class Layout:
    """Positions (in the file) of each kind of FlatBuffer word, for the aware mutations."""

    offsets: list[int] = dataclasses.field(default_factory=list)
    vtable_entries: list[int] = dataclasses.field(default_factory=list)
    table_starts: list[int] = dataclasses.field(default_factory=list)
    lengths: list[int] = dataclasses.field(default_factory=list)
    union_types: list[int] = dataclasses.field(default_factory=list)
    indices: list[int] = dataclasses.field(default_factory=list)
    strings: list[tuple[int, int]] = dataclasses.field(default_factory=list)


def _layout(data: bytes) -> Layout:
    header = pte.read_header(data)
    base = header.program_offset
    flat = data[base:base + header.program_size]
    out = Layout()
    seen: set[int] = set()

    def u16(p: int) -> int:
        return struct.unpack_from("<H", flat, p)[0]

    def u32(p: int) -> int:
        return struct.unpack_from("<I", flat, p)[0]

    def table(pos: int, name: str) -> None:
        if pos in seen:
            return
        seen.add(pos)
        out.table_starts.append(base + pos)
        vtable = pos - struct.unpack_from("<i", flat, pos)[0]
        vsize = u16(vtable)
        out.vtable_entries.extend(base + p for p in range(vtable, vtable + vsize, 2))
        slot = 0
        for _, kind in fv.TABLES[name]:
            at = [u16(vtable + 4 + 2 * (slot + k)) if 4 + 2 * (slot + k) < vsize else 0
                  for k in range(2 if kind in fv.UNIONS else 1)]
            slot += len(at)
            if kind in fv.UNIONS:
                if at[0]:
                    out.union_types.append(base + pos + at[0])
                if at[1]:
                    out.offsets.append(base + pos + at[1])
                    if at[0] and 1 <= flat[pos + at[0]] <= len(fv.UNIONS[kind]):
                        table(pos + at[1] + u32(pos + at[1]), fv.UNIONS[kind][flat[pos + at[0]] - 1])
                continue
            if not at[0]:
                continue
            field = pos + at[0]
            if kind in ("int", "uint"):
                out.indices.append(base + field)
            if kind in fv.SCALAR_SIZES or kind in fv.ENUMS or kind in fv.STRUCTS:
                continue
            out.offsets.append(base + field)
            target = field + u32(field)
            if kind == "string":
                out.lengths.append(base + target)
                out.strings.append((base + target + 4, u32(target)))
            elif kind in fv.TABLES:
                table(target, kind)
            else:  # a vector
                item = kind[1:-1]
                out.lengths.append(base + target)
                n = u32(target)
                if item == "int":
                    out.indices.extend(base + target + 4 + 4 * i for i in range(n))
                elif item in fv.TABLES or item == "string":
                    for i in range(n):
                        element = target + 4 + 4 * i
                        out.offsets.append(base + element)
                        if item == "string":
                            out.lengths.append(base + element + u32(element))
                            out.strings.append((base + element + u32(element) + 4, u32(element + u32(element))))
                        else:
                            table(element + u32(element), item)

    table(u32(0), fv.ROOT)
    return out


# -- mutations ------------------------------------------------------------------------------

EDGE_WORDS = (0, 1, 2, 3, 4, 8, 0x7F, 0x80, 0xFF, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFC,
              0xFFFFFFFF)
EDGE_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0xC3, 0xED)
HEADER_FIELDS = {"header_version": (4, "<I"), "header_size": (8, "<I"), "segment_alignment": (12, "<I"),
                 "program_offset": (16, "<Q"), "program_size": (24, "<Q"), "segment_base_offset": (32, "<Q"),
                 "segment_data_size": (40, "<Q"), "file_size": (48, "<Q")}


@dataclasses.dataclass
class Source:
    name: str
    data: bytes
    header: pte.Header
    layout: Layout

    @property
    def flat_range(self) -> tuple[int, int]:
        return self.header.program_offset, self.header.program_offset + self.header.program_size


def _put32(d: bytearray, pos: int, value: int) -> None:
    if 0 <= pos <= len(d) - 4:
        struct.pack_into("<I", d, pos, value & 0xFFFFFFFF)


def _flat_pos(rng: random.Random, src: Source, align: int = 1) -> int:
    start, end = src.flat_range
    return (rng.randrange(start, end - 3) // align) * align


def _rebuilt(src: Source, flat: bytes, d: bytes) -> bytearray:
    """The file with its FlatBuffer replaced by `flat` and the header's sizes fixed to match."""
    h = src.header
    segments = d[h.segment_base_offset:h.segment_base_offset + h.segment_data_size]
    base = max(h.segment_base_offset, -(-(h.program_offset + len(flat)) // h.segment_alignment) * h.segment_alignment)
    out = bytearray(d[:h.program_offset]) + flat
    out += bytes(base - len(out)) + segments
    struct.pack_into("<Q", out, 24, len(flat))
    struct.pack_into("<Q", out, 32, base)
    struct.pack_into("<Q", out, 48, len(out))
    return out


def m_flip(rng, src, d, others):
    for _ in range(rng.randint(1, 3)):
        pos = _flat_pos(rng, src) if rng.random() < 0.85 else rng.randrange(len(d))
        d[pos] ^= 1 << rng.randrange(8)
    return d


def m_byte(rng, src, d, others):
    pos = _flat_pos(rng, src) if rng.random() < 0.85 else rng.randrange(len(d))
    d[pos] = rng.choice(EDGE_BYTES + (rng.randrange(256),))
    return d


def m_word(rng, src, d, others):
    _put32(d, _flat_pos(rng, src, 4), rng.choice(EDGE_WORDS + (rng.getrandbits(32), src.header.program_size)))
    return d


def m_offset(rng, src, d, others):
    pos = rng.choice(src.layout.offsets)
    old = struct.unpack_from("<I", d, pos)[0]
    _put32(d, pos, rng.choice((old + rng.choice((-8, -4, -2, -1, 1, 2, 4, 8)), old + rng.randrange(-256, 256),
                               rng.choice(EDGE_WORDS), old - (pos - src.header.program_offset) + rng.randrange(64))))
    return d


def m_vtable(rng, src, d, others):
    pos = rng.choice(src.layout.vtable_entries)
    old = struct.unpack_from("<H", d, pos)[0]
    struct.pack_into("<H", d, pos, rng.choice((0, 1, 2, 3, 4, 0xFFFF, 0xFFFE, (old + 2) & 0xFFFF, (old - 4) & 0xFFFF,
                                               (old + 8) & 0xFFFF, rng.randrange(0x10000))))
    return d


def m_vtable_of(rng, src, d, others):
    pos = rng.choice(src.layout.table_starts)
    old = struct.unpack_from("<i", d, pos)[0]
    other = rng.choice(src.layout.table_starts)  # another table's vtable
    new = rng.choice((old + rng.choice((-8, -4, -2, 2, 4, 8)), rng.randrange(-(1 << 31), 1 << 31), 0,
                      pos - other + struct.unpack_from("<i", d, other)[0], -(1 << 31), (1 << 31) - 1))
    struct.pack_into("<i", d, pos, max(-(1 << 31), min((1 << 31) - 1, new)))
    return d


def m_length(rng, src, d, others):
    pos = rng.choice(src.layout.lengths)
    old = struct.unpack_from("<I", d, pos)[0]
    _put32(d, pos, rng.choice((old + 1, old - 1, old + 2, 0, 0xFFFFFFFF, 0x7FFFFFFF, 0x3FFFFFFF, 0x1FFFFFFF,
                               old * 2 + 1, rng.randrange(1 << 16))))
    return d


def m_union(rng, src, d, others):
    pos = rng.choice(src.layout.union_types)
    d[pos] = rng.choice((0, rng.randrange(1, 12), 12, 6, 255, rng.randrange(256)))
    return d


def m_index(rng, src, d, others):
    pos = rng.choice(src.layout.indices)
    old = struct.unpack_from("<i", d, pos)[0]
    struct.pack_into("<i", d, pos, rng.choice((-1, -2, -(1 << 31), (1 << 31) - 1, old + 1, old - 1, old + 100,
                                               rng.randrange(-1000, 1000))))
    return d


def m_string(rng, src, d, others):
    strings = [(s, n) for s, n in src.layout.strings if n]
    start, n = rng.choice(strings)
    d[start + rng.randrange(n)] = rng.choice((0xFF, 0xC3, 0x80, 0xED, 0x00, 0x0A, 0x1B, 0x27, 0x5C))
    return d


def m_truncate(rng, src, d, others):
    return d[:rng.randrange(len(d))]


def m_cut_flat(rng, src, d, others):
    start, end = src.flat_range
    return _rebuilt(src, bytes(d[start:rng.randrange(start, end)]), d)


def m_insert_delete(rng, src, d, others):
    start, end = src.flat_range
    flat = bytearray(d[start:end])
    pos, n = rng.randrange(len(flat)), rng.choice((1, 2, 4, 8, rng.randrange(1, 64)))
    if rng.random() < 0.5:
        flat[pos:pos] = bytes(rng.getrandbits(8) for _ in range(n))
    else:
        del flat[pos:pos + n]
    return _rebuilt(src, bytes(flat), d)


def m_splice(rng, src, d, others):
    other = rng.choice(others)
    o_start, o_end = other.flat_range
    n = rng.choice((4, 8, 16, rng.randrange(1, 128)))
    at = rng.randrange(o_start, max(o_start + 1, o_end - n))
    chunk = other.data[at:at + n]
    pos = _flat_pos(rng, src)
    d[pos:pos + len(chunk)] = chunk[:max(0, src.flat_range[1] - pos)]
    return d


def m_swap(rng, src, d, others):
    a, b = rng.choice(src.layout.offsets), rng.choice(src.layout.offsets)
    d[a:a + 4], d[b:b + 4] = d[b:b + 4], d[a:a + 4]
    return d


def m_header(rng, src, d, others):
    offset, fmt = HEADER_FIELDS[rng.choice(list(HEADER_FIELDS))]
    width = struct.calcsize(fmt)
    old = struct.unpack_from(fmt, d, offset)[0]
    new = rng.choice((0, 1, old + 1, old - 1, old + 8, len(d), (1 << (8 * width)) - 1, rng.getrandbits(8 * width)))
    struct.pack_into(fmt, d, offset, new % (1 << (8 * width)))
    return d


MUTATIONS = {f.__name__[2:]: f for f in (m_flip, m_byte, m_word, m_offset, m_vtable, m_vtable_of, m_length,
                                         m_union, m_index, m_string, m_truncate, m_cut_flat, m_insert_delete,
                                         m_splice, m_swap, m_header)}


def _mutate(rng: random.Random, src: Source, others: list[Source]) -> tuple[str, bytes]:
    if rng.random() < 0.15:
        names = rng.choices(list(MUTATIONS), k=rng.randint(2, 4))
    else:
        names = [rng.choice(list(MUTATIONS))]
    d = bytearray(src.data)
    for name in names:
        try:
            d = MUTATIONS[name](rng, src, d, others)
        except (IndexError, ValueError, struct.error):  # an earlier mutation moved things: skip this one
            pass
    return "+".join(names), bytes(d)


# -- running et-inspect ---------------------------------------------------------------------

def _inspect(argv: list[str]) -> tuple[int | str, str, str]:
    """(exit status or the escaped exception's name, stdout, stderr) of et_inspect.main(argv) in-process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status: int | str = et_inspect.main(argv)
        except SystemExit as exit_:
            status = f"SystemExit({exit_.code})"
        except BaseException as error:  # noqa: BLE001 - anything escaping main is a finding
            status = f"{type(error).__name__}: {error}"
    return status, out.getvalue(), err.getvalue()


def _judge(status: int | str, out: str, err: str, path: str) -> str | None:
    """The finding in one et-inspect run, or None when it ended as it should."""
    if "Traceback" in out + err:
        return "traceback"
    if status not in (0, 1):
        return f"exit status {status}: {err.strip()[:300]}"
    if status == 0:
        return None if out.startswith(f"{path}: ") and not err else f"exit 0 with {err.strip()[:200]!r}"
    lines = err.splitlines()
    if len(lines) != 1 or not lines[0].startswith(f"et-inspect: error: {path}: "):
        return f"not one error line: {err[:300]!r}"
    return None


def _disagreement(data: bytes, err: str) -> str | None:
    """Where the Python verifier and the runtime's C++ verifier disagree on the same FlatBuffer, or None."""
    try:
        pte.read_header(data)
    except pte.PteError:
        return None  # the FlatBuffer was not looked at
    refusal = et_inspect.runtime_refusal(data)
    if "malformed program" in err and refusal is None:
        return f"the Python verifier refuses a program the runtime loads: {err.strip()}"
    if refusal is not None and "FlatBuffers verifier rejected" in refusal and "malformed program" not in err:
        return f"the runtime's verifier rejects a program the Python verifier accepts: {err.strip() or 'exit 0'}"
    return None


def _kind(err: str) -> str:
    """What sort of clean error: the header, the FlatBuffer, or the runtime's refusal."""
    if "malformed program" in err:
        return "malformed program (FlatBuffer verifier)"
    if "the runtime refuses" in err:
        return "runtime refuses (summary shown)"
    return "header / container"


@pytest.fixture(scope="module")
def sources(programs: dict[str, bytes]) -> list[Source]:
    return [Source(name, data, pte.read_header(data), _layout(data)) for name, data in programs.items()]


def test_the_verifier_schema_is_program_fbs() -> None:
    """flatbuffer_verifier.SCHEMA mirrors runtime/schema/program.fbs: same tables, fields in order, types."""
    text = re.sub(r"//[^\n]*", "", SCHEMA.read_text())
    tables = {name: [(f, t) for f, t in re.findall(r"(\w+)\s*:\s*(\[?\w+\]?)[^;]*;", body)]
              for name, body in re.findall(r"\btable\s+(\w+)\s*\{([^}]*)\}", text)}
    structs = {name: re.findall(r"(\w+)\s*:\s*(\w+)\s*;", body)
               for name, body in re.findall(r"\bstruct\s+(\w+)\s*\{([^}]*)\}", text)}
    unions = {name: re.findall(r"\w+", body) for name, body in re.findall(r"\bunion\s+(\w+)\s*\{([^}]*)\}", text)}
    enums = dict(re.findall(r"\benum\s+(\w+)\s*:\s*(\w+)", text))
    assert tables == fv.TABLES
    assert structs == {k: [tuple(f) for f in v] for k, v in fv.STRUCTS.items()}
    assert unions == fv.UNIONS and enums == fv.ENUMS
    assert re.search(r"root_type\s+(\w+)", text).group(1) == fv.ROOT


def test_valid_programs_pass_the_verifier_and_print_with_values(programs: dict[str, bytes], tmp_path: Path) -> None:
    """The demo-like files, delegated ones included, print whole with --values (it crashed on delegates)."""
    for name, data in programs.items():
        path = tmp_path / f"{name}.pte"
        path.write_bytes(data)
        status, out, err = _inspect([str(path), *FULL])
        assert (status, err) == (0, ""), (name, err)
        method = pte.read(data).program.methods[0]
        assert out.count("\n    %") == len(method.values)  # every value listed
        if name != "plain":
            assert re.search(r"delegate \d+: backend '(cpu|nested)', payload segment", out)
            assert re.search(r"^\s+\d+: delegate \d+\(", out, re.M)


def test_a_damaged_program_names_the_place(programs: dict[str, bytes], tmp_path: Path) -> None:
    data = bytearray(programs["plain"])
    src = Source("plain", bytes(data), pte.read_header(bytes(data)), _layout(bytes(data)))
    # A vector length far past the end: the message names the method, the value and the field.
    assert pte.read(bytes(data)).program.methods[0].values[0].valueType == Value.Tensor
    path = tmp_path / "bad.pte"
    for pos in src.layout.lengths:
        d = bytearray(data)
        _put32(d, pos, 0x100000)
        path.write_bytes(d)
        status, _, err = _inspect([str(path)])
        assert status == 1 and err.startswith(f"et-inspect: error: {path}: malformed program: "), err
        if "> value 0 > value (Tensor) > sizes:" in err:
            assert "method 0 ('forward')" in err and "runs past the end of the program" in err
            break
    else:
        pytest.fail("no mutation hit value 0's sizes")


def test_a_program_the_runtime_refuses_is_still_shown(programs: dict[str, bytes], tmp_path: Path) -> None:
    """A sound FlatBuffer with a value index out of range: summary with <bad value>, then the runtime's reason."""
    data = bytearray(programs["plain"])
    src = Source("plain", bytes(data), pte.read_header(bytes(data)), _layout(bytes(data)))
    method = pte.read(bytes(data)).program.methods[0]
    first_input = int(method.inputs[0])
    for pos in src.layout.indices:
        d = bytearray(data)
        struct.pack_into("<i", d, pos, 999)
        try:
            changed = pte.read(bytes(d)).program.methods[0].inputs[0] != first_input
        except pte.PteError:
            continue
        if changed:
            break
    else:
        pytest.fail("no index mutation changed the first input")
    path = tmp_path / "refused.pte"
    path.write_bytes(d)
    status, out, err = _inspect([str(path), "--values"])
    assert status == 1 and "0: <bad value 999>" in out
    assert err.startswith(f"et-inspect: error: {path}: the runtime refuses to load it: ") and err.count("\n") == 1


def test_non_utf8_names_print_escaped(programs: dict[str, bytes], tmp_path: Path) -> None:
    data = bytearray(programs["nested"])
    at = data.index(b"nested\x00")  # the backend name of a delegate
    data[at:at + 3] = b"\xffn\xc3"
    path = tmp_path / "names.pte"
    path.write_bytes(data)
    status, out, err = _inspect([str(path), *FULL])
    assert "Traceback" not in err and status in (0, 1)
    assert "backend '\\xffn\\xc3ted'" in out


def test_mutated_files_end_in_a_summary_or_one_error_line(sources: list[Source], tmp_path: Path) -> None:
    rng = random.Random(SEED)
    counts: collections.Counter[str] = collections.Counter()
    findings: list[str] = []
    path = str(tmp_path / "case.pte")
    for case in range(CASES):
        src = sources[case % len(sources)]
        label, data = _mutate(rng, src, sources)
        with open(path, "wb") as f:
            f.write(data)
        for flags in (FULL, FLAG_SETS[case % len(FLAG_SETS)]):
            status, out, err = _inspect([path, *flags])
            finding = _judge(status, out, err, path) or _disagreement(data, err)
            if finding:
                findings.append(f"case {case} ({src.name}, {label}, flags {flags}): {finding}")
                counts["findings"] += 1
            elif status == 0:
                counts["successes"] += 1
            else:
                counts[f"clean error: {_kind(err)}"] += 1
    counts["cases"] = CASES
    print(f"\net-inspect fuzz, seed {SEED}: {dict(sorted(counts.items()))}")
    assert not findings, "\n".join(findings[:20])
    assert counts["clean error: malformed program (FlatBuffer verifier)"] > 0 and counts["successes"] > 0


def test_the_console_script_on_damaged_files(sources: list[Source], tmp_path: Path) -> None:
    """The installed `et-inspect` (not main() in-process): exit 0 or 1, one error line, no traceback."""
    et_inspect_bin = Path(sys.executable).parent / "et-inspect"
    if not et_inspect_bin.exists():
        pytest.skip("et-inspect is not installed next to this Python (pip install -e .)")
    rng = random.Random(SEED + 1)
    paths = []
    for i, name in enumerate(("offset", "length", "cut_flat", "string", "union", "header")):
        src = sources[i % len(sources)]
        path = tmp_path / f"{name}.pte"
        path.write_bytes(MUTATIONS[name](rng, src, bytearray(src.data), sources))
        paths.append(str(path))
    good = tmp_path / "good.pte"
    good.write_bytes(sources[2].data)  # nested delegates: --values used to crash here
    for argv in ([str(good), *FULL], [*paths, "--values"], [str(tmp_path / "missing.pte")], [str(tmp_path)]):
        result = subprocess.run([str(et_inspect_bin), *argv], capture_output=True, text=True, timeout=120)
        assert "Traceback" not in result.stderr and result.returncode in (0, 1), (argv, result.stderr)
        errors = [line for line in result.stderr.splitlines() if line.startswith("et-inspect: error:")]
        assert len(errors) == len(result.stderr.splitlines()), result.stderr  # nothing but error lines
        assert (result.returncode == 1) == bool(errors)
    result = subprocess.run([str(et_inspect_bin), str(good), "--instructions", "-7"], capture_output=True, text=True)
    assert result.returncode == 2 and "use -1 to list all instructions" in result.stderr


@pytest.mark.parametrize("argv, message", [
    (["nosuch_model"], "no zoo model 'nosuch_model'"),
    (["--no-zoo", "mlp"], "zoo models were named (mlp) but --no-zoo skips them"),
    (["--no-main", "--no-zoo"], "--no-main and --no-zoo together leave nothing to do"),
    (["--no-main", "--out-dir", "{file}"], "exists and is not a directory"),
    (["--no-main", "--out-dir", "{file}/sub"], "cannot create output directory"),
])
def test_demo_bad_arguments_are_one_line_before_any_work(argv: list[str], message: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "a_file"
    file.write_text("")
    status = demo.main([a.replace("{file}", str(file)) for a in argv])
    err = capsys.readouterr().err
    assert status == 1 and err.count("\n") == 1 and err.startswith("etmlir-demo: error: ") and message in err


def test_demo_writes_whole_files_and_finds_et_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails leaves no partial file; et-run is found next to Python or on PATH, or skipped."""
    target = tmp_path / "x.pte"
    demo._write(target, b"abc")
    assert target.read_bytes() == b"abc" and [p.name for p in tmp_path.iterdir()] == ["x.pte"]
    (tmp_path / "d.pte").mkdir()
    with pytest.raises(demo.ToolError, match="cannot write"):
        demo._write(tmp_path / "d.pte", b"abc")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.pte", "x.pte"]
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert demo.find_et_run() is None
    runner = tmp_path / "et-run"
    runner.write_text("#!/bin/sh\necho 'et-run: error: cannot open it' >&2\nexit 1\n")
    runner.chmod(0o755)
    assert demo.find_et_run() == str(runner)
    import numpy as np
    with pytest.raises(demo.ToolError, match=r"et-run failed on .* \(exit status 1\): et-run: error: cannot open it"):
        demo._run_et_run(tmp_path / "x.pte", np.zeros((1,), np.float32), tmp_path)
