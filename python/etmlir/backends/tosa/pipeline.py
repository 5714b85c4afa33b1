"""One outlined delegate -> a `tosa` payload: the backend's named pass pipeline, then the TOSA serializer.

    edge @forward
      --et-fold-constants--> edge (weight transposes and reshapes folded)
      --et-tosa-convert-edge--> tosa dialect (NCHW kept, convolutions and pools wrapped in transposes)
      --canonicalize, tosa-reduce-transposes, canonicalize--> the transposes that meet cancel
      --tosa-attach-target{profiles=pro_fp level=8k}, tosa-validate--> checked against the profile and level
    then: tosa-opt --tosa-validate --tosa-serialize (tosa-tools) -> the standard TOSA FlatBuffer
          -> payload: the shared payload header + the FlatBuffer

`pipeline(profile, level)` returns the pass pipeline as text, so any step can
be rerun on its own with et-opt (`et-opt --pass-pipeline='builtin.module(et-tosa-convert-edge)'`);
the compile spec `verbose=true` prints it and each step's time.

The header's entry points say what a consumer needs before it parses the
body: "forward" -> the TOSA region to run ("main"), "profile" -> the
profile the graph was validated for, "level" -> the level, "ops" -> how
many of each TOSA operator it holds ("conv2d=35 transpose=4 ...", for
et-inspect and the delegation report). The graph's
inputs and outputs are the delegate's live-ins and live-outs in order
(TosaInput_i, TosaOutput_i).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Mapping

from torch_mlir import ir

from etmlir.backends.payload_header import PayloadHeader, delegate_specs, payload_summary, write_payload
from etmlir.backends.tosa import check_specs
from etmlir.backends.tosa.tools import serialize
from etmlir.delegation.backend import BackendError, PreprocessResult
from etmlir.passes.assign_debug_handles import debug_handles
from etmlir.passes.pipeline import parse_pipeline, run_pipeline
from etmlir.program import find_function

BACKEND_ID = "tosa"
BODY_FORMAT = "tosa-flatbuffer"
BODY_VERSION = 1          # the body is a TOSA 1.0 FlatBuffer (tosa.fbs), region "main"
ENTRY = "forward"
REGION = "main"


def pipeline(profile: str = "pro_fp", level: str = "8k") -> str:
    """The pass pipeline from an outlined edge delegate to validated TOSA."""
    passes = ["et-fold-constants", "et-tosa-convert-edge", "canonicalize", "func.func(tosa-reduce-transposes)",
              "canonicalize", f"tosa-attach-target{{profiles={profile} level={level} specification_version=1.0}}",
              "tosa-validate{strict-op-spec-alignment}"]
    return f"builtin.module({','.join(passes)})"


def op_counts(module: ir.Operation) -> dict[str, int]:
    """TOSA operators by name (`conv2d`: 52), most frequent first; constants are not operators."""
    counts: Counter[str] = Counter()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("tosa.") and op.name not in ("tosa.const", "tosa.const_shape"):
            counts[op.name[len("tosa."):]] += 1
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return dict(counts.most_common())


def preprocess(module: ir.Module, compile_specs: Mapping[str, str]) -> PreprocessResult:
    """The tosa backend's preprocess: compile specs checked, the pipeline run, the FlatBuffer written."""
    check_specs(compile_specs)
    profile = compile_specs.get("profile", "pro_fp")
    level = compile_specs.get("level", "8k")
    verbose = compile_specs.get("verbose", "false").lower() == "true"

    def log(line: str) -> None:
        if verbose:
            print(f"[tosa] {line}", file=sys.stderr)

    forward = find_function(module, ENTRY)
    if forward is None:
        raise BackendError(f"tosa backend: the delegate module has no func.func @{ENTRY}")
    inputs, outputs = delegate_specs(forward, BACKEND_ID)
    for kind, specs in (("input", inputs), ("output", outputs)):
        for i, spec in enumerate(specs):
            if -1 in spec.sizes:
                raise BackendError(f"tosa backend: delegate {kind} {i} has a dynamic shape {list(spec.sizes)}; "
                                   "TOSA graphs are static")
    handles = tuple(sorted(set(debug_handles(module.operation))))

    text = pipeline(profile, level)
    log(f"pipeline: {text}")
    try:
        for element in parse_pipeline(text):
            start = time.perf_counter()
            run_pipeline(module, [element])
            log(f"{element.name}: {time.perf_counter() - start:.2f}s")
    except ir.MLIRError as error:
        raise BackendError(f"tosa backend: the delegate does not lower to TOSA {profile}: {error}") from None
    with module.context:
        forward = find_function(module, ENTRY)
        forward.attributes["sym_name"] = ir.StringAttr.get(REGION)
        # tosa-opt attaches its own: the two MLIRs spell an empty extension list differently.
        if "tosa.target_env" in module.operation.attributes:
            del module.operation.attributes["tosa.target_env"]
    start = time.perf_counter()
    body = serialize(module.operation.get_asm(large_elements_limit=None, enable_debug_info=True),
                     profile=profile, level=level)
    log(f"tosa-opt --tosa-serialize: {time.perf_counter() - start:.2f}s, {len(body)} bytes")
    ops = op_counts(module.operation)
    # One payload id for the whole graph: the reference model runs it as one step.
    handle_map = {1: handles} if handles else {}
    header = PayloadHeader(backend_id=BACKEND_ID, body_format=BODY_FORMAT, body_version=BODY_VERSION,
                           inputs=inputs, outputs=outputs,
                           entry_points=((ENTRY, REGION), ("profile", profile), ("level", level))
                           + ((("ops", " ".join(f"{name}={count}" for name, count in ops.items())),) if ops else ()),
                           debug_handle_map=PayloadHeader.handle_map(handle_map))
    payload = write_payload(header, body)
    return PreprocessResult(payload, handle_map, summary=payload_summary(payload))
