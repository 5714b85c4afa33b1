"""Object file + microkernels -> the payload's position-independent shared object.

The C sources in `runtime/backends/cpu/payload_c/` (the microkernels, the arena allocator and the
thread-pool hook the runtime fills in) are compiled once per target, then
linked with each delegate's MLIR object by the system C compiler (`gcc`, or
$CC):

    cc -shared -fPIC -o payload.so forward.o shim.o ukernels.o -lm

The result depends on nothing but libc and libm, so the runtime can load it
from memory on any Linux with the same CPU features. It is linked
`-Bsymbolic`: its code calls its own allocator and microkernels even when
another library of the process defines the same names (the compiler's own
microkernel library, which MLIR's JIT loads globally, or another payload).

The compiled objects are kept across processes in a cache directory of the
user's own (`$ETMLIR_CACHE_DIR`, else `$XDG_CACHE_HOME/etmlir`, else
`~/.cache/etmlir`; `ETMLIR_CACHE_DIR=off` keeps them for the process only),
keyed by a digest of the sources, the flags and the compiler's version:
`ukernels.c` alone takes about 30 s at -O3 on a 2-core machine, which every
new process compiling a model used to pay. Since those objects end up in
every payload, a directory another user could write is not used (its owner
must be this user and its mode deny group and others writing); a per-process
temporary directory is used instead. Files are written under a temporary
name and renamed, so two processes filling the cache at once never see half
an object. Each use of a folder touches it; when a new one is made, all but the
CACHE_KEEP most recently used are removed (every edit of the sources, every
compiler upgrade leaves a folder of about 1.2 MB behind).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import os
import shutil
import stat
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


CACHE_ENV = "ETMLIR_CACHE_DIR"
# Object folders kept (the most recently used): the three x86-64 levels the tests build, for a few
# source versions or compilers side by side.
CACHE_KEEP = 12


def _private_directory(path: Path) -> bool:
    """`path` exists or was made as a directory only this user can write."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


@functools.cache
def _cache_dir() -> Path:
    """Where compiled microkernels are kept: the user's cache (see the module docstring), else a temporary one."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        chosen = os.path.join(base, "etmlir")
    if chosen.lower() not in ("", "off", "0", "false"):
        directory = Path(chosen) / "cpu"
        if _private_directory(Path(chosen)) and _private_directory(directory):
            return directory
    return Path(tempfile.mkdtemp(prefix="etmlir-cpu-"))


@functools.cache
def _compiler_identity() -> str:
    """The compiler's path and its `--version` banner: a different compiler builds different objects."""
    cc = compiler()
    try:
        banner = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        banner = ""
    return f"{shutil.which(cc) or cc}\n{banner}"


def _build(cmd_before_output: list[str], target: Path, what: str) -> None:
    """Run the compiler with `-o` a temporary name beside `target`, then rename it into place."""
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        _run([*cmd_before_output, "-o", str(partial)], what)
        os.replace(partial, target)
    finally:
        if partial.exists():
            partial.unlink()


def _run(cmd: list[str], what: str) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise BackendError(f"cpu backend: {what} failed ({' '.join(cmd[:3])} ...):\n{result.stderr.strip()[:2000]}")


@functools.cache
def _object_dir(target: Target) -> Path:
    """The cache folder of `target`'s objects: named by a digest of everything that goes into them."""
    flags = c_flags(target.march)
    digest = hashlib.sha256("\n".join([_compiler_identity(), *flags]).encode())
    for name in C_SOURCES + C_HEADERS:
        digest.update(name.encode())
        digest.update((SOURCES / name).read_bytes())
    out_dir = _cache_dir() / digest.hexdigest()[:16]
    if out_dir.is_dir():
        os.utime(out_dir)  # used now: the most recent for _prune
    else:
        out_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        _prune(out_dir.parent, keep=CACHE_KEEP)
    return out_dir


def _prune(cache: Path, keep: int) -> None:
    """Remove all but the `keep` most recently used object folders of `cache` (best effort: a folder another
    process removes first, or cannot be removed, is passed over). A process whose folder was removed under
    it builds the objects again (_current_objects)."""
    folders = []
    for entry in cache.iterdir():
        try:
            if (entry.is_dir() and not entry.is_symlink() and len(entry.name) == 16
                    and all(c in "0123456789abcdef" for c in entry.name)):
                folders.append((entry.stat().st_mtime, entry))
        except OSError:
            continue
    folders.sort(reverse=True)
    for _, stale in folders[keep:]:
        shutil.rmtree(stale, ignore_errors=True)


@functools.cache
def microkernel_objects(target: Target) -> tuple[str, ...]:
    """The payload_c sources compiled for `target` (kept in the cache directory)."""
    flags = c_flags(target.march)
    out_dir = _object_dir(target)
    objects = []
    for name in C_SOURCES:
        obj = out_dir / (Path(name).stem + ".o")
        if not obj.exists():
            _build([compiler(), *flags, "-c", str(SOURCES / name)], obj, f"compiling {name}")
        objects.append(str(obj))
    return tuple(objects)


def _current_objects(target: Target) -> tuple[str, ...]:
    """microkernel_objects, built again if another process pruned their folder since this one built them."""
    objects = microkernel_objects(target)
    if not all(os.path.exists(path) for path in objects):
        _object_dir.cache_clear()
        microkernel_objects.cache_clear()
        objects = microkernel_objects(target)
    return objects


def weights_library(assembly: str, directory: str) -> str:
    """The weights alone as a shared library, for MLIR's JIT to resolve their symbols against."""
    path = os.path.join(directory, "weights.so")
    _run([compiler(), "-shared", "-fPIC", "-o", path, assembly], "assembling the weights")
    return path


def link_shared_object(object_file: str, target: Target, extra: list[str] = ()) -> bytes:
    """Link one delegate's object (and `extra` sources, e.g. its weights) with the microkernels: the .so bytes."""
    with tempfile.TemporaryDirectory(prefix="etmlir-cpu-link-") as tmp:
        so = os.path.join(tmp, "payload.so")
        _run([compiler(), "-shared", "-fPIC", "-o", so, object_file, *extra, *_current_objects(target), "-lm", "-s",
              "-Wl,-z,noexecstack", "-Wl,--no-undefined", "-Wl,-Bsymbolic"], "linking the payload")
        return Path(so).read_bytes()


@functools.cache
def microkernel_library(target: Target) -> str:
    """The microkernels as a shared library of their own: MLIR's JIT resolves the calls against it."""
    path = _object_dir(target) / "microkernels.so"
    if not path.exists():
        _build([compiler(), "-shared", "-fPIC", *_current_objects(target), "-lm"], path,
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
