"""Bundled programs: etmlir.devtools.bundle writes test cases into a .pte; Program.verify and
et-run --verify run them with the C++ API (include/etmlir/runtime/bundled.h).

The models are ordinary torch.nn code written here (a GELU MLP, a conv net delegated to the cpu
backend, an argmax with an int64 output, a dynamic-length sequence model), not zoo models.
Expected outputs are PyTorch eager's on the same inputs; tolerances are stated per case (1e-5 for
f32 portable kernels, 1e-4 for the cpu backend's microkernels, 0 for an int64 output).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.export import Dim

import etmlir
import etmlir.runtime as rt
from etmlir import backends
from etmlir.devtools import BundleError, bundle, bundled_cases
from etmlir.executable import pte as pte_file

ET_RUN = Path(sys.executable).parent / "et-run"
ET_INSPECT = Path(sys.executable).parent / "et-inspect"


def _et_run(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([str(ET_RUN), *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 3)).eval()
    x = torch.randn(2, 8)
    program = etmlir.to_edge(etmlir.export(model, (x,))).to_executorch()
    return model, x, program


def test_round_trip_keeps_the_cases_and_the_program(mlp, tmp_path):
    model, x, program = mlp
    with torch.no_grad():
        y = model(x)
    data = bundle(program, (x,), y, atol=1e-5, rtol=1e-5, name="eager")
    x2 = torch.randn(2, 8)
    with torch.no_grad():
        y2 = model(x2)
    data = bundle(data, (x2.numpy(),), (y2,), atol=2e-5, rtol=0.0)  # numpy in, a tuple out; no name
    (first, second) = bundled_cases(data)
    assert (first.method, first.name, first.atol, first.rtol) == ("forward", "eager", 1e-5, 1e-5)
    np.testing.assert_array_equal(first.inputs[0], x.numpy())
    np.testing.assert_array_equal(first.expected_outputs[0], y.numpy())
    assert (second.name, second.atol, second.rtol) == ("", 2e-5, 0.0)
    np.testing.assert_array_equal(second.inputs[0], x2.numpy())
    # The program is unchanged: same outputs as the unbundled file, same methods.
    (plain,) = rt.load(program.buffer).method("forward")(x)
    (bundled,) = rt.load(data).method("forward")(x)
    np.testing.assert_array_equal(np.asarray(plain), np.asarray(bundled))
    results = rt.load(data).verify()
    assert [r.passed for r in results] == [True, True]
    assert all(o.mismatched == 0 and o.numel == 6 and o.max_abs_error <= 1e-5 for r in results for o in r.outputs)
    np.testing.assert_allclose(np.asarray(results[0].outputs[0].actual), y.numpy(), atol=1e-5, rtol=1e-5)
    # et-run --verify on the file, and et-inspect lists the cases.
    path = tmp_path / "mlp_bundled.pte"
    path.write_bytes(data)
    result = _et_run(path, "--verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "case 0 'eager' (method 'forward'): pass (atol 1e-05, rtol 1e-05)" in result.stdout
    assert "verify: 2 of 2 cases passed" in result.stdout
    shown = subprocess.run([str(ET_INSPECT), str(path)], capture_output=True, text=True, timeout=120).stdout
    assert "bundled test cases: 2 (et-run --verify runs them)" in shown
    assert "0 'eager': method 'forward', inputs (float32[2, 8]) -> expected (float32[2, 3]), atol 1e-05" in shown


def test_a_wrong_expectation_fails_naming_the_worst_element(mlp, tmp_path):
    model, x, program = mlp
    with torch.no_grad():
        y = model(x).clone()
    y[1, 2] += 0.25
    data = bundle(program, (x,), y, atol=1e-5, rtol=1e-5, name="off")
    (result,) = rt.load(data).verify()
    assert not result.passed and result.error is None
    (check,) = result.outputs
    assert check.mismatched == 1 and check.worst_index == 5
    assert check.worst_expected - check.worst_actual == pytest.approx(0.25, abs=1e-5)
    assert "1 of 6 elements outside tolerance; worst at flat index 5" in str(result)
    path = tmp_path / "off.pte"
    path.write_bytes(data)
    run = _et_run(path, "--verify")
    assert run.returncode == 1
    assert "case 0 'off' (method 'forward'): FAIL" in run.stdout and "worst at [1, 2]" in run.stdout
    assert "verify: 0 of 1 case passed" in run.stdout


def test_a_cpu_delegated_program_verifies_on_device_style(tmp_path):
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU6(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 4)).eval()
    x = torch.randn(1, 3, 12, 12)
    edge = etmlir.to_edge(etmlir.export(model, (x,)))
    program = edge.to_backend(backends.partitioner("cpu")).to_executorch()
    with torch.no_grad():
        data = bundle(program, (x,), model(x), atol=1e-4, rtol=1e-4)
    path = tmp_path / "conv_cpu.pte"
    path.write_bytes(data)
    run = _et_run(path, "--verify")
    assert run.returncode == 1 and "native code" in run.stderr  # the payload is refused until trusted
    run = _et_run(path, "--verify", "--allow-native")
    assert run.returncode == 0, run.stdout + run.stderr
    assert all(r.passed for r in rt.load(data, allow_native_code=True).verify())


def test_integer_outputs_and_dynamic_inputs(tmp_path):
    class Pick(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.argmax(x.cumsum(1), dim=-1)

    x = torch.randn(3, 10, 4)
    program = etmlir.to_edge(etmlir.export(Pick(), (x,), {"x": {1: Dim("t", min=2, max=16)}})).to_executorch()
    short = torch.randn(3, 5, 4)
    data = bundle(program, (short,), Pick()(short), atol=0, rtol=0, name="short")  # exact
    data = bundle(data, (x,), Pick()(x), atol=0, rtol=0, name="long")
    assert [c.output_dtypes for c in bundled_cases(data)] == [("int64",), ("int64",)]
    assert [r.passed for r in rt.load(data).verify()] == [True, True]
    with pytest.raises(BundleError, match=r"input 0 is float32\[3, 17, 4\]; dim 1 of method 'forward' input 0 is at "
                                          r"most 16"):
        bundle(program, (torch.randn(3, 17, 4),), torch.zeros(3, dtype=torch.int64))


@pytest.mark.parametrize("inputs, outputs, message", [
    ((torch.randn(2, 8), torch.randn(2, 8)), torch.zeros(2, 3), "method 'forward' has 1 inputs; the case gives 2"),
    ((torch.randn(2, 8, dtype=torch.float64),), torch.zeros(2, 3), r"input 0 is float64\[2, 8\]; method 'forward' "
                                                                   r"input 0 is float32\[2, 8\]"),
    ((torch.randn(3, 8),), torch.zeros(2, 3), r"input 0 is float32\[3, 8\]; dim 0 of method 'forward' input 0 is 2"),
    ((torch.randn(2, 8),), (torch.zeros(2, 3), torch.zeros(2)), "method 'forward' has 1 outputs; the case gives 2"),
    ((torch.randn(2, 8),), torch.zeros(2, 3, dtype=torch.int32), r"output 0 is int32\[2, 3\]"),
    ((3.0,), torch.zeros(2, 3), "input 0 is a float; bundled test cases hold tensors only"),
])
def test_a_case_that_does_not_fit_the_method_is_refused_before_writing(mlp, inputs, outputs, message):
    _, _, program = mlp
    with pytest.raises(BundleError, match=message):
        bundle(program, inputs, outputs)


def test_bad_arguments_and_files_without_cases(mlp, tmp_path):
    _, x, program = mlp
    with pytest.raises(BundleError, match="no method 'decode'"):
        bundle(program, (x,), torch.zeros(2, 3), method="decode")
    with pytest.raises(BundleError, match="atol and rtol must be >= 0"):
        bundle(program, (x,), torch.zeros(2, 3), atol=-1)
    with pytest.raises(rt.Error, match="carries no bundled test cases"):
        rt.load(program.buffer).verify()
    path = tmp_path / "plain.pte"
    path.write_bytes(program.buffer)
    run = _et_run(path, "--verify")
    assert run.returncode == 1 and "carries no bundled test cases (add them with etmlir.devtools.bundle)" in run.stderr
    assert _et_run(path, "--verify", "--inputs", "x.npz").returncode == 2  # a usage error


def test_a_case_pointing_outside_its_segment_is_refused_without_a_crash(mlp, tmp_path):
    model, x, program = mlp
    with torch.no_grad():
        data = bundle(program, (x,), model(x))
    f = pte_file.read(data)
    f.program.bundledCases[0].expectedOutputs[0].data.offset = 1 << 30
    broken = pte_file.pack(f.program, [f.segment(i) for i in range(len(f.program.segments))],
                           f.header.segment_alignment)
    loaded = rt.load(broken)  # the program loads and runs: the cases are optional
    loaded.method("forward")(x)
    with pytest.raises(rt.Error, match=r"bundled test case 0, expected output 0: bytes \[1073741824, \+24\) are "
                                       r"outside segment 1"):
        loaded.verify()
    path = tmp_path / "broken.pte"
    path.write_bytes(broken)
    run = _et_run(path, "--verify")
    assert run.returncode == 1 and "bundled test case 0, expected output 0" in run.stderr
    with pytest.raises(BundleError, match="bundled test case 0, expected output 0"):
        bundled_cases(broken)
