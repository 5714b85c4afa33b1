"""The runtime manifest (et-manifest, etmlir.runtime.manifest()) and the loadability check against it.

A manifest is what a runtime build can load; `check_loadable` lists what a `.pte` needs that
it lacks, each with method, instruction and source line. These tests hold the manifest to the
registries it describes (no drift), check the zoo against this build's, then take one thing
away at a time from a manifest (a kernel, a dtype, a backend, a CPU feature, a schema version)
and expect exactly that to be reported, where it is needed; `to_executorch(runtime_manifest=)`
and `et-inspect --check-against` are the same check at export time and on the command line.
Models are tiny (one cpu-backend compile, ~4 s); the zoo comes from the session's `pte_zoo`.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import etmlir
from etmlir import backends, models
from etmlir import runtime as rt
from etmlir.backends.payload_header import CPU_FEATURES, PayloadHeader, read_payload
from etmlir.devtools import NotLoadableError, check_loadable
from etmlir.devtools.manifest import ManifestError, load_manifest
from etmlir.executable import pte
from etmlir.runtime import kernels as runtime_kernels
from etmlir.schema.InstructionKind import InstructionKind
from etmlir.tools import et_inspect

ROOT = Path(__file__).resolve().parents[2]
ET_MANIFEST = Path(sys.executable).parent / "et-manifest"
KERNEL_TABLE = json.loads((ROOT / "python/etmlir/runtime/kernel_table.json").read_text())["kernels"]
SOURCE = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> str:
    """"test_runtime_manifest.py:N" of the model line tagged `# <marker>`: where debug_info must point."""
    (number,) = [i + 1 for i, text in enumerate(SOURCE) if text.rstrip().endswith(f"# <{marker}>")]
    return f"{Path(__file__).name}:{number}"


class Tiny(torch.nn.Module):
    """Token ids (int64 indices: not the kernels' dtype) -> embedding -> linear -> gelu -> linear."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(16, 8)
        self.fc = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(ids)  # <emb>
        h = torch.nn.functional.gelu(self.fc(h))  # <gelu>
        return self.head(h)  # <head>


class Counter(torch.nn.Module):
    """A mutated buffer: program state, so the .pte needs schema version 2."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps.add_(1)
        return x * self.steps


@pytest.fixture(scope="module")
def manifest() -> dict:
    return rt.manifest()


@pytest.fixture(scope="module")
def edge() -> etmlir.EdgeProgram:
    torch.manual_seed(0)
    return etmlir.to_edge(etmlir.export(Tiny().eval(), (torch.randint(0, 16, (2, 5)),)))


@pytest.fixture(scope="module")
def programs(edge) -> dict[str, bytes]:
    """The same model on the portable kernels, in one nested delegate, in one cpu delegate."""
    return {
        "portable": edge.to_executorch().buffer,
        "nested": edge.to_backend(backends.partitioner("nested")).to_executorch().buffer,
        "cpu": edge.to_backend(backends.partitioner("cpu")).to_executorch().buffer,
    }


def without(manifest: dict, edit) -> dict:
    changed = copy.deepcopy(manifest)
    edit(changed)
    return changed


def backend(manifest: dict, backend_id: str) -> dict:
    return next(b for b in manifest["backends"] if b["id"] == backend_id)


def kernel(manifest: dict, op: str) -> dict:
    return next(k for k in manifest["kernels"] if k["op"] == op)


def instruction_of(data: bytes, op: str) -> int:
    """The instruction of the (first) KernelCall of `op` ("aten::gelu.out") in forward."""
    method = pte.read(data).program.methods[0]
    names = [f"{o.name.decode()}.{o.overload.decode()}" for o in method.operators]
    return next(pc for pc, ins in enumerate(method.instructions)
                if ins.kindType == InstructionKind.KernelCall and names[ins.kind.op] == op)


def delegate_call(data: bytes) -> int:
    method = pte.read(data).program.methods[0]
    return next(pc for pc, ins in enumerate(method.instructions) if ins.kindType == InstructionKind.DelegateCall)


# --- The manifest describes the runtime ---------------------------------------------------------


def test_shipped_manifest_matches_what_the_runtime_registers(manifest) -> None:
    """No drift: the manifest installed with the build, et-manifest's output now, and this process's
    registries are one document (but for who wrote it)."""
    shipped = json.loads(Path(rt.shipped_manifest_path()).read_text())
    result = subprocess.run([str(ET_MANIFEST)], capture_output=True, text=True, check=True, timeout=60)
    printed = json.loads(result.stdout)
    assert shipped["producer"] == printed["producer"] == "et-manifest"
    assert manifest["producer"] == "etmlir._runtime"
    assert shipped == printed
    assert {**shipped, "producer": None} == {**manifest, "producer": None}
    assert [k["op"] for k in manifest["kernels"]] == sorted(runtime_kernels.registered())


def test_manifest_dtypes_are_the_kernel_tables(manifest) -> None:
    """Every table kernel is listed with the table's dtypes (the registry carries them); the runtime's
    own kernels declare none; backends, versions and the machine are this build's."""
    listed = {k["op"]: k for k in manifest["kernels"]}
    for entry in KERNEL_TABLE:
        if "fn" not in entry:
            assert entry["op"] not in listed
            continue
        assert set(listed[entry["op"]]["dtypes"]) == set(entry["dtypes"]), entry["op"]
        assert set(listed[entry["op"]]["out_dtypes"]) == set(entry["out_dtypes"]), entry["op"]
        assert listed[entry["op"]]["signature"] == entry["signature"]
    assert all(k["dtypes"] is None for k in listed.values() if k["op"].startswith("etmlir_prim::"))
    assert kernel(manifest, "etmlir_prim::sym_size.int")["name"] == "etmlir_prim::sym_size"
    assert kernel(manifest, "etmlir_prim::sym_size.int")["overload"] == "int"
    assert [b["id"] for b in manifest["backends"]] == rt.compiled_backends()
    assert manifest["program_schema"]["max_version"] >= 3 and manifest["selective_build"] is False
    cpu = backend(manifest, "cpu")
    assert cpu["native_code"] and cpu["arch"] == manifest["host"]["arch"]
    assert cpu["body_format"] == "elf-shared-object" and backend(manifest, "nested")["body_format"] == "pte"


def test_et_manifest_writes_a_file_and_refuses_bad_usage(tmp_path) -> None:
    out = tmp_path / "m.json"
    subprocess.run([str(ET_MANIFEST), "--output", str(out)], check=True, timeout=60)
    assert load_manifest(out).kernels.keys() == {k["op"] for k in rt.manifest()["kernels"]}
    bad = subprocess.run([str(ET_MANIFEST), "--frobnicate"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown argument --frobnicate" in bad.stderr
    unwritable = subprocess.run([str(ET_MANIFEST), "-o", str(tmp_path / "no" / "m.json")], capture_output=True,
                                text=True, timeout=60)
    assert unwritable.returncode == 1 and "cannot write" in unwritable.stderr


def test_manifest_lists_every_kernel_the_zoo_needs(pte_zoo, manifest) -> None:
    for name in models.ZOO:
        report = check_loadable(pte_zoo[name], manifest)
        assert report.ok, report.format()
        assert report.kernel_calls > 0


# --- Something taken away: reported with where ----------------------------------------------------


def test_missing_kernel_is_reported_at_its_instruction_and_source_line(programs, manifest) -> None:
    lacking = without(manifest, lambda m: m["kernels"].remove(kernel(m, "aten::gelu.out")))
    report = check_loadable(programs["portable"], lacking)
    assert not report.ok and report.missing_kernels == ["aten::gelu.out"]
    (problem,) = report.problems
    assert problem.kind == "kernel" and problem.method == "forward"
    assert problem.instruction == instruction_of(programs["portable"], "aten::gelu.out")
    assert problem.location.endswith(line_of("gelu")) and problem.op == "edge.gelu"
    assert f"instruction {problem.instruction}" in str(report) and line_of("gelu") in str(report)


def test_missing_dtype_is_reported_and_index_arguments_are_not_the_kernels_dtype(programs, manifest) -> None:
    def drop_f32(m: dict) -> None:
        entry = kernel(m, "aten::addmm.out")
        entry["dtypes"] = [d for d in entry["dtypes"] if d != "f32"]

    report = check_loadable(programs["portable"], without(manifest, drop_f32))
    assert [p.kind for p in report.problems] == ["dtype", "dtype"]  # fc and head
    first = report.problems[0]
    assert first.instruction == instruction_of(programs["portable"], "aten::addmm.out")
    assert first.location.endswith(line_of("gelu")) and first.module_path == "fc"
    assert "aten::addmm.out has no f32 kernel" in first.message and "'mat1'" in first.message
    assert report.problems[1].location.endswith(line_of("head"))
    # embedding's int64 indices are an index position: a kernel without i64 still takes them.
    no_i64 = without(manifest, lambda m: kernel(m, "aten::embedding.out").update(
        dtypes=[d for d in kernel(m, "aten::embedding.out")["dtypes"] if d != "i64"]))
    assert check_loadable(programs["portable"], no_i64).ok
    no_f32 = without(manifest, lambda m: kernel(m, "aten::embedding.out").update(dtypes=["f64"]))
    (problem,) = check_loadable(programs["portable"], no_f32).problems
    assert problem.kind == "dtype" and "'weight'" in problem.message and problem.location.endswith(line_of("emb"))


def test_missing_backend_is_reported_at_the_delegate_call(programs, manifest) -> None:
    data = programs["cpu"]
    report = check_loadable(data, without(manifest, lambda m: m["backends"].remove(backend(m, "cpu"))))
    (problem,) = report.problems
    assert problem.kind == "backend" and problem.delegate == 0 and problem.instruction == delegate_call(data)
    others = ", ".join(b["id"] for b in manifest["backends"] if b["id"] != "cpu")
    assert f"backend 'cpu' is not compiled into this runtime (it has: {others})" in problem.message
    assert problem.location is not None and Path(__file__).name in problem.location
    unavailable = without(manifest, lambda m: backend(m, "cpu").update(available=False))
    assert [p.kind for p in check_loadable(data, unavailable).problems] == ["backend_unavailable"]


def cpu_payload_header(data: bytes) -> PayloadHeader:
    file = pte.read(data)
    location = file.program.methods[0].delegates[0].payload
    return read_payload(file.segment(location.segment)[location.offset:location.offset + location.size])[0]


def test_native_payload_checked_against_the_runtimes_machine(programs, manifest) -> None:
    data = programs["cpu"]
    header = cpu_payload_header(data)
    assert header.arch == manifest["host"]["arch"]
    other_arch = without(manifest, lambda m: backend(m, "cpu").update(arch="riscv64"))
    (problem,) = check_loadable(data, other_arch).problems
    assert problem.kind == "arch" and f"payload built for {header.arch}; this runtime runs on riscv64" in problem.message
    needed = [name for bit, name in enumerate(CPU_FEATURES) if header.cpu_features >> bit & 1]
    if needed:  # the payload is built for this host's features: a runtime without one cannot run it
        fewer = without(manifest, lambda m: backend(m, "cpu").update(
            cpu_features=[f for f in backend(m, "cpu")["cpu_features"] if f != needed[-1]]))
        (problem,) = check_loadable(data, fewer).problems
        assert problem.kind == "cpu_features" and f"needs CPU features {needed[-1]} " in problem.message
    newer_body = without(manifest, lambda m: backend(m, "cpu").update(body_versions=[2, 2]))
    assert [p.kind for p in check_loadable(data, newer_body).problems] == ["body_version"]
    old_header = without(manifest, lambda m: m["payload_header"].update(min_format_version=0, max_format_version=0))
    assert [p.kind for p in check_loadable(data, old_header).problems] == ["payload_format"]


def test_nested_delegate_body_is_checked_with_the_same_kernels(programs, manifest) -> None:
    data = programs["nested"]
    lacking = without(manifest, lambda m: m["kernels"].remove(kernel(m, "aten::gelu.out")))
    (problem,) = check_loadable(data, lacking).problems
    assert problem.kind == "kernel" and problem.instruction == delegate_call(data) and problem.delegate == 0
    assert problem.inner.startswith("method 'forward', instruction ")
    assert problem.location.endswith(line_of("gelu")) and problem.op == "edge.gelu"
    assert "nested delegate 0" in str(problem)


def test_older_schema_version_is_reported(manifest) -> None:
    data = etmlir.to_edge(etmlir.export(Counter(), (torch.ones(3),))).to_executorch().buffer
    version = pte.read(data).program.version
    assert version >= 2 and check_loadable(data, manifest).ok
    older = without(manifest, lambda m: m["program_schema"].update(max_version=version - 1))
    (problem,) = check_loadable(data, older).problems
    assert problem.kind == "program_version" and problem.method is None
    assert f"program schema version {version}; this runtime reads versions 1..{version - 1}" in problem.message


# --- At export time and on the command line ------------------------------------------------------


def test_to_executorch_raises_listing_what_the_runtime_lacks(edge, manifest, tmp_path) -> None:
    path = tmp_path / "device.json"
    path.write_text(json.dumps(without(manifest, lambda m: m["kernels"].remove(kernel(m, "aten::gelu.out")))))
    with pytest.raises(NotLoadableError, match=r"kernel aten::gelu\.out is not in this runtime") as caught:
        edge.to_executorch(runtime_manifest=path)
    assert line_of("gelu") in str(caught.value) and caught.value.report.missing_kernels == ["aten::gelu.out"]
    with pytest.raises(NotLoadableError):
        etmlir.to_executorch(edge, etmlir.ExecutorchConfig(runtime_manifest=str(path)))
    with pytest.warns(RuntimeWarning, match="aten::gelu.out"):
        et = edge.to_executorch(etmlir.ExecutorchConfig(runtime_manifest=str(path), manifest_check="warn"))
    assert et.buffer
    assert edge.to_executorch(runtime_manifest=rt.shipped_manifest_path()).buffer  # this runtime has it all


def test_bad_manifests_are_clear_errors(tmp_path, manifest) -> None:
    (tmp_path / "not.json").write_text("{")
    with pytest.raises(ManifestError, match="is not JSON"):
        load_manifest(tmp_path / "not.json")
    with pytest.raises(ManifestError, match="not an etmlir runtime manifest"):
        load_manifest({"kernels": []})
    with pytest.raises(ManifestError, match="format_version 2"):
        load_manifest({**manifest, "format_version": 2})
    with pytest.raises(ManifestError, match="cannot read runtime manifest"):
        load_manifest(tmp_path / "absent.json")


def test_et_inspect_check_against_exit_codes(programs, manifest, tmp_path, capsys) -> None:
    model = tmp_path / "model.pte"
    model.write_bytes(programs["cpu"])
    assert et_inspect.main(["--check-against", rt.shipped_manifest_path(), str(model)]) == 0
    assert ": ok (" in capsys.readouterr().out
    device = tmp_path / "device.json"
    device.write_text(json.dumps(without(manifest, lambda m: m["backends"].remove(backend(m, "cpu")))))
    assert et_inspect.main(["--check-against", str(device), str(model)]) == 1
    out = capsys.readouterr().out
    assert f"method 'forward', instruction {delegate_call(programs['cpu'])}" in out and "backend 'cpu'" in out
    assert et_inspect.main(["--check-against", str(model), str(model)]) == 1  # a .pte is not a manifest
    assert "et-inspect: error: runtime manifest" in capsys.readouterr().err
    # The console script, as a user runs it.
    script = subprocess.run([str(Path(sys.executable).parent / "et-inspect"), "--check-against", str(device),
                             str(model)], capture_output=True, text=True, timeout=120)
    assert script.returncode == 1 and "not compiled into this runtime" in script.stdout
