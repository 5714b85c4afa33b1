"""The `vulkan` backend: edge -> linalg -> GPU kernels -> SPIR-V, run through the Vulkan API.

Every model here runs on the machine's Vulkan device (lavapipe, Mesa's Vulkan
driver on the CPU, in CI: scripts/setup.sh installs it) and is compared with
PyTorch eager on the same inputs. Tolerances (f32): atol 1e-4 + rtol 1e-4 for
the small models, 5e-4 for the zoo's deep ones (MobileNetV2's 52
convolutions, nanoGPT's 6 blocks; the tiled matmul sums in another order than
eager, and GELU's erf is a polynomial with error < 1.5e-7). Each method runs
twice and the two runs must agree exactly. Every shader the backend emits
passes spirv-val (compile spec validate=true).

The torch.nn models were written for these tests in ordinary ways (library
modules, F.* calls), not tuned to the lowering.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import etmlir
import etmlir.runtime as rt
from etmlir import backends
from etmlir.backends.payload_header import read_payload
from etmlir.backends.vulkan import dispatch_graph
from etmlir.delegation.backend import BackendError
from etmlir.devtools import delegation_info
from payload_edits import load_error, replace_payload

ET_INSPECT = Path(sys.executable).parent / "et-inspect"
VULKAN = rt.backend_status("vulkan")
# CI installs lavapipe: there a missing device is a failure, not a skip.
pytestmark = pytest.mark.skipif(not VULKAN["available"] and not os.environ.get("CI"),
                                reason=f"no Vulkan device: {VULKAN['reason']}")


def compile_vulkan(model: nn.Module, args: tuple, dynamic_shapes=None, **options) -> tuple[bytes, object]:
    options.setdefault("compile_specs", {})
    options["compile_specs"].setdefault("validate", "true")  # every shader through spirv-val
    edge = etmlir.to_edge(etmlir.export(model, args, dynamic_shapes))
    edge = edge.to_backend(backends.partitioner("vulkan", **options))
    return edge.to_executorch().buffer, edge


def run_twice(method, args: tuple) -> list[np.ndarray]:
    runs = []
    for _ in range(2):
        out = method(*[a.numpy() for a in args])
        runs.append([np.array(o) for o in (out if isinstance(out, (list, tuple)) else [out])])
    for first, second in zip(*runs, strict=True):
        np.testing.assert_array_equal(first, second)
    return runs[0]


def check(model: nn.Module, args: tuple, atol: float = 1e-4, rtol: float = 1e-4, **options) -> object:
    model = model.eval()
    data, edge = compile_vulkan(model, args, **options)
    got = run_twice(rt.load(data).method("forward"), args)
    with torch.no_grad():
        want = model(*args)
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w.numpy(), atol=atol, rtol=rtol)
    return edge


def vulkan_ops(edge) -> int:
    return sum(1 for line in delegation_info(edge).delegated_graph().splitlines() if "vulkan" in line)


@pytest.mark.parametrize("name", ["seed_cnn", "mlp", "mobilenet_v2"])
def test_zoo_models_match_eager(name: str) -> None:
    model, args, _ = etmlir.models.build(name)
    atol = 5e-4 if name == "mobilenet_v2" else 1e-4
    edge = check(model, tuple(args), atol=atol, rtol=atol)
    info = delegation_info(edge)
    assert "vulkan" in info.delegated_graph()


def test_nanogpt_64_and_256_from_one_pte() -> None:
    """The sequence length stays dynamic: the payload holds one dispatch graph per listed size."""
    model, args, dynamic = etmlir.models.build("nanogpt")
    data, edge = compile_vulkan(model, tuple(args), dynamic, compile_specs={"sizes": "64,256"})
    assert "graphs=2" in delegation_info(edge).delegated_graph()
    method = rt.load(data).method("forward")
    for length in (64, 256):
        idx = torch.randint(0, 65, (1, length), generator=torch.Generator().manual_seed(length))
        got = run_twice(method, (idx,))[0]
        with torch.no_grad():
            np.testing.assert_allclose(got, model(idx).numpy(), atol=5e-4, rtol=5e-4)
    with pytest.raises(rt.Error, match=r"input 0 is int64\[1, 100\]; this vulkan delegate was compiled for its "
                                       r"dynamic dims = 64, 256 \(compile spec 'sizes'\)"):
        method(torch.randint(0, 65, (1, 100)).numpy())


def test_dynamic_dims_without_sizes_stay_portable_with_a_reason() -> None:
    model, args, dynamic = etmlir.models.build("nanogpt")
    _, edge = compile_vulkan(model, tuple(args), dynamic)
    report = str(delegation_info(edge))
    assert "has a dynamic shape; the vulkan backend compiles static shapes (give the sizes it takes: " \
           "compile_specs={'sizes': '64,256'})" in report


class ConvBlock(nn.Module):
    """Residual conv block: conv, batch norm, ReLU6, depthwise conv, residual add, pooling, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(8 * 5 * 5, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu6(self.bn(self.conv(x)))
        y = y + self.dw(y)
        y = self.pool(F.avg_pool2d(y, 3, stride=1, padding=1))
        return self.head(torch.flatten(y, 1))


class Attention(nn.Module):
    """Multi-head self-attention written out: bmm, softmax over the last dim, transposes, GELU MLP."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        a = torch.softmax(q @ k.transpose(-1, -2) / (c // self.heads) ** 0.5, dim=-1)
        y = x + self.proj((a @ v).transpose(1, 2).reshape(b, t, c))
        return y + self.mlp(y)


@pytest.mark.parametrize("name,model,shape", [
    ("conv_block", ConvBlock, (2, 4, 10, 10)),
    ("attention", Attention, (2, 17, 32)),
    ("encoder_layer", lambda: nn.TransformerEncoderLayer(24, 4, 48, dropout=0.0, batch_first=True), (2, 9, 24)),
    ("softmax_dim1", lambda: nn.Sequential(nn.Conv2d(3, 5, 1), nn.Softmax(dim=1)), (1, 3, 7, 6)),
    ("strided_dilated_conv", lambda: nn.Sequential(nn.Conv2d(3, 10, 3, stride=2, dilation=2, padding=2), nn.ReLU(),
                                                   nn.Conv2d(10, 7, (1, 3), stride=(1, 2))), (2, 3, 13, 11)),
    ("mlp_odd_sizes", lambda: nn.Sequential(nn.Linear(37, 53), nn.Tanh(), nn.Linear(53, 19), nn.LogSoftmax(-1)),
     (5, 37)),
])
def test_torch_nn_models_match_eager(name: str, model, shape: tuple) -> None:
    torch.manual_seed(0)
    edge = check(model(), (torch.randn(*shape),))
    assert vulkan_ops(edge) >= 1


@pytest.mark.parametrize("name", ["vit", "gemma", "bert", "resnet", "nn_multihead_attention"])
def test_real_architectures_match_eager(name: str) -> None:
    """transformers' and torch.nn's models (etmlir.models.architectures, random weights): what vulkan takes of each
    runs on the device and the whole matches eager. These found: bool masks of odd byte size (ViT), integer
    powers and i64 index arithmetic in kernels (Gemma), casts from dynamic shapes in a static export
    (nn.MultiheadAttention's uneven split)."""
    from etmlir.models import architectures
    model, args = architectures.build(name)
    edge = check(model, tuple(args), atol=1e-4, rtol=1e-4)
    assert "vulkan" in delegation_info(edge).delegated_graph()


class Masked(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.where(mask, x, -x) * 2.0


def test_a_bool_mask_of_odd_byte_size() -> None:
    """17 x 17 bools (289 bytes): shaders read 8-bit data as 32-bit words, so the buffer is padded to
    whole words (the last elements read zeros before, with robust buffer access on)."""
    torch.manual_seed(0)
    check(Masked(), (torch.randn(1, 1, 17, 17), torch.randn(1, 1, 17, 17) > 0))


def test_tanh_gelu_and_integer_powers() -> None:
    """x ** 3 (tanh-GELU, transformers' GELUTanh) is math.fpowi, which SPIR-V lacks: it becomes products."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.GELU(approximate="tanh"), nn.Linear(16, 4))

    class Powers(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return model(x) ** 3 + x.sum() ** -2 + model(x) ** 2

    check(Powers(), (torch.randn(3, 12),), atol=2e-4, rtol=2e-4)


def test_matrix_products_and_convolutions_use_tiled_shared_memory_kernels() -> None:
    conv = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 8, 3, groups=8)).eval()
    _, edge = compile_vulkan(conv, (torch.randn(1, 3, 12, 12),))
    assert "tiled_products=1" in delegation_info(edge).delegated_graph()  # the depthwise one is not tiled
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(40, 70), nn.ReLU(), nn.Linear(70, 9)).eval()
    _, edge = compile_vulkan(model, (torch.randn(33, 40),))
    assert "tiled_products=2" in delegation_info(edge).delegated_graph()
    # A smaller tile (8 x 8 = 64 threads) is a compile spec; the numbers do not change.
    check(model, (torch.randn(33, 40),), compile_specs={"tile": "8"})


def test_every_shader_passes_spirv_val(tmp_path: Path) -> None:
    """Run spirv-val here on every shader the payload holds (the compile spec ran it too)."""
    tool = shutil.which("spirv-val")
    if tool is None:
        assert not os.environ.get("CI"), "CI installs spirv-tools (scripts/setup.sh)"
        pytest.skip("spirv-val not installed")
    model, args, _ = etmlir.models.build("seed_cnn")
    data, _ = compile_vulkan(model, tuple(args))
    from etmlir.tools.et_inspect import extract_payload
    _, body = read_payload(extract_payload(data, "forward", 0, body_only=False))
    module = dispatch_graph.read_module(body)
    count = 0
    for g in range(module.GraphsLength()):
        graph = module.Graphs(g)
        for s in range(graph.ShadersLength()):
            shader = graph.Shaders(s)
            path = tmp_path / f"g{g}_s{s}.spv"
            path.write_bytes(shader.CodeAsNumpy().astype("<u4").tobytes())
            done = subprocess.run([tool, "--target-env", "vulkan1.0", str(path)], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            count += 1
    assert count >= 4


def test_et_inspect_and_the_report_show_the_dispatch_graph() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
    data, edge = compile_vulkan(model, (torch.randn(1, 3, 8, 8),))
    graph = delegation_info(edge).delegated_graph()
    assert "[vulkan-dispatch-graph v1 (" in graph and "graphs=1 dispatches=" in graph
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"vk_inspect_{os.getpid()}.pte"
    path.write_bytes(data)
    try:
        text = subprocess.run([str(ET_INSPECT), str(path), "--instructions", "0"], capture_output=True, text=True,
                              check=True).stdout
    finally:
        path.unlink()
    assert "backend 'vulkan'" in text and "body: vulkan-dispatch-graph v1" in text


def test_bad_compile_specs_are_clear_errors() -> None:
    with pytest.raises(BackendError, match="unknown compile spec"):
        backends.partitioner("vulkan", compile_specs={"tiles": "8"})
    with pytest.raises(BackendError, match="a 32 x 32 matmul tile needs 1024 threads"):
        backends.partitioner("vulkan", compile_specs={"tile": "32"})
    with pytest.raises(BackendError, match="sizes='64,x' is not a list of positive integers"):
        backends.partitioner("vulkan", compile_specs={"sizes": "64,x"})


def test_the_runtime_has_the_backend_and_its_payload_format() -> None:
    assert "vulkan" in rt.compiled_backends()
    assert "vulkan-dispatch-graph" in str(rt.manifest())
    assert VULKAN["device"], VULKAN


def test_the_validation_layer_reports_nothing(tmp_path: Path) -> None:
    """ETMLIR_VULKAN_VALIDATION=1 turns the Khronos validation layer on (when installed): a run reports no
    error or warning."""
    layer = Path("/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json")
    if not layer.exists():
        assert not os.environ.get("CI"), "CI installs vulkan-validationlayers (scripts/setup.sh)"
        pytest.skip("the Khronos validation layer is not installed")
    torch.manual_seed(0)
    model = ConvBlock().eval()
    data, _ = compile_vulkan(model, (torch.randn(2, 4, 10, 10),))
    (tmp_path / "m.pte").write_bytes(data)
    script = ("import sys, numpy as np, etmlir.runtime as rt\n"
              "m = rt.load(sys.argv[1]).method('forward')\n"
              "m(np.ones((2, 4, 10, 10), np.float32)); m(np.ones((2, 4, 10, 10), np.float32))\n"
              "print('messages', rt.backend_counter('vulkan', 'validation_messages'))\n")
    env = dict(os.environ, ETMLIR_VULKAN_VALIDATION="1")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "m.pte")], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "messages 0" in done.stdout, done.stdout + done.stderr


def test_without_a_vulkan_loader_the_load_error_names_the_backend(tmp_path: Path) -> None:
    torch.manual_seed(0)
    data, _ = compile_vulkan(nn.Sequential(nn.Linear(4, 3)).eval(), (torch.randn(2, 4),))
    (tmp_path / "m.pte").write_bytes(data)
    script = ("import sys, etmlir.runtime as rt\n"
              "print(rt.backend_status('vulkan'))\n"
              "try:\n    rt.load(sys.argv[1]).method('forward')\nexcept rt.Error as e:\n    print('ERROR', e)\n")
    env = dict(os.environ, ETMLIR_VULKAN_LOADER=str(tmp_path / "libvulkan-missing.so.1"))
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "m.pte")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "'available': False" in done.stdout
    assert "ERROR" in done.stdout and "backend 'vulkan'" in done.stdout, done.stdout
    assert "no Vulkan loader" in done.stdout and "libvulkan-missing.so.1" in done.stdout, done.stdout


# --- Bad payloads: a clear error at load (the backend's init), never a crash. The payload is rewritten
# in place inside the .pte: the same header around a changed body of the same size, CRC recomputed.

def _vulkan_pte() -> tuple[bytes, bytes, object, bytes]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.GELU(), nn.Linear(5, 3)).eval()
    data, _ = compile_vulkan(model, (torch.randn(2, 6),))
    from etmlir.tools.et_inspect import extract_payload
    payload = extract_payload(data, "forward", 0, body_only=False)
    header, body = read_payload(payload)
    return data, payload, header, body


def test_corrupt_payloads_are_refused_at_load() -> None:
    data, payload, header, body = _vulkan_pte()
    garbage = bytes((b * 7 + 3) & 0xFF for b in body)
    assert "backend 'vulkan'" in load_error(replace_payload(data, payload, header, garbage))
    # A shader whose SPIR-V magic is broken.
    magic = (0x07230203).to_bytes(4, "little")
    at = body.index(magic)
    broken = body[:at] + b"\0\0\0\0" + body[at + 4:]
    assert "is not SPIR-V" in load_error(replace_payload(data, payload, header, broken))
    # An instruction whose word count runs past the module's end.
    overrun = bytearray(body)
    overrun[at + 20:at + 24] = (0xFFFF0000 | 17).to_bytes(4, "little")
    message = load_error(replace_payload(data, payload, header, bytes(overrun)))
    assert "overruns the module" in message or "fails SPIR-V validation" in message, message
    # A body whose FlatBuffer is cut: the verifier refuses it.
    cut = body[:len(body) // 3] + bytes(len(body) - len(body) // 3)
    assert "backend 'vulkan'" in load_error(replace_payload(data, payload, header, cut))


def test_random_body_changes_never_crash(tmp_path: Path) -> None:
    """150 random byte changes in the body (CRC recomputed, so they reach the dispatch-graph and SPIR-V
    checks), each loaded in one child process: refused with a message or loaded, never a crash."""
    data, payload, header, body = _vulkan_pte()
    rng = random.Random(1234)
    cases = tmp_path / "cases"
    cases.mkdir()
    for i in range(150):
        mutated = bytearray(body)
        for _ in range(rng.choice((1, 2, 8))):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        (cases / f"{i}.pte").write_bytes(replace_payload(data, payload, header, bytes(mutated)))
    script = ("import sys, pathlib, etmlir.runtime as rt\n"
              "for p in sorted(pathlib.Path(sys.argv[1]).glob('*.pte')):\n"
              "    print(p.name, flush=True)\n"
              "    try:\n        rt.load(p.read_bytes()).method('forward')\n"
              "    except rt.Error as e:\n        assert str(e), p\n"
              "print('done')\n")
    done = subprocess.run([sys.executable, "-c", script, str(cases)], capture_output=True, text=True, timeout=900)
    last = done.stdout.strip().splitlines()[-1:] or ["(nothing)"]
    assert done.returncode == 0 and last == ["done"], f"crashed on {last}: {done.stderr[-2000:]}"


def test_body_crc_protects_the_graph() -> None:
    data, payload, header, body = _vulkan_pte()
    at = data.index(payload)
    flipped = bytearray(data)
    flipped[at + len(payload) - 5] ^= 0x40  # inside the body, header unchanged: the CRC no longer matches
    assert "checksum mismatch" in load_error(bytes(flipped))
    assert zlib.crc32(body) != 0
