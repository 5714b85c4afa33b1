"""The `cpu` backend end to end: partition, MLIR codegen, native payload, runtime, against PyTorch eager.

Every zoo model is delegated to `cpu` (the ops it takes; the rest stays on
portable kernels), saved as a `.pte`, run on the C++ runtime and compared
with eager. Tolerances: the microkernels accumulate in a different order
than PyTorch (blocked K loops, FMA), so they are looser than bit-exactness
but tight for float32: seed CNN and MLP atol 1e-4 / rtol 1e-4, MobileNetV2
atol 2e-3 / rtol 1e-3 (53 layers; logits of magnitude ~10), nanoGPT atol
1e-3 / rtol 1e-3.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import etmlir
import etmlir.runtime as rt
from etmlir import backends, models
from etmlir.backends import payload_header
from etmlir.backends.cpu import payload as cpu_payload
from etmlir.backends.cpu.target import FEATURE_BITS, host
from etmlir.delegation.partitioner import is_delegate_call
from etmlir.devtools import delegation_info
from etmlir.executable import pte as pte_file

TOLERANCES = {  # name -> (atol, rtol)
    "seed_cnn": (1e-4, 1e-4),
    "mlp": (1e-4, 1e-4),
    "mobilenet_v2": (2e-3, 1e-3),
    "nanogpt": (1e-3, 1e-3),
}


def _eager(model, args) -> np.ndarray:
    with torch.no_grad():
        return model(*args).numpy()


@pytest.fixture(scope="module")
def cpu_zoo(edge_zoo):
    """name -> (cpu-delegated EdgeProgram, its .pte bytes)."""
    out = {}
    for name in models.ZOO:
        edge = edge_zoo[name].to_backend(backends.partitioner("cpu"))
        out[name] = (edge, edge.to_executorch().buffer)
    return out


def _delegate_calls(program: etmlir.EdgeProgram) -> int:
    return sum(is_delegate_call(op.operation) for op in program.function.regions[0].blocks[0].operations)


@pytest.mark.parametrize("name", models.ZOO)
def test_cpu_delegated_zoo_model_runs_and_matches_eager(zoo, cpu_zoo, name):
    model, args, _ = zoo[name]
    edge, pte = cpu_zoo[name]
    assert _delegate_calls(edge) >= 1
    (actual,) = rt.load(pte).method("forward")(*args)
    atol, rtol = TOLERANCES[name]
    np.testing.assert_allclose(actual.numpy(), _eager(model, args), atol=atol, rtol=rtol)


@pytest.mark.parametrize("length", [5, 64, 256])
def test_cpu_delegated_nanogpt_runs_at_several_sequence_lengths_from_one_pte(zoo, cpu_zoo, length):
    model, _, _ = zoo["nanogpt"]
    method = rt.load(cpu_zoo["nanogpt"][1]).method("forward")
    tokens = torch.randint(0, 65, (1, length), generator=torch.Generator().manual_seed(length))
    (actual,) = method(tokens)
    assert tuple(actual.shape) == (1, length, 65)
    np.testing.assert_allclose(actual.numpy(), _eager(model, (tokens,)), atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("threads", [1, 2])
def test_cpu_delegate_thread_pool_gives_the_same_results(zoo, cpu_zoo, threads):
    model, args, _ = zoo["mobilenet_v2"]
    rt.set_cpu_threads(threads)
    fallbacks = rt.cpu_heap_fallbacks()
    try:
        (actual,) = rt.load(cpu_zoo["mobilenet_v2"][1]).method("forward")(*args)
    finally:
        rt.set_cpu_threads(1)
    np.testing.assert_allclose(actual.numpy(), _eager(model, args), atol=2e-3, rtol=1e-3)
    assert rt.cpu_heap_fallbacks() == fallbacks  # the compile-time measured arena held every allocation


def test_cpu_delegate_with_more_threads_than_cores_gives_one_result(zoo, cpu_zoo):
    # Four threads on CI's two cores: workers are often not scheduled when a loop starts, and the caller
    # takes their chunks (each task still runs once, on whichever thread claims it). Every run must give
    # the same bits (each task computes a fixed slice; the order partial sums are added in is fixed)
    # and match eager, without heap fallbacks.
    model, args, _ = zoo["mobilenet_v2"]
    rt.set_cpu_threads(4)
    fallbacks = rt.cpu_heap_fallbacks()
    try:
        method = rt.load(cpu_zoo["mobilenet_v2"][1]).method("forward")
        outputs = [method(*args)[0].numpy().copy() for _ in range(8)]
    finally:
        rt.set_cpu_threads(1)
    for output in outputs[1:]:
        np.testing.assert_array_equal(output, outputs[0])
    np.testing.assert_allclose(outputs[0], _eager(model, args), atol=2e-3, rtol=1e-3)
    assert rt.cpu_heap_fallbacks() == fallbacks


def test_report_shows_the_hot_ops_delegated(zoo, cpu_zoo):
    mobilenet = delegation_info(cpu_zoo["mobilenet_v2"][0])
    assert mobilenet.num_non_delegated_ops == 0, mobilenet.why_not_delegated()
    text = mobilenet.table()
    for op in ("edge.convolution", "edge.native_batch_norm_legit_no_training", "edge.hardtanh", "edge.addmm"):
        assert op in text
    gpt = delegation_info(cpu_zoo["nanogpt"][0])
    refused = {entry.op for entry in gpt.not_delegated}
    for hot in ("edge.addmm", "edge.bmm", "edge.softmax", "edge.native_layer_norm", "edge.gelu", "edge.mm"):
        assert hot not in refused, gpt.why_not_delegated()
    assert "edge.embedding" in refused  # stays on portable kernels, with its reason
    assert {subgraph.backend for subgraph in gpt.subgraphs} == {"cpu"}
    delegated = sum((collections.Counter(subgraph.op_counts) for subgraph in gpt.subgraphs), collections.Counter())
    n_layer = zoo["nanogpt"][0].cfg.n_layer
    # 4 biased linears per block (lm_head has no bias: mm); each block's attention is 2 bmm and 1 softmax.
    assert delegated["edge.addmm"] == 4 * n_layer and delegated["edge.bmm"] == 2 * n_layer
    assert delegated["edge.softmax"] == n_layer


def _cpu_payloads(pte_bytes: bytes) -> list[tuple[int, bytes]]:
    """(delegate's segment index, payload bytes) of every cpu delegate of a .pte's first method."""
    f = pte_file.read(pte_bytes)
    return [(d.payload.segment, f.segment(d.payload.segment)[d.payload.offset:d.payload.offset + d.payload.size])
            for d in f.program.methods[0].delegates or () if d.backend == b"cpu"]


def test_payload_header_says_what_the_code_needs(cpu_zoo):
    payloads = _cpu_payloads(cpu_zoo["nanogpt"][1])
    assert payloads
    blob = payloads[0][1]
    assert blob[8:12] == payload_header.FILE_IDENTIFIER  # the shared header every backend's payload starts with
    info, so = cpu_payload.read_payload(blob)
    assert info.arch == host().arch and info.cpu_features == host().feature_mask
    assert so[:4] == b"\x7fELF" and payload_header.body_offset(blob) % 64 == 0
    assert info.entry and info.shapes_entry  # the sequence length is dynamic
    assert any(-1 in spec.sizes for spec in info.inputs)
    assert info.debug_handles and info.arena_bytes > 0
    header, _ = payload_header.read_payload(blob, backend_id="cpu")
    assert header.body_format == "elf-shared-object" and header.body_version == cpu_payload.ABI_VERSION
    assert header.debug_handle_map == info.debug_handle_map
    # Regions 1..n, each covering the edge ops its code came from, then 0: the ops in no region.
    ids = [i for i, _ in header.debug_handle_map]
    assert ids[:-1] == list(range(1, len(ids))) and ids[-1] == 0
    assert all(handles == tuple(sorted(handles)) for _, handles in header.debug_handle_map)


def _with_payload(pte_bytes: bytes, edit) -> bytes:
    """The .pte with its first cpu payload replaced by `edit(payload bytes)` (re-packed: sizes may change)."""
    f = pte_file.read(pte_bytes)
    segment = _cpu_payloads(pte_bytes)[0][0]
    segments = [f.segment(i) for i in range(len(f.program.segments))]
    segments[segment] = edit(segments[segment])
    for method in f.program.methods:
        for delegate in method.delegates or ():
            if delegate.payload.segment == segment:
                delegate.payload.size = len(segments[segment])
    return pte_file.pack(f.program, segments, f.header.segment_alignment)


def _rewritten(edit_info):
    """An edit that rewrites a cpu payload's header: edit_info(PayloadInfo) -> PayloadInfo, same shared object."""
    def edit(blob: bytes) -> bytes:
        info, so = cpu_payload.read_payload(blob)
        return cpu_payload.write_payload(edit_info(info), so)
    return edit


def _load_error(pte_bytes: bytes) -> str:
    # Edited bytes are not the ones this process compiled: allow the native code to see the payload checks.
    with pytest.raises(Exception) as error:
        rt.load(pte_bytes, allow_native_code=True).method("forward")
    return str(error.value)


def test_corrupt_payload_fails_at_init_with_a_clear_error(cpu_zoo):
    def flip_code_byte(blob: bytes) -> bytes:
        data = bytearray(blob)
        data[payload_header.body_offset(blob) + 4096] ^= 0xFF
        return bytes(data)

    message = _load_error(_with_payload(cpu_zoo["mlp"][1], flip_code_byte))
    assert "cpu delegate 0" in message and "checksum" in message and "corrupt" in message


def test_payload_for_another_architecture_is_refused(cpu_zoo):
    other = "aarch64" if host().arch != "aarch64" else "x86_64"
    message = _load_error(_with_payload(cpu_zoo["mlp"][1], _rewritten(
        lambda info: dataclasses.replace(info, arch=other))))
    assert f"payload built for {other}, this runtime runs on {host().arch}" in message


def test_payload_needing_a_missing_cpu_feature_is_refused(cpu_zoo):
    missing = [i for i, (name, _) in enumerate(FEATURE_BITS) if name not in host().features]
    if not missing:
        pytest.skip("this CPU has every feature the payload schema names")
    message = _load_error(_with_payload(cpu_zoo["mlp"][1], _rewritten(
        lambda info: dataclasses.replace(info, cpu_features=info.cpu_features | 1 << missing[0]))))
    assert FEATURE_BITS[missing[0]][0] in message and "this CPU lacks" in message


def test_truncated_payload_is_refused(cpu_zoo):
    message = _load_error(_with_payload(cpu_zoo["mlp"][1], lambda blob: blob[:-1]))
    assert "cpu delegate 0" in message and "truncated or padded" in message


def test_payload_from_before_the_shared_header_asks_for_a_rebuild(cpu_zoo):
    def old_format(blob: bytes) -> bytes:  # the format-1 cpu header: magic "ETMLCPU1", ...
        info, so = cpu_payload.read_payload(blob)
        header = struct.pack("<8sII16s", b"ETMLCPU1", 320, 1, info.arch.encode()).ljust(320, b"\0")
        return header + so

    message = _load_error(_with_payload(cpu_zoo["mlp"][1], old_format))
    assert "ETMLCPU1" in message and "rebuild the .pte" in message


def test_python_payload_reader_checks_the_checksum():
    info = cpu_payload.PayloadInfo("x86_64", 0, 0, (cpu_payload.TensorSpec(6, (-1, 4)),),
                                   (cpu_payload.TensorSpec(6, (2,)),), ((1, (3, 4)), (0, (5,))), "entry", "shapes")
    blob = cpu_payload.write_payload(info, b"\x7fELF" + bytes(60))
    assert len(blob) % 64 == 0
    assert cpu_payload.read_payload(blob) == (info, b"\x7fELF" + bytes(60))
    corrupt = bytearray(blob)
    corrupt[-1] ^= 1
    with pytest.raises(ValueError, match="checksum"):
        cpu_payload.read_payload(bytes(corrupt))
    header, _ = payload_header.read_payload(blob)
    assert header.backend_id == "cpu" and header.scratch_bytes == 0
    with pytest.raises(ValueError, match="payload is for backend 'cpu', not 'nested'"):
        payload_header.read_payload(blob, backend_id="nested")
    with pytest.raises(ValueError, match="rebuild the .pte"):
        cpu_payload.read_payload(b"ETMLCPU1" + bytes(300))


def test_feature_names_come_from_the_payload_schema():
    # The schema's CpuFeature enum (runtime/schema/payload.fbs) is the one list: target.py derives
    # (GCC name, /proc/cpuinfo flag) pairs from it; bit i is the enum's value i.
    assert FEATURE_BITS[0] == ("sse4.2", "sse4_2")
    assert [flag for _, flag in FEATURE_BITS] == list(payload_header.CPU_FEATURES)
    assert host().feature_mask >> len(FEATURE_BITS) == 0


class _SharedWeight(nn.Module):
    """A weight read by a delegated op (the matmul) and by ops the cpu backend refuses (amax, select)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.linspace(-1.0, 1.0, 4096).reshape(64, 64))

    def forward(self, x):
        return torch.relu(x @ self.w) + torch.amax(self.w, 0)


def test_a_weight_read_inside_and_outside_a_delegate_is_stored_once():
    model, x = _SharedWeight().eval(), torch.randn(8, 64)
    edge = etmlir.to_edge(etmlir.export(model, (x,))).to_backend(backends.partitioner("cpu"))
    pte = edge.to_executorch().buffer
    weight = model.w.detach().numpy().tobytes()
    assert pte.count(weight) == 1
    (actual,) = rt.load(pte).method("forward")(x)
    np.testing.assert_allclose(actual.numpy(), _eager(model, (x,)), atol=1e-4, rtol=1e-4)


def _huge_pages_off() -> bool:
    try:
        return "[never]" in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False


def test_large_weights_move_onto_huge_pages_and_stay_intact():
    """A payload's read-only segment of 4 MiB or more (here 6.3 MB of weights) is copied onto memory advised
    for huge pages and moved over its old addresses at load (README, "Weights on huge pages"): the counter
    grows by at least the weights' size, and the results, read through the moved pages, match eager, for
    two programs loaded side by side and for one loaded again after they are gone (its unmapping undone
    and redone)."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(1024, 1536), nn.ReLU(), nn.Linear(1536, 16)).eval()
    x = torch.randn(4, 1024)
    pte = etmlir.to_edge(etmlir.export(model, (x,))).to_backend(backends.partitioner("cpu")).to_executorch().buffer
    want = _eager(model, (x,))
    weight_bytes = 1024 * 1536 * 4
    for _ in range(2):
        before = rt.backend_counter("cpu", "huge_page_bytes")
        methods = [rt.load(pte).method("forward") for _ in range(2)]
        moved = rt.backend_counter("cpu", "huge_page_bytes") - before
        if _huge_pages_off():
            assert moved == 0
        else:
            assert moved >= 2 * (weight_bytes - (4 << 10) * 2), moved
        for method in methods:
            (actual,) = method(x)
            np.testing.assert_allclose(actual.numpy(), want, atol=1e-4, rtol=1e-4)
        del methods


def test_generic_loops_without_microkernels_match_eager():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, groups=8), nn.Flatten(),
                          nn.Linear(8 * 6 * 6, 5)).eval()
    x = torch.randn(1, 3, 8, 8)
    edge = etmlir.to_edge(etmlir.export(model, (x,)))
    for specs in ({"microkernels": "false"}, {}):
        pte = edge.to_backend(backends.partitioner("cpu", compile_specs=specs)).to_executorch().buffer
        (actual,) = rt.load(pte).method("forward")(x)
        np.testing.assert_allclose(actual.numpy(), _eager(model, (x,)), atol=1e-4, rtol=1e-4)


def test_compiled_microkernels_are_kept_only_in_a_directory_of_the_users_own(tmp_path, monkeypatch):
    # The payload's C objects are kept across processes (ukernels.c takes ~30 s to compile); they end up in
    # every payload, so a cache directory others could write is passed over for a private temporary one.
    from etmlir.backends.cpu import link

    def chosen(value: str) -> Path:
        monkeypatch.setenv(link.CACHE_ENV, value)
        link._cache_dir.cache_clear()
        try:
            return link._cache_dir()
        finally:
            link._cache_dir.cache_clear()

    own = tmp_path / "own"
    assert chosen(str(own)) == own / "cpu"
    assert (own / "cpu").stat().st_mode & 0o777 == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    elsewhere = chosen(str(shared))
    assert shared not in elsewhere.parents and elsewhere.name.startswith("etmlir-cpu-")
    off = chosen("off")
    assert tmp_path not in off.parents and off.name.startswith("etmlir-cpu-")


def test_the_cache_keeps_the_most_recently_used_object_folders(tmp_path, monkeypatch):
    # Every edit of payload_c or compiler upgrade makes a new folder: a new one removes all but the
    # CACHE_KEEP most recently used (a use touches its folder); nothing else in the directory is touched.
    from etmlir.backends.cpu import link, target

    monkeypatch.setenv(link.CACHE_ENV, str(tmp_path / "cache"))
    link._cache_dir.cache_clear()
    link._object_dir.cache_clear()
    try:
        cache = link._cache_dir()
        old = []
        for i in range(link.CACHE_KEEP):
            folder = cache / f"{i:016x}"
            folder.mkdir()
            (folder / "ukernels.o").write_bytes(b"x")
            os.utime(folder, (1000 + i, 1000 + i))
            old.append(folder)
        (cache / "notes").mkdir()  # not an object folder: kept
        os.utime(old[0], None)  # used just now: kept
        made = link._object_dir(target.host())
        assert made.is_dir() and made.parent == cache
        kept = sorted(p.name for p in cache.iterdir())
        assert len(kept) == link.CACHE_KEEP + 1, kept  # CACHE_KEEP object folders (the new one among them), the notes
        assert not old[1].exists() and old[0].exists() and old[2].exists()
        link._object_dir.cache_clear()
        assert link._object_dir(target.host()) == made  # found again: nothing more removed
        assert len(list(cache.iterdir())) == len(kept)
    finally:
        link._cache_dir.cache_clear()
        link._object_dir.cache_clear()


def test_a_cached_object_is_written_whole_or_not_at_all(tmp_path):
    from etmlir.backends.cpu import link

    source = tmp_path / "ok.c"
    source.write_text("int etmlir_cache_probe(void) { return 7; }\n")
    target = tmp_path / "ok.o"
    link._build([link.compiler(), "-c", str(source)], target, "compiling ok.c")
    assert target.stat().st_size > 0
    broken = tmp_path / "broken.c"
    broken.write_text("int etmlir_cache_probe(void) { return }\n")
    with pytest.raises(backends.BackendError, match="compiling broken.c failed"):
        link._build([link.compiler(), "-c", str(broken)], tmp_path / "broken.o", "compiling broken.c")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.c", "ok.c", "ok.o"]  # no partial file left


def test_unknown_compile_spec_is_an_error_naming_it():
    edge = etmlir.to_edge(etmlir.export(nn.ReLU(), (torch.randn(4),)))
    with pytest.raises(Exception, match="unknown compile spec.*tile_size"):
        edge.to_backend(backends.partitioner("cpu", compile_specs={"tile_size": "8"}))


@pytest.mark.parametrize("threads", ["1", "2"])
def test_et_run_runs_a_cpu_delegated_program(zoo, cpu_zoo, tmp_path, threads):
    et_run = Path(sys.executable).parent / "et-run"
    model, args, _ = zoo["mlp"]
    pte, inputs = tmp_path / "mlp_cpu.pte", tmp_path / "inputs.npz"
    pte.write_bytes(cpu_zoo["mlp"][1])
    np.savez(inputs, *[a.numpy() for a in args])
    result = subprocess.run([str(et_run), str(pte), "--inputs", str(inputs), "--iterations", "3", "--cpu-threads",
                             threads, "--allow-native"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"{threads} per delegate call (backends: " in result.stdout


# (kernel, padding, divisor_override): EfficientNet's pooler (transformers: AvgPool2d(1280, ceil_mode=True)
# over its 7x7 features, one window cut where the plane ends) and a 9x9 window, both rewritten as a mean
# over the plane (torch-mlir padded the input to the window: 8 GB for the first); with padding or a divisor
# override the pooling stays as it was.
@pytest.mark.parametrize("kernel,padding,divisor", [(1280, 0, None), (9, 0, None), (8, 1, None), (9, 0, 10)])
def test_avg_pool_whose_window_covers_the_plane(kernel, padding, divisor):
    torch.manual_seed(kernel + padding)
    model = nn.AvgPool2d(kernel, padding=padding, ceil_mode=True, divisor_override=divisor).eval()
    x = torch.randn(1, 40, 7, 7)
    program = etmlir.to_edge(etmlir.export(model, (x,))).to_backend(backends.partitioner("cpu"))
    assert delegation_info(program).num_non_delegated_ops == 0
    got = rt.load(program.to_executorch().buffer).method("forward")(x.numpy())[0]
    np.testing.assert_allclose(np.asarray(got), model(x).numpy(), atol=1e-6, rtol=1e-5)

