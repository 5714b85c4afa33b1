"""The Python runtime API under misuse: threads, the inputs users have, files that change, damaged files.

- Threads: calls of one `Method` from several threads are serialized (a lock per Method) and each
  gets its own right answer; separate Methods of one Program run side by side.
- Inputs: read-only, strided, Fortran-order and big-endian numpy arrays, Python numbers and
  lists, and torch tensors of every dtype the runtime has (bfloat16 included) run; object and
  masked arrays, wrong dtypes and values a dtype cannot hold raise `Error` naming the input.
- Files: `load(path)` copies the file, so overwriting or truncating it afterwards changes nothing;
  `loader="mmap"` maps it (and documents the rule that comes with that).
- Damaged files: every failure of load, method and call is an `etmlir.runtime.Error`, never a
  UnicodeDecodeError, MemoryError or crash. The fuzz test mutates a plain and a delegated program
  (byte flips, truncations, changed field values through the FlatBuffer object API) and runs
  load -> method -> call on each; ETMLIR_FUZZ_CASES (default 600) sets the number of cases, so
  `ETMLIR_FUZZ_CASES=20000 pytest test/python/test_runtime_misuse.py -k fuzz -s` is the long run.

Numerics: the method's outputs on one thread are compared with eager PyTorch (atol 1e-5,
rtol 1e-5: two small float32 linear layers); every other comparison is exact against those
outputs or against PyTorch's own conversion of the same values (copies, casts, cat).
"""

from __future__ import annotations

import os
import random
import threading
from typing import Any, Callable

import numpy as np
import pytest
import torch

import etmlir
import etmlir.runtime as rt
from etmlir.executable import pte

torch.manual_seed(0)
MLP = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
EXAMPLE = torch.randn(2, 8)
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int16, torch.int32,
          torch.int64, torch.uint8, torch.bool]


class CatEach(torch.nn.Module):
    """One input of every dtype the runtime has, each returned concatenated with itself, plus a 0-d input."""

    def forward(self, *xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        *tensors, scale = xs
        return tuple(torch.cat([x, x]) for x in tensors) + (scale * 2,)


def _dtype_args() -> tuple[torch.Tensor, ...]:
    base = torch.tensor([[0, 1, 2], [3, 4, 5]])
    return tuple(((base % 2) if d == torch.bool else base).to(d) for d in DTYPES) + (torch.tensor(1.5),)


@pytest.fixture(scope="module")
def mlp_edge() -> etmlir.EdgeProgram:
    return etmlir.to_edge(etmlir.export(MLP, (EXAMPLE,)))


@pytest.fixture(scope="module")
def mlp_pte(mlp_edge: etmlir.EdgeProgram) -> bytes:
    return mlp_edge.to_executorch().buffer


@pytest.fixture(scope="module")
def nested_pte(mlp_edge: etmlir.EdgeProgram) -> bytes:
    """The MLP with its ops in one "nested" delegate (its payload is a whole .pte)."""
    return etmlir.to_backend("nested", mlp_edge).to_executorch().buffer


@pytest.fixture(scope="module")
def forward(mlp_pte: bytes) -> rt.Method:
    return rt.load(mlp_pte).method()


@pytest.fixture(scope="module")
def dtypes_method() -> rt.Method:
    return rt.load(etmlir.to_edge(etmlir.export(CatEach(), _dtype_args())).to_executorch().buffer).method()


def _expected(x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return MLP(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))).numpy()


# ---- threads ----------------------------------------------------------------------------------


def _inputs(seed: int, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((2, 8)).astype(np.float32) for _ in range(count)]


def _hammer(calls: list[Callable[[np.ndarray], Any]], inputs: list[list[np.ndarray]],
            expected: list[list[np.ndarray]], iterations: int) -> list[int]:
    """Runs calls[t] on thread t, `iterations` times over inputs[t]; returns each thread's wrong answers."""
    wrong = [0] * len(calls)
    errors: list[BaseException] = []
    start = threading.Barrier(len(calls))

    def work(t: int) -> None:
        try:
            start.wait()
            for i in range(iterations):
                k = i % len(inputs[t])
                (y,) = calls[t](inputs[t][k])
                if not np.array_equal(y, expected[t][k]):
                    wrong[t] += 1
        except BaseException as error:  # noqa: BLE001 - reported below, on the test's thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return wrong


def test_one_method_called_from_two_threads_gives_every_call_its_own_answer(forward: rt.Method) -> None:
    inputs = [_inputs(1, 4), _inputs(2, 4)]
    expected = [[forward(x)[0] for x in xs] for xs in inputs]  # one thread first: the reference
    for xs, ys in zip(inputs, expected):
        for x, y in zip(xs, ys):
            np.testing.assert_allclose(y, _expected(x), atol=1e-5, rtol=1e-5)
    assert _hammer([forward, forward], inputs, expected, iterations=1000) == [0, 0]


def test_two_methods_of_one_program_run_on_two_threads(mlp_pte: bytes) -> None:
    program = rt.load(mlp_pte)
    first, second = program.method(), program.method()
    inputs = [_inputs(3, 4), _inputs(4, 4)]
    expected = [[first(x)[0] for x in xs] for xs in inputs]
    assert _hammer([first, second], inputs, expected, iterations=500) == [0, 0]


def test_state_benchmark_and_seed_take_the_methods_lock_too(forward: rt.Method) -> None:
    # A call on another thread while benchmark runs waits for it, and gets its own answer.
    x, other = _inputs(5, 2)
    done: list[np.ndarray] = []
    with forward._lock:  # held: the thread's call must wait until it is released
        thread = threading.Thread(target=lambda: done.append(forward(other)[0]))
        thread.start()
        thread.join(timeout=0.2)
        assert thread.is_alive() and not done
    thread.join()
    assert np.array_equal(done[0], forward(other)[0])
    assert len(forward.benchmark(x, iterations=3, warmup=1)) == 3
    assert forward.seed == rt.DEFAULT_SEED


# ---- inputs users have -------------------------------------------------------------------------


def _read_only(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("make", [
    pytest.param(_read_only, id="read-only"),
    pytest.param(lambda a: np.asfortranarray(a), id="fortran-order"),
    pytest.param(lambda a: np.repeat(a, 2, axis=1)[:, ::2], id="strided"),
    pytest.param(lambda a: np.ascontiguousarray(a.T).T, id="transposed"),
    pytest.param(lambda a: a.astype(">f4"), id="big-endian"),
    pytest.param(lambda a: _read_only(a.astype(">f4")[:, ::-1])[:, ::-1], id="read-only-big-endian-reversed"),
    pytest.param(lambda a: np.frombuffer(a.tobytes(), np.float32).reshape(2, 8), id="frombuffer"),
    pytest.param(lambda a: a.tolist(), id="nested-list"),
    pytest.param(lambda a: tuple(tuple(row) for row in a.tolist()), id="nested-tuple"),
    pytest.param(lambda a: torch.from_numpy(a).t().contiguous().t(), id="torch-strided"),
    pytest.param(lambda a: torch.from_numpy(a).requires_grad_(), id="torch-requires-grad"),
])
def test_numpy_arrays_lists_and_tensors_of_any_layout_run(forward: rt.Method, make: Callable) -> None:
    x = _inputs(6, 1)[0]
    (reference,) = forward(x)
    value = make(x)
    (got,) = forward(value)
    assert np.array_equal(np.asarray(got), reference)
    if isinstance(value, np.ndarray):
        assert np.array_equal(value, x)  # the caller's array is untouched


def test_inputs_the_method_does_not_take_name_the_input_and_the_reason(forward: rt.Method) -> None:
    x = _inputs(7, 1)[0]
    where = r"method 'forward' input 0 \('input'\): "
    cases = [
        (x.astype(object), "object arrays are not tensors"),
        (np.ma.masked_array(x, mask=x > 0), "masked arrays are not tensors"),
        (x.astype(np.float64), r"expected float32\[2, 8\], got float64\[2, 8\]"),
        (x.astype(np.complex64), r"expected float32\[2, 8\], got complex64\[2, 8\]"),
        (x[:1], r"expected float32\[2, 8\], got float32\[1, 8\]"),
        (1.5, r"expected float32\[2, 8\], got float32\[\]"),
        ([[1.0, 2.0], [3.0]], "a list that is not a tensor"),
        ([["a"] * 8] * 2, "a list of str"),
        ([[True] * 8] * 2, r"expected float32\[2, 8\], got a list of bools"),
        ("x", "expected a numpy array, torch tensor or \\(nested\\) list of numbers"),
        (None, r"expected a numpy array, .*\(float32\[2, 8\]\), got NoneType"),
        (torch.from_numpy(x).to(torch.float64), r"expected float32\[2, 8\], got float64\[2, 8\]"),
        (torch.from_numpy(x).to_sparse(), "torch.sparse_coo tensors are not taken"),
    ]
    for value, message in cases:
        with pytest.raises(rt.Error, match=where + message):
            forward(value)
    with pytest.raises(rt.Error, match=r"method 'forward' takes 1 inputs \(float32\[2, 8\]\), got 2"):
        forward(x, x)
    (after,) = forward(x)  # none of those left the method unusable
    np.testing.assert_allclose(after, _expected(x), atol=1e-5, rtol=1e-5)


def test_torch_tensors_of_every_dtype_run(dtypes_method: rt.Method) -> None:
    args = _dtype_args()
    outputs = dtypes_method(*args)
    assert [o.dtype for o in outputs] == DTYPES + [torch.float32]
    for got, x in zip(outputs, args[:-1]):
        assert torch.equal(got, torch.cat([x, x]))
    assert torch.equal(outputs[-1], torch.tensor(3.0))
    # Non-contiguous tensors of each dtype (bfloat16 goes through DLPack) are copied first.
    strided = tuple(torch.cat([x, x], 1)[:, ::2] for x in args[:-1]) + (args[-1],)
    for got, x in zip(dtypes_method(*strided), strided[:-1]):
        assert torch.equal(got, torch.cat([x, x]))


def test_numpy_arrays_of_every_numpy_dtype_and_python_numbers_run(dtypes_method: rt.Method) -> None:
    args = _dtype_args()
    arrays = [a.numpy().astype(a.numpy().dtype.newbyteorder(">")) if a.dtype != torch.bfloat16 else a
              for a in args[:-1]]
    outputs = dtypes_method(*arrays, np.float32(1.5))
    for got, x in zip(outputs, args[:-1]):
        assert torch.equal(torch.as_tensor(got), torch.cat([x, x]))
    # Python numbers nested in lists, converted to each input's dtype as torch.tensor(..., dtype=) does.
    lists = [a.tolist() for a in args[:-1]]
    outputs = dtypes_method(*lists, 1.5)
    for got, values, dtype in zip(outputs, lists, DTYPES):
        assert torch.equal(torch.as_tensor(got), torch.cat([torch.tensor(values, dtype=dtype)] * 2))
    assert float(outputs[-1]) == 3.0
    floats = [[[0.1, 1e-3, 3.3]] * 2 for _ in DTYPES[:4]]  # floats round to float16/bfloat16 like torch
    for got, values, dtype in zip(dtypes_method(*floats, *lists[4:], 1.5), floats, DTYPES):
        assert torch.equal(torch.as_tensor(got), torch.cat([torch.tensor(values, dtype=dtype)] * 2))


@pytest.mark.parametrize("index, value, message", [
    (4, [[0, 1, 300]] * 2, r"input 4 .*a list of ints that int8 does not hold exactly"),
    (8, [[0, 1, -1]] * 2, r"input 8 .*a list of ints that uint8 does not hold exactly"),
    (1, [[0, 1, 4097]] * 2, r"input 1 .*a list of ints that float16 does not hold exactly"),
    (7, [[0.5, 1.0, 2.0]] * 2, r"input 7 .*expected int64\[2, 3\], got a list of floats"),
    (9, [[0, 1, 1]] * 2, r"input 9 .*expected bool\[2, 3\], got a list of ints"),
    (7, [[1 << 70, 1, 1]] * 2, r"input 7 .*a list of items that are not numbers of one dtype .*ints past 64 bits"),
])
def test_python_numbers_a_dtype_cannot_hold_are_refused(dtypes_method: rt.Method, index: int, value: Any,
                                                        message: str) -> None:
    args = list(_dtype_args())
    args[index] = value
    with pytest.raises(rt.Error, match=message):
        dtypes_method(*args)


# ---- files that change under a loaded program ---------------------------------------------------


def test_default_load_copies_the_file_so_overwriting_or_truncating_it_changes_nothing(mlp_pte: bytes,
                                                                                        tmp_path: Any) -> None:
    path = tmp_path / "mlp.pte"
    path.write_bytes(mlp_pte)
    program = rt.load(path)
    method = program.method()
    x = _inputs(8, 1)[0]
    (before,) = method(x)
    with open(path, "r+b") as f:  # in place, same inode: what a mapping would see
        f.write(os.urandom(len(mlp_pte)))
    assert np.array_equal(method(x)[0], before)
    os.truncate(path, 0)
    assert np.array_equal(method(x)[0], before)
    assert np.array_equal(program.method()(x)[0], before)  # a method made after: from the copy too
    path.unlink()
    assert np.array_equal(program.method()(x)[0], before)
    np.testing.assert_allclose(before, _expected(x), atol=1e-5, rtol=1e-5)


def test_mmap_loader_runs_and_loader_values_are_checked(mlp_pte: bytes, nested_pte: bytes, tmp_path: Any) -> None:
    x = _inputs(9, 1)[0]
    for name, data in (("mlp", mlp_pte), ("nested", nested_pte)):
        path = tmp_path / f"{name}.pte"
        path.write_bytes(data)
        (mapped,) = rt.load(path, loader="mmap").method()(x)
        (copied,) = rt.load(str(path), loader="file").method()(x)
        assert np.array_equal(mapped, copied)
        np.testing.assert_allclose(mapped, _expected(x), atol=1e-5, rtol=1e-5)
    with pytest.raises(rt.Error, match=r"loader must be 'file' .* or 'mmap' .*got 'mapped'"):
        rt.load(tmp_path / "mlp.pte", loader="mapped")
    with pytest.raises(rt.Error, match=r"loader='mmap' maps a file; bytes are always copied"):
        rt.load(mlp_pte, loader="mmap")
    for loader in rt.LOADERS:
        with pytest.raises(rt.Error, match=r"cannot open .*missing.pte: No such file or directory"):
            rt.load(tmp_path / "missing.pte", loader=loader)
        with pytest.raises(rt.Error, match=r"is not a regular file"):
            rt.load(tmp_path, loader=loader)
    with pytest.raises(rt.Error, match=r"load takes a path or the file's bytes, got int"):
        rt.load(3)


# ---- damaged files ----------------------------------------------------------------------------


def _rewrite(data: bytes, change: Callable[[Any], None]) -> bytes:
    """`data` with its program table changed by `change` (object API), segments kept."""
    parsed = pte.read(data)
    segments = [parsed.segment(i) for i in range(len(parsed.program.segments))]
    change(parsed.program)
    return pte.pack(parsed.program, segments, parsed.header.segment_alignment)


def test_names_that_are_not_utf8_come_back_escaped_and_errors_stay_errors(mlp_pte: bytes) -> None:
    def rename_method(program: Any) -> None:
        program.methods[0].name = b"forw\xffrd"

    program = rt.load(_rewrite(mlp_pte, rename_method))
    assert program.method_names == ["forw\\xffrd"]
    with pytest.raises(rt.Error, match="no method 'forward'|forward"):
        program.method("forward")

    def rename_others(program: Any) -> None:
        program.methods[0].arenas[0].name = b"\xc3("
        program.methods[0].argNames = [b"in\xfe"]

    method = rt.load(_rewrite(mlp_pte, rename_others)).method()
    assert method.arenas[0][0] == "\\xc3("
    with pytest.raises(rt.Error, match=r"input 0 \('in\\xfe'\): object arrays"):
        method(np.zeros((2, 8), object))

    def rename_operator(program: Any) -> None:
        program.methods[0].operators[0].name = b"aten::\xe2\x82"

    with pytest.raises(rt.Error, match=r"no kernel for aten::\\xe2\\x82"):
        rt.load(_rewrite(mlp_pte, rename_operator)).method()


def test_an_arena_no_memory_holds_is_an_error_naming_it(mlp_pte: bytes) -> None:
    def grow(program: Any) -> None:
        program.methods[0].arenas[0].size = 1 << 60

    program = rt.load(_rewrite(mlp_pte, grow))
    with pytest.raises(rt.Error, match=r"method 'forward': arena 0 \('planned'\): cannot allocate "
                                       r"1152921504606846976 bytes \(out of memory\)"):
        program.method()
    with pytest.raises(rt.Error, match=r"temp_bytes must be a non-negative int"):
        rt.load(mlp_pte).method(temp_bytes=-1)


# -- the fuzz test --

INTERESTING = [0, 1, -1, 2, 7, 255, 256, 65535, (1 << 31) - 1, -(1 << 31), (1 << 32) - 1, (1 << 62), (1 << 63) - 1]


def _fields(obj: Any, out: list[tuple[Any, Any]], depth: int = 0) -> None:
    """(object, attribute or index) of every scalar field under `obj` (a FlatBuffer object-API tree)."""
    if depth > 40:
        return
    items = enumerate(obj) if isinstance(obj, list) else vars(obj).items()
    for key, value in items:
        if isinstance(value, np.ndarray):  # vectors the reader gave as numpy: lists, to change an item
            value = value.tolist()
            if isinstance(obj, list):
                obj[key] = value
            else:
                setattr(obj, key, value)
        if isinstance(value, (bool, int, float, bytes, str)):
            out.append((obj, key))
        elif isinstance(value, list) or hasattr(value, "__dict__"):
            _fields(value, out, depth + 1)


def _change_field(rng: random.Random, data: bytes) -> bytes | None:
    """`data` with one field of its program given another value (None when that cannot be packed)."""
    parsed = pte.read(data)
    segments = [parsed.segment(i) for i in range(len(parsed.program.segments))]
    fields: list[tuple[Any, Any]] = []
    _fields(parsed.program, fields)
    fields = [(o, k) for o, k in fields if k != "segments"]
    obj, key = rng.choice(fields)
    old = obj[key] if isinstance(obj, list) else getattr(obj, key)
    if isinstance(old, (bytes, str)):
        new: Any = rng.choice([b"", b"\xff\xfe", b"forward", (old.encode() if isinstance(old, str) else old) + b"\x80",
                               b"x" * 300])
    elif isinstance(old, float):
        new = rng.choice([0.0, -1.0, float("nan"), float("inf"), 1e308])
    elif isinstance(old, int):
        new = rng.choice(INTERESTING + [old + 1, old - 1, old ^ (1 << rng.randrange(64))])
    else:
        return None
    if isinstance(obj, list):
        obj[key] = new
    else:
        setattr(obj, key, new)
    try:
        return pte.pack(parsed.program, segments, parsed.header.segment_alignment)
    except Exception:  # noqa: BLE001 - a value the field's type cannot hold (struct.error and the like)
        return None


def _mutate(rng: random.Random, data: bytes) -> bytes | None:
    kind = rng.randrange(10)
    if kind < 4:  # byte flips, mostly in the header and the FlatBuffer
        out = bytearray(data)
        end = len(out) if rng.random() < 0.2 else min(len(out), pte.read_header(data).segment_base_offset)
        for _ in range(rng.choice([1, 1, 2, 4, 16])):
            out[rng.randrange(end)] ^= rng.choice([1 << rng.randrange(8), 0xFF, rng.randrange(1, 256)])
        return bytes(out)
    if kind < 5:  # truncations
        return data[:rng.randrange(len(data))]
    if kind < 6:  # a 4-byte word of the FlatBuffer set to an interesting value
        out = bytearray(data)
        at = rng.randrange(64, min(len(out), pte.read_header(data).segment_base_offset) - 4) & ~3
        out[at:at + 4] = (rng.choice(INTERESTING) & 0xFFFFFFFF).to_bytes(4, "little")
        return bytes(out)
    return _change_field(rng, data)


def _exercise(data: bytes) -> str:
    """load -> every method -> a call on zeros of its input specs; "ok" or "error" (an rt.Error)."""
    try:
        program = rt.load(data)
        for name in program.method_names:
            method = program.method(name)
            args = []
            for spec in method.inputs:
                if spec is None or int(np.prod(spec.sizes, dtype=np.float64)) > 1 << 20:
                    raise rt.Error("skip: not a tensor input this test makes")
                dtype = torch.bfloat16 if spec.dtype == "bfloat16" else None
                args.append(torch.zeros(spec.sizes, dtype=dtype) if dtype else np.zeros(spec.sizes, spec.dtype))
            method.call_flat(*args)
            method(*args)
            for state in method.state_names:
                method.state(state)
            method.reset_state()
        return "ok"
    except rt.Error:
        return "error"


def test_fuzz_damaged_programs_raise_only_runtime_errors(mlp_pte: bytes, nested_pte: bytes) -> None:
    cases = int(os.environ.get("ETMLIR_FUZZ_CASES", "600"))
    rng = random.Random(20240522)
    seeds = [mlp_pte, nested_pte]
    counts = {"ok": 0, "error": 0, "unpackable": 0}
    findings: list[str] = []
    for case in range(cases):
        data = _mutate(rng, seeds[case % len(seeds)])
        if data is None:
            counts["unpackable"] += 1
            continue
        try:
            counts[_exercise(data)] += 1
        except Exception as error:  # noqa: BLE001 - what this test looks for
            findings.append(f"case {case}: {type(error).__name__}: {error}")
    print(f"\nruntime API fuzz: {cases} cases, {counts['error']} clean errors, {counts['ok']} ran, "
          f"{counts['unpackable']} field values the type cannot hold, {len(findings)} findings")
    assert not findings, "\n".join(findings[:20])
    assert counts["error"] > cases // 4 and counts["ok"] > 0
