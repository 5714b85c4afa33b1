"""The C++ runtime from Python: every zoo model runs from its .pte and matches eager.

Tolerances (float32, portable kernels vs PyTorch eager on the same inputs):
seed CNN and MLP atol 1e-5 / rtol 1e-4; MobileNetV2 logits atol 2e-3 (53
layers of convolution reordered sums); nanoGPT logits atol 1e-3 / rtol 1e-3.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import etmlir
import etmlir.runtime as rt
from etmlir import models

TOLERANCES = {  # name -> (atol, rtol)
    "seed_cnn": (1e-5, 1e-4),
    "mlp": (1e-5, 1e-4),
    "mobilenet_v2": (2e-3, 1e-3),
    "nanogpt": (1e-3, 1e-3),
}


@pytest.fixture(scope="module")
def methods(pte_zoo):
    return {name: rt.load(program.buffer).method("forward") for name, program in pte_zoo.items()}


def _eager(model, args) -> np.ndarray:
    with torch.no_grad():
        return model(*args).numpy()


@pytest.mark.parametrize("name", models.ZOO)
def test_zoo_model_runs_from_its_pte_and_matches_eager(zoo, methods, name):
    model, args, _ = zoo[name]
    (actual,) = methods[name](*args)
    expected = _eager(model, args)
    atol, rtol = TOLERANCES[name]
    assert isinstance(actual, torch.Tensor) and actual.shape == expected.shape
    np.testing.assert_allclose(actual.numpy(), expected, atol=atol, rtol=rtol)


@pytest.mark.parametrize("length", [5, 64, 256])
def test_nanogpt_runs_at_several_sequence_lengths_from_one_pte(zoo, methods, length):
    model, _, _ = zoo["nanogpt"]
    tokens = torch.randint(0, 65, (1, length), generator=torch.Generator().manual_seed(length))
    (actual,) = methods["nanogpt"](tokens)
    expected = _eager(model, (tokens,))
    assert actual.shape == (1, length, 65)
    np.testing.assert_allclose(actual.numpy(), expected, atol=1e-3, rtol=1e-3)


def test_numpy_inputs_give_numpy_outputs_and_files_load_by_path(zoo, pte_zoo, tmp_path):
    model, args, _ = zoo["mlp"]
    path = tmp_path / "mlp.pte"
    pte_zoo["mlp"].save(path)
    program = rt.load(path)
    assert program.method_names == ["forward"]
    method = program.method()
    (actual,) = method(args[0].numpy())
    assert isinstance(actual, np.ndarray)
    np.testing.assert_allclose(actual, _eager(model, args), atol=1e-5, rtol=1e-4)
    assert str(method.inputs[0]) == "float32[8, 784]"


def test_wrong_input_count_names_the_method_and_the_signature(methods):
    with pytest.raises(rt.Error, match=r"method 'forward' takes 1 inputs \(float32\[8, 784\]\), got 2"):
        methods["mlp"](np.zeros((8, 784), np.float32), np.zeros((8, 784), np.float32))


def test_wrong_input_shape_names_the_input_expected_and_actual(methods):
    with pytest.raises(rt.Error, match=r"input 0 \('x'\): expected float32\[8, 784\], got float32\[8, 783\]"):
        methods["mlp"](np.zeros((8, 783), np.float32))


def test_dynamic_input_beyond_its_bound_is_rejected(methods):
    with pytest.raises(rt.Error, match=r"input 0 \('idx'\): expected int64\[1, <=256\], got int64\[1, 257\]"):
        methods["nanogpt"](np.zeros((1, 257), np.int64))


def test_static_dim_of_a_dynamic_input_must_match_exactly(methods):
    """Only the sequence dim was exported as dynamic: the batch stays 1 (not any size up to 1)."""
    assert str(methods["nanogpt"].inputs[0]) == "int64[1, <=256]"
    with pytest.raises(rt.Error, match=r"input 0 \('idx'\): expected int64\[1, <=256\], got int64\[0, 5\]"):
        methods["nanogpt"](np.zeros((0, 5), np.int64))


def test_wrong_input_dtype_names_both_dtypes(methods):
    with pytest.raises(rt.Error, match=r"input 0 \('x'\): expected float32\[8, 784\], got float64\[8, 784\]"):
        methods["mlp"](np.zeros((8, 784), np.float64))


def test_a_failing_kernel_reports_the_source_line_of_its_op(zoo):
    """An embedding index out of range is caught by the kernel, reported at the model's line."""
    _, _, _ = zoo["nanogpt"]
    method = rt.load(etmlir.to_edge(etmlir.export(torch.nn.Embedding(4, 3), (torch.tensor([1, 2]),)))
                     .to_executorch().buffer).method()
    with pytest.raises(rt.Error, match=r"(?s)sparse\.py:\d+ \(method 'forward', instruction \d+\).*aten::embedding\.out"):
        method(np.array([1, 9], np.int64))


class _PickRows(torch.nn.Module):
    """Indexes with a constant tensor: torch.export lifts it to a `dense_resource` literal of `dtype`."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[torch.tensor([0, 2, 2], dtype=self.dtype)] * torch.tensor([1, 2, 3], dtype=torch.int16)[:, None]


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_constant_integer_index_tensor_runs_and_matches_eager(dtype):
    """Signed-integer tensor literals (si64/si32/si16) become edge constants over the same blob; exact match."""
    model, x = _PickRows(dtype), torch.randn(4, 3)
    edge = etmlir.to_edge(etmlir.export(model, (x,)))
    assert "dense_resource<lifted_tensor_0>" in edge.mlir(large_elements_limit=None)
    (actual,) = rt.load(edge.to_executorch().buffer).method()(x.numpy())
    np.testing.assert_array_equal(actual, _eager(model, (x,)))


def test_corrupt_bytes_give_an_error_not_a_crash(pte_zoo):
    data = bytearray(pte_zoo["seed_cnn"].buffer)
    with pytest.raises(rt.Error, match="truncated"):
        rt.load(bytes(data[:100]))
    data[0:4] = b"NOPE"
    with pytest.raises(rt.Error, match="not an etmlir .pte"):
        rt.load(bytes(data))
    with pytest.raises(rt.Error, match="cannot open"):
        rt.load("/nonexistent/model.pte")


def test_missing_method_lists_the_methods(pte_zoo):
    with pytest.raises(rt.Error, match=r"no method 'backward' in the program \(it has 'forward'\)"):
        rt.load(pte_zoo["mlp"].buffer).method("backward")


def test_main_job_classifies_the_chelsea_photo_as_a_cat():
    from etmlir.models import imagenet

    model = models.mobilenet_v2.pretrained()
    image = imagenet.chelsea()
    method = rt.load(etmlir.to_edge(etmlir.export(model, (image,))).to_executorch().buffer).method()
    (logits,) = method(image)
    top = imagenet.top_k(logits)
    assert top[0][0] in range(281, 286), top  # ImageNet's domestic cats: tabby .. Egyptian cat
    np.testing.assert_allclose(logits.numpy(), _eager(model, (image,)), atol=2e-3, rtol=1e-3)
