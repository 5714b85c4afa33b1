"""et-run under misuse: the real binary (the one `pip install -e .` puts next to the interpreter), run
as a subprocess on mutated `.pte` files, odd and corrupt inputs, and bad arguments. For every case:

* no crash: the process exits (no signal: SIGSEGV, SIGBUS, SIGABRT from an uncaught exception ...);
* no hang: it ends within 20 s; a mutated file whose JumpFalse now jumps backward may loop forever
  (a valid program can), so a timeout on such a file is counted as a loop, not a failure;
* exit status 0, 1 (bad file, bad input, kernel failure) or 2 (usage error), and on a failure exactly
  one stderr line, "et-run: error: ..." (status 1) or "et-run: ... (et-run --help for usage)" (2).

Each run gets an address-space limit of 2 GiB (RLIMIT_AS), so that a mutated size asking for more
memory than that is the clean "out of memory" error it is on a small device, not minutes of paging.

The mutated `.pte` files come from two small compiled programs (a two-input network, and the same
with its body delegated to the "nested" backend): byte flips and writes (mostly inside the
FlatBuffer), truncations, header fields, and 1/4/8-byte writes of interesting values at the
positions of table fields (found through the vtables of every table the schema's readers reach).
ETMLIR_FUZZ_CASES (default 600) is the number of mutated `.pte` runs; the seed is fixed
(ETMLIR_FUZZ_SEED, default 1). The input and argument cases are a fixed list.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import struct
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import etmlir
from etmlir import backends
from etmlir.schema.Program import Program as FbProgram
from etmlir.schema.InstructionKind import InstructionKind

ET_RUN = Path(sys.executable).parent / "et-run"
TIMEOUT_S = 20
ADDRESS_SPACE_LIMIT = 2 << 30
CASES = int(os.environ.get("ETMLIR_FUZZ_CASES", "600"))
SEED = int(os.environ.get("ETMLIR_FUZZ_SEED", "1"))


class TwoInputs(nn.Module):
    """float32[2, 16] and int64[3] (indices into a 16 x 8 table): two dtypes, so inputs can be swapped."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 8)
        self.table = nn.Parameter(torch.randn(16, 8))

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x)).sum(0) + self.table[idx].sum(0)


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    """name -> .pte path: the network on the portable kernels, and delegated to "nested"."""
    torch.manual_seed(0)
    model = TwoInputs().eval()
    args = (torch.randn(2, 16), torch.tensor([1, 5, 15]))
    edge = etmlir.to_edge(etmlir.export(model, args))
    out = tmp_path_factory.mktemp("et_run_fuzz")
    paths = {"portable": out / "portable.pte", "nested": out / "nested.pte"}
    edge.to_executorch().save(paths["portable"])
    etmlir.to_edge(etmlir.export(model, args)).to_backend(backends.partitioner("nested")).to_executorch().save(
        paths["nested"])
    return paths


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


@dataclass
class Outcome:
    """What one et-run run did, checked against the promises above."""

    label: str
    returncode: int
    stderr: str
    timed_out: bool = False


# util-linux prlimit sets the limit in the child without a preexec_fn (which would make Python fork
# its whole, large, process for every run instead of spawning: 60 ms against 9 ms a run).
PRLIMIT = shutil.which("prlimit")


def run_et_run(label: str, *args: object) -> Outcome:
    assert ET_RUN.exists(), f"{ET_RUN} was not built (pip install -e . or scripts/dev_rebuild.sh builds it)"
    limit = [PRLIMIT, f"--as={ADDRESS_SPACE_LIMIT}"] if PRLIMIT else []
    try:
        result = subprocess.run([*limit, str(ET_RUN), *map(str, args)], capture_output=True, text=True,
                                errors="replace", timeout=TIMEOUT_S,
                                preexec_fn=None if PRLIMIT else _limit_memory)
    except subprocess.TimeoutExpired as e:
        stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Outcome(label, -9, stderr, timed_out=True)
    return Outcome(label, result.returncode, result.stderr)


def problem(o: Outcome, allowed: tuple[int, ...] = (0, 1, 2)) -> str | None:
    """Why `o` breaks a promise, or None."""
    if o.timed_out:
        return f"{o.label}: no result within {TIMEOUT_S} s (a hang)"
    if o.returncode < 0:
        return f"{o.label}: killed by signal {-o.returncode}; stderr: {o.stderr[-500:]!r}"
    if o.returncode not in allowed:
        return f"{o.label}: exit status {o.returncode}, expected one of {allowed}; stderr: {o.stderr[-500:]!r}"
    lines = o.stderr.splitlines()
    if o.returncode == 0:
        return None if not lines else f"{o.label}: succeeded but wrote to stderr: {o.stderr[-500:]!r}"
    prefix = "et-run: error: " if o.returncode == 1 else "et-run: "
    if len(lines) != 1 or not lines[0].startswith(prefix) or len(lines[0]) <= len(prefix):
        return f"{o.label}: exit {o.returncode} without one '{prefix}...' line: {o.stderr[-800:]!r}"
    if o.returncode == 2 and not lines[0].endswith("(et-run --help for usage)"):
        return f"{o.label}: a usage error that does not point at --help: {lines[0]!r}"
    return None


# ---- Mutations of a .pte ------------------------------------------------------------------------

def _table_positions(data: bytes, program_offset: int) -> list[int]:
    """File offsets of the tables the schema's readers reach (program, methods, values, instructions...)."""
    p = FbProgram.GetRootAs(data, program_offset)
    tables = [p._tab.Pos]
    tables += [p.Segments(i)._tab.Pos for i in range(p.SegmentsLength())]
    for i in range(p.MethodsLength()):
        m = p.Methods(i)
        tables.append(m._tab.Pos)
        for j in range(m.ValuesLength()):
            ev = m.Values(j)
            tables.append(ev._tab.Pos)
            if (value := ev.Value()) is not None:
                tables.append(value.Pos)
        for j in range(m.InstructionsLength()):
            ins = m.Instructions(j)
            tables.append(ins._tab.Pos)
            if (kind := ins.Kind()) is not None:
                tables.append(kind.Pos)
        tables += [m.Operators(j)._tab.Pos for j in range(m.OperatorsLength())]
        tables += [m.Arenas(j)._tab.Pos for j in range(m.ArenasLength())]
        tables += [m.Delegates(j)._tab.Pos for j in range(m.DelegatesLength())]
    return tables


def field_positions(data: bytes) -> list[int]:
    """Where each table's fields (scalars, structs, offsets, union types) are: through its vtable."""
    program_offset = struct.unpack_from("<Q", data, 16)[0]
    fields = []
    for pos in _table_positions(data, program_offset):
        vtable = pos - struct.unpack_from("<i", data, pos)[0]
        vtable_size = struct.unpack_from("<H", data, vtable)[0]
        for k in range(4, vtable_size, 2):
            entry = struct.unpack_from("<H", data, vtable + k)[0]
            if entry:
                fields.append(pos + entry)
    return fields


def interesting(rng: random.Random, width: int, old: int) -> int:
    mask = (1 << (8 * width)) - 1
    return rng.choice([0, 1, mask, old + 1, old - 1, old * 2, 1 << (8 * width - 1), (1 << (8 * width - 1)) - 1,
                       old ^ (1 << rng.randrange(8 * width)), rng.getrandbits(8 * width)]) & mask


def mutate(rng: random.Random, data: bytes, fields: list[int]) -> tuple[str, bytes]:
    """One seeded corruption of `data`: (strategy, mutated bytes)."""
    out = bytearray(data)
    program_offset, program_size = struct.unpack_from("<QQ", data, 16)
    in_program = lambda: program_offset + rng.randrange(program_size)  # noqa: E731
    strategy = rng.choices(["bit flips", "byte writes", "truncate", "header field", "table field"],
                           weights=[20, 15, 10, 10, 45])[0]
    if strategy == "bit flips":
        for _ in range(rng.randint(1, 6)):
            at = in_program() if rng.random() < 0.8 else rng.randrange(len(out))
            out[at] ^= 1 << rng.randrange(8)
    elif strategy == "byte writes":
        for _ in range(rng.randint(1, 6)):
            at = in_program() if rng.random() < 0.8 else rng.randrange(len(out))
            out[at] = rng.choice([0, 0xFF, rng.randrange(256)])
    elif strategy == "truncate":
        return strategy, bytes(out[:rng.randrange(len(out))])
    elif strategy == "header field":
        offset, width = rng.choice([(4, 4), (8, 4), (12, 4), (16, 8), (24, 8), (32, 8), (40, 8), (48, 8)])
        old = int.from_bytes(out[offset:offset + width], "little")
        out[offset:offset + width] = interesting(rng, width, old).to_bytes(width, "little")
    else:
        at = rng.choice(fields)
        width = min(rng.choice([1, 2, 4, 8]), len(out) - at)
        old = int.from_bytes(out[at:at + width], "little")
        out[at:at + width] = interesting(rng, width, old).to_bytes(width, "little")
    return strategy, bytes(out)


def has_backward_jump(data: bytes) -> bool:
    """True if some JumpFalse jumps back (or to itself): a file that may loop forever when run."""
    try:
        p = FbProgram.GetRootAs(data, struct.unpack_from("<Q", data, 16)[0])
        for i in range(p.MethodsLength()):
            m = p.Methods(i)
            for j in range(m.InstructionsLength()):
                ins = m.Instructions(j)
                if ins.KindType() == InstructionKind.JumpFalse:
                    from etmlir.schema.JumpFalse import JumpFalse
                    jump = JumpFalse()
                    jump.Init(ins.Kind().Bytes, ins.Kind().Pos)
                    if jump.Target() <= j:
                        return True
    except Exception:  # a corrupt file the reader cannot follow: no loop to blame
        return False
    return False


def test_mutated_programs_give_a_clean_error_or_run(programs, tmp_path):
    rng = random.Random(SEED)
    sources = {name: path.read_bytes() for name, path in programs.items()}
    fields = {name: field_positions(data) for name, data in sources.items()}
    counts = {"ok": 0, "error": 0, "loop": 0}
    by_strategy: dict[str, list[int]] = {}
    problems = []
    for case in range(CASES):
        name = list(sources)[case % len(sources)]
        strategy, data = mutate(rng, sources[name], fields[name])
        path = tmp_path / f"case_{case}.pte"
        path.write_bytes(data)
        loader = "mmap" if case % 2 else "file"
        o = run_et_run(f"case {case} ({name}, {strategy}, --loader {loader})", path, "--iterations", 1, "--warmup", 0,
                       "--loader", loader, "--int-bound", 16)
        if o.timed_out and has_backward_jump(data):
            counts["loop"] += 1
            continue
        if (why := problem(o, allowed=(0, 1))) is not None:
            problems.append(why)
            (tmp_path / f"finding_{case}.pte").write_bytes(data)
        else:
            path.unlink()
        counts["ok" if o.returncode == 0 else "error"] += 1
        by_strategy.setdefault(strategy, [0, 0])[0 if o.returncode == 0 else 1] += 1
    print(f"\n[et-run fuzz] {CASES} mutated .pte runs (seed {SEED}): {counts['ok']} ran, {counts['error']} clean "
          f"errors, {counts['loop']} loops; by strategy (ran, error): {by_strategy}; findings: {len(problems)}")
    assert not problems, "\n".join(problems[:10])
    assert counts["error"] > CASES // 4, "too few mutations were refused: is et-run checking anything?"
    assert counts["ok"] > 0, "no mutated file ran at all: the mutations are too coarse to reach execute()"


# ---- Inputs ---------------------------------------------------------------------------------------

def _npz(path: Path, *arrays: np.ndarray, **named: np.ndarray) -> Path:
    np.savez(path, *arrays, **named)
    return path


def _npy_header(path: Path, descr: str, shape: tuple[int, ...], data: bytes) -> Path:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape!r}, }}".encode()
    header += b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data)
    return path


def input_cases(d: Path) -> list[tuple[str, Path]]:
    """(label, inputs file) pairs, each wrong in one way (or right, as a control)."""
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    idx = np.array([1, 5, 15], dtype=np.int64)
    cases = [("valid (control)", _npz(d / "ok.npz", x, idx))]
    for dtype in (np.float64, np.float16, np.int32, np.int8, np.uint8, np.bool_, np.complex64, np.uint16):
        cases.append((f"x as {np.dtype(dtype).name}", _npz(d / f"x_{np.dtype(dtype).name}.npz", x.astype(dtype), idx)))
    cases += [
        ("idx as float32", _npz(d / "idx_f32.npz", x, idx.astype(np.float32))),
        ("idx as int32", _npz(d / "idx_i32.npz", x, idx.astype(np.int32))),
        ("inputs swapped", _npz(d / "swapped.npz", idx, x)),
        ("x [2, 15]", _npz(d / "x_2_15.npz", x[:, :15].copy(), idx)),
        ("x [16, 2]", _npz(d / "x_16_2.npz", x.T.copy(), idx)),
        ("x [2, 16, 1]", _npz(d / "x_rank3.npz", x[..., None].copy(), idx)),
        ("x 0-d", _npz(d / "x_0d.npz", np.float32(1.0), idx)),
        ("x [0, 16]", _npz(d / "x_empty.npz", np.zeros((0, 16), np.float32), idx)),
        ("idx out of range (index 99)", _npz(d / "idx_99.npz", x, np.array([1, 99, 2], np.int64))),
        ("idx negative", _npz(d / "idx_neg.npz", x, np.array([-1, 0, 2], np.int64))),
        ("one array", _npz(d / "one.npz", x)),
        ("three arrays", _npz(d / "three.npz", x, idx, idx)),
        ("named keys in the wrong order", _npz(d / "named.npz", b_x=x, a_idx=idx)),
        ("string array", _npz(d / "strings.npz", np.array(["a", "b"]), idx)),
        ("structured array", _npz(d / "structured.npz", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i8")]), idx)),
        ("fortran order", _npz(d / "fortran.npz", np.asfortranarray(x), idx)),
        ("big-endian", _npz(d / "big_endian.npz", x.astype(">f4"), idx)),
        ("a lone .npy for a two-input method", d / "x.npy"),
        ("huge declared shape", _npy_header(d / "huge.npy", "<f4", (1 << 40, 16), b"\0" * 64)),
        ("shape that overflows", _npy_header(d / "overflow.npy", "<f8", (1 << 62, 1 << 62), b"")),
        ("empty file", d / "empty.npz"),
        ("random bytes", d / "random.npz"),
        ("a directory", d),
        ("a file that does not exist", d / "missing.npz"),
        ("a character device", Path("/dev/null")),
    ]
    np.save(d / "x.npy", x)
    (d / "empty.npz").write_bytes(b"")
    (d / "random.npz").write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    np.savez_compressed(d / "compressed.npz", x, idx)
    cases.append(("np.savez_compressed", d / "compressed.npz"))
    # Corrupt zips: truncations and flipped bytes of the valid file (the CRC or the structure catches them).
    good = (d / "ok.npz").read_bytes()
    rng = random.Random(SEED)
    for k in range(12):
        cut = rng.randrange(len(good))
        (d / f"cut_{k}.npz").write_bytes(good[:cut])
        cases.append((f"truncated to {cut} bytes", d / f"cut_{k}.npz"))
    for k in range(24):
        bad = bytearray(good)
        at = rng.randrange(len(bad))
        bad[at] ^= 1 << rng.randrange(8)
        (d / f"flip_{k}.npz").write_bytes(bytes(bad))
        cases.append((f"bit flipped at byte {at}", d / f"flip_{k}.npz"))
    # A zip whose entry is stored but is not an .npy, and one with a path-like entry name.
    with zipfile.ZipFile(d / "not_npy.npz", "w") as z:
        z.writestr("arr_0.txt", "hello")
    cases.append(("an entry that is not .npy", d / "not_npy.npz"))
    with zipfile.ZipFile(d / "newline_key.npz", "w") as z:
        z.writestr("arr\n_0.npy", (d / "x.npy").read_bytes())
    cases.append(("a key with a newline", d / "newline_key.npz"))
    return cases


def test_odd_and_corrupt_inputs_are_one_line_errors(programs, tmp_path):
    problems, refused = [], 0
    cases = input_cases(tmp_path)
    for label, path in cases:
        for name in ("portable", "nested"):
            o = run_et_run(f"{name}, inputs: {label}", programs[name], "--inputs", path, "--iterations", 1,
                           "--warmup", 0)
            if (why := problem(o, allowed=(0, 1))) is not None:
                problems.append(why)
            refused += o.returncode == 1
            if label == "valid (control)":
                assert o.returncode == 0, o.stderr
            elif label.startswith(("x as", "x [", "x 0-d", "idx as", "inputs swapped", "one array", "three arrays",
                                   "string", "structured", "big-endian", "a lone", "huge", "shape that", "empty file",
                                   "random bytes", "a directory", "a file that", "a character", "np.savez_compressed",
                                   "an entry", "a key with", "fortran")):
                assert o.returncode == 1, (label, name, o.stderr)
    assert not problems, "\n".join(problems[:10])
    print(f"\n[et-run fuzz] {len(cases)} input files x 2 programs: {refused} clean errors, no crash")


# ---- Arguments ------------------------------------------------------------------------------------

def test_bad_arguments_are_one_line_errors(programs, tmp_path):
    model = programs["portable"]
    (tmp_path / "empty.pte").write_bytes(b"")
    cases: list[tuple[str, tuple[object, ...], int]] = [
        ("no arguments", (), 2),
        ("unknown option", (model, "--frobnicate"), 2),
        ("unknown short option", (model, "-x"), 2),
        ("two models", (model, model), 2),
        ("missing value at the end", (model, "--iterations"), 2),
        ("empty value", (model, "--iterations="), 2),
        ("negative iterations", (model, "--iterations", "-1"), 2),
        ("zero iterations", (model, "--iterations", "0"), 2),
        ("too many iterations", (model, "--iterations", "10000001"), 2),
        ("iterations overflow u64", (model, "--iterations", "99999999999999999999999"), 2),
        ("iterations not a number", (model, "--iterations", "ten"), 2),
        ("iterations with junk", (model, "--iterations", "3x"), 2),
        ("negative warmup", (model, "--warmup=-2"), 2),
        ("too much warmup", (model, "--warmup", "18446744073709551615"), 2),
        ("negative seed", (model, "--seed", "-1"), 2),
        ("zero int bound", (model, "--int-bound", "0"), 2),
        ("zero backend threads", (model, "--backend-threads", "0"), 2),
        ("too many backend threads", (model, "--cpu-threads", "257"), 2),
        ("temp bytes with a bad suffix", (model, "--temp-bytes", "1T"), 2),
        ("temp bytes that overflow", (model, "--temp-bytes", "17179869184G"), 2),
        ("unknown loader", (model, "--loader", "http"), 2),
        ("a newline in an option value", (model, "--loader", "mm\nap"), 2),
        ("absurd temp bytes (2^60)", (model, "--temp-bytes", "1073741824G", "--iterations", 1), 1),
        ("unknown method", (model, "--method", "backward"), 1),
        ("a method name with a newline", (model, "--method", "for\nward"), 1),
        ("missing model", (tmp_path / "missing.pte",), 1),
        ("model is a directory", (tmp_path,), 1),
        ("model is a character device", ("/dev/null",), 1),
        ("model is a FIFO (no writer: opening it must not block)", (tmp_path / "fifo",), 1),
        ("inputs is a FIFO", (model, "--inputs", tmp_path / "fifo"), 1),
        ("model is empty", (tmp_path / "empty.pte",), 1),
        ("model is an .npz", (tmp_path / "x.npz",), 1),
        ("inputs is empty string", (model, "--inputs="), 1),
        ("trusted key file missing", (model, "--trusted-key", tmp_path / "missing.pub"), 1),
        ("trusted key file is a directory", (model, "--trusted-key", tmp_path), 1),
        ("trusted key file is not a key", (model, "--trusted-key", tmp_path / "x.npz"), 1),
        ("zero temp bytes", (model, "--temp-bytes", "0", "--iterations", 1), (0, 1)),
        ("the largest seed", (model, "--seed", "18446744073709551615", "--iterations", 1), 0),
        ("a huge int bound", (model, "--int-bound", "18446744073709551615", "--iterations", 1), (0, 1)),
    ]
    np.savez(tmp_path / "x.npz", np.zeros(3, np.float32))
    os.mkfifo(tmp_path / "fifo")
    problems = []
    for label, args, expected in cases:
        o = run_et_run(label, *args)
        allowed = expected if isinstance(expected, tuple) else (expected,)
        if (why := problem(o, allowed=allowed)) is not None:
            problems.append(why)
    assert not problems, "\n".join(problems)
