"""One outlined delegate -> a `vulkan` payload: the backend's named pass pipeline, SPIR-V, the dispatch graph.

    edge @forward
      --et-fold-constants, et-edge-to-torch, et-torch-to-linalg, et-cpu-fuse-elementwise-->
            linalg on tensors (the lowering the cpu backend uses, shared)
      (--et-vulkan-specialize-shapes{size=N}--> static shapes, once per size in `sizes`, for a
            delegate with dynamic dims: the payload holds one dispatch graph per size)
      --et-vulkan-bufferize--> memrefs, results as out-parameters
      --et-vulkan-outline-kernels--> one gpu.func per linalg op, launched from @forward
      --et-vulkan-tile-matmul--> matmul / batch_matmul as shared-memory tiled kernels
      --et-vulkan-map-threads--> every other kernel: one parallel iteration per GPU thread
      --et-vulkan-legalize-kernels--> erf expanded, f64 constants narrowed, stores recorded
      --spirv-attach-target, convert-math-to-spirv, convert-gpu-to-spirv,
        spirv-lower-abi-attrs, spirv-update-vce--> spirv.module per kernel (Vulkan target env)
    then: gpu-module-to-binary -> SPIR-V words per kernel (checked by spirv-val when it is installed)
          -> dispatch graph (dispatch_graph.py: buffers, memory plan, barriers, weights)
          -> payload: the shared payload header + the graph FlatBuffer (runtime/schema/vulkan.fbs)

`pipeline(...)` returns the pass pipeline as text, so any step can be rerun on
its own (`et-opt --pass-pipeline='builtin.module(et-vulkan-map-threads)'`);
the compile spec `verbose=true` prints it and each step's time.

Compile specs:
    sizes                      for a delegate with dynamic dims: the sizes they take, "64,256" (one
                               dispatch graph per size; the runtime refuses inputs of any other size)
    tile                       the matmul tile edge (default 16: 16 x 16 = 256 threads per workgroup)
    max_workgroup_invocations  the device limit the shaders must fit (default 256; Vulkan guarantees 128,
                               most GPUs have 256 or more; the runtime checks the real limit at init)
    spirv_version              the SPIR-V version of the target env (default v1.0, Vulkan 1.0)
    validate                   "auto" (default: run spirv-val on every shader when it is installed),
                               "true" (spirv-val must be there), "false"
    verbose                    "true": print the pipeline and each step's time
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping

from torch_mlir import ir
from torch_mlir.dialects import gpu as gpu_dialect

from etmlir.backends.cpu.ir_util import run
from etmlir.backends.payload_header import PayloadHeader, delegate_specs, payload_summary, write_payload
from etmlir.backends.vulkan import dispatch_graph
from etmlir.backends.vulkan.passes.legalize_kernels import WRITES
from etmlir.backends.vulkan.passes.map_threads import ENTRY_POINT_ABI
from etmlir.backends.vulkan.passes.outline_kernels import DEBUG_HANDLE, kernels
from etmlir.backends.vulkan.passes.specialize_shapes import PINNED
from etmlir.delegation.backend import BackendError, PreprocessResult
from etmlir.passes.pipeline import parse_pipeline, run_pipeline
from etmlir.program import clone_module, find_function

BACKEND_ID = "vulkan"
BODY_FORMAT = "vulkan-dispatch-graph"
BODY_VERSION = 1
ENTRY = "forward"
SPECS = ("sizes", "tile", "max_workgroup_invocations", "spirv_version", "validate", "verbose")
SPIRV_VERSIONS = ("v1.0", "v1.1", "v1.2", "v1.3", "v1.4", "v1.5", "v1.6")


def check_specs(specs: Mapping[str, str]) -> dict[str, object]:
    """The compile specs, checked (a BackendError naming a bad one), with their defaults."""
    unknown = sorted(set(specs) - set(SPECS))
    if unknown:
        raise BackendError(f"vulkan backend: unknown compile spec(s) {', '.join(unknown)} (known: {', '.join(SPECS)})")
    values: dict[str, object] = {}
    for name, default in (("tile", 16), ("max_workgroup_invocations", 256)):
        text = specs.get(name, str(default))
        if not text.isdigit() or int(text) < 1:
            raise BackendError(f"vulkan backend: compile spec {name}='{text}' is not a positive integer")
        values[name] = int(text)
    if values["tile"] ** 2 > values["max_workgroup_invocations"]:
        raise BackendError(f"vulkan backend: a {values['tile']} x {values['tile']} matmul tile needs "
                           f"{values['tile'] ** 2} threads per workgroup; max_workgroup_invocations is "
                           f"{values['max_workgroup_invocations']} (choose a smaller tile)")
    values["spirv_version"] = specs.get("spirv_version", "v1.0")
    if values["spirv_version"] not in SPIRV_VERSIONS:
        raise BackendError(f"vulkan backend: spirv_version '{values['spirv_version']}' is not one of "
                           f"{', '.join(SPIRV_VERSIONS)}")
    values["validate"] = specs.get("validate", "auto").lower()
    if values["validate"] not in ("auto", "true", "false"):
        raise BackendError(f"vulkan backend: validate='{specs['validate']}' (known: auto, true, false)")
    values["verbose"] = specs.get("verbose", "false").lower() == "true"
    sizes = [part.strip() for part in specs.get("sizes", "").split(",") if part.strip()]
    if any(not part.isdigit() or int(part) < 1 for part in sizes):
        raise BackendError(f"vulkan backend: compile spec sizes='{specs['sizes']}' is not a list of positive "
                           "integers like '64,256'")
    values["sizes"] = sorted(set(int(part) for part in sizes))
    return values


def pipeline(*, tile: int = 16, spirv_version: str = "v1.0", size: int | None = None) -> str:
    """The pass pipeline from an outlined edge delegate to one spirv.module per kernel (`size`: every
    dynamic dim of the delegate's inputs takes that value)."""
    specialize = [f"et-vulkan-specialize-shapes{{size={size}}}"] if size is not None else []
    passes = ["et-fold-constants", "et-edge-to-torch", "et-torch-to-linalg", *specialize, "et-cpu-fuse-elementwise",
              "et-vulkan-bufferize", "et-vulkan-outline-kernels", f"et-vulkan-tile-matmul{{tile={tile}}}",
              "et-vulkan-map-threads", "et-vulkan-legalize-kernels",
              f"spirv-attach-target{{ver={spirv_version} caps=Shader,Int64 exts=SPV_KHR_storage_buffer_storage_class}}",
              "gpu.module(gpu.func(convert-math-to-spirv))", "convert-gpu-to-spirv",
              "spirv.module(spirv-lower-abi-attrs,spirv-update-vce)"]
    return f"builtin.module({','.join(passes)})"


def serialize_kernels(module: ir.Operation) -> dict[str, bytes]:
    """{kernel: SPIR-V bytes}: each spirv.module moved into its gpu.module, then `gpu-module-to-binary`.

    For Vulkan targets convert-gpu-to-spirv puts the spirv.module next to its
    gpu.module; gpu-module-to-binary serializes the one nested inside it.
    """
    body = module.regions[0].blocks[0]
    tops = [op.operation for op in body.operations]
    modules = {ir.StringAttr(op.attributes["sym_name"]).value: op for op in tops if op.name == "gpu.module"}
    for op in tops:
        if op.name != "spirv.module":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value.removeprefix("__spv__")
        block = modules[name].regions[0].blocks[0]
        for inner in list(block.operations):
            if inner.operation.name == "gpu.func":
                inner.operation.erase()
        rest = list(block.operations)
        if rest:
            op.move_before(rest[0].operation)
        else:
            block.append(op)
    run(module, "builtin.module(gpu-module-to-binary{format=bin})")
    found: dict[str, bytes] = {}
    for op in body.operations:
        op = op.operation
        if op.name == "gpu.binary":
            objects = list(ir.ArrayAttr(op.attributes["objects"]))
            found[ir.StringAttr(op.attributes["sym_name"]).value] = bytes(gpu_dialect.ObjectAttr(objects[0]).object)
    return found


def validate_spirv(binaries: dict[str, bytes], spirv_version: str, required: bool) -> None:
    """Run spirv-val (SPIRV-Tools) on every shader for the Vulkan 1.0 environment; a BackendError naming the
    shader when it finds a problem."""
    tool = shutil.which("spirv-val")
    if tool is None:
        if required:
            raise BackendError("vulkan backend: validate=true but spirv-val is not installed "
                               "(Debian: apt-get install spirv-tools)")
        return
    env = "vulkan1.1" if spirv_version in ("v1.1", "v1.2", "v1.3") else "vulkan1.0"
    if spirv_version in ("v1.4", "v1.5", "v1.6"):
        env = "vulkan1.2" if spirv_version != "v1.6" else "vulkan1.3"
    with tempfile.TemporaryDirectory(prefix="etmlir-spirv-") as tmp:
        for name, code in binaries.items():
            path = os.path.join(tmp, f"{name}.spv")
            with open(path, "wb") as f:
                f.write(code)
            result = subprocess.run([tool, "--target-env", env, path], capture_output=True, text=True)
            if result.returncode != 0:
                raise BackendError(f"vulkan backend: shader {name} fails spirv-val: "
                                   f"{(result.stderr or result.stdout).strip()}")


def _workgroup_size(kernel: ir.Operation) -> tuple[int, int, int]:
    text = str(kernel.attributes[ENTRY_POINT_ABI])
    sizes = text[text.index("[") + 1:text.index("]")].split(",")
    values = [int(s) for s in sizes] + [1] * (3 - len(sizes))
    return values[0], values[1], values[2]


def _sizes(types: list[ir.Type]) -> list[int]:
    return [int(d) for t in types for d in ir.MemRefType(t).shape]


def compile_graph(module: ir.Module, specs: dict[str, object], num_inputs: int, size: int | None,
                  log: Callable[[str], None]) -> tuple[dispatch_graph.DispatchGraph, list[bytes], int]:
    """Run the pipeline on `module` (changed in place) and read its dispatch graph: (graph, its weights' bytes,
    how many products were tiled)."""
    text = pipeline(tile=int(specs["tile"]), spirv_version=str(specs["spirv_version"]), size=size)
    log(f"pipeline: {text}")
    try:
        for element in parse_pipeline(text):
            start = time.perf_counter()
            run_pipeline(module, [element])
            log(f"{element.name}: {time.perf_counter() - start:.2f}s")
    except ir.MLIRError as error:
        at = f" (sizes={size})" if size is not None else ""
        raise BackendError(f"vulkan backend: the delegate does not compile to SPIR-V{at}: {error}") from None
    with module.context:
        forward = find_function(module, ENTRY)
        arguments = ir.FunctionType(ir.TypeAttr(forward.attributes["function_type"]).value).inputs
        input_sizes, output_sizes = _sizes(arguments[:num_inputs]), _sizes(arguments[num_inputs:])
        names, sizes, writes, handles, tiled = [], {}, {}, {}, 0
        for kernel_module, kernel in kernels(module.operation):
            name = ir.StringAttr(kernel.attributes["sym_name"]).value
            names.append(name)
            sizes[name] = (_workgroup_size(kernel), len(kernel.regions[0].blocks[0].arguments))
            writes[name] = list(ir.DenseI32ArrayAttr(kernel.attributes[WRITES])) if WRITES in kernel.attributes else []
            handles[name] = (ir.IntegerAttr(kernel_module.attributes[DEBUG_HANDLE]).value
                             if DEBUG_HANDLE in kernel_module.attributes else 0)
            tiled += "etmlir.tiled" in kernel.attributes
        start = time.perf_counter()
        binaries = serialize_kernels(module.operation)
        log(f"gpu-module-to-binary: {time.perf_counter() - start:.2f}s, {len(binaries)} shaders")
        shader_index = {name: i for i, name in enumerate(names)}
        buffers, dispatches, constants = dispatch_graph.read_host(module.operation, num_inputs, shader_index,
                                                                  writes, handles)
    for name, (workgroup, _) in sizes.items():
        invocations = workgroup[0] * workgroup[1] * workgroup[2]
        if invocations > int(specs["max_workgroup_invocations"]):
            raise BackendError(f"vulkan backend: shader {name} has {invocations} threads per workgroup; "
                               f"max_workgroup_invocations is {specs['max_workgroup_invocations']}")
    missing = [name for name in names if name not in binaries]
    if missing:
        raise BackendError(f"vulkan backend: no SPIR-V for kernel(s) {', '.join(missing)}")
    if specs["validate"] != "false":
        start = time.perf_counter()
        validate_spirv(binaries, str(specs["spirv_version"]), specs["validate"] == "true")
        log(f"spirv-val: {time.perf_counter() - start:.2f}s")
    shaders = [dispatch_graph.Shader(name, binaries[name], sizes[name][0], sizes[name][1]) for name in names]
    slot_sizes = dispatch_graph.plan_memory(buffers, dispatches)
    dispatch_graph.place_barriers(buffers, dispatches)
    attributes = module.operation.attributes
    pinned = list(ir.DenseI64ArrayAttr(attributes[PINNED])) if PINNED in attributes else []
    graph = dispatch_graph.DispatchGraph(input_sizes, output_sizes, size or 0, pinned, shaders, buffers, dispatches,
                                         slot_sizes)
    return graph, constants, tiled


def preprocess(module: ir.Module, compile_specs: Mapping[str, str]) -> PreprocessResult:
    """The vulkan backend's preprocess: compile specs checked, the pipeline run (once per size of a dynamic
    delegate), the payload written."""
    specs = check_specs(compile_specs)

    def log(line: str) -> None:
        if specs["verbose"]:
            print(f"[vulkan] {line}", file=sys.stderr)

    forward = find_function(module, ENTRY)
    if forward is None:
        raise BackendError(f"vulkan backend: the delegate module has no func.func @{ENTRY}")
    inputs, outputs = delegate_specs(forward, BACKEND_ID)
    dynamic = [f"input {i} {list(spec.sizes)}" for i, spec in enumerate(inputs) if -1 in spec.sizes]
    if dynamic and not specs["sizes"]:
        raise BackendError(f"vulkan backend: the delegate has dynamic dims ({', '.join(dynamic)}); a dispatch graph "
                           "has static shapes: give the sizes it runs with, compile_specs={'sizes': '64,256'}")
    variants: list[int | None] = list(specs["sizes"]) if dynamic else [None]
    compiled = dispatch_graph.DispatchModule([], [])
    tiled = 0
    for size in variants:
        if size is not None:
            log(f"graph for size {size}")
        work = clone_module(module) if len(variants) > 1 else module
        graph, constants, graph_tiled = compile_graph(work, specs, len(inputs), size, log)
        compiled.add_constants(graph, constants)
        tiled += graph_tiled
    body = dispatch_graph.serialize_module(compiled)
    counts = compiled.counts()
    ops = (f"graphs={counts['graphs']} dispatches={counts['dispatches']} barriers={counts['barriers']} "
           f"tiled_products={tiled} weights={counts['weights_bytes']} intermediates={counts['intermediate_bytes']}")
    if dynamic:
        ops += f" sizes={','.join(str(s) for s in specs['sizes'])}"
    log(ops)
    # Payload id n: the n-th dispatch, counted through the graphs in order; it computes one edge op.
    numbered = [d for graph in compiled.graphs for d in graph.dispatches]
    handle_map = {i + 1: (d.debug_handle,) for i, d in enumerate(numbered) if d.debug_handle}
    header = PayloadHeader(backend_id=BACKEND_ID, body_format=BODY_FORMAT, body_version=BODY_VERSION,
                           inputs=inputs, outputs=outputs, entry_points=((ENTRY, "graphs"), ("ops", ops)),
                           debug_handle_map=PayloadHeader.handle_map(handle_map))
    payload = write_payload(header, body)
    return PreprocessResult(payload, handle_map, summary=payload_summary(payload))
