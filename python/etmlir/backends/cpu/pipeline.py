"""One outlined delegate -> a `cpu` payload: the backend's named pass pipeline, then serialisation.

    edge @forward
      --et-conv1d-to-conv2d--> 1-d convolutions as 2-d ones over a height-1 image
      --et-fold-constants--> edge (weight transposes and reshapes folded)
      --et-fold-batch-norm--> inference batch norms folded into the convolutions before them
      --et-edge-to-torch--> torch dialect --et-torch-to-linalg--> linalg on tensors
      --et-cpu-split-groups--> grouped convolutions as one dense convolution per group
      --et-cpu-fuse-elementwise--> fused loop nests, contractions kept
      --et-cpu-shapes-function--> + @forward_shapes when a result is dynamic
      --et-cpu-attention--> attention (kept whole) as calls of the fused attention kernel
      --et-cpu-bufferize--> memrefs, results as out-parameters
      --et-cpu-microkernels--> contractions as calls of the C microkernels
      --et-cpu-pack-weights--> constant weights packed into the microkernels' panels at compile time
      --et-cpu-fuse-inverted-residual--> 1x1 -> depthwise -> 1x1 chains as one banded kernel call
      --et-cpu-approximate-math--> exp/tanh/erf as arithmetic, reductions reassociable (so loops vectorize)
      --et-cpu-trace-regions--> each piece of compute bracketed as a region the tracer times
      --et-cpu-report-failures--> run-time checks return errors instead of aborting
      --et-cpu-externalize-weights--> large weights as external symbols
      --et-cpu-to-llvm--> LLVM dialect
    then: ExecutionEngine (opt 2, this CPU) -> object --link--> shared object
          --measure--> arena size --payload--> header + shared object

`pipeline(...)` returns the pass pipeline as text, so any step can be rerun
on its own (`et-opt --pass-pipeline='builtin.module(et-cpu-bufferize)'`);
the compile spec `verbose=true` prints it and each step's time.

The arena (every buffer the compiled code allocates, and the microkernels'
packing scratch) is sized by running the shared object once, in this
process, at the largest input sizes the delegate accepts, with work split
as a pool of `ARENA_THREADS` threads would split it: the allocator is
deterministic, so the runtime's arena of that size holds every allocation
of every smaller run too (results are not used; inputs are zeros).
"""

from __future__ import annotations

import ctypes
import dataclasses
import mmap
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping

import numpy as np
from torch_mlir import ir
from torch_mlir.execution_engine import ExecutionEngine

from etmlir.backends.cpu import link, payload
from etmlir.backends.cpu.ir_util import ENTRY, SHAPES_ENTRY, argument_types, result_types
from etmlir.backends.cpu.passes.externalize_weights import take_external_weights, write_weights_assembly
from etmlir.backends.cpu.passes.trace_regions import recorded_regions
from etmlir.backends.cpu.target import Target, host
from etmlir.delegation.backend import BackendError, PreprocessResult
from etmlir.executable.dtypes import SCALAR_TYPE_NAMES
from etmlir.frontend.shape_bounds import argument_max_sizes
from etmlir.passes.assign_debug_handles import debug_handles
from etmlir.passes.pipeline import parse_pipeline, run_pipeline
from etmlir.program import find_function


SPECS = ("microkernels", "trace_regions", "verbose", "winograd")


def preprocess(module: ir.Module, compile_specs: Mapping[str, str]) -> PreprocessResult:
    """The cpu backend's preprocess: compile specs checked, the pipeline run, the payload serialised."""
    unknown = sorted(set(compile_specs) - set(SPECS))
    if unknown:
        raise BackendError(f"cpu backend: unknown compile spec(s) {', '.join(unknown)} (known: {', '.join(SPECS)})")
    verbose = compile_specs.get("verbose", "false").lower() == "true"
    try:
        compiled = compile_delegate(
            module, microkernels=compile_specs.get("microkernels", "true").lower() != "false",
            trace_regions=compile_specs.get("trace_regions", "true").lower() != "false",
            winograd=compile_specs.get("winograd", "true").lower() != "false",
            log=(lambda line: print(f"[cpu] {line}", file=sys.stderr)) if verbose else None)
    except ir.MLIRError as error:
        raise BackendError(f"cpu backend: the delegate does not compile: {error}") from None
    # Region id -> the edge ops it covers: what a DelegateOp event's payload id expands to.
    return PreprocessResult(compiled.payload, dict(compiled.info.debug_handle_map))


def pipeline(*, microkernels: bool = True, trace_regions: bool = True, panels: tuple[int, int] | None = None,
             winograd: bool = True) -> str:
    """The pass pipeline from an outlined edge delegate to the LLVM dialect (`panels`: the microkernels'
    (A rows, B columns), `link.panel_shape`; None leaves et-cpu-pack-weights to ask the host's;
    `winograd`: 3x3 convolutions through Winograd where they suit)."""
    passes = ["et-conv1d-to-conv2d", "et-fold-constants", "et-fold-batch-norm", "et-edge-to-torch", "et-torch-to-linalg{attention=1}", "et-cpu-split-groups", "et-cpu-fuse-elementwise",
              "et-cpu-shapes-function", "et-cpu-attention", "et-cpu-bufferize"]
    if microkernels:
        options = ([f"panel-rows={panels[0]}", f"panel-width={panels[1]}"] if panels else []) + \
            ([] if winograd else ["winograd=false"])
        passes += ["et-cpu-microkernels", f"et-cpu-pack-weights{{{' '.join(options)}}}" if options else "et-cpu-pack-weights",
                   "et-cpu-fuse-inverted-residual"]
    passes.append("et-cpu-approximate-math")
    if trace_regions:
        passes.append("et-cpu-trace-regions")
    passes += ["et-cpu-report-failures", "et-cpu-externalize-weights", "et-cpu-to-llvm"]
    return f"builtin.module({','.join(passes)})"


ENTRY_SYMBOL = f"_mlir__mlir_ciface_{ENTRY}"
SHAPES_SYMBOL = f"_mlir__mlir_ciface_{SHAPES_ENTRY}"
# LLVM's -O2: -O3 triples the compile time of nanoGPT's blocks (dynamic loop nests) for no measured gain;
# the time is spent in the microkernels, which gcc compiles at -O3.
OPT_LEVEL = 2
# The microkernels give each parallel task its own packing scratch, so the arena is sized for this
# many threads (the measuring run splits work as a pool of this size would, running chunks in turn).
# A runtime pool larger than this still computes correctly; the extra scratch comes from malloc, counted.
ARENA_THREADS = 8
_MEASURE_ARENA = 1 << 32  # 4 GiB of address space: pages are touched only as the measuring run uses them


@dataclasses.dataclass
class CompiledDelegate:
    payload: bytes
    info: payload.PayloadInfo
    microkernel_calls: dict[str, int]
    seconds: dict[str, float]



def compile_delegate(module: ir.Module, *, target: Target | None = None, microkernels: bool = True,
                     trace_regions: bool = True, winograd: bool = True,
                     log: Callable[[str], None] | None = None) -> CompiledDelegate:
    """Compile an outlined delegate module (edge `@forward`, changed in place) into a payload."""
    target = target or host()
    seconds: dict[str, float] = {}

    def timed(name: str, start: float) -> None:
        seconds[name] = time.perf_counter() - start
        if log:
            log(f"{name}: {seconds[name]:.2f}s")

    forward = find_function(module, ENTRY)
    if forward is None:
        raise BackendError(f"cpu backend: the delegate module has no func.func @{ENTRY}")
    in_types, out_types = argument_types(forward), result_types(forward)
    max_sizes = [argument_max_sizes(forward, i) for i in range(len(in_types))]
    for i, t in enumerate(in_types):
        missing = [d for d in range(t.rank) if t.is_dynamic_dim(d) and d not in max_sizes[i]]
        if missing:
            raise BackendError(f"cpu backend: input {i} ({t}) has dynamic dims {missing} without an upper bound")
    handles = tuple(sorted(set(debug_handles(module.operation))))

    text = pipeline(microkernels=microkernels, trace_regions=trace_regions,
                    panels=link.panel_shape(target) if microkernels else None, winograd=winograd)
    if log:
        log(f"pipeline: {text}")
    for element in parse_pipeline(text):  # one at a time: each step's time is reported
        start = time.perf_counter()
        run_pipeline(module, [element])
        timed(element.name, start)
    calls = _microkernel_calls(module)
    regions = recorded_regions(module.operation)
    has_shapes = find_function(module, SHAPES_ENTRY) is not None or _has_llvm_function(module, SHAPES_ENTRY)
    weights = take_external_weights(module.operation)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="etmlir-cpu-") as tmp:
        obj = os.path.join(tmp, "forward.o")
        extra = [write_weights_assembly(weights, tmp)] if weights else []
        # MLIR's JIT resolves every symbol before it writes the object: the microkernels, the weights.
        libraries = [link.microkernel_library(target)]
        if extra:
            libraries.append(link.weights_library(extra[0], tmp))
        engine = ExecutionEngine(module, opt_level=OPT_LEVEL, shared_libs=libraries)
        engine.dump_to_object_file(obj)
        del engine
        timed("llvm", start)
        start = time.perf_counter()
        so = link.link_shared_object(obj, target, extra)
        timed("link", start)
    info = payload.PayloadInfo(
        arch=target.arch, cpu_features=target.feature_mask, arena_bytes=0,
        inputs=tuple(map(payload.TensorSpec.of, in_types)), outputs=tuple(map(payload.TensorSpec.of, out_types)),
        debug_handle_map=handle_map(regions, handles), entry=ENTRY_SYMBOL,
        shapes_entry=SHAPES_SYMBOL if has_shapes else "")
    start = time.perf_counter()
    arena = measure_arena(so, info, [[max_sizes[i].get(d, s) for d, s in enumerate(spec.sizes)]
                                     for i, spec in enumerate(info.inputs)])
    info = dataclasses.replace(info, arena_bytes=arena)
    timed("measure arena", start)
    return CompiledDelegate(payload.write_payload(info, so), info, calls, seconds)


def handle_map(regions: list[tuple[int, ...]], handles: tuple[int, ...]) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """The payload header's debug_handle_map: region i + 1 -> its edge ops; 0 -> the ops in no region."""
    entries = tuple((number, region) for number, region in enumerate(regions, start=1))
    timed = {h for region in regions for h in region}
    untimed = tuple(h for h in handles if h not in timed)
    return entries + (((0, untimed),) if untimed else ())


def _llvm_functions(module: ir.Module) -> list[ir.Operation]:
    return [op.operation for op in module.body.operations if op.operation.name == "llvm.func"]


def _has_llvm_function(module: ir.Module, name: str) -> bool:
    return any(ir.StringAttr(f.attributes["sym_name"]).value == name for f in _llvm_functions(module))


def _microkernel_calls(module: ir.Module) -> dict[str, int]:
    """Calls per microkernel in the lowered module (what et-cpu-microkernels made)."""
    counts: dict[str, int] = {}

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "llvm.call" and "callee" in op.attributes:
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            if callee.startswith("etmlir_uk_"):
                counts[callee] = counts.get(callee, 0) + 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return counts


class LoadedPayload:
    """A payload's shared object loaded in this process with ctypes (compile-time checks, tests)."""

    def __init__(self, so: bytes, info: payload.PayloadInfo) -> None:
        fd, self._path = tempfile.mkstemp(suffix=".so", prefix="etmlir-cpu-")
        with os.fdopen(fd, "wb") as f:
            f.write(so)
        try:
            self.lib = ctypes.CDLL(self._path, mode=os.RTLD_LOCAL)
        finally:
            os.unlink(self._path)
        self.info = info
        self.lib.etmlir_cpu_set_arena.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
        self.lib.etmlir_cpu_arena_peak.restype = ctypes.c_uint64
        self.lib.etmlir_cpu_heap_fallbacks.restype = ctypes.c_uint64
        self.lib.etmlir_cpu_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.lib.etmlir_cpu_run.restype = ctypes.c_int
        self.lib.etmlir_cpu_failure.restype = ctypes.c_char_p
        self.lib.etmlir_cpu_failed_handle.restype = ctypes.c_int32
        self._keep: list[object] = []

    def set_arena(self, size: int) -> None:
        buffer = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0))
        self._keep.append(buffer)
        address = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
        self.lib.etmlir_cpu_set_arena(ctypes.c_void_p(address), ctypes.c_uint64(size))

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        arrays = [np.ascontiguousarray(a) for a in inputs]
        out_sizes: list[tuple[int, ...]] = []
        if self.info.shapes_entry:
            total = sum(len(t.sizes) for t in self.info.outputs)
            sizes = np.zeros(total, dtype=np.int64)
            self._run(getattr(self.lib, self.info.shapes_entry), arrays + [sizes])
            at = 0
            for t in self.info.outputs:
                out_sizes.append(tuple(int(s) for s in sizes[at:at + len(t.sizes)]))
                at += len(t.sizes)
        else:
            out_sizes = [t.sizes for t in self.info.outputs]
        outs = [np.zeros(s, dtype=np.dtype(SCALAR_TYPE_NAMES[t.dtype])) for s, t in zip(out_sizes, self.info.outputs)]
        self._run(getattr(self.lib, self.info.entry), arrays + outs)
        return outs

    def _run(self, function: ctypes._CFuncPtr, arrays: list[np.ndarray]) -> None:
        """Call an entry point through etmlir_cpu_run, so a failed run-time check raises PayloadFailure
        instead of aborting this process (PAYLOAD.md "Timed regions and failures")."""
        from torch_mlir.runtime.np_to_memref import get_ranked_memref_descriptor
        descriptors = [ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a))) for a in arrays]
        packed = (ctypes.c_void_p * len(descriptors))(*[ctypes.cast(d, ctypes.c_void_p) for d in descriptors])
        if self.lib.etmlir_cpu_run(ctypes.cast(function, ctypes.c_void_p), packed):
            raise PayloadFailure(self.lib.etmlir_cpu_failure().decode(errors="replace"),
                                 int(self.lib.etmlir_cpu_failed_handle()))


class PayloadFailure(Exception):
    """A run-time check of the payload failed: the message and the failing edge op's debug handle (0: unknown)."""

    def __init__(self, message: str, debug_handle: int) -> None:
        super().__init__(message)
        self.debug_handle = debug_handle


def measure_arena(so: bytes, info: payload.PayloadInfo, input_sizes: list[list[int]]) -> int:
    """Run the payload once at `input_sizes` with a huge arena; the bytes it used, rounded up to 64."""
    loaded = LoadedPayload(so, info)
    loaded.set_arena(_MEASURE_ARENA)
    body_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    pool_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, body_type, ctypes.c_void_p)

    def serial_pool(_ctx: int, n: int, body: object, arg: int) -> None:
        chunks = min(ARENA_THREADS, n)
        for i in range(chunks):
            body(arg, n * i // chunks, n * (i + 1) // chunks)

    pool = pool_type(serial_pool)
    loaded.lib.etmlir_cpu_set_parallel.argtypes = [pool_type, ctypes.c_void_p, ctypes.c_int]
    loaded.lib.etmlir_cpu_set_parallel(pool, None, ARENA_THREADS)
    inputs = [np.zeros(sizes, dtype=np.dtype(SCALAR_TYPE_NAMES[t.dtype])) for sizes, t in zip(input_sizes, info.inputs)]
    try:
        loaded(*inputs)
    except PayloadFailure as failure:
        where = f" (edge op debug handle {failure.debug_handle})" if failure.debug_handle else ""
        sizes = ", ".join("x".join(map(str, s)) or "scalar" for s in input_sizes)
        raise BackendError(f"cpu backend: the measuring run at the largest input sizes ({sizes}, zeros) failed a "
                           f"run-time check{where}: {failure}") from failure
    if loaded.lib.etmlir_cpu_heap_fallbacks():
        raise BackendError("cpu backend: the measuring run allocated outside its arena")
    return (int(loaded.lib.etmlir_cpu_arena_peak()) + 63) // 64 * 64
