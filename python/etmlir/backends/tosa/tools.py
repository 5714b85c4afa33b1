"""Where the TOSA project's own tools are: tosa-tools (PyPI) in an environment of its own.

tosa-tools pins its own numpy and flatbuffers and installs top-level
packages named `tests`, `runner`, ... (shared/DESIGN.md): it must not share
the project's environment, so scripts/setup.sh puts it in `.venv-tosa` and
this module finds its commands there:

    ETMLIR_TOSA_TOOLS=/path/to/venv      an explicit tosa-tools environment, else
    <checkout>/.venv-tosa                the one setup made, else
    tosa-opt on PATH

`serialize` runs `tosa-opt --tosa-validate --tosa-serialize` (the serializer
and validator of the TOSA release the reference model comes from) on the
module's text; `run_reference_model` runs the standalone
`tosa_reference_model` on a FlatBuffer, which is how tests check a payload
against the reference outside our runtime.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from etmlir.delegation.backend import BackendError

TOSA_TOOLS_VERSION = "2026.8.0"
_CHECKOUT = Path(__file__).resolve().parents[4]


def tools_dir() -> Path | None:
    """The bin/ folder holding tosa-opt and tosa_reference_model (None: tosa-tools is not installed)."""
    explicit = os.environ.get("ETMLIR_TOSA_TOOLS")
    candidates = [Path(explicit) / "bin"] if explicit else [_CHECKOUT / ".venv-tosa" / "bin"]
    found = shutil.which("tosa-opt")
    if found and not explicit:
        candidates.append(Path(found).parent)
    for folder in candidates:
        if (folder / "tosa-opt").exists():
            return folder
    return None


def tool(name: str) -> Path:
    """The path of a tosa-tools command, or a BackendError saying how to install it."""
    folder = tools_dir()
    if folder is None or not (folder / name).exists():
        where = os.environ.get("ETMLIR_TOSA_TOOLS") or str(_CHECKOUT / ".venv-tosa")
        raise BackendError(f"tosa backend: {name} not found in {where}: install tosa-tools=={TOSA_TOOLS_VERSION} in "
                           "an environment of its own (scripts/setup.sh makes .venv-tosa) or set ETMLIR_TOSA_TOOLS "
                           "to one")
    return folder / name


def serialize(mlir_text: str, *, profile: str, level: str) -> bytes:
    """The standard TOSA FlatBuffer of a module of `tosa` ops, checked by tosa-opt's own validator."""
    with tempfile.TemporaryDirectory(prefix="etmlir-tosa-") as tmp:
        source, target = Path(tmp) / "graph.mlir", Path(tmp) / "graph.tosa"
        source.write_text(mlir_text)
        command = [str(tool("tosa-opt")), str(source),
                   f"--tosa-attach-target=profiles={profile} level={level} specification_version=1.0",
                   "--tosa-validate=strict-op-spec-alignment",
                   f"--tosa-serialize=tosa-flatbuffer-filename={target}", "-o", os.devnull]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0 or not target.exists():
            raise BackendError(f"tosa backend: tosa-opt refused the graph ({profile}, level {level}):\n"
                               f"{(done.stderr or done.stdout).strip()}")
        return target.read_bytes()


def run_reference_model(flatbuffer: bytes, inputs: list[np.ndarray], output_shapes: list[tuple[int, ...]],
                        output_dtypes: list[np.dtype] | None = None) -> list[np.ndarray]:
    """Run the standalone `tosa_reference_model` on a TOSA FlatBuffer (inputs in the graph's order)."""
    import json

    with tempfile.TemporaryDirectory(prefix="etmlir-tosa-ref-") as tmp:
        folder = Path(tmp)
        (folder / "graph.tosa").write_bytes(flatbuffer)
        in_files = []
        for i, array in enumerate(inputs):
            name = f"input_{i}.npy"
            np.save(folder / name, np.ascontiguousarray(array))
            in_files.append(name)
        out_files = [f"output_{i}.npy" for i in range(len(output_shapes))]
        desc = {"tosa_file": "graph.tosa", "ifm_name": [f"TosaInput_{i}" for i in range(len(inputs))],
                "ifm_file": in_files, "ofm_name": [f"TosaOutput_{i}" for i in range(len(output_shapes))],
                "ofm_file": out_files, "expected_failure": False}
        (folder / "desc.json").write_text(json.dumps(desc))
        done = subprocess.run([str(tool("tosa_reference_model")), f"--test_desc={folder / 'desc.json'}"],
                              capture_output=True, text=True)
        missing = [f for f in out_files if not (folder / f).exists()]
        if done.returncode != 0 or missing:
            raise BackendError(f"tosa_reference_model failed (exit {done.returncode}):\n"
                               f"{(done.stderr or done.stdout).strip()[-2000:]}")
        return [np.load(folder / f) for f in out_files]
