"""The cpu backend's payload C sources: microkernels against torch, the arena allocator, and the
parallel split. Each x86-64 level the host supports gets its own build of the same sources."""

from __future__ import annotations

import ctypes
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from etmlir.backends.cpu import link
from etmlir.backends.cpu.passes.pack_weights import pack_columns, pack_rows, winograd_filter
from etmlir.backends.cpu.target import host

SOURCES = [link.SOURCES / name for name in link.C_SOURCES]
# Every x86-64 level this CPU runs (the payload's own is the last); the portable path elsewhere.
LEVELS = host().march_levels or [host().march]


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, Path]:
    """march level -> a payload-style .so built from the C sources alone."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not found")
    out = tmp_path_factory.mktemp("cpu_payload")
    result = {}
    for level in LEVELS:
        so = out / f"payload_{level}.so"
        cmd = [link.compiler(), *link.c_flags(level), "-Wall", "-Werror", "-shared", "-Wl,-Bsymbolic",
               "-o", str(so), *map(str, SOURCES)]
        subprocess.run(cmd, check=True)
        result[level] = so
    return result


_counter = [0]


def load_fresh(so: Path, tmp_path: Path) -> ctypes.CDLL:
    """A private copy of the .so, so its statics (arena, pool) start from load state."""
    _counter[0] += 1
    copy = tmp_path / f"copy{_counter[0]}_{so.name}"
    shutil.copy(so, copy)
    lib = ctypes.CDLL(str(copy))
    lib.etmlir_cpu_payload_abi.restype = ctypes.c_int
    lib.etmlir_cpu_set_arena.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    lib.etmlir_cpu_heap_fallbacks.restype = ctypes.c_uint64
    lib.etmlir_cpu_arena_peak.restype = ctypes.c_uint64
    lib.etmlir_cpu_set_parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    lib._mlir_memref_to_llvm_alloc.restype = ctypes.c_void_p
    lib._mlir_memref_to_llvm_alloc.argtypes = [ctypes.c_size_t]
    lib._mlir_memref_to_llvm_aligned_alloc.restype = ctypes.c_void_p
    lib._mlir_memref_to_llvm_aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    lib._mlir_memref_to_llvm_free.argtypes = [ctypes.c_void_p]
    for name in ("matmul", "batch_matmul"):
        getattr(lib, f"_mlir_ciface_etmlir_uk_{name}").argtypes = [ctypes.c_void_p] * 3
    for name in ("conv2d_nchw_fchw", "depthwise_conv2d_nchw_chw"):
        getattr(lib, f"_mlir_ciface_etmlir_uk_{name}").argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 4
    for name in ("matmul", "batch_matmul"):
        getattr(lib, f"_mlir_ciface_etmlir_uk_{name}_ep").argtypes = [ctypes.c_void_p] * 4
    for name in ("conv2d_nchw_fchw", "depthwise_conv2d_nchw_chw"):
        getattr(lib, f"_mlir_ciface_etmlir_uk_{name}_ep").argtypes = (
            [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 4 + [ctypes.c_void_p])
    lib._mlir_ciface_etmlir_uk_matmul_packed_ep.argtypes = [ctypes.c_void_p] * 4
    lib._mlir_ciface_etmlir_uk_conv2d_packed_ep.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 6 + [ctypes.c_void_p]
    lib._mlir_ciface_etmlir_uk_conv2d_winograd_ep.argtypes = [ctypes.c_void_p] * 4
    lib._mlir_ciface_etmlir_uk_max_pool2d.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64] * 8
    lib._mlir_ciface_etmlir_uk_inverted_residual_ep.argtypes = (
        [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 2 + [ctypes.c_void_p] * 4)
    lib._mlir_ciface_etmlir_uk_attention.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64, ctypes.c_float]
    lib.etmlir_uk_panel_width.restype = ctypes.c_int64
    lib.etmlir_uk_panel_rows.restype = ctypes.c_int64
    return lib


@pytest.fixture(params=LEVELS)
def lib(request, builds, tmp_path) -> ctypes.CDLL:
    return load_fresh(builds[request.param], tmp_path)


# ---------------------------------------------------------------------------------------------
# memref descriptors over numpy views


def descriptor(view: np.ndarray, base: np.ndarray):
    """MLIR memref descriptor for `view`, a float32 view into `base`: allocated/aligned point at
    base, the view's start becomes `offset`, strides are in elements."""
    assert view.dtype == np.float32 and base.dtype == np.float32
    rank = view.ndim

    class Desc(ctypes.Structure):
        _fields_ = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64),
                    ("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]

    base_ptr = base.ctypes.data
    d = Desc()
    d.allocated = d.aligned = base_ptr
    d.offset = (view.ctypes.data - base_ptr) // 4
    for i in range(rank):
        d.sizes[i] = view.shape[i]
        d.strides[i] = view.strides[i] // 4
    return d


def strided(shape, layout: str, rng, fill=None):
    """A float32 view of `shape` inside a larger buffer: 'c' contiguous with an offset, 't' the last
    two dims transposed (column-major), 's' every other column of a wider buffer."""
    shape = tuple(shape)
    if layout == "c":
        base = rng.standard_normal(int(np.prod(shape)) + 5).astype(np.float32)
        view = base[5:].reshape(shape)
    elif layout == "t":
        tshape = shape[:-2] + (shape[-1], shape[-2])
        base = rng.standard_normal(int(np.prod(shape)) + 3).astype(np.float32)
        view = base[3:].reshape(tshape).swapaxes(-1, -2)
    elif layout == "s":
        wide = shape[:-1] + (2 * shape[-1] + 1,)
        base = rng.standard_normal(int(np.prod(wide))).astype(np.float32)
        view = base.reshape(wide)[..., 1::2]
    else:
        raise ValueError(layout)
    if fill is not None:
        view[...] = fill
    return view, base


def tol(k: int) -> dict:
    # Operands are N(0, 1), so a dot product over k terms has magnitude ~sqrt(k); float32 summation
    # in a different order drifts by a few ulps of the partial sums.
    return {"rtol": 1e-4, "atol": 2e-6 * k}


# ---------------------------------------------------------------------------------------------
# matmul / batch_matmul


def run_matmul(lib, a, a_base, b, b_base, c, c_base):
    da, db, dc = descriptor(a, a_base), descriptor(b, b_base), descriptor(c, c_base)
    lib._mlir_ciface_etmlir_uk_matmul(ctypes.byref(da), ctypes.byref(db), ctypes.byref(dc))


MATMUL_SHAPES = [(1, 384, 1152), (1, 1536, 384), (1, 7, 65), (3, 384, 100), (4, 65, 33), (6, 100, 37), (7, 3, 49),
                 (8, 64, 64), (13, 17, 33), (30, 50, 66), (64, 384, 65), (29, 401, 70), (100, 1, 31), (15, 64, 16), (2, 5, 1)]


@pytest.mark.parametrize("m,k,n", MATMUL_SHAPES)
@pytest.mark.parametrize("b_layout", ["c", "t", "s"])
def test_matmul_matches_torch(lib, m, k, n, b_layout):
    rng = np.random.default_rng(m * 1000 + k + n)
    a, a_base = strided((m, k), "c", rng)
    b, b_base = strided((k, n), b_layout, rng)
    c, c_base = strided((m, n), "c", rng)
    expected = (torch.from_numpy(c.copy()).double() + torch.from_numpy(a.copy()).double()
                @ torch.from_numpy(b.copy()).double()).numpy()
    run_matmul(lib, a, a_base, b, b_base, c, c_base)
    np.testing.assert_allclose(c, expected, **tol(k))


@pytest.mark.parametrize("a_layout,c_layout", [("t", "c"), ("s", "s"), ("c", "t")])
def test_matmul_strided_a_and_c(lib, a_layout, c_layout):
    rng = np.random.default_rng(7)
    for m, k, n in [(1, 33, 17), (3, 40, 50), (37, 45, 70), (64, 128, 96)]:
        a, a_base = strided((m, k), a_layout, rng)
        b, b_base = strided((k, n), "t", rng)
        c, c_base = strided((m, n), c_layout, rng)
        expected = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
        run_matmul(lib, a, a_base, b, b_base, c, c_base)
        np.testing.assert_allclose(c, expected, **tol(k))


@pytest.mark.parametrize("m,k,n", [(1, 16, 32), (5, 16, 32), (20, 40, 32), (64, 48, 40)])
def test_matmul_broadcast_and_narrow_operands(lib, m, k, n):
    """Zero strides (broadcast views) and a B exactly one panel wide (row stride 32)."""
    rng = np.random.default_rng(m + k + n)
    a_row = rng.standard_normal(k + 1).astype(np.float32)
    a = np.lib.stride_tricks.as_strided(a_row[1:], shape=(m, k), strides=(0, 4))
    b_col = rng.standard_normal(n).astype(np.float32)
    b_bcast = np.lib.stride_tricks.as_strided(b_col, shape=(k, n), strides=(0, 4))
    for b, b_base in [(b_bcast, b_col), strided((k, n), "c", rng)]:
        c, c_base = strided((m, n), "c", rng)
        expected = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
        run_matmul(lib, a, a_row, b, b_base, c, c_base)
        np.testing.assert_allclose(c, expected, **tol(k))


def test_matmul_leaves_the_rest_of_c_alone(lib):
    rng = np.random.default_rng(3)
    a, a_base = strided((9, 20), "c", rng)
    b, b_base = strided((20, 40), "c", rng)
    big = rng.standard_normal((12, 50)).astype(np.float32)
    before = big.copy()
    c = big[2:11, 5:45]
    run_matmul(lib, a, a_base, b, b_base, c, big)
    expected = before.copy()
    expected[2:11, 5:45] += a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(big, expected, **tol(20))


@pytest.mark.parametrize("bsz,m,k,n,b_layout", [(6, 64, 64, 64, "t"), (6, 64, 64, 64, "c"), (3, 7, 5, 9, "c"),
                                                 (2, 1, 33, 20, "t"), (4, 30, 70, 1, "c"), (1, 17, 256, 64, "s")])
def test_batch_matmul_matches_torch(lib, bsz, m, k, n, b_layout):
    rng = np.random.default_rng(bsz + m + k + n)
    a, a_base = strided((bsz, m, k), "c", rng)
    b, b_base = strided((bsz, k, n), b_layout, rng)
    c, c_base = strided((bsz, m, n), "c", rng)
    expected = (torch.from_numpy(c.copy()).double() + torch.bmm(torch.from_numpy(a.copy()).double(),
                                                                  torch.from_numpy(b.copy()).double())).numpy()
    da, db, dc = descriptor(a, a_base), descriptor(b, b_base), descriptor(c, c_base)
    lib._mlir_ciface_etmlir_uk_batch_matmul(ctypes.byref(da), ctypes.byref(db), ctypes.byref(dc))
    np.testing.assert_allclose(c, expected, **tol(k))


# ---------------------------------------------------------------------------------------------
# convolutions


def conv_out_size(size, k, stride, dilation):
    return (size - dilation * (k - 1) - 1) // stride + 1


def run_conv(lib, name, x, x_base, w, w_base, out, out_base, stride, dilation):
    dx, dw, do = descriptor(x, x_base), descriptor(w, w_base), descriptor(out, out_base)
    getattr(lib, f"_mlir_ciface_etmlir_uk_{name}")(ctypes.byref(dx), ctypes.byref(dw), ctypes.byref(do),
                                                   stride[0], stride[1], dilation[0], dilation[1])


CONV_CASES = [
    # n, c, h, w, f, kh, kw, stride, dilation
    (1, 3, 225, 225, 32, 3, 3, (2, 2), (1, 1)),  # MobileNetV2's first layer (input already padded)
    (1, 16, 13, 11, 24, 1, 1, (1, 1), (1, 1)),  # pointwise, odd plane
    (1, 32, 28, 28, 192, 1, 1, (1, 1), (1, 1)),
    (1, 20, 7, 7, 37, 1, 1, (1, 1), (1, 1)),  # 49 columns: a tile of 32 and one of 17 (AVX-512: kern512's x16)
    (1, 20, 13, 5, 37, 1, 1, (1, 1), (1, 1)),  # 65 columns: 64 in the microkernel, one as dot products
    (2, 7, 9, 9, 5, 1, 1, (2, 2), (1, 1)),  # strided pointwise
    (2, 5, 12, 10, 7, 3, 3, (1, 1), (1, 1)),
    (1, 4, 15, 17, 9, 3, 2, (2, 1), (2, 3)),  # dilation, non-square kernel
    (1, 1, 6, 6, 1, 2, 2, (1, 1), (1, 1)),
    (1, 3, 39, 39, 64, 7, 7, (2, 2), (1, 1)),  # a 7x7 stem of 64 filters: AVX-512 packs B (many panels)
    (1, 16, 12, 12, 160, 3, 3, (1, 1), (1, 1)),  # stride 1, 160 filters: likewise
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_matches_torch(lib, case):
    n, c, h, w, f, kh, kw, stride, dilation = case
    rng = np.random.default_rng(sum(case[:7]))
    x, x_base = strided((n, c, h, w), "c", rng)
    wt, w_base = strided((f, c, kh, kw), "c", rng)
    oh, ow = conv_out_size(h, kh, stride[0], dilation[0]), conv_out_size(w, kw, stride[1], dilation[1])
    out, out_base = strided((n, f, oh, ow), "c", rng)
    with torch.no_grad():
        expected = torch.from_numpy(out.copy()).double() + torch.nn.functional.conv2d(
            torch.from_numpy(x.copy()).double(), torch.from_numpy(wt.copy()).double(), stride=stride,
            dilation=dilation)
    run_conv(lib, "conv2d_nchw_fchw", x, x_base, wt, w_base, out, out_base, stride, dilation)
    np.testing.assert_allclose(out, expected.numpy(), **tol(c * kh * kw))


@pytest.mark.parametrize("layout", ["s", "t"])
def test_conv2d_strided_operands(lib, layout):
    """Non-unit innermost strides on the input, the filter and the output (copies / gathers)."""
    rng = np.random.default_rng(11)
    n, c, h, w, f, k = 1, 6, 10, 9, 8, 3
    x, x_base = strided((n, c, h, w), layout, rng)
    wt, w_base = strided((f, c, k, k), layout, rng)
    out, out_base = strided((n, f, h - 2, w - 2), layout, rng)
    expected = torch.from_numpy(out.copy()).double() + torch.nn.functional.conv2d(
        torch.from_numpy(x.copy()).double(), torch.from_numpy(wt.copy()).double())
    run_conv(lib, "conv2d_nchw_fchw", x, x_base, wt, w_base, out, out_base, (1, 1), (1, 1))
    np.testing.assert_allclose(out, expected.numpy(), **tol(c * k * k))


DEPTHWISE_CASES = [
    # n, c, h, w, k, stride, dilation (h, w: padded input)
    (1, 32, 114, 114, 3, 1, 1),
    (1, 8, 113, 113, 3, 2, 1),
    (1, 16, 9, 9, 3, 1, 1),  # 7x7 output
    (1, 16, 15, 15, 3, 2, 1),  # 7x7 output, stride 2
    (2, 3, 19, 20, 3, 2, 1),  # odd/even widths, batch 2
    (1, 5, 35, 36, 3, 2, 1),  # output wider than 16 with a tail
    (1, 4, 11, 13, 5, 1, 1),
    (1, 4, 12, 14, 3, 1, 2),
]


@pytest.mark.parametrize("case", DEPTHWISE_CASES)
def test_depthwise_matches_torch(lib, case):
    n, c, h, w, k, s, d = case
    rng = np.random.default_rng(sum(case))
    x, x_base = strided((n, c, h, w), "c", rng)
    wt, w_base = strided((c, k, k), "c", rng)
    oh, ow = conv_out_size(h, k, s, d), conv_out_size(w, k, s, d)
    out, out_base = strided((n, c, oh, ow), "c", rng)
    expected = torch.from_numpy(out.copy()).double() + torch.nn.functional.conv2d(
        torch.from_numpy(x.copy()).double(), torch.from_numpy(wt.copy()).double()[:, None], stride=s, dilation=d,
        groups=c)
    run_conv(lib, "depthwise_conv2d_nchw_chw", x, x_base, wt, w_base, out, out_base, (s, s), (d, d))
    np.testing.assert_allclose(out, expected.numpy(), **tol(k * k))


def test_depthwise_strided_operands(lib):
    rng = np.random.default_rng(5)
    x, x_base = strided((1, 6, 17, 17), "s", rng)
    wt, w_base = strided((6, 3, 3), "t", rng)
    out, out_base = strided((1, 6, 8, 8), "s", rng)
    expected = torch.from_numpy(out.copy()).double() + torch.nn.functional.conv2d(
        torch.from_numpy(x.copy()).double(), torch.from_numpy(wt.copy()).double()[:, None], stride=2, groups=6)
    run_conv(lib, "depthwise_conv2d_nchw_chw", x, x_base, wt, w_base, out, out_base, (2, 2), (1, 1))
    np.testing.assert_allclose(out, expected.numpy(), **tol(9))


def run_max_pool(lib, x, x_base, out, out_base, kernel, stride, dilation, pad) -> None:
    dx, do = descriptor(x, x_base), descriptor(out, out_base)
    lib._mlir_ciface_etmlir_uk_max_pool2d(ctypes.byref(dx), ctypes.byref(do), *kernel, *stride, *dilation, *pad)


def max_pool_reference(x, out, kernel, stride, dilation, pad) -> np.ndarray:
    """max(out, eager's max pooling of x padded with -inf on every side, a NaN winning): the windows
    that leave x at the bottom or right, as ceil_mode's do, are cut where x ends."""
    oh, ow = out.shape[2:]
    reach = [(o - 1) * s + (k - 1) * d + 1 for o, k, s, d in zip((oh, ow), kernel, stride, dilation)]
    padded = torch.nn.functional.pad(torch.from_numpy(x.copy()), (pad[1], reach[1] - pad[1] - x.shape[3],
                                                                  pad[0], reach[0] - pad[0] - x.shape[2]),
                                     value=float("-inf"))
    pooled = torch.nn.functional.max_pool2d(padded, kernel, stride, 0, dilation)
    both = torch.stack([torch.from_numpy(out.copy()), pooled])
    return torch.where(both.isnan().any(0), float("nan"), both.amax(0)).numpy()


# n, c, h, w, kernel, stride, dilation, pad, (output h, w): ResNet's stem pool, 2x2 / 2, stride 1,
# dilated, windows past the bottom-right (ceil mode), a kernel wider than the padded row, one output.
MAX_POOL_CASES = [
    (1, 3, 112, 112, (3, 3), (2, 2), (1, 1), (1, 1), (56, 56)),
    (2, 5, 17, 20, (2, 2), (2, 2), (1, 1), (0, 0), (8, 10)),
    (1, 4, 9, 33, (3, 3), (1, 1), (1, 1), (1, 1), (9, 33)),
    (1, 2, 15, 16, (3, 2), (2, 1), (2, 3), (2, 1), (7, 15)),
    (1, 3, 10, 10, (3, 3), (2, 2), (1, 1), (0, 0), (5, 5)),
    (1, 2, 3, 4, (5, 7), (1, 1), (1, 1), (2, 3), (3, 4)),
    (1, 1, 5, 5, (5, 5), (5, 5), (1, 1), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("case", MAX_POOL_CASES)
@pytest.mark.parametrize("layout", ["c", "s"])
def test_max_pool_matches_eager(lib, case, layout):
    n, c, h, w, kernel, stride, dilation, pad, (oh, ow) = case
    rng = np.random.default_rng(sum(case[:4]))
    x, x_base = strided((n, c, h, w), layout, rng)
    x[0, 0, 0, :3] = [np.nan, -np.inf, np.inf]  # a NaN wins; -inf and inf are values like any other
    out, out_base = strided((n, c, oh, ow), layout, rng, fill=-np.inf)
    out[-1, -1, -1, -1] = np.nan  # what out held takes part: a NaN there stays
    expected = max_pool_reference(x, out, kernel, stride, dilation, pad)
    run_max_pool(lib, x, x_base, out, out_base, kernel, stride, dilation, pad)
    np.testing.assert_array_equal(out, expected)


# ---------------------------------------------------------------------------------------------
# parallel split


PARALLEL_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)
PARALLEL_BODY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def reversed_pool(num_chunks: int, calls: list):
    """A 'pool' that splits [0, n) into at most num_chunks chunks and runs them serially, last first."""

    def run(ctx, n, body, arg):
        calls.append(n)
        body_fn = PARALLEL_BODY(body)
        bounds = [n * i // num_chunks for i in range(num_chunks + 1)]
        for begin, end in reversed(list(zip(bounds[:-1], bounds[1:]))):
            if begin < end:
                body_fn(arg, begin, end)

    return PARALLEL_FN(run)


@pytest.mark.parametrize("threads,chunks", [(2, 2), (3, 3), (4, 2)])
def test_parallel_split_matches_serial(lib, threads, chunks):
    calls: list[int] = []
    pool = reversed_pool(chunks, calls)
    lib.etmlir_cpu_set_parallel(ctypes.cast(pool, ctypes.c_void_p), None, threads)
    rng = np.random.default_rng(threads)
    for m, k, n, layout in [(64, 384, 1152, "t"), (256, 64, 65, "c"), (1, 384, 1536, "t"), (1, 300, 999, "c"),
                            (5, 300, 20, "c")]:
        a, a_base = strided((m, k), "c", rng)
        b, b_base = strided((k, n), layout, rng)
        c, c_base = strided((m, n), "c", rng)
        expected = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
        run_matmul(lib, a, a_base, b, b_base, c, c_base)
        np.testing.assert_allclose(c, expected, **tol(k))

    # B packed at compile time; the last: one row, split by panels.
    for m, k, n in [(64, 384, 1152), (3, 100, 70), (300, 64, 40), (1, 1100, 999)]:
        a, a_base = strided((m, k), "c", rng)
        b = rng.standard_normal((k, n)).astype(np.float32)
        panels, p_base = aligned_copy(pack_columns(b, lib.etmlir_uk_panel_width()))
        c, c_base = strided((m, n), "c", rng)
        expected = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
        ep = epilogue(0, 0.0, 0.0, None, None)
        da, dp, dc = descriptor(a, a_base), descriptor(panels, p_base), descriptor(c, c_base)
        lib._mlir_ciface_etmlir_uk_matmul_packed_ep(ctypes.byref(da), ctypes.byref(dp), ctypes.byref(dc),
                                                    ctypes.byref(ep))
        np.testing.assert_allclose(c, expected, **tol(k))

    # Filters packed at compile time; a pointwise one of up to 112 filters (8 panels) reads its input in place
    # (40, 96 and 112 filters here; 120 has it packed), over 900, 196, 49 and 81 columns (past a multiple of 32).
    for f, c, k, hw in [(40, 24, 1, 30), (30, 16, 3, 20), (64, 50, 3, 12), (96, 20, 1, 14), (112, 24, 1, 7),
                        (120, 8, 1, 9)]:
        x, x_base = strided((1, c, hw, hw), "c", rng)
        wt = rng.standard_normal((f, c, k, k)).astype(np.float32)
        out, out_base = strided((1, f, hw - k + 1, hw - k + 1), "c", rng)
        expected = torch.from_numpy(out.copy()).double() + torch.nn.functional.conv2d(
            torch.from_numpy(x.copy()).double(), torch.from_numpy(wt).double())
        _run_packed_conv(lib, x, x_base, wt, lib.etmlir_uk_panel_rows(), out, out_base, 1, 1,
                         epilogue(0, 0.0, 0.0, None, None))
        np.testing.assert_allclose(out, expected.numpy(), **tol(c * k * k))

    # Winograd F(2x2) and F(4x4): few tiles (one block: the tasks share it phase by phase), and many blocks
    # (six for the second: a block per task at 2 and 3 threads, phase by phase block after block at 4; the
    # last: two blocks by the budget, made ten smaller ones).
    for f, c, hw, n, tile in [(96, 80, 9, 1, 2), (33, 64, 40, 2, 2), (96, 80, 13, 1, 4), (40, 48, 70, 1, 4)]:
        x, x_base = strided((n, c, hw, hw), "c", rng)
        wt = rng.standard_normal((f, c, 3, 3)).astype(np.float32)
        out, out_base = strided((n, f, hw - 2, hw - 2), "c", rng)
        expected = torch.from_numpy(out.copy()).double() + torch.nn.functional.conv2d(
            torch.from_numpy(x.copy()).double(), torch.from_numpy(wt).double())
        _run_winograd(lib, x, x_base, wt, lib.etmlir_uk_panel_rows(), out, out_base, epilogue(0, 0.0, 0.0, None, None),
                      tile=tile)
        np.testing.assert_allclose(out, expected.numpy(), **tol(c * 9))

    a, a_base = strided((6, 64, 64), "c", rng)
    b, b_base = strided((6, 64, 64), "t", rng)
    c, c_base = strided((6, 64, 64), "c", rng)
    expected = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    da, db, dc = descriptor(a, a_base), descriptor(b, b_base), descriptor(c, c_base)
    lib._mlir_ciface_etmlir_uk_batch_matmul(ctypes.byref(da), ctypes.byref(db), ctypes.byref(dc))
    np.testing.assert_allclose(c, expected, **tol(64))

    x, x_base = strided((1, 24, 30, 30), "c", rng)
    wt, w_base = strided((40, 24, 1, 1), "c", rng)
    out, out_base = strided((1, 40, 30, 30), "c", rng)
    expected = torch.from_numpy(out.copy()).double() + torch.nn.functional.conv2d(
        torch.from_numpy(x.copy()).double(), torch.from_numpy(wt.copy()).double())
    run_conv(lib, "conv2d_nchw_fchw", x, x_base, wt, w_base, out, out_base, (1, 1), (1, 1))
    np.testing.assert_allclose(out, expected.numpy(), **tol(24))

    x, x_base = strided((1, 37, 31, 31), "c", rng)
    wt, w_base = strided((37, 3, 3), "c", rng)
    out, out_base = strided((1, 37, 15, 15), "c", rng)
    expected = torch.from_numpy(out.copy()).double() + torch.nn.functional.conv2d(
        torch.from_numpy(x.copy()).double(), torch.from_numpy(wt.copy()).double()[:, None], stride=2, groups=37)
    run_conv(lib, "depthwise_conv2d_nchw_chw", x, x_base, wt, w_base, out, out_base, (2, 2), (1, 1))
    np.testing.assert_allclose(out, expected.numpy(), **tol(9))

    x, x_base = strided((2, 64, 56, 56), "c", rng)
    out, out_base = strided((2, 64, 28, 28), "c", rng, fill=-np.inf)
    expected = max_pool_reference(x, out, (3, 3), (2, 2), (1, 1), (1, 1))
    run_max_pool(lib, x, x_base, out, out_base, (3, 3), (2, 2), (1, 1), (1, 1))
    np.testing.assert_array_equal(out, expected)

    assert calls, "no kernel went through the pool"


def test_a_late_thread_leaves_its_tasks_to_the_others(lib):
    """Kernels cut their work into tasks claimed at run time: a thread that starts late finds its share
    taken. The pool below runs participant 0 alone first; the output must already be complete then (it
    took every task, its own share's and the others'), and the late participants change nothing."""
    rng = np.random.default_rng(7)
    state: dict = {}

    def run(ctx, n, body, arg):
        body_fn = PARALLEL_BODY(body)
        state["participants"] = n
        body_fn(arg, 0, 1)
        state["check"]()
        for i in range(1, n):
            body_fn(arg, i, i + 1)

    pool = PARALLEL_FN(run)
    lib.etmlir_cpu_set_parallel(ctypes.cast(pool, ctypes.c_void_p), None, 4)

    a, a_base = strided((96, 256), "c", rng)
    b, b_base = strided((256, 600), "c", rng)
    c, c_base = strided((96, 600), "c", rng)
    expected = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    state["check"] = lambda: np.testing.assert_allclose(c, expected, **tol(256))
    run_matmul(lib, a, a_base, b, b_base, c, c_base)
    assert state["participants"] == 4
    np.testing.assert_allclose(c, expected, **tol(256))

    # A filter packed at compile time: the columns split into more tasks than threads.
    x, x_base = strided((1, 32, 34, 34), "c", rng)
    wt = rng.standard_normal((48, 32, 3, 3)).astype(np.float32)
    out, out_base = strided((1, 48, 32, 32), "c", rng)
    expected_conv = torch.from_numpy(out.copy()).double() + torch.nn.functional.conv2d(
        torch.from_numpy(x.copy()).double(), torch.from_numpy(wt).double())
    state["participants"] = 0
    state["check"] = lambda: np.testing.assert_allclose(out, expected_conv.numpy(), **tol(32 * 9))
    _run_packed_conv(lib, x, x_base, wt, lib.etmlir_uk_panel_rows(), out, out_base, 1, 1,
                     epilogue(0, 0.0, 0.0, None, None))
    assert state["participants"] == 4
    np.testing.assert_allclose(out, expected_conv.numpy(), **tol(32 * 9))

    x, x_base = strided((1, 64, 40, 40), "c", rng)
    wt, w_base = strided((64, 3, 3), "c", rng)
    out, out_base = strided((1, 64, 38, 38), "c", rng)
    expected_dw = torch.from_numpy(out.copy()).double() + torch.nn.functional.conv2d(
        torch.from_numpy(x.copy()).double(), torch.from_numpy(wt.copy()).double()[:, None], groups=64)
    state["participants"] = 0
    state["check"] = lambda: np.testing.assert_allclose(out, expected_dw.numpy(), **tol(9))
    run_conv(lib, "depthwise_conv2d_nchw_chw", x, x_base, wt, w_base, out, out_base, (1, 1), (1, 1))
    assert state["participants"] == 4
    np.testing.assert_allclose(out, expected_dw.numpy(), **tol(9))


def test_parallel_with_one_thread_stays_serial(lib):
    calls: list[int] = []
    pool = reversed_pool(2, calls)
    lib.etmlir_cpu_set_parallel(ctypes.cast(pool, ctypes.c_void_p), None, 1)
    rng = np.random.default_rng(0)
    a, a_base = strided((64, 128), "c", rng)
    b, b_base = strided((128, 256), "c", rng)
    c, c_base = strided((64, 256), "c", rng)
    expected = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    run_matmul(lib, a, a_base, b, b_base, c, c_base)
    np.testing.assert_allclose(c, expected, **tol(128))
    assert calls == []


# ---------------------------------------------------------------------------------------------
# arena allocator


class Arena:
    def __init__(self, lib, nbytes: int):
        # 64-byte aligned backing store, so offsets are comparable across loads.
        self.raw = np.zeros(nbytes + 64, dtype=np.uint8)
        start = (-self.raw.ctypes.data) % 64
        self.buf = self.raw[start:start + nbytes]
        self.base = self.buf.ctypes.data
        self.nbytes = nbytes
        lib.etmlir_cpu_set_arena(self.base, nbytes)

    def offset(self, ptr: int) -> int | None:
        return ptr - self.base if self.base <= ptr < self.base + self.nbytes else None


def test_abi_version(lib):
    assert lib.etmlir_cpu_payload_abi() == 1


def test_without_arena_allocations_fall_back_to_malloc(lib):
    alloc, free = lib._mlir_memref_to_llvm_alloc, lib._mlir_memref_to_llvm_free
    p = alloc(1000)
    q = lib._mlir_memref_to_llvm_aligned_alloc(128, 100)
    assert p and q and q % 128 == 0
    ctypes.memset(p, 1, 1000)
    free(p)
    free(q)
    free(None)
    assert lib.etmlir_cpu_heap_fallbacks() == 2
    assert lib.etmlir_cpu_arena_peak() == 0


def test_arena_first_fit_reuse_and_coalescing(lib):
    arena = Arena(lib, 1 << 20)
    alloc, free = lib._mlir_memref_to_llvm_alloc, lib._mlir_memref_to_llvm_free
    a, b, c = alloc(100), alloc(1000), alloc(64)
    offsets = [arena.offset(p) for p in (a, b, c)]
    assert offsets == [64, 64 + 128 + 64, 64 + 128 + 64 + 1024 + 64]  # 64-byte header before each block
    assert all(p % 64 == 0 for p in (a, b, c))
    assert lib.etmlir_cpu_arena_peak() == offsets[2] + 64 + 64  # top + alignment slack
    free(a)
    assert alloc(50) == a  # first fit reuses the hole
    free(a)
    free(b)  # a and b coalesce into one hole of 128 + 64 + 1024 bytes
    d = alloc(128 + 64 + 1024)
    assert d == a
    free(d)
    free(c)  # everything free: the arena is empty again
    assert alloc(4096) == a
    assert lib.etmlir_cpu_heap_fallbacks() == 0


def test_arena_peak_tracks_high_water_mark(lib):
    arena = Arena(lib, 1 << 20)
    alloc, free = lib._mlir_memref_to_llvm_alloc, lib._mlir_memref_to_llvm_free
    p = alloc(10_000)
    q = alloc(20_000)
    peak = lib.etmlir_cpu_arena_peak()
    free(q)
    free(p)
    r = alloc(100)
    free(r)
    assert lib.etmlir_cpu_arena_peak() == peak
    assert peak >= 30_000 + 2 * 64
    assert arena.offset(p) == 64


def test_arena_layout_is_deterministic(builds, tmp_path):
    so = builds[LEVELS[-1]]

    def trace():
        lib = load_fresh(so, tmp_path)
        arena = Arena(lib, 1 << 20)
        alloc, free = lib._mlir_memref_to_llvm_alloc, lib._mlir_memref_to_llvm_free
        live, offsets = [], []
        for i in range(60):
            size = (i * 7919) % 5000 + 1
            live.append(alloc(size))
            offsets.append(arena.offset(live[-1]))
            if i % 3 == 2:
                free(live.pop(i % len(live)))
        for p in live:
            free(p)
        return offsets, lib.etmlir_cpu_arena_peak()

    first, second = trace(), trace()
    assert first == second
    assert None not in first[0]


def test_arena_overflow_falls_back_and_frees(lib):
    arena = Arena(lib, 4096)
    alloc, free = lib._mlir_memref_to_llvm_alloc, lib._mlir_memref_to_llvm_free
    a = alloc(2000)
    big = alloc(10_000)
    assert arena.offset(a) is not None and arena.offset(big) is None
    assert lib.etmlir_cpu_heap_fallbacks() == 1
    ctypes.memset(big, 7, 10_000)
    free(big)  # goes to free(), not into the arena
    b = alloc(1000)
    assert arena.offset(b) is not None
    free(a)
    free(b)
    assert alloc(3000) == arena.base + 64
    assert lib.etmlir_cpu_heap_fallbacks() == 1


def test_over_aligned_allocations(lib):
    arena = Arena(lib, 1 << 16)
    aligned_alloc, free = lib._mlir_memref_to_llvm_aligned_alloc, lib._mlir_memref_to_llvm_free
    p = aligned_alloc(256, 100)
    q = aligned_alloc(4096, 300)
    assert p % 256 == 0 and q % 4096 == 0
    assert arena.offset(p) is not None and arena.offset(q) is not None
    free(p)
    free(q)
    assert lib._mlir_memref_to_llvm_alloc(64) == arena.base + 64  # both blocks went back
    assert lib.etmlir_cpu_heap_fallbacks() == 0


def test_ukernel_scratch_comes_from_the_arena(lib):
    arena = Arena(lib, 16 << 20)
    rng = np.random.default_rng(1)
    a, a_base = strided((64, 384), "c", rng)
    b, b_base = strided((384, 1152), "t", rng)
    c, c_base = strided((64, 1152), "c", rng, fill=0.0)
    run_matmul(lib, a, a_base, b, b_base, c, c_base)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), **tol(384))
    assert lib.etmlir_cpu_heap_fallbacks() == 0
    assert 0 < lib.etmlir_cpu_arena_peak() <= arena.nbytes
    # The scratch was released: the next block starts at the bottom again.
    assert lib._mlir_memref_to_llvm_alloc(64) == arena.base + 64


def test_ukernel_without_room_in_the_arena_uses_the_heap(lib):
    arena = Arena(lib, 1024)
    rng = np.random.default_rng(2)
    a, a_base = strided((32, 64), "c", rng)
    b, b_base = strided((64, 64), "c", rng)
    c, c_base = strided((32, 64), "c", rng, fill=0.0)
    run_matmul(lib, a, a_base, b, b_base, c, c_base)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), **tol(64))
    assert lib.etmlir_cpu_heap_fallbacks() == 1
    assert lib._mlir_memref_to_llvm_alloc(64) == arena.base + 64


# ---------------------------------------------------------------------------------------------
# fused epilogues (the _ep kernels): init (the output, zero or a bias), bias after, residual, bounds

# etmlir_cpu_payload.h's ETMLIR_EP_* flags
INIT_OUTPUT, INIT_ZERO, INIT_BIAS, BIAS_AFTER, RESIDUAL = 0, 1, 2, 4, 8
NAN_TO_BOUND, KEEP_NAN = 1, 2
ACT_SHIFT, GELU, GELU_TANH, SILU, SIGMOID, TANH = 8, 1, 2, 3, 4, 5
_erf = np.vectorize(math.erf, otypes=[np.float64])
# float64 references of the ETMLIR_EP_ACT_* activations
ACTIVATION_REFERENCES = {
    GELU: lambda v: 0.5 * v * (1.0 + _erf(v / math.sqrt(2.0))),
    GELU_TANH: lambda v: 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3))),
    SILU: lambda v: v / (1.0 + np.exp(-v)),
    SIGMOID: lambda v: 1.0 / (1.0 + np.exp(-v)),
    TANH: np.tanh,
}


class Epilogue(ctypes.Structure):
    _fields_ = [("mode", ctypes.c_int64), ("lo", ctypes.c_float), ("hi", ctypes.c_float),
                ("bias", ctypes.c_void_p), ("bias_stride", ctypes.c_int64), ("res", ctypes.c_void_p),
                ("res_strides", ctypes.c_int64 * 4), ("pad_top", ctypes.c_int64), ("pad_left", ctypes.c_int64)]


def epilogue(mode: int, lo: float, hi: float, bias: np.ndarray | None, res: np.ndarray | None) -> Epilogue:
    ep = Epilogue()
    ep.mode, ep.lo, ep.hi = mode, lo, hi
    if bias is not None:
        ep.bias, ep.bias_stride = bias.ctypes.data, bias.strides[0] // 4
    if res is not None:
        ep.res = res.ctypes.data
        for i, stride in enumerate(res.strides):
            ep.res_strides[i] = stride // 4
    return ep


def expected_epilogue(product, before, mode, lo, hi, bias_b, res):
    """float64 reference: product plus init, then bias, residual and the bounds with their NaN rules."""
    init = mode & 3
    v = product + (before if init == INIT_OUTPUT else bias_b if init == INIT_BIAS else 0.0)
    if mode & BIAS_AFTER:
        v = v + bias_b
    if mode & RESIDUAL:
        v = v + res
    if (mode >> ACT_SHIFT) & 7:
        with np.errstate(over="ignore"):
            v = ACTIVATION_REFERENCES[(mode >> ACT_SHIFT) & 7](v)
    lo_mode, hi_mode = (mode >> 4) & 3, (mode >> 6) & 3
    if lo_mode == KEEP_NAN:
        v = np.where(lo > v, lo, v)
    elif lo_mode:
        v = np.where(v > lo, v, lo)
    if hi_mode == KEEP_NAN:
        v = np.where(hi < v, hi, v)
    elif hi_mode:
        v = np.where(v < hi, v, hi)
    return v


# (mode, lo, hi): a linear with ReLU, a conv with bias and ReLU6 (NaN -> 0 below, kept above), a
# residual add, a bias after plus residual plus an upper bound, hardtanh(-1, 1) on the output's value,
# a linear with GELU, a conv with bias, residual and SiLU, tanh of the output's value.
EPILOGUE_MODES = [
    (INIT_ZERO | BIAS_AFTER | (KEEP_NAN << 4), 0.0, 0.0),
    (INIT_BIAS | (NAN_TO_BOUND << 4) | (KEEP_NAN << 6), 0.0, 6.0),
    (INIT_BIAS | RESIDUAL, 0.0, 0.0),
    (INIT_ZERO | BIAS_AFTER | RESIDUAL | (NAN_TO_BOUND << 6), 0.0, 0.5),
    (INIT_OUTPUT | (NAN_TO_BOUND << 4) | (NAN_TO_BOUND << 6), -1.0, 1.0),
    (INIT_ZERO | BIAS_AFTER | (GELU << ACT_SHIFT), 0.0, 0.0),
    (INIT_BIAS | RESIDUAL | (SILU << ACT_SHIFT), 0.0, 0.0),
    (INIT_OUTPUT | (TANH << ACT_SHIFT), 0.0, 0.0),
]


def _with_nans(res: np.ndarray, rng) -> None:
    """A few NaNs in the residual: the bounds' NaN rules are checked where they land."""
    flat = res.reshape(-1) if res.flags.c_contiguous else None
    if flat is not None and flat.size > 4:
        flat[rng.integers(0, flat.size, 3)] = np.nan


def _check(got, want, k):
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], **tol(k))


# (m, k, n, B layout): the packed GEMM, B read in place (few rows), dot products (one row; a
# transposed B), a last tile of 17 columns (n = 49; AVX-512: kern512's 17-column tile, also over two K blocks and with
# a short last panel), tail columns (n = 65), a K of two blocks (the epilogue only after the last).
EP_MATMUL = [(64, 48, 96, "c"), (20, 30, 70, "c"), (1, 40, 33, "c"), (6, 64, 40, "t"), (64, 32, 49, "c"),
             (33, 500, 49, "c"), (64, 32, 65, "c"), (9, 900, 37, "c"), (3, 1, 5, "c")]


def _check_product_epilogue(lib, kernel, a_shape, b_shape, layout, mode, lo, hi, seed, c_layout="c", panels=None):
    """A product kernel under an epilogue against float64. panels: (width, misalign) packs B into panels
    (et-cpu-pack-weights' layout, `aligned_copy`) for etmlir_uk_matmul_packed_ep."""
    rng = np.random.default_rng(seed)
    a, a_base = strided(a_shape, "c", rng)
    if panels is None:
        b, b_base = strided(b_shape, layout, rng)
        operand = descriptor(b, b_base)
    else:
        b = rng.standard_normal(b_shape).astype(np.float32)
        packed, packed_base = aligned_copy(pack_columns(b, panels[0]), panels[1])  # alive until the call
        operand = descriptor(packed, packed_base)
    c, c_base = strided(a_shape[:-1] + b_shape[-1:], c_layout, rng)
    bias = rng.standard_normal(b_shape[-1]).astype(np.float32)
    res = rng.standard_normal(c.shape).astype(np.float32)
    _with_nans(res, rng)
    want = expected_epilogue(a.astype(np.float64) @ b.astype(np.float64), c.astype(np.float64), mode, lo, hi,
                             bias.astype(np.float64), res.astype(np.float64))
    ep = epilogue(mode, lo, hi, bias, res)
    da, dc = descriptor(a, a_base), descriptor(c, c_base)
    getattr(lib, f"_mlir_ciface_etmlir_uk_{kernel}_ep")(ctypes.byref(da), ctypes.byref(operand), ctypes.byref(dc),
                                                        ctypes.byref(ep))
    _check(c, want, a_shape[-1])


@pytest.mark.parametrize("m,k,n,layout", EP_MATMUL)
@pytest.mark.parametrize("mode,lo,hi", EPILOGUE_MODES)
def test_matmul_epilogue_matches_reference(lib, m, k, n, layout, mode, lo, hi):
    _check_product_epilogue(lib, "matmul", (m, k), (k, n), layout, mode, lo, hi, m * 1000 + k + n)


@pytest.mark.parametrize("mode,lo,hi", EPILOGUE_MODES)
def test_batch_matmul_epilogue_matches_reference(lib, mode, lo, hi):
    _check_product_epilogue(lib, "batch_matmul", (3, 17, 24), (3, 24, 40), "c", mode, lo, hi, mode)


def aligned_copy(x: np.ndarray, misalign: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`x` copied into a 64-byte aligned buffer (as the payload's weights are), or `misalign` floats past
    such an address: (view, base)."""
    base = np.empty(x.size + 32, dtype=np.float32)
    start = (-base.ctypes.data % 64) // 4 + misalign
    view = base[start:start + x.size].reshape(x.shape)
    view[...] = x
    return view, base


def _check_packed_matmul(lib, m, k, n, width, mode, lo, hi, seed, misalign=0, c_layout="c"):
    """C (+)= A B with B packed into `width`-column panels, under an epilogue."""
    _check_product_epilogue(lib, "matmul_packed", (m, k), (k, n), "c", mode, lo, hi, seed, c_layout,
                            (width, misalign))


# (m, k, n): one row (a dot-product path of its own: whole panel pairs, an odd K and a ragged last
# panel), a few rows (where an unpacked B is read in place), whole panels, a ragged last panel, two K
# blocks, more rows than one M block holds, a K of 1.
PACKED_MATMUL = [(1, 40, 64), (1, 37, 100), (1, 1, 20), (5, 30, 70), (28, 64, 96), (64, 900, 100), (400, 17, 33),
                 (3, 1, 32)]


@pytest.mark.parametrize("m,k,n", PACKED_MATMUL)
@pytest.mark.parametrize("mode,lo,hi", EPILOGUE_MODES)
def test_packed_matmul_matches_reference(lib, m, k, n, mode, lo, hi):
    _check_packed_matmul(lib, m, k, n, lib.etmlir_uk_panel_width(), mode, lo, hi, m * 1000 + k + n + mode)


@pytest.mark.parametrize("act", [GELU, GELU_TANH, SILU, SIGMOID, TANH])
@pytest.mark.parametrize("c_layout", ["c", "t"])
def test_every_activation_matches_reference(lib, act, c_layout):
    """Each activation on whole vectors, a partial last vector (70 columns) and a strided output (C
    transposed: the activation gathers, applies, scatters), with NaNs from the residual."""
    mode = INIT_BIAS | RESIDUAL | (act << ACT_SHIFT)
    _check_product_epilogue(lib, "matmul", (21, 48), (48, 70), "c", mode, 0.0, 0.0, act, c_layout)
    _check_packed_matmul(lib, 21, 48, 70, lib.etmlir_uk_panel_width(), mode, 0.0, 0.0, act, c_layout=c_layout)


def test_activations_over_their_whole_range(lib):
    """The activations alone (a product of zeros: the output is the residual), from -100 to 100, past
    exp's clamps, against float64: within 2e-6 relative, or 5e-7 absolute where the value is small
    (GELU's A&S erfc has an absolute error of 1.5e-7); NaN stays NaN."""
    x = np.concatenate([np.linspace(-100.0, 100.0, 4001), [0.0, -0.0, 1e-30, -1e-30, 87.5, -87.5, 89.0, -89.0,
                                                           np.nan]]).astype(np.float32)
    a = np.zeros((1, 1), np.float32)
    b = np.zeros((1, x.size), np.float32)
    for act, reference in ACTIVATION_REFERENCES.items():
        c = x.copy().reshape(1, -1)
        ep = epilogue(INIT_ZERO | RESIDUAL | (act << ACT_SHIFT), 0.0, 0.0, None, x.reshape(1, -1))
        da, db, dc = descriptor(a, a), descriptor(b, b), descriptor(c, c)
        lib._mlir_ciface_etmlir_uk_matmul_ep(ctypes.byref(da), ctypes.byref(db), ctypes.byref(dc), ctypes.byref(ep))
        with np.errstate(over="ignore"):
            want = reference(x.astype(np.float64))
        assert np.isnan(c[0, -1]), act
        np.testing.assert_allclose(c[0, :-1], want[:-1], rtol=2e-6, atol=5e-7, err_msg=f"activation {act}")


@pytest.mark.parametrize("m", [1, 20])
def test_packed_matmul_into_a_strided_output(lib, m):
    _check_packed_matmul(lib, m, 33, 70, lib.etmlir_uk_panel_width(), *EPILOGUE_MODES[1], m, c_layout="s")


@pytest.mark.parametrize("mode,lo,hi", EPILOGUE_MODES)
def test_packed_matmul_of_another_width_is_still_right(lib, mode, lo, hi):
    """Panels of a width the kernels were not built for (the compiler never makes them) still multiply right."""
    assert lib.etmlir_uk_panel_width() in (16, 32)
    _check_packed_matmul(lib, 9, 50, 37, 8, mode, lo, hi, mode)
    # The kernels' own width, but not 64-byte aligned (their fast path loads aligned vectors).
    _check_packed_matmul(lib, 9, 50, 37, lib.etmlir_uk_panel_width(), mode, lo, hi, mode, misalign=1)


def _run_packed_conv(lib, x, x_base, wt, rows, out, out_base, stride, dilation, ep, misalign=0):
    """The convolution with its filter packed into `rows`-row panels (et-cpu-pack-weights' layout)."""
    f, c, kh, kw = wt.shape
    panels, p_base = aligned_copy(pack_rows(wt.reshape(f, c * kh * kw), rows), misalign)
    dx, dp, do = descriptor(x, x_base), descriptor(panels, p_base), descriptor(out, out_base)
    lib._mlir_ciface_etmlir_uk_conv2d_packed_ep(ctypes.byref(dx), ctypes.byref(dp), ctypes.byref(do), stride, stride,
                                                dilation, dilation, kh, kw, ctypes.byref(ep))


# (n, c, h, w, f, kh, kw, stride, dilation): pointwise over a plane that flattens, pointwise at stride 2,
# 3x3 (the implicit GEMM with AVX-512, else im2col) with a short last panel, 3x3 over two K blocks
# (im2col), dilation 2, a 7x7 stride-2 stem, one output channel; pointwise at 7x7 (49 columns, a last
# tile of 17: AVX-512's kern512's 17-column tile), at 13x5 (65: one tail column) and at 6x6 with an odd K (four tail
# columns); 3x3 at 7x7 over two K blocks (kern512's 17-column tile with a short last panel); a 7x7 stride-2 stem of 64
# filters (AVX-512: im2col, the implicit GEMM only takes up to three panels at stride 2).
PACKED_CONV = [(1, 16, 14, 14, 24, 1, 1, 1, 1), (2, 8, 9, 9, 30, 1, 1, 2, 1), (2, 8, 11, 13, 20, 3, 3, 1, 1),
               (1, 50, 9, 9, 10, 3, 3, 1, 1), (1, 6, 12, 12, 16, 3, 3, 1, 2), (1, 3, 23, 23, 8, 7, 7, 2, 1),
               (1, 4, 6, 6, 1, 3, 3, 1, 1), (1, 40, 7, 7, 33, 1, 1, 1, 1), (1, 40, 13, 5, 33, 1, 1, 1, 1),
               (1, 13, 6, 6, 30, 1, 1, 1, 1), (1, 48, 9, 9, 31, 3, 3, 1, 1), (1, 3, 29, 29, 64, 7, 7, 2, 1)]


@pytest.mark.parametrize("case", PACKED_CONV)
@pytest.mark.parametrize("mode,lo,hi", EPILOGUE_MODES[:3])
@pytest.mark.parametrize("native", [True, False])
def test_packed_conv2d_matches_reference(lib, case, mode, lo, hi, native):
    """Panels of the kernels' own height, and of another, misaligned (the compiler never makes them: still
    right)."""
    n, c, h, w, f, kh, kw, s, d = case
    rng = np.random.default_rng(sum(case) + mode)
    x, x_base = strided((n, c, h, w), "c", rng)
    wt = rng.standard_normal((f, c, kh, kw)).astype(np.float32)
    oh, ow = conv_out_size(h, kh, s, d), conv_out_size(w, kw, s, d)
    out, out_base = strided((n, f, oh, ow), "c", rng)
    bias = rng.standard_normal(f).astype(np.float32)
    res = rng.standard_normal((n, f, oh, ow)).astype(np.float32)
    _with_nans(res, rng)
    product = torch.nn.functional.conv2d(torch.from_numpy(x.copy()).double(), torch.from_numpy(wt).double(),
                                         stride=s, dilation=d).numpy()
    want = expected_epilogue(product, out.astype(np.float64), mode, lo, hi,
                             bias.astype(np.float64)[None, :, None, None], res.astype(np.float64))
    rows = lib.etmlir_uk_panel_rows() if native else 5
    assert native or rows != lib.etmlir_uk_panel_rows()
    _run_packed_conv(lib, x, x_base, wt, rows, out, out_base, s, d, epilogue(mode, lo, hi, bias, res),
                     misalign=0 if native else 3)
    _check(out, want, c * kh * kw)


def _run_winograd(lib, x, x_base, wt, rows, out, out_base, ep, misalign=0, tile=2):
    """The 3x3 stride-1 convolution by Winograd F(tile x tile, 3x3), its filter transformed as
    et-cpu-pack-weights does."""
    u, u_base = aligned_copy(winograd_filter(wt, rows, tile), misalign)
    dx, du, do = descriptor(x, x_base), descriptor(u, u_base), descriptor(out, out_base)
    lib._mlir_ciface_etmlir_uk_conv2d_winograd_ep(ctypes.byref(dx), ctypes.byref(du), ctypes.byref(do), ctypes.byref(ep))


# (n, c, h, w, f, layout) of the padded input: output sizes that are and are not multiples of the tile (a
# last tile partly outside), ResNet-18's first stage, a K of two blocks (512 channels) with fewer tiles
# than a panel, strided input and output (the input copied to unit column stride), one channel in and
# out, a 1x1 output, more than one 16-tile vector per tile row (F(4x4) on AVX-512).
WINOGRAD = [(1, 32, 10, 10, 32, "c"), (2, 40, 11, 13, 36, "c"), (1, 64, 58, 58, 64, "c"), (1, 512, 9, 9, 512, "c"),
            (1, 33, 7, 9, 47, "s"), (1, 1, 5, 6, 1, "c"), (1, 5, 3, 3, 2, "s"), (1, 20, 6, 150, 24, "c")]


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("case", WINOGRAD)
@pytest.mark.parametrize("mode,lo,hi", EPILOGUE_MODES)
@pytest.mark.parametrize("native", [True, False])
def test_winograd_conv2d_matches_reference(lib, tile, case, mode, lo, hi, native):
    """F(2x2, 3x3) and F(4x4, 3x3) against the float64 convolution under every epilogue; with the kernels'
    own panel height, and another, misaligned (the compiler never makes it: repacked, still right). The
    usual tolerance holds for both (F(4x4) comes within a third of it at 512 channels)."""
    n, c, h, w, f, layout = case
    rng = np.random.default_rng(sum(case[:5]) + mode)
    x, x_base = strided((n, c, h, w), layout, rng)
    wt = rng.standard_normal((f, c, 3, 3)).astype(np.float32)
    out, out_base = strided((n, f, h - 2, w - 2), layout, rng)
    bias = rng.standard_normal(f).astype(np.float32)
    res = rng.standard_normal((n, f, h - 2, w - 2)).astype(np.float32)
    _with_nans(res, rng)
    product = torch.nn.functional.conv2d(torch.from_numpy(x.copy()).double(), torch.from_numpy(wt).double()).numpy()
    want = expected_epilogue(product, out.astype(np.float64), mode, lo, hi,
                             bias.astype(np.float64)[None, :, None, None], res.astype(np.float64))
    rows = lib.etmlir_uk_panel_rows() if native else 5
    _run_winograd(lib, x, x_base, wt, rows, out, out_base, epilogue(mode, lo, hi, bias, res), 0 if native else 3,
                  tile)
    _check(out, want, c * 9)


# (n, c, h, w, f, kh, kw, stride, output layout): pointwise (the input as B), 3x3 (the implicit GEMM
# with AVX-512, else im2col), a reduction over two K blocks (im2col), a strided output (row-wise
# epilogue), MobileNetV2's first layer.
EP_CONV = [(1, 16, 14, 14, 24, 1, 1, 1, "c"), (2, 8, 11, 13, 20, 3, 3, 1, "c"), (1, 50, 9, 9, 10, 3, 3, 1, "c"),
           (1, 6, 10, 9, 8, 3, 3, 1, "s"), (1, 3, 33, 33, 32, 3, 3, 2, "c")]


@pytest.mark.parametrize("case", EP_CONV)
@pytest.mark.parametrize("mode,lo,hi", EPILOGUE_MODES)
def test_conv2d_epilogue_matches_reference(lib, case, mode, lo, hi):
    n, c, h, w, f, kh, kw, s, layout = case
    rng = np.random.default_rng(sum(case[:8]) + mode)
    x, x_base = strided((n, c, h, w), "c", rng)
    wt, w_base = strided((f, c, kh, kw), "c", rng)
    oh, ow = conv_out_size(h, kh, s, 1), conv_out_size(w, kw, s, 1)
    out, out_base = strided((n, f, oh, ow), layout, rng)
    bias = rng.standard_normal(f).astype(np.float32)
    res = rng.standard_normal((n, f, oh, ow)).astype(np.float32)
    _with_nans(res, rng)
    product = torch.nn.functional.conv2d(torch.from_numpy(x.copy()).double(), torch.from_numpy(wt.copy()).double(),
                                         stride=s).numpy()
    want = expected_epilogue(product, out.astype(np.float64), mode, lo, hi,
                             bias.astype(np.float64)[None, :, None, None], res.astype(np.float64))
    ep = epilogue(mode, lo, hi, bias, res)
    dx, dw, do = descriptor(x, x_base), descriptor(wt, w_base), descriptor(out, out_base)
    lib._mlir_ciface_etmlir_uk_conv2d_nchw_fchw_ep(ctypes.byref(dx), ctypes.byref(dw), ctypes.byref(do), s, s, 1, 1,
                                                   ctypes.byref(ep))
    _check(out, want, c * kh * kw)


@pytest.mark.parametrize("case", [(1, 32, 18, 18, 3, 1), (2, 5, 35, 36, 3, 2), (1, 4, 11, 13, 5, 1)])
@pytest.mark.parametrize("mode,lo,hi", EPILOGUE_MODES)
def test_depthwise_epilogue_matches_reference(lib, case, mode, lo, hi):
    n, c, h, w, k, s = case
    rng = np.random.default_rng(sum(case) + mode)
    x, x_base = strided((n, c, h, w), "c", rng)
    wt, w_base = strided((c, k, k), "c", rng)
    oh, ow = conv_out_size(h, k, s, 1), conv_out_size(w, k, s, 1)
    out, out_base = strided((n, c, oh, ow), "c", rng)
    bias = rng.standard_normal(c).astype(np.float32)
    res = rng.standard_normal((n, c, oh, ow)).astype(np.float32)
    _with_nans(res, rng)
    product = torch.nn.functional.conv2d(torch.from_numpy(x.copy()).double(),
                                         torch.from_numpy(wt.copy()).double()[:, None], stride=s, groups=c).numpy()
    want = expected_epilogue(product, out.astype(np.float64), mode, lo, hi,
                             bias.astype(np.float64)[None, :, None, None], res.astype(np.float64))
    ep = epilogue(mode, lo, hi, bias, res)
    dx, dw, do = descriptor(x, x_base), descriptor(wt, w_base), descriptor(out, out_base)
    lib._mlir_ciface_etmlir_uk_depthwise_conv2d_nchw_chw_ep(ctypes.byref(dx), ctypes.byref(dw), ctypes.byref(do), s, s,
                                                            1, 1, ctypes.byref(ep))
    _check(out, want, k * k)


# (n, c, h, w, k, stride, pad): an unpadded input the kernel pads itself (MobileNetV2's 3x3 stride 1
# and 2, an odd plane, a 5x5 kernel with padding 2, a plane narrower than a vector); pad is all four sides
# or (top, bottom, left, right): TF "same" padding pads only the bottom and right at stride 1. The AVX-512
# 3x3 kernels read the padding as zeros (no padded copy), every load under its mask: planes of several
# vectors a row, inner ones clear of both edges, the last partial (56, 112 and 37 wide; 17: two vectors,
# both at an edge). Planes of rows up to 8 wide and up to 256 outputs (7x7, 8x5, 33x6) run as flat arrays, 16 outputs
# a vector across rows; 50x7 is past that. A left padding of 1 takes the sliding passes (each row's vectors
# loaded once, the taps rotated from them): right paddings of 2 and 3 at both strides, and a row of 530
# (a second column block, whose carried column is the one left of it). Other windows at stride 1 take bands
# of output rows in registers (dw_plane_rows): ConvNeXt's 7x7 with padding 3 at 56x56, 14x14 and 7x7 (rows of
# one vector: bands of 8 rows), a window larger than the plane, 5x5 rows of 70 and 100 (bands of 4 vectors,
# then 1 and 3 left), 2x4 and 1x9 windows, and a 17x17 window (past the bands' limit: the generic loop).
@pytest.mark.parametrize("case", [(1, 3, 56, 56, 7, 1, 3), (1, 4, 14, 14, 7, 1, 3), (2, 3, 7, 7, 7, 1, 3),
                                  (1, 2, 3, 5, 7, 1, 3), (1, 2, 9, 70, 5, 1, 2), (1, 2, 6, 100, 5, 1, (2, 1, 2, 3)),
                                  (1, 3, 11, 19, (2, 4), 1, (0, 1, 1, 2)), (1, 2, 5, 40, (1, 9), 1, (0, 0, 4, 4)),
                                  (1, 2, 20, 21, 17, 1, 8)])
@pytest.mark.parametrize("mode,lo,hi", EPILOGUE_MODES[:3])
def test_depthwise_rows_absorb_padding(lib, case, mode, lo, hi):
    _check_padded_depthwise(lib, case, mode, lo, hi)


@pytest.mark.parametrize("case", [(1, 32, 16, 16, 3, 1, 1), (2, 5, 33, 34, 3, 2, 1), (1, 4, 11, 13, 5, 1, 2),
                                  (1, 3, 7, 5, 3, 2, 1), (1, 8, 9, 9, 3, 1, 0), (1, 8, 9, 9, 3, 1, (0, 1, 0, 1)),
                                  (1, 6, 10, 12, 3, 2, (0, 1, 0, 1)), (1, 4, 8, 9, 3, 1, (0, 2, 1, 0)),
                                  (1, 3, 56, 56, 3, 1, 1), (1, 2, 112, 112, 3, 2, 1), (1, 2, 40, 37, 3, 2, 1),
                                  (1, 3, 20, 37, 3, 1, 1), (1, 2, 9, 17, 3, 1, 1), (1, 2, 6, 35, 3, 2, (1, 0, 1, 0)),
                                  (1, 5, 7, 7, 3, 1, 1), (2, 3, 8, 5, 3, 1, 1), (1, 4, 33, 6, 3, 1, 1),
                                  (1, 2, 50, 7, 3, 1, 1), (1, 3, 10, 37, 3, 1, (1, 1, 1, 2)),
                                  (1, 3, 11, 38, 3, 2, (1, 2, 1, 2)), (1, 2, 5, 530, 3, 1, (1, 1, 1, 3))])
@pytest.mark.parametrize("mode,lo,hi", EPILOGUE_MODES[:3])
def test_depthwise_absorbs_padding(lib, case, mode, lo, hi):
    _check_padded_depthwise(lib, case, mode, lo, hi)


# The AVX-512 3x3 kernels build their 4-row passes once per epilogue kind: none (the sums added to the
# output), bounds only after an init (each bound keeping NaN or turning it into the bound; none, or one
# side only), and the general one. NaNs in the input land in the sums, so each bound's NaN rule shows.
# Planes: 9 and 11 rows (the last rows by a 4-row pass that overlaps the one before), 3 rows (fewer than
# a pass), rows of 1,100 and 750 outputs (column blocks of 32 vectors), and rows of 4,200 (wider than the
# zero row: a padded copy).
BOUND_KINDS = [(0, 0.0, 0.0), (INIT_BIAS, 0.0, 0.0), (INIT_ZERO | (KEEP_NAN << 4), 0.0, 0.0),
               (INIT_BIAS | (NAN_TO_BOUND << 4) | (KEEP_NAN << 6), 0.0, 6.0),
               (INIT_BIAS | (KEEP_NAN << 4) | (NAN_TO_BOUND << 6), -0.5, 0.5),
               (INIT_ZERO | (NAN_TO_BOUND << 4) | (NAN_TO_BOUND << 6), -1.0, 1.0),
               (INIT_OUTPUT | (NAN_TO_BOUND << 4), 0.0, 0.0)]


@pytest.mark.parametrize("case", [(1, 8, 9, 9, 3, 1, 1), (1, 2, 21, 37, 3, 2, 1), (1, 2, 6, 35, 3, 2, (1, 0, 1, 0)),
                                  (1, 2, 6, 1100, 3, 1, 1), (1, 2, 7, 1500, 3, 2, 1), (1, 1, 3, 4200, 3, 1, 1)])
@pytest.mark.parametrize("mode,lo,hi", BOUND_KINDS)
def test_depthwise_epilogue_kinds(lib, case, mode, lo, hi):
    _check_padded_depthwise(lib, case, mode, lo, hi, nans=True)


def _check_padded_depthwise(lib, case, mode, lo, hi, nans=False):
    n, c, h, w, k, s, pad = case
    kh, kw = (k, k) if isinstance(k, int) else k
    top, bottom, left, right = (pad,) * 4 if isinstance(pad, int) else pad
    rng = np.random.default_rng(h + w + kh + kw + c + mode)
    x, x_base = strided((n, c, h, w), "c", rng)
    if nans:
        x[..., rng.integers(0, h, 3), rng.integers(0, w, 3)] = np.nan
    wt, w_base = strided((c, kh, kw), "c", rng)
    oh, ow = conv_out_size(h + top + bottom, kh, s, 1), conv_out_size(w + left + right, kw, s, 1)
    out, out_base = strided((n, c, oh, ow), "c", rng)
    bias = rng.standard_normal(c).astype(np.float32)
    res = rng.standard_normal((n, c, oh, ow)).astype(np.float32)
    padded = torch.nn.functional.pad(torch.from_numpy(x.copy()).double(), (left, right, top, bottom))
    product = torch.nn.functional.conv2d(padded, torch.from_numpy(wt.copy()).double()[:, None], stride=s,
                                         groups=c).numpy()
    want = expected_epilogue(product, out.astype(np.float64), mode, lo, hi,
                             bias.astype(np.float64)[None, :, None, None], res.astype(np.float64))
    ep = epilogue(mode, lo, hi, bias, res)
    ep.pad_top, ep.pad_left = top, left
    dx, dw, do = descriptor(x, x_base), descriptor(wt, w_base), descriptor(out, out_base)
    lib._mlir_ciface_etmlir_uk_depthwise_conv2d_nchw_chw_ep(ctypes.byref(dx), ctypes.byref(dw), ctypes.byref(do), s, s,
                                                            1, 1, ctypes.byref(ep))
    _check(out, want, kh * kw)


# ---------------------------------------------------------------------------------------------
# the inverted-residual block: expand (1x1), depthwise, project (1x1) in one call


# (n, c_in, c_wide, c_out, h, w, k, stride, pad (top, bottom, left, right)). From 1 MiB of wide activations
# the kernel runs over bands of output rows: stride 1 and 2 (MobileNetV2's 3x3), a batch of two with odd
# sizes, a 5x5 window (dw_plane_rows over a padded copy of each band), TF "same" padding at
# stride 2 (none on top, one row below the image), planes narrower than a vector; below 1 MiB the three
# kernels one after the other.
INVERTED_RESIDUAL = [(1, 8, 64, 8, 64, 64, 3, 1, (1, 1, 1, 1)), (2, 5, 72, 7, 63, 61, 3, 2, (1, 1, 1, 1)),
                     (1, 6, 64, 6, 64, 66, 5, 1, (2, 2, 2, 2)), (1, 4, 64, 9, 65, 64, 3, 2, (0, 1, 0, 1)),
                     (1, 8, 512, 8, 40, 13, 3, 1, (1, 1, 1, 1)), (1, 6, 40, 6, 9, 11, 3, 1, (1, 1, 1, 1))]
RELU6_MODE = (INIT_BIAS | (NAN_TO_BOUND << 4) | (KEEP_NAN << 6), 0.0, 6.0)
# (expansion, depthwise, projection) epilogues: MobileNetV2's (ReLU6, ReLU6, bias + the block's input when the
# shapes allow); a SiLU expansion with its bias after, a hardtanh depthwise, a projection that accumulates
# into the output's old value.
IR_MODES = [(RELU6_MODE, RELU6_MODE, (INIT_BIAS | RESIDUAL, 0.0, 0.0)),
            ((INIT_ZERO | BIAS_AFTER | (SILU << ACT_SHIFT), 0.0, 0.0),
             (INIT_ZERO | BIAS_AFTER | (NAN_TO_BOUND << 4) | (NAN_TO_BOUND << 6), -1.5, 2.5),
             (INIT_OUTPUT | RESIDUAL, 0.0, 0.0))]


def _check_inverted_residual(lib, case, modes, rows=None, misalign=0):
    n, cin, cx, cout, h, w, k, s, (top, bottom, left, right) = case
    rng = np.random.default_rng(sum(case[:8]))
    x, x_base = strided((n, cin, h, w), "c", rng)
    w1 = rng.standard_normal((cx, cin, 1, 1)).astype(np.float32)
    wd, wd_base = strided((cx, k, k), "c", rng)
    w2 = (rng.standard_normal((cout, cx, 1, 1)) / 4).astype(np.float32)
    b1, b2, b3 = (rng.standard_normal(c).astype(np.float32) for c in (cx, cx, cout))
    oh, ow = conv_out_size(h + top + bottom, k, s, 1), conv_out_size(w + left + right, k, s, 1)
    out, out_base = strided((n, cout, oh, ow), "c", rng)
    # The residual: the block's input where the shapes match, else a tensor of the output's shape.
    res = x if (cin, h, w) == (cout, oh, ow) else rng.standard_normal((n, cout, oh, ow)).astype(np.float32)
    (m1, lo1, hi1), (m2, lo2, hi2), (m3, lo3, hi3) = modes
    f64 = lambda a: torch.from_numpy(np.ascontiguousarray(a)).double()  # noqa: E731
    y = expected_epilogue(torch.nn.functional.conv2d(f64(x), f64(w1)).numpy(), 0.0, m1, lo1, hi1,
                          b1.astype(np.float64)[None, :, None, None], None)
    y = torch.nn.functional.pad(f64(y), (left, right, top, bottom))
    y = expected_epilogue(torch.nn.functional.conv2d(y, f64(wd)[:, None], stride=s, groups=cx).numpy(), 0.0, m2,
                          lo2, hi2, b2.astype(np.float64)[None, :, None, None], None)
    want = expected_epilogue(torch.nn.functional.conv2d(f64(y), f64(w2)).numpy(), out.astype(np.float64), m3, lo3,
                             hi3, b3.astype(np.float64)[None, :, None, None], res.astype(np.float64))
    rows = rows or lib.etmlir_uk_panel_rows()
    p1, p1_base = aligned_copy(pack_rows(w1.reshape(cx, cin), rows), misalign)
    p2, p2_base = aligned_copy(pack_rows(w2.reshape(cout, cx), rows), misalign)
    e1, e2, e3 = epilogue(m1, lo1, hi1, b1, None), epilogue(m2, lo2, hi2, b2, None), epilogue(m3, lo3, hi3, b3, res)
    e2.pad_top, e2.pad_left = top, left
    dx, dp1, dwd = descriptor(x, x_base), descriptor(p1, p1_base), descriptor(wd, wd_base)
    dp2, do = descriptor(p2, p2_base), descriptor(out, out_base)
    lib._mlir_ciface_etmlir_uk_inverted_residual_ep(ctypes.byref(dx), ctypes.byref(dp1), ctypes.byref(e1),
                                                    ctypes.byref(dwd), s, s, ctypes.byref(e2), ctypes.byref(dp2),
                                                    ctypes.byref(do), ctypes.byref(e3))
    # Three products in a row: the wide sums (cx terms of values the earlier steps rounded) set the tolerance.
    np.testing.assert_allclose(out, want, **tol(cx * k * k))


@pytest.mark.parametrize("case", INVERTED_RESIDUAL)
@pytest.mark.parametrize("modes", IR_MODES)
def test_inverted_residual_matches_reference(lib, case, modes):
    _check_inverted_residual(lib, case, modes)


def test_inverted_residual_with_other_panels_is_still_right(lib):
    """Panels of another height, misaligned (the compiler never makes them): the three kernels in turn."""
    _check_inverted_residual(lib, INVERTED_RESIDUAL[0], IR_MODES[0], rows=5, misalign=3)


@pytest.mark.parametrize("threads,chunks", [(2, 2), (3, 3), (4, 2)])
def test_inverted_residual_split_over_threads(lib, threads, chunks):
    """Runs of bands as tasks (each starting with the rows it shares with the run before, expanded again),
    run last first: the same result as one thread."""
    calls: list[int] = []
    pool = reversed_pool(chunks, calls)
    lib.etmlir_cpu_set_parallel(ctypes.cast(pool, ctypes.c_void_p), None, threads)
    for case in INVERTED_RESIDUAL[:2]:
        _check_inverted_residual(lib, case, IR_MODES[0])
    assert calls and min(calls) >= 2


# Blocks below 1 MiB with threads: each task expands whole panels of the wide channels, runs their
# depthwise planes and a partial projection over them; the partials are added and finished after. A
# batch of two at stride 2, the block's input as residual (both epilogue sets: MobileNetV2's, and a
# projection that accumulates into the output), two panels (fewer tasks than threads at 3 and 4), and
# a block of one panel (no split).
SMALL_BLOCKS = [(2, 5, 72, 7, 13, 11, 3, 2, (1, 1, 1, 1)), (1, 6, 40, 6, 9, 11, 3, 1, (1, 1, 1, 1)),
                (1, 4, 20, 5, 8, 8, 3, 1, (1, 1, 1, 1)), (1, 3, 5, 3, 6, 6, 3, 1, (1, 1, 1, 1))]


@pytest.mark.parametrize("threads,chunks", [(2, 2), (3, 3), (4, 2)])
@pytest.mark.parametrize("modes", IR_MODES)
def test_small_inverted_residual_split_over_channels(lib, threads, chunks, modes):
    calls: list[int] = []
    pool = reversed_pool(chunks, calls)
    lib.etmlir_cpu_set_parallel(ctypes.cast(pool, ctypes.c_void_p), None, threads)
    for case in SMALL_BLOCKS:
        _check_inverted_residual(lib, case, modes)
    assert calls and min(calls) >= 2


# ---------------------------------------------------------------------------------------------
# the shim: a failed allocation fails the run


ALLOCATION_DRIVER = r"""
#include <stdint.h>
#include <stdio.h>
#include "etmlir_cpu_payload.h"
int etmlir_cpu_run(void (*entry)(void**), void** args);
static int reached;
static void entry(void** args) {
  (void)args;
  etmlir_cpu_region_begin(3, 42);
  float* p = (float*)_mlir_memref_to_llvm_alloc((size_t)1 << 62);
  p[0] = 1.0f; /* what generated code does next: never reached */
  reached = 1;
}
int main(void) {
  int rc = etmlir_cpu_run(entry, NULL);
  void* outside = _mlir_memref_to_llvm_alloc((size_t)1 << 62);
  printf("rc=%d handle=%d reached=%d outside=%s failure=%s\n", rc, (int)etmlir_cpu_failed_handle(), reached,
         outside ? "pointer" : "null", etmlir_cpu_failure());
  return 0;
}
"""


def test_a_failed_allocation_fails_the_run(builds, tmp_path):
    """Neither the arena nor the heap has the bytes (EfficientNet's pooler once asked for 8 GB): the run
    returns a failure naming it, against the edge op of the region it was in, instead of the generated code
    writing through a null pointer; outside a run the allocation returns NULL, as malloc does."""
    so = builds["x86-64-v2"]
    driver, exe = tmp_path / "driver.c", tmp_path / "driver"
    driver.write_text(ALLOCATION_DRIVER)
    subprocess.run([link.compiler(), "-O1", "-I", str(SOURCES[0].parent), "-o", str(exe), str(driver), str(so),
                    f"-Wl,-rpath,{so.parent}"], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.strip()
    assert out == (f"rc=1 handle=42 reached=0 outside=null "
                   f"failure=out of memory: could not allocate {1 << 62} bytes"), out


# ---------------------------------------------------------------------------------------------
# fused attention (attention.c), at every ISA level: its row blocks are 8 query rows on AVX-512 and 4
# elsewhere, and each row's max is a vector max that watches for NaN


def _attention_reference(q, k, v, causal: bool) -> np.ndarray:
    with torch.no_grad():
        out = torch.nn.functional.scaled_dot_product_attention(
            *(torch.from_numpy(t.copy()).double() for t in (q, k, v)), is_causal=causal)
    return out.numpy()


@pytest.mark.parametrize("threads,chunks", [(1, 1), (2, 2), (3, 2)])
@pytest.mark.parametrize("batches,rows,keys,depth,causal", [
    (4, 150, 150, 64, False),  # an audio encoder's long unmasked rows: one unit per batch at 1 thread
    (1, 201, 201, 24, True),   # one head split into units, the last one short
    (3, 13, 37, 20, False),    # fewer rows than a block; keys not a multiple of the vector
])
def test_attention_matches_torch(lib, threads, chunks, batches, rows, keys, depth, causal):
    calls: list[int] = []
    pool = reversed_pool(chunks, calls)
    lib.etmlir_cpu_set_parallel(ctypes.cast(pool, ctypes.c_void_p), None, threads)
    rng = np.random.default_rng(rows + keys)
    q, q_base = strided((batches, rows, depth), "c", rng)
    k, k_base = strided((batches, keys, depth), "t" if causal else "c", rng)  # keys transposed too
    v, v_base = strided((batches, keys, depth), "c", rng)
    out, out_base = strided((batches, rows, depth), "c", rng, fill=np.nan)
    descriptors = [descriptor(*pair) for pair in ((q, q_base), (k, k_base), (v, v_base), (out, out_base))]
    lib._mlir_ciface_etmlir_uk_attention(*map(ctypes.byref, descriptors), int(causal), 1.0 / math.sqrt(depth))
    np.testing.assert_allclose(out, _attention_reference(q, k, v, causal), rtol=1e-4, atol=1e-5)
    large = 2 * batches * rows * keys * 2 * depth >= 1 << 21  # attention.c's ATT_PAR_MIN_FLOPS
    assert bool(calls) == (threads > 1 and large)


def test_attention_row_with_a_nan_is_nan_and_others_are_not(lib):
    rng = np.random.default_rng(5)
    q, q_base = strided((1, 40, 16), "c", rng)
    k, k_base = strided((1, 70, 16), "c", rng)
    v, v_base = strided((1, 70, 16), "c", rng)
    out, out_base = strided((1, 40, 16), "c", rng, fill=0.0)
    q[0, 9, 3] = np.nan  # row 9's every score is NaN
    k[0, 66, 0] = np.nan  # key 66 (in the scalar tail past the last full vector): every row's score is NaN
    descriptors = [descriptor(*pair) for pair in ((q, q_base), (k, k_base), (v, v_base), (out, out_base))]
    lib._mlir_ciface_etmlir_uk_attention(*map(ctypes.byref, descriptors), 1, 0.25)
    # Causal: rows before 66 never read key 66, so only row 9 is NaN among them; rows 66.. see it.
    assert np.isnan(out[0, 9]).all()
    assert not np.isnan(np.delete(out[0, :40], 9, axis=0)).any()
    q[0, 9, 3] = 0.0
    lib._mlir_ciface_etmlir_uk_attention(*map(ctypes.byref, descriptors), 0, 0.25)
    assert np.isnan(out).all()  # unmasked: key 66's NaN reaches every row, as in eager


def _u8_descriptor(array: np.ndarray):
    """MLIR memref descriptor of a contiguous uint8 array (a boolean mask), strides in elements."""
    assert array.dtype == np.uint8 and array.flags.c_contiguous

    class Desc(ctypes.Structure):
        _fields_ = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_int64),
                    ("sizes", ctypes.c_int64 * array.ndim), ("strides", ctypes.c_int64 * array.ndim)]

    d = Desc()
    d.allocated = d.aligned = array.ctypes.data
    d.offset = 0
    for i in range(array.ndim):
        d.sizes[i] = array.shape[i]
        d.strides[i] = array.strides[i]
    return d


@pytest.mark.parametrize("threads,chunks", [(1, 1), (2, 2), (3, 2)])
def test_attention_bool_mask_reads_no_key_past_a_rows_last_true(lib, threads, chunks):
    """A boolean mask's trailing false keys are never computed (a causal mask built in the graph, as
    transformers' LLaMA does; a batch's padding): rows of one block that end at different keys, holes
    before a row's end, a row that sees no key (zeros, as eager's safe softmax), and NaN in k and v past
    every row's end, which no row may read."""
    calls: list[int] = []
    pool = reversed_pool(chunks, calls)
    lib.etmlir_cpu_set_parallel(ctypes.cast(pool, ctypes.c_void_p), None, threads)
    lib._mlir_ciface_etmlir_uk_attention_bmask.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64, ctypes.c_float]
    rng = np.random.default_rng(11)
    batches, rows, keys, depth = 3, 37, 70, 20
    q, q_base = strided((batches, rows, depth), "c", rng)
    k, k_base = strided((batches, keys, depth), "c", rng)
    v, v_base = strided((batches, keys, depth), "c", rng)
    out, out_base = strided((batches, rows, depth), "c", rng, fill=np.nan)
    ends = rng.integers(1, 60, size=(batches, rows))
    ends[1] = np.arange(rows) + 1  # causal
    ends[2, 5] = 0  # sees nothing
    mask = np.zeros((batches, rows, keys), np.uint8)
    for b in range(batches):
        for i in range(rows):
            mask[b, i, :ends[b, i]] = rng.random(ends[b, i]) > 0.3
            mask[b, i, max(ends[b, i] - 1, 0)] = ends[b, i] > 0
    k[:, 62:] = np.nan  # past every row's end
    v[:, 62:] = np.nan
    scale = 1.0 / math.sqrt(depth)
    descriptors = [descriptor(*pair) for pair in ((q, q_base), (k, k_base), (v, v_base))]
    lib._mlir_ciface_etmlir_uk_attention_bmask(*map(ctypes.byref, descriptors), ctypes.byref(_u8_descriptor(mask)),
                                               ctypes.byref(descriptor(out, out_base)), 0, scale)
    want = np.zeros((batches, rows, depth))
    for b in range(batches):
        for i in range(rows):
            seen = mask[b, i].astype(bool)
            if seen.any():
                s = scale * (k[b][seen].astype(np.float64) @ q[b, i].astype(np.float64))
                w = np.exp(s - s.max())
                want[b, i] = (w / w.sum()) @ v[b][seen].astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    assert (out[2, 5] == 0).all()
