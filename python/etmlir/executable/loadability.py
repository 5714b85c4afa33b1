"""Will this `.pte` load on that runtime? A check against the runtime's manifest, on the host.

A runtime build writes a manifest (`et-manifest`, `<build>/runtime-manifest.json`,
`etmlir.runtime.manifest()` for this process's runtime; layout in tools/runtime_manifest.h):
the kernels it registers with the dtypes each takes, the backends compiled in (available on
the machine that wrote it or not, the payload bodies they read, the arch and CPU features
native payloads may need), the `Program.version` range and payload header format it reads.

    report = etmlir.devtools.check_loadable("model.pte", "device-manifest.json")
    if not report.ok:
        print(report)
    # model.pte against device-manifest.json: 3 problems: the runtime would refuse or fail on it
    #   method 'forward', instruction 0 (model.py:11, delegate cpu_0, in fc): delegate 0 ('cpu'):
    #     backend 'cpu' is not compiled into this runtime (it has: nested)
    #   method 'forward', instruction 1 (model.py:11, edge.gelu): kernel aten::gelu.out is not in
    #     this runtime (register it, or build with the operator selected)
    #   ...

It sits at the executable level so that `to_executorch(..., runtime_manifest=...)` can run it;
its public home is `etmlir.devtools.manifest` (`etmlir.devtools.check_loadable`).

What is checked, each problem with where (method, instruction, and the source line, op and
module path from the `.pte`'s debug_info):

- `Program.version` within the runtime's range (`program_version`);
- every KernelCall's operator is registered (`kernel`), its arguments fit the registered
  signature (`signature`: what method loading checks), and the dtypes of its data tensors are
  among the kernel's dtypes, its outputs' among its out_dtypes (`dtype`: a kernel fails at run
  time on a dtype it lacks). Which arguments are data is the edge dialect's rule (the one
  test_kernel_table.py holds the kernel table to): an argument whose edge dtypes are a fixed set
  (indices i32/i64, masks i1, scalars) is not checked; for an op the edge table does not know,
  the first tensor input and the outputs are;
- every delegate: its backend compiled in (`backend`) and available (`backend_unavailable`),
  its payload header's format version (`payload_format`), backend id, body format and body
  version (`body_format`, `body_version`) readable by that backend, and for native-code
  backends the arch and CPU features the payload needs (`arch`, `cpu_features`). A `nested`
  delegate's body is itself a `.pte` that the same runtime loads with the same kernels: it is
  checked the same way, its problems reported at the outer delegate call with `inner` saying
  where inside.

Kernels the manifest lists without dtypes (the runtime's own `etmlir_prim::` kernels, custom
kernels registered without them) are checked for presence and signature only.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import struct
from collections.abc import Mapping
from typing import Any

from etmlir.executable import pte
from etmlir.executable.dtypes import ELEMENT_TYPES
from etmlir.payload_schema.CpuFeature import CpuFeature
from etmlir.schema.InstructionKind import InstructionKind
from etmlir.schema.Value import Value

MANIFEST_FORMAT = "etmlir-runtime-manifest"
MANIFEST_FORMAT_VERSION = 1  # tools/runtime_manifest.h kRuntimeManifestFormatVersion

# ScalarType code -> edge element type name (the manifest's dtype names).
_DTYPE_NAMES = {code: name for name, (code, _, _) in ELEMENT_TYPES.items()}
# Scalar, index, mask and index-result positions: fixed by the edge dialect, taken by every kernel
# (test_kernel_table.py FIXED_POSITIONS): such an argument's dtype is not the kernel's dtype.
_FIXED_POSITIONS = [sorted(f) for f in (["f64", "i1", "i64"], ["i32", "i64"], ["i32", "i64", "i1", "ui8"],
                                        ["i1"], ["i64"])]
_VALUE_NAMES = {v: k for k, v in vars(Value).items() if not k.startswith("_") and isinstance(v, int)}
_SCALARS = {Value.Int, Value.Double, Value.Bool}
# Signature character (include/etmlir/runtime/kernel.h) -> the value kinds it takes (None: any).
_SIGNATURE_KINDS: dict[str, set[int] | None] = {
    "T": {Value.Tensor}, "t": {Value.Tensor, Value.Null}, "i": {Value.Int}, "I": {Value.Int, Value.Null},
    "f": {Value.Double, Value.Int}, "F": {Value.Double, Value.Int, Value.Null}, "s": _SCALARS,
    "S": _SCALARS | {Value.Null}, "b": {Value.Bool}, "B": {Value.Bool, Value.Null}, "L": {Value.IntList},
    "M": {Value.IntList, Value.Null}, "D": {Value.DoubleList}, "G": {Value.DoubleList, Value.Null},
    "E": {Value.BoolList}, "Q": {Value.String}, "R": {Value.String, Value.Null}, "X": {Value.TensorList},
    "Y": {Value.OptionalTensorList}, "?": None,
}
_PAYLOAD_IDENTIFIER = b"ETPH"

# CpuFeature names in bit order (payload.fbs; etmlir.backends.payload_header.CPU_FEATURES, a layer up).
CPU_FEATURES = tuple(name for name, _ in sorted(((n, v) for n, v in vars(CpuFeature).items()
                                                 if not n.startswith("_") and isinstance(v, int)),
                                                key=lambda item: item[1]))
# Problem kinds.
KINDS = ("program_version", "kernel", "signature", "dtype", "backend", "backend_unavailable", "payload",
         "payload_format", "body_format", "body_version", "arch", "cpu_features")


class ManifestError(ValueError):
    """The manifest cannot be read or is not a runtime manifest this code understands."""


class NotLoadableError(RuntimeError):
    """A program the target runtime would refuse (or fail on): `report` lists what it lacks."""

    def __init__(self, report: "LoadabilityReport", max_lines: int = 25) -> None:
        super().__init__(report.format(max_lines=max_lines))
        self.report = report


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing the runtime lacks, and where the program needs it."""

    kind: str                       # one of KINDS
    message: str                    # what is missing, in words
    method: str | None = None       # the (outer) method; None for the program as a whole
    instruction: int | None = None  # the (outer) instruction: a kernel call, or the delegate call
    location: str | None = None     # "model.py:12" (debug_info)
    op: str | None = None           # "edge.gelu" (debug_info)
    module_path: str | None = None  # "layers.3.attn" (debug_info; "" for the model's own forward)
    delegate: int | None = None     # the delegate's index in `method`
    inner: str | None = None        # inside a nested delegate: "method 'forward', instruction 3"
    need: str | None = None         # the operator, backend or feature, for grouping ("aten::gelu.out")

    @property
    def where(self) -> str:
        if self.method is None:
            return "program"
        parts = [f"method '{self.method}'"]
        if self.instruction is not None:
            parts.append(f"instruction {self.instruction}")
        text = ", ".join(parts)
        if self.inner:
            text += f" > nested delegate {self.delegate}: {self.inner}"
        source = [s for s in (self.location, self.op) if s]
        if self.module_path:
            source.append(f"in {self.module_path}")
        return text + (f" ({', '.join(source)})" if source else "")

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclasses.dataclass
class LoadabilityReport:
    """What `check_loadable` found: `ok` when the runtime has everything the program needs."""

    program: str                     # the .pte's name
    manifest: str                    # which manifest (its path or producer)
    problems: list[Problem]
    methods: int = 0
    kernel_calls: int = 0
    delegates: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def by_kind(self, kind: str) -> list[Problem]:
        return [p for p in self.problems if p.kind == kind]

    @property
    def missing_kernels(self) -> list[str]:
        """The operators the runtime has no kernel for (each once)."""
        return sorted({p.need for p in self.problems if p.kind == "kernel" and p.need})

    def format(self, max_lines: int | None = None) -> str:
        head = f"{self.program} against {self.manifest}: "
        if self.ok:
            return (head + f"ok ({self.methods} method{'s' if self.methods != 1 else ''}, {self.kernel_calls} "
                    f"kernel calls, {self.delegates} delegate{'s' if self.delegates != 1 else ''} checked)")
        count = len(self.problems)
        lines = [head + f"{count} problem{'s' if count != 1 else ''}: the runtime would refuse or fail on it"]
        shown = self.problems if max_lines is None else self.problems[:max_lines]
        lines += [f"  {p}" for p in shown]
        if len(shown) < count:
            lines.append(f"  ... {count - len(shown)} more (missing kernels: {', '.join(self.missing_kernels)})"
                         if self.missing_kernels else f"  ... {count - len(shown)} more")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


# --- The manifest ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RuntimeManifest:
    """A runtime manifest, read and checked (`load_manifest`)."""

    data: Mapping[str, Any]
    source: str

    @property
    def kernels(self) -> dict[str, Mapping[str, Any]]:
        return {k["op"]: k for k in self.data["kernels"]}

    @property
    def backends(self) -> dict[str, Mapping[str, Any]]:
        return {b["id"]: b for b in self.data["backends"]}

    @property
    def program_versions(self) -> tuple[int, int]:
        schema = self.data["program_schema"]
        return int(schema["min_version"]), int(schema["max_version"])

    @property
    def payload_format_versions(self) -> tuple[int, int]:
        header = self.data["payload_header"]
        return int(header["min_format_version"]), int(header["max_format_version"])


def load_manifest(manifest: "str | os.PathLike[str] | Mapping[str, Any] | RuntimeManifest") -> RuntimeManifest:
    """A manifest from a JSON file, or one already loaded (`etmlir.runtime.manifest()`); ManifestError
    naming what is wrong when it is not one."""
    if isinstance(manifest, RuntimeManifest):
        return manifest
    if isinstance(manifest, Mapping):
        data, source = manifest, f"the runtime manifest from {manifest.get('producer', 'an unknown producer')}"
    else:
        path = os.fspath(manifest)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as error:
            raise ManifestError(f"cannot read runtime manifest '{path}': {error.strerror or error}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ManifestError(f"runtime manifest '{path}' is not JSON: {error}") from None
        source = path
    if not isinstance(data, Mapping) or data.get("format") != MANIFEST_FORMAT:
        raise ManifestError(f"{source} is not an etmlir runtime manifest (no \"format\": \"{MANIFEST_FORMAT}\"; "
                            "write one with et-manifest)")
    version = data.get("format_version")
    if version != MANIFEST_FORMAT_VERSION:
        raise ManifestError(f"{source}: runtime manifest format_version {version!r}; this etmlir reads "
                            f"{MANIFEST_FORMAT_VERSION}")
    try:
        for kernel in data["kernels"]:
            str(kernel["op"]), str(kernel["signature"])
            for key in ("dtypes", "out_dtypes"):
                if kernel.get(key) is not None and not isinstance(kernel[key], list):
                    raise TypeError(f"kernel {kernel['op']}: {key} is not a list")
        for backend in data["backends"]:
            str(backend["id"]), bool(backend["available"])
        RuntimeManifest(data, source).program_versions
        RuntimeManifest(data, source).payload_format_versions
    except (KeyError, TypeError, ValueError) as error:
        raise ManifestError(f"{source}: malformed runtime manifest ({type(error).__name__}: {error})") from None
    return RuntimeManifest(data, source)


# --- Which arguments carry the kernel's dtype --------------------------------------------------


@functools.cache
def _schema_arguments(kernel: str) -> tuple[tuple[str, bool], ...] | None:
    """(name, is output) per argument of `kernel`'s schema, in call order; None when unknown."""
    try:
        from etmlir.runtime.signatures import schema_of

        schema = schema_of(kernel)
    except Exception:  # noqa: BLE001 - an operator PyTorch does not know (a custom kernel)
        return None
    return tuple((a.name, bool(a.is_out)) for a in schema.arguments)


@functools.cache
def _data_positions(kernel: str, edge_op: str | None, num_args: int) -> tuple[frozenset[int], frozenset[int]]:
    """The argument positions of a call of `kernel` whose dtype is the kernel's: (inputs, outputs).

    From the edge op the instruction came from (debug_info): an argument whose edge dtypes are
    not one of the fixed sets. Without one: the first tensor-like input and every output.
    """
    arguments = _schema_arguments(kernel)
    if arguments is not None and len(arguments) == num_args and edge_op and edge_op.startswith("edge."):
        from etmlir.dialects.edge import edge_ops

        op = edge_ops().get(edge_op.removeprefix("edge."))
        if op is not None:
            results = [r["name"] for r in op.results]
            inputs, outputs, out_index = set(), set(), 0
            for k, (name, is_out) in enumerate(arguments):
                if is_out:
                    name = results[out_index] if out_index < len(results) else name
                    out_index += 1
                allowed = op.allowed_dtypes.get(name)
                if allowed and sorted(allowed) not in _FIXED_POSITIONS:
                    (outputs if is_out else inputs).add(k)
            return frozenset(inputs), frozenset(outputs)
    if arguments is not None and len(arguments) == num_args:
        outs = frozenset(k for k, (_, is_out) in enumerate(arguments) if is_out)
    else:
        outs = frozenset({num_args - 1}) if num_args else frozenset()
    return frozenset({0}) - outs, outs


# --- Reading the program ------------------------------------------------------------------------


def _text(s: object) -> str:
    if s is None:
        return ""
    return s.decode(errors="backslashreplace") if isinstance(s, bytes) else str(s)


def _read_pte(program: Any) -> tuple[bytes, str]:
    if hasattr(program, "buffer") and isinstance(program.buffer, (bytes, bytearray)):
        return bytes(program.buffer), "<program>"
    if isinstance(program, (bytes, bytearray, memoryview)):
        return bytes(program), "<buffer>"
    path = os.fspath(program)
    with open(path, "rb") as f:
        return f.read(), path


@dataclasses.dataclass
class _Payload:
    format_version: int
    backend_id: str
    body_format: str
    body_version: int
    arch: str
    cpu_features: int
    handles: list[int]
    body: bytes | None


def _read_payload_header(blob: bytes) -> _Payload | str:
    """The header's fields, whatever its format_version (the point is to compare it with the
    manifest's); a string saying why when the payload has no shared header."""
    from etmlir.payload_schema.PayloadHeader import PayloadHeader

    if len(blob) < 12 or blob[8:12] != _PAYLOAD_IDENTIFIER:
        return (f"its payload has no etmlir payload header (bytes 8..12 are {bytes(blob[8:12])!r}, not "
                f"{_PAYLOAD_IDENTIFIER!r}): a payload from before the shared header; rebuild the .pte")
    (size,) = struct.unpack_from("<I", blob)
    if size > len(blob) - 4:
        return f"its payload header ({size} bytes) does not fit in the payload ({len(blob)} bytes)"
    try:
        h = PayloadHeader.GetRootAs(blob[4:4 + size], 0)
        handles = sorted({int(d.Handles(j)) for i in range(h.DebugHandleMapLength())
                          for d in [h.DebugHandleMap(i)] for j in range(d.HandlesLength())})
        offset, body_size = h.BodyOffset(), h.BodySize()
        body = blob[offset:offset + body_size] if offset + body_size <= len(blob) else None
        return _Payload(h.FormatVersion(), _text(h.BackendId()), _text(h.BodyFormat()), h.BodyVersion(),
                        _text(h.Arch()), h.CpuFeatures(), handles, body)
    except Exception as error:  # noqa: BLE001 - the Python FlatBuffers reader has no verifier
        return f"its payload header is not a valid FlatBuffer ({type(error).__name__}: {error})"


def _feature_names(bits: int) -> list[str]:
    return [CPU_FEATURES[i] if i < len(CPU_FEATURES) else f"feature bit {i}" for i in range(64) if bits >> i & 1]


class _Checker:
    def __init__(self, manifest: RuntimeManifest) -> None:
        self.manifest = manifest
        self.kernels = manifest.kernels
        self.backends = manifest.backends
        self.problems: list[Problem] = []
        self.methods = self.kernel_calls = self.delegates = 0

    def check_program(self, data: bytes, outer: dict[str, Any] | None = None) -> None:
        """Checks one .pte; `outer` (method, instruction, delegate, debug) when it is a nested delegate's body."""
        try:
            file = pte.read(data)
        except pte.PteError as error:
            if outer is None:  # the program itself: not a question of the runtime
                raise
            self._add(outer, None, None, None, "payload", f"its body is not a .pte this etmlir reads: {error}")
            return
        program = file.program
        low, high = self.manifest.program_versions
        if not low <= program.version <= high:
            self._add(outer, None, None, None, "program_version",
                      f"program schema version {program.version}; this runtime reads versions {low}..{high}"
                      + (" (the runtime is older than this file: update it, or compile with the etmlir release it comes from)"
                         if program.version > high else ""),
                      need=f"Program.version {program.version}")
        for method in program.methods or []:
            self._check_method(file, method, outer)

    def _check_method(self, file: pte.PteFile, method: Any, outer: dict[str, Any] | None) -> None:
        self.methods += outer is None
        name = _text(method.name)
        values = method.values or []
        operators = method.operators or []
        debug = {e.handle: e for e in (method.debugInfo or [])}
        delegate_calls: dict[int, list[tuple[int, Any]]] = {}
        for pc, ins in enumerate(method.instructions or []):
            body = ins.kind
            if body is None:
                continue
            where = (name, pc, debug.get(ins.debugHandle))
            if ins.kindType == InstructionKind.KernelCall and body.op < len(operators):
                self.kernel_calls += outer is None
                operator = operators[body.op]
                overload = _text(operator.overload)
                key = _text(operator.name) + (f".{overload}" if overload else "")
                self._check_kernel_call(key, [int(a) for a in (body.args if body.args is not None else [])],
                                        values, where, outer)
            elif ins.kindType == InstructionKind.DelegateCall:
                delegate_calls.setdefault(body.delegate, []).append((pc, ins))
        for index, delegate in enumerate(method.delegates or []):
            self.delegates += outer is None
            calls = delegate_calls.get(index, [])
            pc = calls[0][0] if calls else None
            entry = debug.get(calls[0][1].debugHandle) if calls else None
            self._check_delegate(file, delegate, index, (name, pc, entry), debug, outer)

    def _add(self, outer: dict[str, Any] | None, where: tuple[str, int | None, Any] | None, delegate: int | None,
             entry: Any, kind: str, message: str, need: str | None = None) -> None:
        method, pc = (where[0], where[1]) if where else (None, None)
        entry = entry if entry is not None else (where[2] if where else None)
        location = op = module = None
        if entry is not None:
            location, op = _text(entry.location) or None, _text(entry.op) or None
            module = _text(entry.modulePath) if getattr(entry, "modulePath", None) is not None else None
        if outer is not None:  # inside a nested delegate: report at the outer delegate call
            here = "program" if method is None else f"method '{method}'" + (
                f", instruction {pc}" if pc is not None else "")
            inner = f"{outer['inner']} > {here}" if outer.get("inner") else here
            if entry is None and outer.get("entry") is not None:
                outer_entry = outer["entry"]
                location, op = _text(outer_entry.location) or None, _text(outer_entry.op) or None
            self.problems.append(Problem(kind, message, outer["method"], outer["instruction"], location, op, module,
                                         outer["delegate"], inner, need))
            return
        self.problems.append(Problem(kind, message, method, pc, location, op, module, delegate, None, need))

    def _check_kernel_call(self, key: str, args: list[int], values: list, where: tuple, outer: Any) -> None:
        kernel = self.kernels.get(key)
        if kernel is None:
            self._add(outer, where, None, None, "kernel", f"kernel {key} is not in this runtime "
                      "(register it, or build with the operator selected)", need=key)
            return
        signature = str(kernel["signature"])
        kinds = signature.replace("|", "")
        if len(kinds) != len(args):
            self._add(outer, where, None, None, "signature",
                      f"{key} is called with {len(args)} arguments; this runtime's kernel takes {len(kinds)} "
                      f"(signature \"{signature}\")", need=key)
            return
        for k, (kind, index) in enumerate(zip(kinds, args)):
            value_kind = values[index].valueType if 0 <= index < len(values) else None
            accepted = _SIGNATURE_KINDS.get(kind, set())
            if accepted is not None and value_kind not in accepted:
                self._add(outer, where, None, None, "signature",
                          f"{key} argument {k} is a {_VALUE_NAMES.get(value_kind, 'missing value')}; this runtime's "
                          f"kernel expects kind '{kind}' (signature \"{signature}\")", need=key)
                return
        dtypes, out_dtypes = kernel.get("dtypes"), kernel.get("out_dtypes")
        if dtypes is None and out_dtypes is None:
            return  # the registry declares none: presence and signature are all there is to check
        entry = where[2]
        inputs, outputs = _data_positions(key, _text(entry.op) if entry is not None else None, len(args))
        arguments = _schema_arguments(key)
        # (dtype, role) -> the arguments that have it: one problem per dtype the kernel lacks.
        lacking: dict[tuple[str, str], list[str]] = {}
        for k in sorted(inputs | outputs):
            role = "out_dtypes" if k in outputs else "dtypes"
            supported = out_dtypes if k in outputs else dtypes
            if supported is None:
                continue
            for dtype in self._tensor_dtypes(values, args[k]):
                if dtype not in supported:
                    arg = f"'{arguments[k][0]}'" if arguments and k < len(arguments) else f"{k}"
                    lacking.setdefault((dtype, role), []).append(arg)
        for (dtype, role), names in lacking.items():
            supported = out_dtypes if role == "out_dtypes" else dtypes
            what = "output" if role == "out_dtypes" else "argument"
            are = f"{what} {names[0]} is" if len(names) == 1 else f"{what}s {', '.join(names)} are"
            self._add(outer, where, None, None, "dtype",
                      f"{key} has no {dtype} kernel ({are} {dtype}; this runtime's kernel takes "
                      f"{', '.join(supported) or 'no dtype'})", need=f"{key} {dtype}")

    @staticmethod
    def _tensor_dtypes(values: list, index: int) -> list[str]:
        if not 0 <= index < len(values):
            return []
        v = values[index]
        if v.valueType == Value.Tensor and v.value is not None:
            return [_DTYPE_NAMES.get(v.value.dtype, f"scalar_type_{v.value.dtype}")]
        if v.valueType in (Value.TensorList, Value.OptionalTensorList) and v.value is not None:
            items = [int(i) for i in (v.value.items if v.value.items is not None else [])]
            found: list[str] = []
            for i in items:
                for dtype in _Checker._tensor_dtypes(values, i) if i >= 0 else []:
                    if dtype not in found:
                        found.append(dtype)
            return found
        return []

    def _check_delegate(self, file: pte.PteFile, delegate: Any, index: int, where: tuple, debug: dict,
                        outer: dict[str, Any] | None) -> None:
        backend_id = _text(delegate.backend)
        payload = None
        blob = None
        if delegate.payload is not None:
            loc = delegate.payload
            try:
                blob = file.segment(loc.segment)[loc.offset:loc.offset + loc.size]
            except pte.PteError as error:
                self._add(outer, where, index, None, "payload", f"delegate {index} ('{backend_id}'): {error}")
                return
            payload = _read_payload_header(blob)
        # A delegate call with no debug entry of its own: the first op it covers says where.
        entry = where[2]
        if entry is None and isinstance(payload, _Payload):
            entry = next((debug[h] for h in payload.handles if h in debug), None)
        where = (where[0], where[1], entry)
        label = f"delegate {index} ('{backend_id}')"
        backend = self.backends.get(backend_id)
        if backend is None:
            have = ", ".join(sorted(self.backends)) or "none"
            self._add(outer, where, index, None, "backend",
                      f"{label}: backend '{backend_id}' is not compiled into this runtime (it has: {have})",
                      need=backend_id)
            return
        if not backend.get("available", True):
            self._add(outer, where, index, None, "backend_unavailable",
                      f"{label}: backend '{backend_id}' is compiled in but not available on the machine that "
                      "wrote the manifest", need=backend_id)
        if payload is None:
            return
        if isinstance(payload, str):
            self._add(outer, where, index, None, "payload", f"{label}: {payload}", need=backend_id)
            return
        low, high = self.manifest.payload_format_versions
        if not low <= payload.format_version <= high:
            self._add(outer, where, index, None, "payload_format",
                      f"{label}: payload header format_version {payload.format_version}; this runtime reads "
                      f"{low}..{high}", need=f"payload format {payload.format_version}")
            return  # the rest of the header may mean something else
        if payload.backend_id != backend_id:
            self._add(outer, where, index, None, "payload",
                      f"{label}: its payload is for backend '{payload.backend_id}'", need=backend_id)
        body_format, versions = backend.get("body_format"), backend.get("body_versions")
        if body_format is not None and payload.body_format != body_format:
            self._add(outer, where, index, None, "body_format",
                      f"{label}: payload body_format '{payload.body_format}'; backend '{backend_id}' of this runtime "
                      f"reads '{body_format}'", need=f"{backend_id} {payload.body_format}")
        elif versions is not None and not versions[0] <= payload.body_version <= versions[1]:
            self._add(outer, where, index, None, "body_version",
                      f"{label}: payload body_version {payload.body_version}; backend '{backend_id}' of this "
                      f"runtime reads {versions[0]}..{versions[1]}",
                      need=f"{backend_id} body_version {payload.body_version}")
        if backend.get("native_code"):
            arch = backend.get("arch")
            if payload.arch and arch is not None and payload.arch != arch:
                self._add(outer, where, index, None, "arch",
                          f"{label}: payload built for {payload.arch}; this runtime runs on {arch}", need=payload.arch)
            have = set(backend.get("cpu_features") or [])
            missing = [f for f in _feature_names(payload.cpu_features) if f not in have]
            if missing:
                self._add(outer, where, index, None, "cpu_features",
                          f"{label}: payload needs CPU features {', '.join(missing)} that the runtime's machine "
                          f"lacks (it has: {', '.join(sorted(have)) or 'none'})", need=", ".join(missing))
        if payload.body_format == "pte" and payload.body is not None:
            if outer is None:
                inner_outer = {"method": where[0], "instruction": where[1], "delegate": index, "entry": entry,
                               "inner": None}
            else:
                inner_outer = dict(outer)
                inner_outer["inner"] = self._inner_path(outer, where, index)
            self.check_program(payload.body, inner_outer)

    @staticmethod
    def _inner_path(outer: dict[str, Any], where: tuple, index: int) -> str:
        here = f"method '{where[0]}'" + (f", instruction {where[1]}" if where[1] is not None else "")
        here += f" > nested delegate {index}"
        return f"{outer['inner']} > {here}" if outer.get("inner") else here


def check_loadable(program: Any, manifest: Any) -> LoadabilityReport:
    """What `manifest`'s runtime lacks to load and run `program` (see the module docstring).

    program:  a `.pte` path, its bytes, or an `ExecutorchProgram`
    manifest: a runtime manifest JSON path (`et-manifest --output`), or one loaded
              (`etmlir.runtime.manifest()`)

    Raises ManifestError for a manifest it cannot read, `etmlir.executable.pte.PteError` for
    bytes that are not a `.pte`; everything the runtime lacks is in the report, never raised.
    """
    runtime_manifest = load_manifest(manifest)
    data, name = _read_pte(program)
    checker = _Checker(runtime_manifest)
    checker.check_program(data)
    # By place; problems at one place (a nested delegate's) keep the order they were found in.
    problems = sorted(checker.problems, key=lambda p: (p.method is not None, p.method or "",
                                                      -1 if p.instruction is None else p.instruction))
    return LoadabilityReport(name, runtime_manifest.source, problems, checker.methods, checker.kernel_calls,
                             checker.delegates)


def raise_if_not_loadable(program: Any, manifest: Any, action: str = "raise") -> LoadabilityReport:
    """`check_loadable`, then NotLoadableError ("raise") or a warning ("warn") when something is missing."""
    if action not in ("raise", "warn"):
        raise ValueError(f"manifest check action must be 'raise' or 'warn', not {action!r}")
    report = check_loadable(program, manifest)
    if not report.ok:
        if action == "raise":
            raise NotLoadableError(report)
        import warnings

        warnings.warn(report.format(max_lines=25), RuntimeWarning, stacklevel=3)
    return report
