"""The cpu backend's graph-level speedups, end to end on ordinary torch.nn models written here:
batch norm folding (et-fold-batch-norm), fused microkernel epilogues and absorbed depthwise padding
(et-cpu-microkernels), max pooling inside the delegate.

Each model is exported, delegated to `cpu` whole (the delegation report must show no op left out),
run on the C++ runtime and compared with eager on the same inputs: atol 1e-4 / rtol 1e-4 for the
convolution models (float32 sums over up to 3*3*64 terms, batch-norm statistics folded into the
weights), 1e-5 for the linear ones. Each also checks what the compiler did, from the delegate's
compile result: which microkernels it calls (an `_ep` kernel means an epilogue was fused).
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
from torch import nn

import etmlir
import etmlir.runtime as rt
from etmlir import backends
from etmlir.devtools import delegation_info


# A dense convolution's kernel: with its filter as it is, or packed at compile time (et-cpu-pack-weights,
# when its output channels fill the microkernel's row panels well enough: which depends on the ISA's panel).
CONVOLUTIONS = {"etmlir_uk_conv2d_nchw_fchw_ep", "etmlir_uk_conv2d_packed_ep", "etmlir_uk_conv2d_winograd_ep"}


def _convolutions(kernel_calls: collections.Counter) -> int:
    return sum(kernel_calls[name] for name in CONVOLUTIONS)


def _run(model: nn.Module, *inputs: torch.Tensor, atol: float) -> None:
    model.eval()
    program = etmlir.to_edge(etmlir.export(model, inputs)).to_backend(backends.partitioner("cpu"))
    info = delegation_info(program)
    assert info.num_non_delegated_ops == 0, info.why_not_delegated()
    method = rt.load(program.to_executorch().buffer).method("forward")
    got = method(*[x.numpy() for x in inputs])
    with torch.no_grad():
        want = model(*inputs)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w.numpy(), atol=atol, rtol=atol)


def _randomize_norms(model: nn.Module) -> None:
    torch.manual_seed(0)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.normal_(0, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            if m.affine:
                m.weight.data.normal_(1, 0.3)
                m.bias.data.normal_(0, 0.3)


def _matches_eager_at_1_and_2_threads(pte: bytes, model: nn.Module, x: torch.Tensor, atol: float,
                                      rtol: float | None = None) -> None:
    """The program's first output against eager's, run on 1 thread and on 2 (work split between them)."""
    with torch.no_grad():
        want = model(x).numpy()
    previous = rt.cpu_threads()
    try:
        for threads in (1, 2):
            rt.set_cpu_threads(threads)
            got = rt.load(pte).method("forward")(x.numpy())[0]
            np.testing.assert_allclose(np.asarray(got), want, atol=atol, rtol=atol if rtol is None else rtol)
    finally:
        rt.set_cpu_threads(previous)


class BasicBlock(nn.Module):
    """ResNet's block: conv-BN-ReLU, conv-BN, plus the input, ReLU (the residual add and the ReLU
    become the second convolution's epilogue)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class Stem(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 16, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.block = BasicBlock(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(self.pool(torch.relu(self.bn(self.conv(x)))))


def test_resnet_stem_and_block(kernel_calls):
    model = Stem()
    _randomize_norms(model)
    _run(model, torch.randn(1, 3, 40, 44), atol=1e-4)
    # Three convolutions, each with its batch norm folded and its ReLU (and the residual) fused; the pooling
    # in its kernel.
    assert _convolutions(kernel_calls) == 3 and set(kernel_calls) <= CONVOLUTIONS | {"etmlir_uk_max_pool2d"}
    assert kernel_calls["etmlir_uk_max_pool2d"] == 1


def _record_epilogue_modes(monkeypatch) -> list[int]:
    """The epilogue modes et-cpu-microkernels chooses while the test compiles, in order."""
    from etmlir.backends.cpu import epilogue

    modes: list[int] = []
    match = epilogue.match

    def recording(ops, at):
        fusion = match(ops, at)
        modes.append(fusion.mode)
        return fusion

    monkeypatch.setattr(epilogue, "match", recording)
    return modes


def test_a_zero_bias_starts_the_product_at_zero(monkeypatch, kernel_calls):
    """A freshly built model's batch norm (mean 0, variance 1, weight 1, bias 0) folds into a bias of
    zeros, which constant folding turns into a zero constant of the output's shape: the convolution's
    epilogue starts at zero (INIT_ZERO) with its ReLU fused, instead of a full-size copy of that constant
    before every run and a loop after it."""
    from etmlir.backends.cpu import epilogue

    modes = _record_epilogue_modes(monkeypatch)
    torch.manual_seed(2)
    model = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU()).eval()
    _run(model, torch.randn(1, 3, 40, 44), atol=1e-4)
    assert _convolutions(kernel_calls) == 1 and len(modes) == 1
    assert modes[0] & epilogue.INIT_MASK == epilogue.INIT_ZERO and (modes[0] >> 4) & 3, modes


class Pools(nn.Module):
    """Max pooling the ways models write it: ResNet's stem pool, 2x2 / 2, ceil mode (windows past the
    end), dilated, a 3x1 window, and over a strided slice."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        f = nn.functional
        return (f.max_pool2d(x, 3, 2, 1), f.max_pool2d(x, 2), f.max_pool2d(x, 3, 2, 0, ceil_mode=True),
                f.max_pool2d(x, 3, 1, 1, dilation=2), f.max_pool2d(x, (3, 1), 1, (1, 0)),
                f.max_pool2d(torch.relu(x)[:, :, :, ::2], 3, 2, 1))


def test_max_pooling_runs_in_its_kernel_and_matches_eager(kernel_calls):
    """Exactly eager's values at 1 and 2 threads, NaN (which wins a window) and infinities included."""
    torch.manual_seed(7)
    x = torch.randn(2, 48, 29, 34)
    x[0, 0, 3, 4] = float("nan")
    x[1, 2, 5, :] = float("-inf")
    x[1, 3, :, 7] = float("inf")
    program = etmlir.to_edge(etmlir.export(Pools(), (x,))).to_backend(backends.partitioner("cpu"))
    assert kernel_calls["etmlir_uk_max_pool2d"] == 6, kernel_calls
    pte = program.to_executorch().buffer
    want = [w.numpy() for w in Pools()(x)]
    previous = rt.cpu_threads()
    try:
        for threads in (1, 2):
            rt.set_cpu_threads(threads)
            for got, expected in zip(rt.load(pte).method("forward")(x.numpy()), want):
                np.testing.assert_array_equal(np.asarray(got), expected)
    finally:
        rt.set_cpu_threads(previous)


class InvertedResidual(nn.Module):
    """MobileNetV2's block, written out: expand (1x1, ReLU6), depthwise 3x3 with padding, project."""

    def __init__(self, c: int, expand: int, stride: int, kernel: int = 3, dilation: int = 1) -> None:
        super().__init__()
        hidden = c * expand
        pad = dilation * (kernel - 1) // 2
        self.layers = nn.Sequential(
            nn.Conv2d(c, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, hidden, kernel, stride, pad, dilation=dilation, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden), nn.Hardtanh(-1.5, 2.5),
            nn.Conv2d(hidden, c, 1, bias=False), nn.BatchNorm2d(c))
        self.residual = stride == 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.layers(x)
        return x + y if self.residual else y


@pytest.mark.parametrize("stride,kernel,dilation", [(1, 3, 1), (2, 3, 1), (1, 5, 1), (1, 3, 2)])
def test_inverted_residual(kernel_calls, stride, kernel, dilation):
    model = InvertedResidual(8, 4, stride, kernel, dilation)
    _randomize_norms(model)
    _run(model, torch.randn(2, 8, 15, 13), atol=1e-4)
    # The three convolutions as one call (et-cpu-fuse-inverted-residual), except with a dilated depthwise one.
    fused = dilation == 1
    assert kernel_calls["etmlir_uk_inverted_residual_ep"] == int(fused)
    assert kernel_calls["etmlir_uk_depthwise_conv2d_nchw_chw_ep"] == int(not fused)
    assert _convolutions(kernel_calls) == (0 if fused else 2)


@pytest.mark.parametrize("stride,kernel", [(1, 3), (2, 3), (1, 5)])
def test_inverted_residual_over_row_bands(kernel_calls, stride, kernel):
    """A block whose wide activations pass 1 MiB (16 -> 96 channels at 48x60): the kernel runs it over bands of
    output rows, at 1 and 2 threads (runs of bands split between them)."""
    model = InvertedResidual(16, 6, stride, kernel).eval()
    _randomize_norms(model)
    x = torch.randn(1, 16, 48, 60)
    pte = etmlir.to_edge(etmlir.export(model, (x,))).to_backend(backends.partitioner("cpu")).to_executorch().buffer
    assert kernel_calls["etmlir_uk_inverted_residual_ep"] == 1 and _convolutions(kernel_calls) == 0, kernel_calls
    _matches_eager_at_1_and_2_threads(pte, model, x, atol=1e-4)


@pytest.mark.parametrize("stride", [1, 2])
def test_small_inverted_residual_over_threads(kernel_calls, stride):
    """A block below 1 MiB (8 -> 48 channels at 15x13, a batch of two; the block's input as residual at
    stride 1): at 2 threads each task expands whole panels of the wide channels and computes its share of
    the projection's sum, added after. The heap is not touched at either thread count."""
    model = InvertedResidual(8, 6, stride).eval()
    _randomize_norms(model)
    x = torch.randn(2, 8, 15, 13)
    pte = etmlir.to_edge(etmlir.export(model, (x,))).to_backend(backends.partitioner("cpu")).to_executorch().buffer
    assert kernel_calls["etmlir_uk_inverted_residual_ep"] == 1 and _convolutions(kernel_calls) == 0, kernel_calls
    fallbacks = rt.cpu_heap_fallbacks()
    _matches_eager_at_1_and_2_threads(pte, model, x, atol=1e-4)
    assert rt.cpu_heap_fallbacks() == fallbacks


@pytest.mark.parametrize("activation", [nn.ReLU(), nn.ReLU6(), nn.Hardtanh(-0.5, 0.25), nn.Identity()])
def test_linear_with_activation(kernel_calls, activation):
    # 64 columns are whole panels at either width (16, 32): packed; 7 would be mostly padding: not.
    model = nn.Sequential(nn.Linear(24, 64), activation, nn.Linear(64, 7))
    _run(model, torch.randn(5, 24), atol=1e-5)
    assert kernel_calls == {"etmlir_uk_matmul_packed_ep": 1, "etmlir_uk_matmul_ep": 1}


class TiedProjections(nn.Module):
    """Linears of several widths, one weight used twice (packed once), under a dynamic number of rows."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(48, 160)
        self.mid = nn.Linear(160, 160, bias=False)
        self.down = nn.Linear(160, 64)  # widths of whole panels at either width (16 or 32): all packed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.up(x))
        h = self.mid(torch.relu(self.mid(h))) + h
        return self.down(h)


def test_packed_weights_match_eager_at_any_row_count(kernel_calls):
    torch.manual_seed(3)
    model = TiedProjections().eval()
    rows = torch.export.Dim("rows", min=1, max=512)
    program = etmlir.to_edge(etmlir.export(model, (torch.randn(8, 48),), dynamic_shapes=({0: rows},))).to_backend(
        backends.partitioner("cpu"))
    assert kernel_calls["etmlir_uk_matmul_packed_ep"] == 4
    pte = program.to_executorch().buffer
    previous = rt.cpu_threads()
    try:
        for threads in (1, 2):
            rt.set_cpu_threads(threads)
            method = rt.load(pte).method("forward")
            for m in (1, 5, 29, 300):
                x = torch.randn(m, 48)
                with torch.no_grad():
                    want = model(x).numpy()
                np.testing.assert_allclose(method(x.numpy())[0], want, atol=1e-4, rtol=1e-4)
    finally:
        rt.set_cpu_threads(previous)


class ConvStack(nn.Module):
    """Dense convolutions of several shapes: 7x7/2 stem, 3x3, dilated 3x3, pointwise, a 3x3 over K > 384."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 7, 2, 3)
        self.a = nn.Conv2d(16, 48, 3, 1, 1)
        self.b = nn.Conv2d(48, 48, 3, 1, 2, dilation=2, bias=False)
        self.c = nn.Conv2d(48, 20, 1)
        self.d = nn.Conv2d(48, 24, 3, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(torch.relu(self.stem(x))))
        h = self.b(h) + h
        return self.c(h).sum() + self.d(torch.relu(h))


def test_packed_filters_match_eager(kernel_calls):
    """Every filter here fills the microkernel's row panels at least half (16+ channels): all are packed."""
    torch.manual_seed(4)
    model = ConvStack().eval()
    x = torch.randn(2, 3, 37, 33)
    program = etmlir.to_edge(etmlir.export(model, (x,))).to_backend(backends.partitioner("cpu"))
    assert kernel_calls["etmlir_uk_conv2d_packed_ep"] == 5 and kernel_calls["etmlir_uk_conv2d_nchw_fchw_ep"] == 0
    _matches_eager_at_1_and_2_threads(program.to_executorch().buffer, model, x, atol=1e-3, rtol=1e-4)


class WideBlocks(nn.Module):
    """3x3 layers Winograd takes: a ResNet block and a widening layer with 32+ output tiles of 4x4
    (F(4x4)); a 256-channel layer at 14 x 16 (16 tiles of 4x4: enough with 64+ channels, F(4x4)) and
    the same filter at 13 x 13 (only 66% of the 4x4 tiles' outputs real: F(2x2), 49 tiles); and three it
    leaves alone: a stride-2 layer, a small slice sharing a filter with a layer it takes, and the 256-channel
    filter at 7 x 7 (16 tiles of 2x2: too few for F(2x2), whose larger filter costs more to stream than it
    saves)."""

    def __init__(self) -> None:
        super().__init__()
        self.block = BasicBlock(64)
        self.widen = nn.Conv2d(64, 96, 3, 1, 1)
        self.shared = nn.Conv2d(96, 64, 3, 1, 1, bias=False)
        self.down = nn.Conv2d(64, 256, 3, 2, 1)
        self.deep = nn.Conv2d(256, 256, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.block(x)
        h = nn.functional.relu6(self.widen(y))
        d = torch.relu(self.down(y))
        return (self.shared(h), self.shared(h[:, :, :5, :7]), self.deep(d), self.deep(d[:, :, :13, :13]),
                self.deep(d[:, :, :7, :7]))


def test_winograd_convolutions_match_eager(kernel_calls):
    """3x3 stride-1 layers with their filters transformed at compile time (et-cpu-pack-weights), under
    ReLU, residual and bias epilogues, at 1 and 2 threads, against eager: the transforms reassociate the
    sums (F(4x4)'s coefficients reach 8), hence 1e-3. Their scratch fits the arena measured at compile
    time."""
    torch.manual_seed(5)
    model = WideBlocks().eval()
    _randomize_norms(model)
    x = torch.randn(2, 64, 27, 31)
    program = etmlir.to_edge(etmlir.export(model, (x,))).to_backend(backends.partitioner("cpu"))
    assert kernel_calls["etmlir_uk_conv2d_winograd_ep"] == 6, kernel_calls
    assert kernel_calls["etmlir_uk_conv2d_packed_ep"] == 3, kernel_calls
    pte = program.to_executorch().buffer
    with torch.no_grad():
        want = [w.numpy() for w in model(x)]
    previous, fallbacks = rt.cpu_threads(), rt.cpu_heap_fallbacks()
    try:
        for threads in (1, 2):
            rt.set_cpu_threads(threads)
            for got, expected in zip(rt.load(pte).method("forward")(x.numpy()), want):
                np.testing.assert_allclose(np.asarray(got), expected, atol=1e-3, rtol=1e-4)
    finally:
        rt.set_cpu_threads(previous)
    assert rt.cpu_heap_fallbacks() == fallbacks  # the measured arena held the transforms' scratch


def test_winograd_can_be_turned_off_for_a_smaller_payload(kernel_calls):
    """compile_specs={"winograd": "false"}: the same layers read plain filter panels (1/4 the size of
    F(4x4)'s transformed filters), and still match eager."""
    torch.manual_seed(6)
    model = BasicBlock(64).eval()
    _randomize_norms(model)
    x = torch.randn(1, 64, 24, 24)
    edge = etmlir.to_edge(etmlir.export(model, (x,)))
    sizes = {}
    for spec in ("true", "false"):
        kernel_calls.clear()
        pte = edge.to_backend(backends.partitioner("cpu", compile_specs={"winograd": spec})).to_executorch().buffer
        assert kernel_calls["etmlir_uk_conv2d_winograd_ep"] == (2 if spec == "true" else 0), kernel_calls
        assert _convolutions(kernel_calls) == 2
        with torch.no_grad():
            np.testing.assert_allclose(rt.load(pte).method("forward")(x.numpy())[0], model(x).numpy(), atol=1e-3,
                                       rtol=1e-4)
        sizes[spec] = len(pte)
    # Two 64 x 64 x 3 x 3 filters: 36 / 9 times the floats with Winograd F(4x4) (plus panel padding).
    assert sizes["true"] - sizes["false"] > 2 * 64 * 64 * 9 * 4 * 2.5


class Activated(nn.Module):
    """Each kind of contraction followed by `act`: linear layers on a [1, T, C] input (the product is
    [T, N], the activation sees [1, T, N]), packed and not; a padded 3x3 convolution; a depthwise one; a
    pointwise one with a residual add before the activation; a Winograd one."""

    def __init__(self, act: nn.Module) -> None:
        super().__init__()
        self.act = act
        self.l1, self.l2 = nn.Linear(24, 64), nn.Linear(64, 7)
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pw = nn.Conv2d(16, 16, 1)
        self.wide = nn.Conv2d(64, 64, 3, padding=1)

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.act(self.l2(self.act(self.l1(x))))
        c = self.act(self.dw(self.act(self.conv(y))))
        c = self.act(self.pw(c) + c)
        return h, c, self.act(self.wide(z))


def _activated(act: nn.Module, monkeypatch) -> tuple[list[int], list[np.ndarray], list[torch.Tensor]]:
    """Activated(act) through the cpu backend at 1 and 2 threads: the epilogue modes et-cpu-microkernels
    chose, the outputs at each thread count (flattened, 1 thread first) and eager's."""
    modes = _record_epilogue_modes(monkeypatch)
    torch.manual_seed(0)
    model = Activated(act).eval()
    inputs = (torch.randn(1, 5, 24) * 2, torch.randn(2, 3, 15, 13) * 2, torch.randn(1, 64, 16, 16))
    program = etmlir.to_edge(etmlir.export(model, inputs)).to_backend(backends.partitioner("cpu"))
    assert delegation_info(program).num_non_delegated_ops == 0
    method = rt.load(program.to_executorch().buffer).method("forward")
    got = []
    previous = rt.cpu_threads()
    try:
        for threads in (1, 2):
            rt.set_cpu_threads(threads)
            got += [np.asarray(g) for g in method(*[t.numpy() for t in inputs])]
    finally:
        rt.set_cpu_threads(previous)
    with torch.no_grad():
        want = list(model(*inputs))
    return modes, got, want + want


# etmlir_cpu_payload.h's ETMLIR_EP_ACT_* code of each
ACTIVATIONS = {"gelu": (nn.GELU(), 1), "gelu_tanh": (nn.GELU(approximate="tanh"), 2), "silu": (nn.SiLU(), 3),
               "sigmoid": (nn.Sigmoid(), 4), "tanh": (nn.Tanh(), 5)}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activations_run_in_the_kernels_epilogue(monkeypatch, name):
    """All six contractions take the activation into their epilogue (no loop after them), and match
    eager within 5e-5 (the Winograd layer's 576-term sums differ from eager's by up to ~1.5e-5)."""
    act, code = ACTIVATIONS[name]
    modes, got, want = _activated(act, monkeypatch)
    assert [(mode >> 8) & 7 for mode in modes] == [code] * 6, modes
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), atol=5e-5, rtol=5e-5)


class ChannelsLastMlp(nn.Module):
    """ConvNeXt's block MLP: linear layers over an image in channels-last order, [N, H, W, C]. The
    products are [N H W, 4C] and [N H W, C]; the GELU and the residual add see them as [N, H, W, *]."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)))


@pytest.mark.parametrize("shape", [(1, 14, 14, 16), (2, 5, 7, 24)])
def test_linear_layers_over_an_image_take_their_epilogue(monkeypatch, kernel_calls, shape):
    """The GELU after the first layer and the residual add after the second run in the kernels' epilogues
    though they see the product's rows split in three dims (no loop over the 4C-wide tensor after the
    product), and the model matches eager at 1 and 2 threads."""
    modes = _record_epilogue_modes(monkeypatch)
    torch.manual_seed(2)
    model = ChannelsLastMlp(shape[-1]).eval()
    x = torch.randn(*shape)
    pte = etmlir.to_edge(etmlir.export(model, (x,))).to_backend(backends.partitioner("cpu")).to_executorch().buffer
    assert kernel_calls["etmlir_uk_matmul_packed_ep"] == 2, kernel_calls
    from etmlir.backends.cpu import epilogue
    assert [(mode >> 8) & 7 for mode in modes] == [1, 0], modes  # GELU, then none
    assert modes[1] & epilogue.RESIDUAL and all(mode & epilogue.BIAS_AFTER for mode in modes), modes
    with torch.no_grad():
        _matches_eager_at_1_and_2_threads(pte, model, x, atol=2e-5)


def test_gelu_tanh_matches_eager_closely():
    """GELU's tanh form as PyTorch computes it (et-torch-to-linalg decomposes it itself: torch-mlir's own
    lowering multiplies by 0.797724 for sqrt(2/pi) = 0.7978846, up to 2e-4 off eager)."""
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(approximate="tanh"))
    _run(model, torch.randn(9, 16) * 3, atol=2e-6)


def _nan_model(activation: nn.Module) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(1)
    layer = nn.Linear(4, 6)
    with torch.no_grad():
        layer.weight[2, 0] = float("nan")
    return nn.Sequential(layer, activation).eval(), torch.randn(3, 4)


def _delegated(model: nn.Module, x: torch.Tensor) -> np.ndarray:
    program = etmlir.to_edge(etmlir.export(model, (x,))).to_backend(backends.partitioner("cpu"))
    return np.asarray(rt.load(program.to_executorch().buffer).method("forward")(x.numpy())[0])


def test_fused_relu_keeps_nan_like_eager():
    model, x = _nan_model(nn.ReLU())
    got = _delegated(model, x)
    with torch.no_grad():
        want = model(x).numpy()
    assert np.isnan(got[:, 2]).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], atol=1e-6)


def test_fused_bounds_follow_the_lowered_code_bit_for_bit(monkeypatch):
    """A fused bound does what the loop it replaces did, NaN included. (torch-mlir lowers hardtanh's
    lower bound as `x > lo ? x : lo`, so ReLU6(NaN) is 0 there where eager gives NaN, fused or not.)"""
    from etmlir.backends.cpu import epilogue

    model, x = _nan_model(nn.ReLU6())
    fused = _delegated(model, x)
    monkeypatch.setattr(epilogue, "match", lambda ops, at: epilogue.Fusion())
    loops = _delegated(model, x)
    np.testing.assert_array_equal(fused, loops)


class Conv1dStack(nn.Module):
    """1-d convolutions as audio front ends use them: padded, strided, depthwise, pointwise, dilated grouped."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv1d(8, 16, 3, padding=1)
        self.b = nn.Conv1d(16, 16, 5, stride=2, padding=2, groups=16)
        self.c = nn.Conv1d(16, 4, 1, bias=False)
        self.d = nn.Conv1d(4, 6, 3, dilation=2, groups=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.d(self.c(torch.relu(self.b(torch.relu(self.a(x))))))


def test_conv1d_runs_on_the_2d_microkernels(kernel_calls):
    """et-conv1d-to-conv2d gives each a unit height, so the conv2d and depthwise kernels take them."""
    torch.manual_seed(7)
    _run(Conv1dStack(), torch.randn(2, 8, 50), atol=1e-5)
    # a and c on the conv2d kernel, b on the depthwise one, each with its epilogue; d (2 groups) as two
    # dense convolutions (et-cpu-split-groups), its bias a loop before them.
    assert _convolutions(kernel_calls) == 2 and kernel_calls["etmlir_uk_depthwise_conv2d_nchw_chw_ep"] == 1
    assert kernel_calls["etmlir_uk_conv2d_nchw_fchw"] == 2
    assert set(kernel_calls) <= CONVOLUTIONS | {"etmlir_uk_depthwise_conv2d_nchw_chw_ep", "etmlir_uk_conv2d_nchw_fchw"}


# (batch, channels in, out, groups, size, kernel, stride, padding, dilation): RegNet's and ResNeXt's grouped
# 3x3 layers (et-cpu-split-groups: one dense convolution per group, on the GEMM kernels; they were scalar
# loops, about 45x slower than eager), a strided one with a batch of two, uneven in and out widths per
# group, a dilated 5x5, and 1x1 grouped convolutions (ShuffleNet's).
@pytest.mark.parametrize("case", [(1, 64, 64, 4, 14, 3, 1, 1, 1), (2, 48, 48, 3, 15, 3, 2, 1, 1),
                                  (1, 12, 24, 4, 9, 3, 1, 1, 1), (1, 16, 8, 2, 11, 5, 1, 4, 2),
                                  (1, 32, 32, 8, 7, 1, 1, 0, 1)])
def test_grouped_convolutions_run_as_dense_ones_per_group(kernel_calls, case):
    n, cin, cout, groups, size, k, stride, pad, dil = case
    torch.manual_seed(sum(case))
    model = nn.Sequential(nn.Conv2d(cin, cout, k, stride, pad, dil, groups=groups), nn.BatchNorm2d(cout),
                          nn.ReLU()).eval()
    model[1].running_mean.uniform_(-1, 1)
    model[1].running_var.uniform_(0.5, 2)
    x = torch.randn(n, cin, size, size)
    program = etmlir.to_edge(etmlir.export(model, (x,))).to_backend(backends.partitioner("cpu"))
    assert delegation_info(program).num_non_delegated_ops == 0
    pte = program.to_executorch().buffer
    convolutions = sum(count for name, count in kernel_calls.items() if "conv2d" in name)
    assert convolutions == groups, kernel_calls
    _matches_eager_at_1_and_2_threads(pte, model, x, atol=2e-5, rtol=1e-4)


class _LinearViewsNorm(nn.Module):
    """LeViT's linear layer: no bias, the rows flattened for a BatchNorm1d over the channels, viewed back."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(16, 32, bias=False)
        self.norm = nn.BatchNorm1d(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return self.norm(y.flatten(0, 1)).reshape_as(y)


class _PoolThenNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.pool = nn.AvgPool2d(2)
        self.norm = nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(self.pool(self.conv(x))))


BATCH_NORMS = {  # name -> (model, input, matrix products the folded model runs)
    "linear_then_bn1d": (lambda: nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16)), (4, 8), 1),
    "linear_views_bn1d": (_LinearViewsNorm, (2, 10, 16), 1),
    "pool_then_bn2d": (_PoolThenNorm, (2, 3, 12, 12), 0),
    "bn2d_on_the_input": (lambda: nn.Sequential(nn.BatchNorm2d(3), nn.Conv2d(3, 4, 1)), (1, 3, 8, 8), 0),
    "bn1d_over_a_sequence_without_affine": (
        lambda: nn.Sequential(nn.Conv1d(4, 6, 3), nn.ReLU(), nn.BatchNorm1d(6, affine=False)), (2, 4, 20), 0),
    "bn3d": (lambda: nn.BatchNorm3d(3), (1, 3, 4, 5, 6), 0),
}


@pytest.mark.parametrize("name", sorted(BATCH_NORMS))
def test_batch_norms_without_a_convolution_before_them_fold_too(kernel_calls, name):
    # After a linear layer (through views that keep its channels last) the batch norm folds into the weight
    # and a bias, so the product runs with a bias epilogue and nothing after it; elsewhere it becomes a
    # multiply-add by per-channel constants. Either way no square root per element is left.
    build, shape, products = BATCH_NORMS[name]
    model = build()
    _randomize_norms(model)
    torch.manual_seed(1)
    _run(model, torch.randn(*shape), atol=1e-4)
    assert kernel_calls["etmlir_uk_matmul_packed_ep"] + kernel_calls["etmlir_uk_matmul_ep"] == products
