"""The cpu backend's microkernels against torch eager, one thread, on the shapes the zoo models run.

    .venv/bin/python bench/cpu_ukernels.py [--march x86-64-v3] [--filter pointwise]

Builds runtime/backends/cpu/payload_c/*.c for the host (or --march), calls each microkernel
through ctypes on memref descriptors over numpy arrays, and prints ms, GFLOP/s and the ratio
torch_ms / ours_ms (> 1: ours is faster). Weights are laid out as the compiler hands them over:
a linear layer's B is the transposed [N, K] weight (strides [1, K]).
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch_mlir.runtime.np_to_memref import get_ranked_memref_descriptor

from etmlir.backends.cpu import link
from etmlir.backends.cpu.target import host



def build(march: str, out_dir: Path) -> ctypes.CDLL:
    """The microkernels as payloads get them (the compiler's sources, compiler and flags) at `march`."""
    so = out_dir / f"payload_{march}.so"
    srcs = [str(link.SOURCES / name) for name in link.C_SOURCES]
    subprocess.run([link.compiler(), *link.c_flags(march), "-shared", "-Wl,-Bsymbolic", "-o", str(so), *srcs],
                   check=True)
    lib = ctypes.CDLL(str(so))
    lib.etmlir_cpu_set_arena.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    lib.etmlir_cpu_heap_fallbacks.restype = ctypes.c_uint64
    lib.etmlir_cpu_arena_peak.restype = ctypes.c_uint64
    for name in ("matmul", "batch_matmul"):
        getattr(lib, f"_mlir_ciface_etmlir_uk_{name}").argtypes = [ctypes.c_void_p] * 3
    for name in ("conv2d_nchw_fchw", "depthwise_conv2d_nchw_chw"):
        getattr(lib, f"_mlir_ciface_etmlir_uk_{name}").argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 4
    return lib


def descriptor(arr: np.ndarray):
    """MLIR memref descriptor over `arr` (kept alive by the descriptor)."""
    d = get_ranked_memref_descriptor(arr)
    d.keepalive = arr
    return d


def best_ms(fn, budget_s: float = 0.15) -> float:
    """Best per-call time over repeated batches, in this thread's CPU time (both sides run on the
    calling thread), so that other processes on the machine do not count against either."""
    clock = time.thread_time
    fn()
    t0 = clock()
    fn()
    once = max(clock() - t0, 1e-7)
    inner = max(1, int(0.005 / once))
    best = float("inf")
    deadline = time.perf_counter() + budget_s
    while True:
        t0 = clock()
        for _ in range(inner):
            fn()
        best = min(best, (clock() - t0) / inner)
        if time.perf_counter() > deadline:
            return best * 1e3


def rand(*shape) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


def matmul_case(m, k, n, group="matmul"):
    """A linear layer: x[m, k] @ W[n, k].T, B handed over as the transposed weight view."""
    a, w = rand(m, k), rand(n, k)
    c = np.zeros((m, n), np.float32)
    ta, tw = torch.from_numpy(a), torch.from_numpy(w)
    descs = (descriptor(a), descriptor(w.T), descriptor(c))

    def ours(lib):
        f = lib._mlir_ciface_etmlir_uk_matmul
        ptrs = [ctypes.addressof(d) for d in descs]
        return lambda: f(*ptrs)

    return (group, f"M={m} K={k} N={n}", 2 * m * k * n, ours, lambda: torch.nn.functional.linear(ta, tw))


def bmm_case(heads, m, k, n, b_transposed, label):
    a = rand(heads, m, k)
    b = rand(heads, n, k).transpose(0, 2, 1) if b_transposed else rand(heads, k, n)  # q @ k.T: a strided view
    c = np.zeros((heads, m, n), np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b) if not b_transposed else torch.from_numpy(
        np.ascontiguousarray(b.transpose(0, 2, 1))).transpose(1, 2)
    descs = (descriptor(a), descriptor(b), descriptor(c))

    def ours(lib):
        f = lib._mlir_ciface_etmlir_uk_batch_matmul
        ptrs = [ctypes.addressof(d) for d in descs]
        return lambda: f(*ptrs)

    return ("batch_matmul", f"{heads}x[{m}x{k}]@[{k}x{n}] {label}", 2 * heads * m * k * n, ours,
            lambda: torch.bmm(ta, tb))


def cases():
    """(group, label, flops, ours(lib) -> callable, torch callable)."""
    for m in (1, 64, 256):
        for k, n in [(384, 1152), (384, 384), (384, 1536), (1536, 384), (384, 65)]:
            yield matmul_case(m, k, n)
    for t in (64, 256):
        yield bmm_case(6, t, 64, t, True, "q@kT")
        yield bmm_case(6, t, t, 64, False, "p@v")
    pointwise = [(32, 16, 112), (16, 96, 112), (24, 144, 56), (144, 24, 56), (32, 192, 28), (64, 384, 14),
                 (96, 576, 14), (160, 960, 7), (320, 1280, 7)]
    for c_in, f, hw in pointwise:
        yield conv_case("pointwise", c_in, f, hw, 1, 1)
    yield conv_case("conv", 3, 32, 225, 3, 2)
    for ch, hw, s in [(32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1), (384, 14, 1),
                      (576, 14, 2), (960, 7, 1)]:
        yield depthwise_case(ch, hw, s)


def mobilenet_v2_layers():
    """(case, repeat) for every conv and the classifier of MobileNetV2 at 224x224, batch 1."""
    layers = [(conv_case("conv", 3, 32, 225, 3, 2), 1), (depthwise_case(32, 112, 1), 1),
              (conv_case("pointwise", 32, 16, 112, 1, 1), 1)]
    c_in, hw = 16, 112
    for t, c, n, s in [(6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = c_in * t
            layers.append((conv_case("pointwise", c_in, hidden, hw, 1, 1), 1))
            layers.append((depthwise_case(hidden, hw, stride), 1))
            hw //= stride
            layers.append((conv_case("pointwise", hidden, c, hw, 1, 1), 1))
            c_in = c
    layers.append((conv_case("pointwise", 320, 1280, 7, 1, 1), 1))
    layers.append((matmul_case(1, 1280, 1000), 1))
    return layers


def nanogpt_layers(t: int):
    """(case, repeat) for the GEMMs of nanoGPT (6 layers, 6 heads, d=384, vocab 65) at sequence length t."""
    return [(matmul_case(t, 384, 1152), 6), (bmm_case(6, t, 64, t, True, "q@kT"), 6),
            (bmm_case(6, t, t, 64, False, "p@v"), 6), (matmul_case(t, 384, 384), 6), (matmul_case(t, 384, 1536), 6),
            (matmul_case(t, 1536, 384), 6), (matmul_case(t, 384, 65), 1)]


def conv_case(group, c_in, f, h, k, s):
    x, wt = rand(1, c_in, h, h), rand(f, c_in, k, k)
    o = (h - k) // s + 1
    out = np.zeros((1, f, o, o), np.float32)
    tx, tw = torch.from_numpy(x), torch.from_numpy(wt)
    descs = (descriptor(x), descriptor(wt), descriptor(out))

    def ours(lib):
        fn = lib._mlir_ciface_etmlir_uk_conv2d_nchw_fchw
        ptrs = [ctypes.addressof(d) for d in descs]
        return lambda: fn(*ptrs, s, s, 1, 1)

    label = f"{c_in}->{f} @{h}" if k == 1 else f"{c_in}->{f} {k}x{k} s{s} @{h} (padded)"
    return (group, label, 2 * f * c_in * k * k * o * o, ours, lambda: torch.nn.functional.conv2d(tx, tw, stride=s))


def depthwise_case(ch, hw, s):
    # The compiler pads first, so the op sees a padded input and no padding.
    h = hw + 2
    x, wt = rand(1, ch, h, h), rand(ch, 3, 3)
    o = (h - 3) // s + 1
    out = np.zeros((1, ch, o, o), np.float32)
    tx, tw = torch.from_numpy(x), torch.from_numpy(wt[:, None].copy())
    descs = (descriptor(x), descriptor(wt), descriptor(out))

    def ours(lib):
        fn = lib._mlir_ciface_etmlir_uk_depthwise_conv2d_nchw_chw
        ptrs = [ctypes.addressof(d) for d in descs]
        return lambda: fn(*ptrs, s, s, 1, 1)

    return ("depthwise", f"{ch} 3x3 s{s} @{hw}", 2 * ch * 9 * o * o, ours,
            lambda: torch.nn.functional.conv2d(tx, tw, stride=s, groups=ch))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--march", default=host().march)
    parser.add_argument("--filter", default="", help="only rows whose group or label contains this ('model': only "
                        "the whole-model sums)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(args.march, Path(tmp))
        arena = np.zeros(256 << 20, np.uint8)
        lib.etmlir_cpu_set_arena(arena.ctypes.data, arena.nbytes)
        print(f"march={args.march}, 1 thread, torch {torch.__version__}")
        print(f"{'kernel':<13} {'shape':<30} {'ours ms':>9} {'GF/s':>7} {'torch ms':>9} {'GF/s':>7} {'ratio':>6}")
        ratios: dict[str, list[float]] = {}
        for group, label, flops, ours, theirs in cases():
            if args.filter and (args.filter == "model" or (args.filter not in group and args.filter not in label)):
                continue
            ours_ms = best_ms(ours(lib))
            with torch.no_grad():
                torch_ms = best_ms(theirs)
            ratio = torch_ms / ours_ms
            ratios.setdefault(group, []).append(ratio)
            print(f"{group:<13} {label:<30} {ours_ms:9.4f} {flops / ours_ms / 1e6:7.1f} {torch_ms:9.4f} "
                  f"{flops / torch_ms / 1e6:7.1f} {ratio:6.2f}")
        if not args.filter or args.filter == "model":
            for name, layers in [("MobileNetV2", mobilenet_v2_layers()), ("nanoGPT T=64", nanogpt_layers(64))]:
                ours_ms = torch_ms = flops = 0.0
                for (_, _, layer_flops, ours, theirs), repeat in layers:
                    ours_ms += repeat * best_ms(ours(lib), 0.05)
                    with torch.no_grad():
                        torch_ms += repeat * best_ms(theirs, 0.05)
                    flops += repeat * layer_flops
                label = f"{name} ({sum(r for _, r in layers)} calls)"
                print(f"{'model':<13} {label:<30} {ours_ms:9.4f} {flops / ours_ms / 1e6:7.1f} {torch_ms:9.4f} "
                      f"{flops / torch_ms / 1e6:7.1f} {torch_ms / ours_ms:6.2f}")
        if ratios:
            print("geomean ratio (torch ms / ours ms): " +
                  ", ".join(f"{g} {np.exp(np.mean(np.log(r))):.2f}" for g, r in ratios.items()))
        print(f"arena peak {lib.etmlir_cpu_arena_peak() / 2**20:.2f} MiB, heap fallbacks "
              f"{lib.etmlir_cpu_heap_fallbacks()}")


if __name__ == "__main__":
    main()
