"""et-run, the C++ command-line runner: a .pte run from an np.savez file matches PyTorch eager, inputs that
do not fit the method are reported by name with what was expected and what was given, malformed .npz files
are errors (exit 1), never crashes; usage errors exit 2. The tool is the one `pip install -e .` puts next
to the interpreter; these tests build nothing but the .pte files they run.

The selective build (et-run-selected) takes minutes to compile on a small machine, so it is checked by
scripts/selective_build_size.sh, not here; here the header scripts/selected_operators.py writes is
compiled against selective_build.h to check what it selects.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

import etmlir
from etmlir import models

ET_RUN = Path(sys.executable).parent / "et-run"
REPO = Path(__file__).resolve().parents[2]
SELECTED_OPERATORS = REPO / "scripts" / "selected_operators.py"
OUTPUT_LINE = re.compile(r"^  output (\d+): (\w+)\[([^\]]*)\]: \[(.*)\] \(([\d,]+) values?\)$", re.MULTILINE)


def et_run(*args: object) -> subprocess.CompletedProcess:
    assert ET_RUN.exists(), f"{ET_RUN} was not built (pip install -e . or scripts/dev_rebuild.sh builds it)"
    return subprocess.run([str(ET_RUN), *map(str, args)], check=False, capture_output=True, text=True,
                          errors="replace", timeout=120)


def outputs(stdout: str) -> list[tuple[str, list[int], np.ndarray, int]]:
    """(dtype, shape, first values, numel) of each printed output."""
    found = []
    for match in OUTPUT_LINE.finditer(stdout):
        dtype, shape, values, numel = match.group(2, 3, 4, 5)
        first = np.array([float(v) for v in values.split(", ") if v != "..."])
        found.append((dtype, [int(s) for s in shape.split(", ") if s], first, int(numel.replace(",", ""))))
    return found


def assert_one_line_error(result: subprocess.CompletedProcess, status: int = 1) -> str:
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("et-run: "), result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def mlp():
    """(model, example input, path of its .pte)."""
    model, args, dynamic = models.build("mlp")
    return model, args[0], etmlir.to_edge(etmlir.export(model, args, dynamic)).to_executorch()


@pytest.fixture
def mlp_pte(mlp, tmp_path) -> Path:
    path = tmp_path / "mlp.pte"
    mlp[2].save(path)
    return path


@pytest.fixture
def mlp_input(mlp) -> np.ndarray:
    return torch.rand(mlp[1].shape, generator=torch.Generator().manual_seed(7)).numpy() * 2 - 1


def eager_first_values(model: torch.nn.Module, x: np.ndarray, n: int = 8) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy().reshape(-1)[:n]


def test_mlp_from_npz_matches_eager_and_prints_latency(mlp, mlp_pte, mlp_input, tmp_path):
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, mlp_input)
    result = et_run(mlp_pte, "--inputs", inputs, "--iterations", 3, "--warmup", 1)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "input 0: float32[8, 784]" in out and "output 0: float32[8, 10]" in out
    assert f"input 0 <- {inputs}:arr_0 float32[8, 784]" in out
    (dtype, shape, first, numel), = outputs(out)
    assert (dtype, shape, numel) == ("float32", [8, 10], 80)
    # Printed with 7 significant digits: tolerance 1e-4.
    np.testing.assert_allclose(first, eager_first_values(mlp[0], mlp_input), atol=1e-4, rtol=1e-4)
    assert "iterations: 3 (after 1 warmup)" in out
    assert "threads: 1" in out
    assert re.search(r"^latency \(ms\): min [\d.]+  median [\d.]+  max [\d.]+$", out, re.MULTILINE), out
    assert re.search(r"^memory \(allocated before execute\): method allocator [\d,]+ B, arena 0 ", out, re.MULTILINE)


def test_file_loader_and_npy_input_give_the_same_outputs(mlp, mlp_pte, mlp_input, tmp_path):
    npy = tmp_path / "x.npy"
    np.save(npy, mlp_input)
    result = et_run(mlp_pte, "--inputs", npy, "--loader", "file", "--iterations", 1)
    assert result.returncode == 0, result.stderr
    assert "file loader" in result.stdout and f"input 0 <- {npy} float32[8, 784]" in result.stdout
    np.testing.assert_allclose(outputs(result.stdout)[0][2], eager_first_values(mlp[0], mlp_input),
                               atol=1e-4, rtol=1e-4)


def test_named_npz_arrays_feed_inputs_in_sorted_key_order(mlp, mlp_pte, mlp_input, tmp_path):
    inputs = tmp_path / "named.npz"
    np.savez(inputs, image=mlp_input)
    result = et_run(mlp_pte, "--inputs", inputs, "--iterations", 1)
    assert result.returncode == 0, result.stderr
    assert f"input 0 <- {inputs}:image" in result.stdout
    np.testing.assert_allclose(outputs(result.stdout)[0][2], eager_first_values(mlp[0], mlp_input),
                               atol=1e-4, rtol=1e-4)


def test_without_inputs_runs_on_deterministic_pseudo_random_inputs(mlp_pte):
    first, second = et_run(mlp_pte, "--iterations", 1), et_run(mlp_pte, "--iterations", 1, "--warmup", 0)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "inputs: pseudo-random (seed 0): floats in [-1, 1]" in first.stdout
    assert "input 0 <- random float32[8, 784]" in first.stdout
    assert outputs(first.stdout)[0][2].tolist() == outputs(second.stdout)[0][2].tolist()
    other_seed = et_run(mlp_pte, "--iterations", 1, "--seed", 5)
    assert outputs(other_seed.stdout)[0][2].tolist() != outputs(first.stdout)[0][2].tolist()


def test_dynamic_dim_runs_at_its_upper_bound_and_below(tmp_path):
    class AddOne(torch.nn.Module):
        def forward(self, x):
            return x * 2.0 + 1.0

    x = torch.ones(4, 3)
    dynamic = {"x": {0: torch.export.Dim("n", min=2, max=6)}}
    path = tmp_path / "dynamic.pte"
    etmlir.to_edge(etmlir.export(AddOne(), (x,), dynamic)).to_executorch().save(path)
    random = et_run(path, "--iterations", 1)
    assert random.returncode == 0, random.stderr
    assert "input 0: float32[<=6, 3]" in random.stdout  # only dim 0 was exported as dynamic
    assert outputs(random.stdout)[0][1] == [6, 3]  # random inputs take the upper bound
    inputs = tmp_path / "three.npz"
    np.savez(inputs, np.arange(9, dtype=np.float32).reshape(3, 3))
    below = et_run(path, "--inputs", inputs, "--iterations", 1)
    assert below.returncode == 0, below.stderr
    (_, shape, first, numel), = outputs(below.stdout)
    assert (shape, numel) == ([3, 3], 9)
    np.testing.assert_allclose(first, (np.arange(8) * 2.0 + 1.0), atol=0)


def test_wrong_input_shape_names_the_input_expected_and_given(mlp_pte, tmp_path):
    inputs = tmp_path / "short.npz"
    np.savez(inputs, np.zeros((4, 784), dtype=np.float32))
    line = assert_one_line_error(et_run(mlp_pte, "--inputs", inputs))
    assert "input 0" in line and "expected float32[8, 784]" in line and "got float32[4, 784]" in line, line
    assert f"{inputs}:arr_0" in line


def test_wrong_input_dtype_is_reported(mlp_pte, tmp_path):
    inputs = tmp_path / "double.npz"
    np.savez(inputs, np.zeros((8, 784)))  # float64
    line = assert_one_line_error(et_run(mlp_pte, "--inputs", inputs))
    assert "expected float32[8, 784]" in line and "got float64[8, 784]" in line, line


def test_wrong_number_of_arrays_is_reported(mlp_pte, tmp_path):
    inputs = tmp_path / "two.npz"
    np.savez(inputs, np.zeros((8, 784), np.float32), np.zeros(3, np.float32))
    line = assert_one_line_error(et_run(mlp_pte, "--inputs", inputs))
    assert "has 2 arrays (arr_0, arr_1)" in line and "takes 1 input" in line, line


def test_compressed_npz_is_refused_with_a_hint(mlp_pte, tmp_path):
    inputs = tmp_path / "compressed.npz"
    np.savez_compressed(inputs, np.zeros((8, 784), np.float32))
    line = assert_one_line_error(et_run(mlp_pte, "--inputs", inputs))
    assert "compressed npz is not supported, use np.savez" in line


def test_unsupported_npy_contents_are_reported(mlp_pte, tmp_path):
    cases = {
        "big_endian": (np.zeros((8, 784), dtype=">f4"), "big-endian"),
        "fortran": (np.asfortranarray(np.zeros((8, 784), np.float32)), "fortran-order"),
        "uint64": (np.zeros((8, 784), np.uint64), "dtype '<u8' is not supported"),
    }
    for name, (array, message) in cases.items():
        inputs = tmp_path / f"{name}.npz"
        np.savez(inputs, array)
        assert message in assert_one_line_error(et_run(mlp_pte, "--inputs", inputs)), name


def _malformed_variants(valid: bytes) -> dict[str, bytes]:
    variants = {"empty": b"", "garbage": b"PK\x03\x04" + bytes(range(256)) * 4, "text": b"not an npz\n"}
    for cut in (10, 30, 100, len(valid) // 2, len(valid) - 30, len(valid) - 1):
        variants[f"truncated_{cut}"] = valid[:cut]
    rng = np.random.default_rng(0)
    for i in range(24):  # flipped bytes, mostly in the headers and directory
        data = bytearray(valid)
        pos = int(rng.integers(0, 200)) if i % 2 else len(valid) - 1 - int(rng.integers(0, 150))
        data[pos] ^= 0xFF
        variants[f"flip_{pos}"] = bytes(data)
    return variants


def test_malformed_npz_is_an_error_never_a_crash(mlp_pte, mlp_input, tmp_path):
    valid = tmp_path / "valid.npz"
    np.savez(valid, mlp_input[:1, :8])
    for name, data in _malformed_variants(valid.read_bytes()).items():
        path = tmp_path / f"{name}.npz"
        path.write_bytes(data)
        result = et_run(mlp_pte, "--inputs", path, "--iterations", 1)
        # Every variant is rejected: either unreadable, or (a flip inside the data) a wrong shape.
        assert result.returncode == 1, (name, result.returncode, result.stderr)
        assert result.stderr.startswith("et-run: error: "), (name, result.stderr)


def test_npz_entry_that_is_not_npy_is_reported(mlp_pte, tmp_path):
    path = tmp_path / "other.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("notes.txt", "hello")
    assert "entry 'notes.txt' is not an .npy array" in assert_one_line_error(et_run(mlp_pte, "--inputs", path))


def test_missing_or_invalid_model_exits_1(tmp_path):
    line = assert_one_line_error(et_run(tmp_path / "missing.pte"))
    assert "cannot open" in line and "missing.pte" in line
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"\0" * 200)
    assert "bad.pte" in assert_one_line_error(et_run(bad))


def test_unknown_method_lists_the_methods(mlp_pte):
    line = assert_one_line_error(et_run(mlp_pte, "--method", "backward"))
    assert "no method 'backward'" in line and "forward" in line


def test_usage_errors_exit_2_and_help_exits_0():
    for args in ([], ["--bogus", "m.pte"], ["m.pte", "--iterations", "0"], ["m.pte", "--iterations", "x"],
                 ["m.pte", "--loader", "tape"], ["m.pte", "--temp-bytes", "12Q"], ["m.pte", "--warmup"],
                 ["a.pte", "b.pte"]):
        result = et_run(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert "et-run --help" in result.stderr, args
    help_ = et_run("--help")
    assert help_.returncode == 0 and help_.stdout.startswith("usage: et-run MODEL.pte")
    for option in ("--inputs", "--iterations", "--warmup", "--method", "--temp-bytes", "--loader", "--cpu-threads"):
        assert option in help_.stdout


def test_temp_bytes_takes_a_size_with_a_suffix(mlp_pte):
    # The MLP's kernels need no scratch, so even 0 bytes runs.
    assert et_run(mlp_pte, "--temp-bytes", "0", "--iterations", 1).returncode == 0
    result = et_run(mlp_pte, "--temp-bytes", "1K", "--iterations", 1)
    assert result.returncode == 0 and "temp 1,024 B" in result.stdout


def test_selected_operators_lists_a_programs_operators(mlp_pte, tmp_path):
    flag = subprocess.run([sys.executable, str(SELECTED_OPERATORS), str(mlp_pte)], check=False, capture_output=True,
                          text=True)
    assert flag.returncode == 0, flag.stderr
    # The weight transposes are folded at compile time (et-fold-constants): no permute_copy.
    assert flag.stdout.strip() == "-DETMLIR_SELECTED_OPERATORS=aten::addmm.out;aten::relu.out"
    bad = subprocess.run([sys.executable, str(SELECTED_OPERATORS), str(SELECTED_OPERATORS)], check=False,
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "not a .pte file" in bad.stderr


@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler")
def test_selected_operators_header_selects_only_those_kernels(mlp_pte, tmp_path):
    header = tmp_path / "selected" / "etmlir_selected_operators.h"
    subprocess.run([sys.executable, str(SELECTED_OPERATORS), str(mlp_pte), "--header", str(header)], check=True)
    probe = tmp_path / "probe.cpp"
    probe.write_text(
        '#include "etmlir/runtime/selective_build.h"\n'
        "static_assert(etmlir::kSelectiveBuild);\n"
        'static_assert(etmlir::kernel_selected("aten::addmm.out"));\n'
        'static_assert(etmlir::kernel_selected("aten::relu.out"));\n'
        'static_assert(!etmlir::kernel_selected("aten::permute_copy.out"));\n'
        'static_assert(!etmlir::kernel_selected("aten::add.out"));\n'
        'static_assert(!etmlir::kernel_selected("aten::addmm"));\n')
    result = subprocess.run(["c++", "-std=c++17", "-fsyntax-only", "-DETMLIR_SELECTIVE_BUILD",
                             f"-I{REPO / 'include'}", f"-I{header.parent}", str(probe)],
                            check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
