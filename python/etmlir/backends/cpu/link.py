"""Object file + microkernels -> the payload's position-independent shared object.

The C sources in `runtime/backends/cpu/payload_c/` (the microkernels, the arena allocator and the
thread-pool hook the runtime fills in) are compiled once per process and
target, then linked with each delegate's MLIR object by the system C
compiler (`gcc`, or $CC):

    cc -shared -fPIC -o payload.so forward.o shim.o ukernels.o -lm

The result depends on nothing but libc and libm, so the runtime can load it
from memory on any Linux with the same CPU features. It is linked
`-Bsymbolic`: its code calls its own allocator and microkernels even when
another library of the process defines the same names (the compiler's own
microkernel library, which MLIR's JIT loads globally, or another payload).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from etmlir.delegation.backend import BackendError
from etmlir.backends.cpu.target import Target

C_SOURCES = ("shim.c", "ukernels.c", "activation.c", "attention.c", "abi.c")
C_HEADERS = ("etmlir_cpu_payload.h", "etmlir_cpu_vec.h")  # hashed with the sources: a change rebuilds


def _sources() -> Path:
    """runtime/backends/cpu/payload_c: the checkout's copy first, else the one the build installed."""
    checkout = Path(__file__).resolve().parents[4] / "runtime" / "backends" / "cpu" / "payload_c"
    if (checkout / "ukernels.c").exists():
        return checkout
    # The package's install directory holds the build's copy (runtime/backends/cpu/CMakeLists.txt installs it).
    spec = importlib.util.find_spec("etmlir")
    for root in (spec.submodule_search_locations or []) if spec else []:
        installed = Path(root) / "_data" / "cpu_payload_c"
        if (installed / "ukernels.c").exists():
            return installed
    raise BackendError("cpu backend: the payload's C sources (runtime/backends/cpu/payload_c) are missing")


SOURCES = _sources()
def compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise BackendError("cpu backend: no C compiler (gcc or $CC) to link the payload with")
    return cc


def c_flags(march: str) -> list[str]:
    """Flags for the payload_c sources at gcc's `-march` level `march` (Target.march)."""
    return ["-O3", "-fPIC", f"-march={march}", "-ffp-contract=fast", "-fno-math-errno",
            "-std=gnu11"]


@functools.cache
def _cache_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="etmlir-cpu-"))


def _run(cmd: list[str], what: str) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise BackendError(f"cpu backend: {what} failed ({' '.join(cmd[:3])} ...):\n{result.stderr.strip()[:2000]}")


@functools.cache
def microkernel_objects(target: Target) -> tuple[str, ...]:
    """The payload_c sources compiled for `target` (cached per process)."""
    flags = c_flags(target.march)
    digest = hashlib.sha256(" ".join(flags).encode())
    for name in C_SOURCES + C_HEADERS:
        digest.update((SOURCES / name).read_bytes())
    out_dir = _cache_dir() / digest.hexdigest()[:16]
    out_dir.mkdir(parents=True, exist_ok=True)
    objects = []
    for name in C_SOURCES:
        obj = out_dir / (Path(name).stem + ".o")
        if not obj.exists():
            _run([compiler(), *flags, "-c", str(SOURCES / name), "-o", str(obj)], f"compiling {name}")
        objects.append(str(obj))
    return tuple(objects)


def weights_library(assembly: str, directory: str) -> str:
    """The weights alone as a shared library, for MLIR's JIT to resolve their symbols against."""
    path = os.path.join(directory, "weights.so")
    _run([compiler(), "-shared", "-fPIC", "-o", path, assembly], "assembling the weights")
    return path


def link_shared_object(object_file: str, target: Target, extra: list[str] = ()) -> bytes:
    """Link one delegate's object (and `extra` sources, e.g. its weights) with the microkernels: the .so bytes."""
    with tempfile.TemporaryDirectory(prefix="etmlir-cpu-link-") as tmp:
        so = os.path.join(tmp, "payload.so")
        _run([compiler(), "-shared", "-fPIC", "-o", so, object_file, *extra, *microkernel_objects(target), "-lm", "-s",
              "-Wl,-z,noexecstack", "-Wl,--no-undefined", "-Wl,-Bsymbolic"], "linking the payload")
        return Path(so).read_bytes()


@functools.cache
def microkernel_library(target: Target) -> str:
    """The microkernels as a shared library of their own: MLIR's JIT resolves the calls against it."""
    path = _cache_dir() / f"microkernels-{target.march}.so"
    if not path.exists():
        _run([compiler(), "-shared", "-fPIC", "-o", str(path), *microkernel_objects(target), "-lm"],
             "linking the microkernel library")
    return str(path)


@functools.cache
def panel_shape(target: Target) -> tuple[int, int]:
    """(A-panel rows, B-panel columns) of the microkernels built for `target` (et-cpu-pack-weights packs
    weights to them): asked of the kernels, so the packing and the kernels cannot disagree."""
    library = ctypes.CDLL(microkernel_library(target))
    shape = []
    for name in ("etmlir_uk_panel_rows", "etmlir_uk_panel_width"):
        function = getattr(library, name)
        function.restype = ctypes.c_int64
        shape.append(int(function()))
    return shape[0], shape[1]
