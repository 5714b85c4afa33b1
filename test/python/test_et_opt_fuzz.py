"""Fuzz et-opt: mutated MLIR and random option strings must end in a result or a clear error.

The corpus is the lit tests' inputs (`test/passes/*.mlir`, split at `// -----`).
Each case takes one input, most often mutated (character flips, truncation, line deletion,
duplication and swaps, changed numbers, shapes, element types and op names,
deep nesting, extra split markers, bytes that are not UTF-8) and runs it
through a short random pipeline of cheap passes with random, often wrong,
options. A case passes when et-opt

* exits 0 or 1 (2 is an internal error: a finding),
* prints no Python traceback,
* finishes within CASE_SECONDS (a hang is a finding), and does not crash the process.

Cases run in-process (`et_opt.main`) in a worker subprocess, so a crash or a
hang costs one case, not the test run; a few more run through the real
`et-opt` entry point. Deterministic (seed SEED). The number of cases is
ETMLIR_FUZZ_CASES (default 200: about 25 s with the entry-point cases, on 2 cores); a longer run:

    ETMLIR_FUZZ_CASES=5000 .venv/bin/pytest test/python/test_et_opt_fuzz.py -q -s

prints the counts (cases, clean errors, successes, findings) with `-s`.
"""

from __future__ import annotations

import json
import os
import random
import re
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS_DIR = ROOT / "test" / "passes"
SEED = 22
CASES = int(os.environ.get("ETMLIR_FUZZ_CASES", "200"))
CASE_SECONDS = 60.0  # generous: a slow 2-core CI machine, and the first case pays for imports
ENTRY_POINT_CASES = 4
TRACEBACK = "Traceback (most recent call last)"
MARKER = "@@case "

# Passes cheap enough to run hundreds of times (no backend compilation, no torch-mlir lowering).
PASSES = ["et-edge-verify", "et-edge-canonicalize", "et-to-out-variants", "et-plan-memory", "et-verify-memory-plan",
          "et-assign-debug-handles", "et-verify-core-aten", "et-to-edge", "et-fold-constants", "et-partition",
          "et-outline-delegates", "et-edge-to-torch", "et-link-lowered-modules", "et-emit", "canonicalize", "cse"]
OPTIONS = {
    "et-plan-memory": ["alignment=16", "alignment=3", "alignment=-8", "alignment=1180591620717411303424",
                       "arenas=fast:32,slow", "arenas=fast:lots", "arenas=a:99999999999999999999G", "policy=random",
                       "policy=smallest-first", "algorithm=best-fit", "alloc-inputs=false", "alloc-outputs=maybe",
                       "foo=1", "print-summary"],
    "et-fold-constants": ["max-bytes=0", "max-bytes=-1", "max-bytes=abc", "max-bytes=99999999999999999999999"],
    "et-partition": ["backend=nested", "backend=nested ops=edge.relu", "backend=nested ops=edge.bogus",
                     "backend=nope", "backend=nested min-group-size=0", "backend=nested skip-ops=edge.add_tensor"],
    "et-verify-core-aten": ["keep=aten.linear.default", "keep=aten.nonexistent.op", "keep=,,,", "keep=aten"],
    "et-to-out-variants": ["functions=main", "functions=nope"],
    "et-emit": ["segment-alignment=3", "segment-alignment=0", "segment-alignment=64"],
}
GARBAGE_OPTIONS = ["=", "x", '"', "a=b=c", "{", "}", "(", ")", "keep=\u00e9", "\x7f", "-1", "a b c"]
ELEMENT_TYPES = ["f32", "f16", "bf16", "f64", "i1", "i8", "ui8", "i32", "i64", "index", "complex<f32>", "f8E4M3FN"]
NUMBERS = ["0", "1", "-1", "2", "3", "7", "65536", "9223372036854775807", "-9223372036854775808",
           "1180591620717411303424", "1000000000000"]
NEST_OPEN = ["module {", "[", "(", "tuple<", "{a = "]


def corpus() -> list[str]:
    """Every chunk of every lit test input (lit directives are comments: kept, harmless)."""
    chunks = []
    for path in sorted(CORPUS_DIR.glob("*.mlir")):
        for chunk in re.split(r"^// -----\s*$", path.read_text(), flags=re.M):
            if chunk.strip():
                chunks.append(chunk)
    return chunks


def mutate(text: str, rng: random.Random) -> str:
    """One to three random mutations of `text`."""
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(12)
        lines = text.splitlines(keepends=True)
        if kind == 0 and text:  # flip bytes (as characters: the input file is written as UTF-8)
            chars = list(text)
            for _ in range(rng.randint(1, 8)):
                chars[rng.randrange(len(chars))] = chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 0x3000)]))
            text = "".join(chars)
        elif kind == 1 and text:
            text = text[:rng.randrange(len(text))]
        elif kind == 2 and lines:
            del lines[rng.randrange(len(lines))]
            text = "".join(lines)
        elif kind == 3 and lines:
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            text = "".join(lines)
        elif kind == 4 and len(lines) > 1:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            text = "".join(lines)
        elif kind == 5:
            numbers = list(re.finditer(r"-?\d+", text))
            if numbers:
                m = rng.choice(numbers)
                text = text[:m.start()] + rng.choice(NUMBERS) + text[m.end():]
        elif kind == 6:
            shapes = list(re.finditer(r"tensor<([0-9x?]*)([a-z][a-z0-9]*)>", text))
            if shapes:
                m = rng.choice(shapes)
                dims = "x".join(rng.choice(["1", "2", "3", "4", "5", "?", "0", "1000000000000"])
                                for _ in range(rng.randint(0, 4)))
                text = text[:m.start()] + f"tensor<{dims + 'x' if dims else ''}{m.group(2)}>" + text[m.end():]
        elif kind == 7:
            types = list(re.finditer(r"\b(f32|f16|i64|i32|i1|f64)\b", text))
            if types:
                m = rng.choice(types)
                text = text[:m.start()] + rng.choice(ELEMENT_TYPES) + text[m.end():]
        elif kind == 8:
            names = list(re.finditer(r'"(edge|etx)\.[a-z_]+"', text))
            if names:
                m = rng.choice(names)
                other = rng.choice(names).group()
                text = text[:m.start()] + other + text[m.end():]
        elif kind == 9:
            depth = rng.choice([10, 500, 1001, 5000, 100_000])
            opener = rng.choice(NEST_OPEN)
            closer = {"module {": "}", "[": "]", "(": ")", "tuple<": ">", "{a = ": "}"}[opener]
            text = f"module attributes {{t.x = {opener * depth}{closer * depth}}} {{}}\n" if opener != "module {" \
                else opener * depth + closer * depth
        elif kind == 10 and lines:
            lines.insert(rng.randrange(len(lines) + 1), "// -----\n")
            text = "".join(lines)
        elif kind == 11:
            text = text.replace("etx.method", rng.choice(["etx.methd", "sym_name", "etx.method"]), 1)
    return text


def argv_for(input_path: str, out_dir: str, rng: random.Random) -> list[str]:
    """A random et-opt command line over cheap passes and (mostly wrong) options; outputs stay in out_dir."""
    argv = [input_path]
    for _ in range(rng.randint(1, 3)):
        flag = rng.choice(PASSES)
        options = ""
        if flag in OPTIONS and rng.random() < 0.7:
            options = rng.choice(OPTIONS[flag])
        elif rng.random() < 0.1:
            options = rng.choice(GARBAGE_OPTIONS)
        if flag == "et-emit":
            options = (options + " " if options else "") + f"output={out_dir}/out.pte"
        elif flag == "et-partition" and not options:
            options = "backend=nested"
        argv.append(f"--{flag}" + (f"={options}" if options else ""))
    for extra in ("--split-input-file", "--verify-diagnostics", "--mlir-print-debuginfo"):
        if rng.random() < 0.2:
            argv.append(extra)
    if rng.random() < 0.05:
        argv.append("--et-delegation-report")
    if rng.random() < 0.1:
        argv += ["-o", f"{out_dir}/{rng.choice(['out.mlir', 'missing/out.mlir'])}"]
    if rng.random() < 0.03:
        argv.append(rng.choice(["--mlir-elide-elementsattrs-if-larger=-1", "--bogus-flag", "stray", "--",
                                "--pass-pipeline=builtin.module(cse", "-o"]))
    return argv


def make_cases(count: int, work: Path) -> list[list[str]]:
    """`count` command lines, their inputs written under `work` (deterministic)."""
    rng = random.Random(SEED)
    inputs = corpus()
    cases = []
    for index in range(count):
        path = work / f"case{index}.mlir"
        text = rng.choice(inputs)
        # A fifth of the inputs stay valid, so the passes themselves (not only the parser) see
        # every level of IR under random pipelines and options.
        data = (text if rng.random() < 0.2 else mutate(text, rng)).encode("utf-8")
        if data and rng.random() < 0.05:  # bytes that are not UTF-8
            at = rng.randrange(len(data))
            data = data[:at] + bytes([rng.randrange(0x80, 0x100)]) + data[at + 1:]
        path.write_bytes(data)
        cases.append(argv_for(str(path), str(work), rng))
    return cases


def worker(cases_file: str, start: int) -> None:
    """Run cases from `start` in this process, one result line per case on stdout."""
    import contextlib
    import io

    from etmlir.tools import et_opt

    cases = json.loads(Path(cases_file).read_text())
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # native writes to stdout must not garble the channel
    for index in range(start, len(cases)):
        channel.write(f"{MARKER}{json.dumps({'index': index, 'started': True})}\n")
        channel.flush()
        err, out = io.StringIO(), io.StringIO()
        began = time.monotonic()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                code = et_opt.main(cases[index])
            except SystemExit as exit_:  # --help and the like
                code = exit_.code if isinstance(exit_.code, int) else 1
            except BaseException as exc:  # noqa: BLE001 - escaping main at all is a finding
                code = f"escaped {type(exc).__name__}: {exc}"
        result = {"index": index, "code": code, "stderr": err.getvalue()[-2000:],
                  "seconds": round(time.monotonic() - began, 3)}
        channel.write(f"{MARKER}{json.dumps(result)}\n")
        channel.flush()


def run_in_workers(cases: list[list[str]], work: Path) -> list[dict]:
    """Every case's result; a worker that crashes or hangs costs that case, and a new worker goes on."""
    cases_file = work / "cases.json"
    cases_file.write_text(json.dumps(cases))
    results: dict[int, dict] = {}
    start = 0
    while start < len(cases):
        process = subprocess.Popen([sys.executable, __file__, "--worker", str(cases_file), str(start)],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=work)
        current, deadline, buffer = None, time.monotonic() + CASE_SECONDS * 3, b""
        while True:
            ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:  # the current case hangs
                process.kill()
                process.wait()
                index = start if current is None else current
                results[index] = {"index": index, "code": "hang", "stderr": "", "seconds": CASE_SECONDS}
                start = index + 1
                break
            chunk = os.read(process.stdout.fileno(), 1 << 16)
            if not chunk:  # the worker died: the current case crashed it
                process.wait()
                if current is not None:
                    results[current] = {"index": current, "code": f"crash (signal {-process.returncode})"
                                        if process.returncode < 0 else f"worker exit {process.returncode}",
                                        "stderr": "", "seconds": 0.0}
                    start = current + 1
                else:
                    start = len(cases)
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                text = line.decode(errors="replace")
                if not text.startswith(MARKER):
                    continue
                record = json.loads(text[len(MARKER):])
                if record.get("started"):
                    current, deadline = record["index"], time.monotonic() + CASE_SECONDS
                else:
                    results[record["index"]] = record
                    current = None
                    start = record["index"] + 1
    return [results[i] for i in range(len(cases))]


def finding(result: dict) -> str | None:
    """Why a case's result is a finding, or None."""
    if result["code"] not in (0, 1):
        return f"exit {result['code']}"
    if TRACEBACK in result["stderr"]:
        return "traceback on stderr"
    if result["seconds"] > CASE_SECONDS:
        return "too slow"
    return None


@pytest.fixture(scope="module")
def work():
    with tempfile.TemporaryDirectory(prefix="et_opt_fuzz_") as directory:
        yield Path(directory)


def test_et_opt_survives_mutated_inputs_and_options(work):
    cases = make_cases(CASES, work)
    results = run_in_workers(cases, work)
    findings = [(cases[r["index"]], r, finding(r)) for r in results if finding(r)]
    successes = sum(1 for r in results if r["code"] == 0)
    clean = sum(1 for r in results if r["code"] == 1 and not finding(r))
    print(f"\net-opt fuzz: {len(results)} cases, {clean} clean errors, {successes} successes, "
          f"{len(findings)} findings; slowest case {max(r['seconds'] for r in results):.2f} s")
    shown = "\n".join(f"{why}: et-opt {' '.join(argv)}\n{r['stderr'][-600:]}" for argv, r, why in findings[:5])
    assert not findings, f"{len(findings)} findings, the first:\n{shown}"
    assert successes > 0 and clean > 0  # the mix exercises both outcomes


def test_the_entry_point_on_fuzzed_cases(work):
    """A few cases through the installed `et-opt` script: real exit statuses and the whole stderr."""
    et_opt_script = Path(sys.executable).parent / "et-opt"
    rng = random.Random(SEED + 1)
    env = {k: v for k, v in os.environ.items() if k != "ETMLIR_DEBUG"}
    statuses = set()
    for index, argv in enumerate(make_cases(ENTRY_POINT_CASES, work)):
        if index % 2:
            argv = argv + [rng.choice(["--et-plan-memory=alignment=5", "--et-fold-constants=max-bytes=-1"])]
        done = subprocess.run([str(et_opt_script), *argv], capture_output=True, timeout=CASE_SECONDS * 2, env=env,
                              cwd=work)
        statuses.add(done.returncode)
        assert done.returncode in (0, 1), (argv, done.stderr[-2000:])
        assert TRACEBACK.encode() not in done.stderr, (argv, done.stderr[-2000:])
    assert 1 in statuses


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--worker":
    worker(sys.argv[2], int(sys.argv[3]))
