"""The `tosa` backend: edge -> MLIR `tosa` -> a standard TOSA FlatBuffer, run by the TOSA reference model.

Every model is checked three ways on the same inputs: PyTorch eager, our
runtime running the `.pte` (the runtime's `tosa` backend hands the payload
to the reference model linked as a library), and the standalone
`tosa_reference_model` command of tosa-tools run on the FlatBuffer that
`et-inspect --extract-payload` takes out of the `.pte`. Tolerances (f32,
PRO-FP): runtime vs eager atol 1e-4 + rtol 1e-4 for the small models, 5e-4
for the zoo's deep ones (MobileNetV2's 52 convolutions, nanoGPT's 6 blocks);
runtime vs the standalone reference atol 1e-6 (the same reference model on
the same graph: only the loading differs).

The torch.nn models here were written for these tests in ordinary ways
(library modules, F.* calls), not tuned to the conversion.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import etmlir
import etmlir.runtime as rt
from etmlir import backends
from etmlir.backends.tosa import tools as tosa_tools
from etmlir.delegation.backend import BackendError
from etmlir.devtools import delegation_info
from payload_edits import load_error, replace_payload

ET_INSPECT = Path(sys.executable).parent / "et-inspect"

pytestmark = pytest.mark.skipif(tosa_tools.tools_dir() is None and not __import__("os").environ.get("CI"),
                                reason="tosa-tools is not installed (scripts/setup.sh makes .venv-tosa)")


def compile_tosa(model: nn.Module, args: tuple, tmp_path: Path, name: str, **options) -> tuple[Path, object]:
    edge = etmlir.to_edge(etmlir.export(model, args, None))
    edge = edge.to_backend(backends.partitioner("tosa", **options))
    path = tmp_path / f"{name}.pte"
    edge.to_executorch().save(str(path))
    return path, edge


def run_runtime(path: Path, args: tuple) -> list[np.ndarray]:
    """Two calls of the method (a graph runs again and again) that must agree exactly; the first's outputs."""
    method = rt.load(str(path)).method("forward")
    runs = []
    for _ in range(2):
        out = method(*[a.numpy() for a in args])
        runs.append([np.array(o) for o in (out if isinstance(out, (list, tuple)) else [out])])
    for first, second in zip(*runs, strict=True):
        np.testing.assert_array_equal(first, second)
    return runs[0]


def extracted_body(path: Path, tmp_path: Path, index: int = 0) -> bytes:
    target = tmp_path / f"{path.stem}_{index}.tosa"
    done = subprocess.run([str(ET_INSPECT), str(path), "--extract-payload", str(index), "--out", str(target)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return target.read_bytes()


def check_three_ways(model: nn.Module, args: tuple, tmp_path: Path, name: str, atol: float = 1e-4,
                     rtol: float = 1e-4, whole: bool = True) -> object:
    """Eager vs our runtime; when the whole model is one delegate, also vs the standalone reference model."""
    model.eval()
    with torch.no_grad():
        expected = model(*args)
    expected = [e.numpy() for e in (expected if isinstance(expected, (list, tuple)) else [expected])]
    path, edge = compile_tosa(model, args, tmp_path, name)
    info = delegation_info(edge)
    assert info.num_delegated_subgraphs >= 1, str(info)
    got = run_runtime(path, args)
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, atol=atol, rtol=rtol)
    if whole:
        assert info.num_delegated_subgraphs == 1 and info.num_non_delegated_ops == 0, str(info)
        standalone = tosa_tools.run_reference_model(extracted_body(path, tmp_path), [a.numpy() for a in args],
                                                    [e.shape for e in expected])
        for s, g in zip(standalone, got, strict=True):
            np.testing.assert_allclose(g, s, atol=1e-6, rtol=0)
    return edge


@pytest.mark.parametrize("name", ["seed_cnn", "mlp", "mobilenet_v2"])
def test_zoo_cnns_match_eager_and_the_standalone_reference(zoo, name: str, tmp_path: Path) -> None:
    model, args, _ = zoo[name]
    check_three_ways(model, tuple(args), tmp_path, name, atol=5e-4, rtol=5e-4)


def test_nanogpt_static_matches_eager(tmp_path: Path) -> None:
    """nanoGPT at a static T=64: the blocks go to tosa; the token embedding (i64 ids) and the causal
    mask's integer arithmetic (arange, compare) stay portable, with reasons. The three-way check with
    attention in it is torch.nn's TransformerEncoderLayer below (one delegate, float in and out)."""
    model, args, _ = etmlir.models.build("nanogpt")
    edge = check_three_ways(model, tuple(args), tmp_path, "nanogpt", atol=5e-4, rtol=5e-4, whole=False)
    report = str(delegation_info(edge))
    assert "edge.embedding" in report and "i64" in report


class ConvStack(nn.Module):
    """Strided, dilated and depthwise convolutions, batch norm, pooling: the usual CNN pieces."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8)
        self.b = nn.Conv2d(8, 16, 1)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.avg = nn.AvgPool2d(2)
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu6(self.bn(self.a(x)))
        x = F.hardswish(self.b(self.dw(x)))
        x = self.avg(self.pool(x))
        return F.log_softmax(self.fc(torch.flatten(x, 1)), dim=-1)


class Encoder(nn.Module):
    """torch.nn's own transformer encoder layer (multi-head attention, layer norm, GELU feed-forward)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


class Shapes(nn.Module):
    """Views, concatenation, splitting, padding, resizing and reductions between elementwise ops."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = torch.chunk(x, 2, dim=1)
        y = torch.cat([torch.sigmoid(a) * b, torch.tanh(b) - a], dim=1)
        y = F.pad(y, (1, 2, 0, 1), value=0.5)
        y = F.interpolate(y, scale_factor=2, mode="nearest")
        y = y.permute(0, 2, 3, 1).reshape(y.shape[0], -1, y.shape[1])
        m = y.mean(dim=1, keepdim=True)
        return torch.where(y > m, y.abs().sqrt(), torch.clamp(y, -0.5, 0.5)) / (y.pow(2).sum(-1, keepdim=True) + 1)


class Powers(nn.Module):
    """Integer powers of negative numbers (TOSA's pow needs a positive base), a negative power and a
    tensor exponent: the forms GELU's tanh approximation and user code write."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.pow(3) - 0.5 * x ** 2 + 1 / (x ** 2 + 1) + torch.pow(x.abs() + 0.5, x) + (x.abs() + 0.1) ** 0.5


class Slices(nn.Module):
    """Basic indexing: offsets, negative bounds, steps (Swin's patch merging takes x[:, 0::2, 1::2]), select.
    A slice's start and step were once ignored: every row from 0 (found on Swin, by compare())."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        merged = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], dim=-1)
        return merged.sum(-1) + x[:, 1:7:3, -5:].sum((1, 2, 3))[:, None, None] + x[:, 3, 1:9:4].mean((1, 2))[:, None, None]


@pytest.mark.parametrize("make, shape", [
    (Slices, (2, 8, 10, 3)),
    (Powers, (3, 8)),
    (ConvStack, (2, 3, 16, 16)),
    (Encoder, (2, 10, 32)),
    (Shapes, (1, 4, 6, 6)),
    (lambda: nn.Sequential(nn.Linear(20, 30), nn.SiLU(), nn.LayerNorm(30), nn.Linear(30, 5), nn.Softmax(-1)),
     (4, 20)),
    (lambda: nn.Sequential(nn.Conv2d(4, 6, 3), nn.GELU(approximate="tanh"), nn.AdaptiveAvgPool2d(1)), (1, 4, 9, 9)),
    (lambda: nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear"), nn.LeakyReLU(0.2), nn.AvgPool2d(3, 1, 1)),
     (1, 3, 5, 7)),
], ids=["slices", "powers", "conv_stack", "transformer_encoder_layer", "shapes", "mlp_layernorm", "conv_gelu_pool", "resize_pool"])
def test_torch_nn_models_match_three_ways(make, shape, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = make().eval()
    check_three_ways(model, (torch.randn(*shape),), tmp_path, "model")


def test_delegates_without_tosa_operators_load_and_run(tmp_path: Path) -> None:
    """A delegate whose graph folds to nothing (x * 1.0) or is only a constant (torch.full) has no TOSA
    operators: its payload still loads and runs (found by trying ordinary models: it was refused)."""

    class Folded(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return F.elu(x * 1.0), torch.full((2, 3), 1.5)

    model = Folded().eval()
    x = torch.randn(2, 5)
    path, _ = compile_tosa(model, (x,), tmp_path, "folded")
    got = run_runtime(path, (x,))
    expected = model(x)
    np.testing.assert_allclose(got[0], expected[0].numpy(), atol=1e-6)
    np.testing.assert_array_equal(got[1], expected[1].numpy())


def test_what_tosa_cannot_take_stays_portable_with_reasons(tmp_path: Path) -> None:
    """A grouped convolution (neither plain nor depthwise) and an embedding stay on portable kernels;
    the report names op, reason and source line; the rest is still delegated and correct."""

    class Mixed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(10, 8)
            self.grouped = nn.Conv2d(8, 8, 3, padding=1, groups=2)
            self.conv = nn.Conv2d(8, 8, 1)

        def forward(self, ids: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            e = self.emb(ids).sum(1)[:, :, None, None]
            return torch.relu(self.conv(self.grouped(x) + e))

    torch.manual_seed(0)
    model = Mixed().eval()
    args = (torch.tensor([[1, 2, 3]]), torch.randn(1, 8, 6, 6))
    edge = check_three_ways(model, args, tmp_path, "mixed", whole=False)
    report = str(delegation_info(edge))
    assert "grouped convolution (2 groups of 8 channels) is neither plain nor depthwise" in report
    assert "test_tosa_backend.py:" in report


def test_dynamic_shapes_stay_portable_with_a_reason() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).eval()
    batch = torch.export.Dim("batch", min=1, max=16)
    edge = etmlir.to_edge(etmlir.export(model, (torch.randn(4, 8),), {"input": {0: batch}}))
    edge = edge.to_backend(backends.partitioner("tosa"))
    info = delegation_info(edge)
    assert info.op_counts["edge.addmm"] == (0, 1) and info.op_counts["edge.relu"] == (0, 1)
    assert "has a dynamic shape; TOSA graphs are static" in str(info)


def test_profiles_and_specs_are_checked() -> None:
    with pytest.raises(BackendError, match="pro_int.*quantized edge graphs"):
        backends.partitioner("tosa", profile="pro_int")
    with pytest.raises(BackendError, match="unknown profile 'pro_xx'"):
        backends.partitioner("tosa", profile="pro_xx")
    with pytest.raises(BackendError, match="unknown compile spec"):
        backends.partitioner("tosa", compile_specs={"fast": "yes"})


def test_missing_tosa_tools_is_a_clear_error(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ETMLIR_TOSA_TOOLS", str(tmp_path / "nowhere"))
    model = nn.Sequential(nn.Linear(4, 4)).eval()
    with pytest.raises(Exception, match=r"tosa-opt not found in .*nowhere.*tosa-tools==2026\.8\.0"):
        compile_tosa(model, (torch.randn(2, 4),), tmp_path, "none")


def test_et_inspect_shows_the_tosa_delegate(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
    path, edge = compile_tosa(model, (torch.randn(1, 3, 8, 8),), tmp_path, "inspect")
    text = subprocess.run([str(ET_INSPECT), str(path), "--instructions", "0"], capture_output=True, text=True,
                          check=True).stdout
    assert "backend 'tosa'" in text
    assert "body: tosa-flatbuffer v1" in text and "profile pro_fp, level 8k" in text
    assert "conv2d=1" in text and "clamp=1" in text
    # The weights are the FlatBuffer's constant tensors only: the program's constant segment is empty.
    assert __import__("re").search(r"constants\s+offset\s+[\d,]+\s+size\s+0\n", text), text
    # The delegation report says the same on the delegate's line.
    graph = delegation_info(edge).delegated_graph()
    assert "[tosa-flatbuffer v1 (" in graph and "profile pro_fp, level 8k; ops: " in graph and "conv2d=1" in graph


def test_wrong_input_shape_is_refused_with_the_static_shape(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh()).eval()
    path, _ = compile_tosa(model, (torch.randn(2, 4),), tmp_path, "shape")
    method = rt.load(str(path)).method("forward")
    with pytest.raises(rt.Error, match=r"input 0"):
        method(np.zeros((5, 4), np.float32))
    np.testing.assert_allclose(method(np.ones((2, 4), np.float32))[0],
                               model(torch.ones(2, 4)).detach().numpy(), atol=1e-5)


def test_the_runtime_has_the_backend_and_its_payload_format() -> None:
    assert "tosa" in rt.compiled_backends()
    assert "tosa-flatbuffer" in str(rt.manifest())


# --- Bad payloads: each is a clear error at load (the runtime's tosa backend init), never a crash. ---
# The payload is rewritten in place inside the .pte: the same header (ForceDefaults keeps its size)
# around a changed body, with the body's CRC-32 recomputed, so the bytes reach the TOSA parse.

def _tosa_pte(tmp_path: Path) -> tuple[bytes, bytes, object, bytes]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 4 * 4, 5)).eval()
    path, _ = compile_tosa(model, (torch.randn(1, 2, 4, 4),), tmp_path, "bad")
    data = path.read_bytes()
    payload = extracted_body_whole(path, tmp_path)
    from etmlir.backends.payload_header import read_payload
    header, body = read_payload(payload)
    return data, payload, header, body


def extracted_body_whole(path: Path, tmp_path: Path) -> bytes:
    target = tmp_path / "whole.bin"
    subprocess.run([str(ET_INSPECT), str(path), "--extract-payload", "0", "--whole-payload", "--out", str(target)],
                   check=True, capture_output=True)
    return target.read_bytes()


def test_corrupt_tosa_bodies_are_refused_at_load(tmp_path: Path) -> None:
    data, payload, header, body = _tosa_pte(tmp_path)
    garbage = bytes((b * 7 + 3) & 0xFF for b in body)
    message = load_error(replace_payload(data, payload, header, garbage))
    assert "backend 'tosa'" in message and "not a TOSA FlatBuffer" in message
    # Verifies as a FlatBuffer, but its second half is zeros: the reference model's deserializer
    # would crash on it; the library reads it in a child process first.
    truncated = body[: len(body) // 2] + bytes(len(body) - len(body) // 2)
    message = load_error(replace_payload(data, payload, header, truncated))
    assert "backend 'tosa'" in message and "the TOSA graph" in message, message


def test_wrong_profile_payloads_are_refused_at_load(tmp_path: Path) -> None:
    data, payload, header, body = _tosa_pte(tmp_path)
    entries = dict(header.entry_points)

    def with_profile(name: str) -> bytes:
        points = tuple((k, name if k == "profile" else v) for k, v in header.entry_points)
        return replace_payload(data, payload, dataclasses.replace(header, entry_points=points), body)

    assert entries["profile"] == "pro_fp"
    # Same length as "pro_fp" so the header keeps its size.
    message = load_error(with_profile("pro_xx"))
    assert "TOSA profile 'pro_xx'" in message and "runs pro_fp and pro_int" in message
    message = load_error(with_profile("pro_in"))
    assert "TOSA profile 'pro_in'" in message


def test_a_float_graph_labelled_pro_int_is_refused(tmp_path: Path) -> None:
    """The profile the header states is checked against the graph's tensor types."""
    data, payload, header, body = _tosa_pte(tmp_path)
    points = tuple((k, "pro_int" if k == "profile" else v) for k, v in header.entry_points)
    labelled = dataclasses.replace(header, entry_points=points)
    # "pro_int" is one byte longer than "pro_fp", which the header's padding absorbs: the payload keeps
    # its size, so it can be rewritten in place.
    message = load_error(replace_payload(data, payload, labelled, body))
    assert "which profile pro_int does not allow" in message, message


FUZZ_SCRIPT = r"""
import random, sys
import etmlir.runtime as rt
from etmlir.backends.payload_header import read_payload, write_payload
data = open(sys.argv[1], "rb").read(); payload = open(sys.argv[2], "rb").read()
header, body = read_payload(payload)
at = data.index(payload)
rng = random.Random(int(sys.argv[3]))
outcomes = {"loaded": 0, "refused": 0}
for i in range(int(sys.argv[4])):
    mutated = bytearray(body)
    for _ in range(rng.choice([1, 2, 4, 16])):
        mutated[rng.randrange(len(mutated))] = rng.randrange(256)
    blob = data[:at] + write_payload(header, bytes(mutated)) + data[at + len(payload):]
    try:
        rt.load(blob).method("forward")
        outcomes["loaded"] += 1
    except rt.Error:
        outcomes["refused"] += 1
print(outcomes)
"""


def test_fuzzed_tosa_bodies_never_crash(tmp_path: Path) -> None:
    """Random byte changes in the TOSA FlatBuffer (CRC recomputed, so they reach the TOSA parse): every
    load succeeds or is an error; the process never dies."""
    data, payload, _, _ = _tosa_pte(tmp_path)
    (tmp_path / "p.pte").write_bytes(data)
    (tmp_path / "payload.bin").write_bytes(payload)
    done = subprocess.run([sys.executable, "-c", FUZZ_SCRIPT, str(tmp_path / "p.pte"), str(tmp_path / "payload.bin"),
                           "1", "120"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded, refused = (int(n) for n in __import__("re").findall(r"\d+", done.stdout.strip().splitlines()[-1]))
    assert loaded + refused == 120 and refused > 0


def test_a_missing_reference_library_is_a_clear_error(tmp_path: Path) -> None:
    data, _, _, _ = _tosa_pte(tmp_path)
    (tmp_path / "m.pte").write_bytes(data)
    script = ("import etmlir.runtime as rt, sys\n"
              "try:\n    rt.load(sys.argv[1]).method('forward')\nexcept rt.Error as e:\n    print(e)\n")
    env = dict(__import__("os").environ, ETMLIR_TOSA_REFERENCE_LIB=str(tmp_path / "missing.so"))
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "m.pte")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "backend 'tosa'" in done.stdout and "missing.so" in done.stdout, done.stdout


@pytest.mark.parametrize("name", ["resnet", "efficientnet", "swin", "vit"])
def test_real_architectures_match_eager(name: str, tmp_path: Path) -> None:
    """transformers' vision models (architectures.py, random weights): what tosa takes of each runs on the
    reference model and the whole matches eager. Swin's strided patch merging and EfficientNet's
    padding=[0] convolution were wrong or refused before these ran here."""
    from etmlir.models import architectures

    model, args = architectures.build(name)
    with torch.no_grad():
        expected = model(*args)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    path, edge = compile_tosa(model, tuple(args), tmp_path, name)
    assert delegation_info(edge).num_delegated_ops > 20
    got = run_runtime(path, tuple(args))
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e.numpy(), atol=1e-4 * max(1.0, float(e.abs().max())), rtol=1e-4)
