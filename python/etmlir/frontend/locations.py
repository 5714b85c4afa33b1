"""Make every op's location point into the model's own Python files.

torch-mlir's importer takes each op's location from the FX node's stack
trace. Ops the importer creates itself (constants, list constructs, the
return, the function) and nodes whose trace is missing or points into torch
internals (the input placeholders of a dynamic-shape export point into
`torch/fx/passes/runtime_assert.py`) would otherwise carry `loc(unknown)` or a
torch file. Those get the location of the op that uses them, or, failing
that, the line of the model's `forward`.
"""

from __future__ import annotations

import importlib.util
import os
import re

import functools

import torch_mlir
from torch_mlir import ir

_FILE_LOC_RE = re.compile(r'"([^"]+)":(\d+):(\d+)')


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """torch's and torch-mlir's install directories (found without importing torch)."""
    torch_spec = importlib.util.find_spec("torch")
    torch_dirs = list(torch_spec.submodule_search_locations or ()) if torch_spec else []
    return tuple(os.path.realpath(p) + os.sep for p in [*torch_dirs, *torch_mlir.__path__])


def file_locations(location: ir.Location | str) -> list[tuple[str, int, int]]:
    """Every `file:line:col` inside a (possibly callsite or fused) location, or its printed form."""
    return [(f, int(line), int(col)) for f, line, col in _FILE_LOC_RE.findall(str(location))]


def is_library_file(path: str) -> bool:
    """torch and torch-mlir sources, absolute or as the relative `torch/fx/...` paths export records,
    and code torch generated (`<eval_with_key>.5`: the graph a torch.cond branch was traced from)."""
    if path.startswith("<"):
        return True
    if os.path.isabs(path):
        return os.path.realpath(path).startswith(_library_dirs())
    return path.split("/", 1)[0] in ("torch", "torch_mlir")


def source_line(location: ir.Location | str) -> str:
    """`model.py:17`: the innermost frame in the model's own code (else the first frame; "unknown").

    A callsite location lists the callee first (`callsite("torch/nn/modules/linear.py":134 at
    callsite("model.py":47 at "model.py":76))`), so the first frame outside torch is the line in
    the innermost module's forward (47, the attention's `self.qkv(x)`), not the top model's
    `x = block(x)` (76) that every op of the block would otherwise share.
    """
    frames = file_locations(location)
    if not frames:
        return "unknown"
    user = [f for f in frames if not is_library_file(f[0])]
    path, line, _ = user[0] if user else frames[0]
    return f"{path}:{line}"


# The key under which a location records the module path (see `with_module_path`).
MODULE_PATH_KEY = "etmlir.module_path"
_MODULE_PATH_RE = re.compile(r'fused<\{' + re.escape(MODULE_PATH_KEY) + r' = "([^"]*)"\}>')


def with_module_path(location: ir.Location, path: str) -> ir.Location:
    """`location` tagged with the nn.Module path its op was traced in (`layers.3.attn`; "" for the root).

    The path rides in the location, not in an attribute, because MLIR carries locations through
    every rewrite on its own: a decomposition's ops take their source op's location, to_edge's
    patterns build with `op.location`, outlining and cloning keep it, and CSE ignores it. An
    attribute would be dropped by each pattern that creates a new op. It is a fused location's
    metadata (`loc(fused<{etmlir.module_path = "layers.3.attn"}>["model.py":41:0])`), not a name
    location, because names already mean something else here (a delegate call's tag), and the
    file:line text inside stays where `file_locations` finds it.
    """
    metadata = ir.DictAttr.get({MODULE_PATH_KEY: ir.StringAttr.get(path)}, context=location.context)
    return ir.Location.fused([location], metadata, context=location.context)


# The key under which a backend's lowering records the edge op a lowered op came from (see
# `with_debug_handle`).
DEBUG_HANDLE_KEY = "etmlir.debug_handle"
_DEBUG_HANDLE_RE = re.compile(r'fused<\{' + re.escape(DEBUG_HANDLE_KEY) + r' = (\d+) : i64\}>')


def with_debug_handle(location: ir.Location, handle: int) -> ir.Location:
    """`location` tagged with the debug handle of the edge op it belongs to.

    A backend that lowers edge ops further (the `cpu` backend: edge -> torch -> linalg -> loops)
    tags each op's location this way when it leaves the edge level. The tag then rides along for
    the same reason the module path does: every rewrite keeps locations, and fusion keeps the
    body ops' own ones (`loc(fused<{etmlir.debug_handle = 7 : i64}>[...])`). So after fusion
    and bufferization the handles of the edge ops a piece of generated code came from can still
    be read off its locations (`location_debug_handles`), which is how a payload maps its timed
    regions and its failures back to edge ops.
    """
    metadata = ir.DictAttr.get({DEBUG_HANDLE_KEY: ir.IntegerAttr.get(
        ir.IntegerType.get_signless(64, location.context), handle)}, context=location.context)
    return ir.Location.fused([location], metadata, context=location.context)


def location_debug_handles(location: ir.Location | str) -> list[int]:
    """The debug handles `with_debug_handle` recorded anywhere in `location`, in order, each once."""
    return list(dict.fromkeys(int(h) for h in _DEBUG_HANDLE_RE.findall(str(location))))


def module_path(location: ir.Location | str) -> str | None:
    """The module path `with_module_path` recorded in `location` (the outermost one), or None."""
    match = _MODULE_PATH_RE.search(str(location))
    return match.group(1) if match else None


def common_module_path(paths: list[str]) -> str:
    """The innermost module holding all of `paths` (`layers.0` for `layers.0.ln`, `layers.0.attn.q`)."""
    parts = [path.split(".") if path else [] for path in paths]
    common: list[str] = []
    for names in zip(*parts):
        if any(name != names[0] for name in names):
            break
        common.append(names[0])
    return ".".join(common)


def is_user_location(location: ir.Location) -> bool:
    """True if the location names a file outside torch and torch-mlir (the model's code)."""
    return any(not is_library_file(path) for path, _, _ in file_locations(location))


def anchor_locations(module: ir.Module, fallback: ir.Location) -> int:
    """Give every op and function argument without a user location a user one; returns how many changed."""
    changed = 0
    ops: list[ir.Operation] = []
    module.operation.walk(lambda op: (ops.append(op), ir.WalkResult.ADVANCE)[1])
    # Users come after producers in a block, so walking backwards fixes users first.
    for op in reversed(ops):
        if is_user_location(op.location):
            continue
        own_path = module_path(op.location)
        op.location = _first_user_location(op) or fallback
        if own_path is not None and module_path(op.location) != own_path:
            op.location = with_module_path(op.location, own_path)  # the line moves, the module stays
        changed += 1
    for op in ops:
        if op.name != "func.func":
            continue
        for argument in op.regions[0].blocks[0].arguments:
            if not is_user_location(argument.location):
                argument.set_location(_first_use_location(argument) or fallback)
                changed += 1
    return changed


def _first_user_location(op: ir.Operation) -> ir.Location | None:
    for result in op.results:
        location = _first_use_location(result)
        if location is not None:
            return location
    return None


def _first_use_location(value: ir.Value) -> ir.Location | None:
    for use in value.uses:
        if is_user_location(use.owner.location):
            return use.owner.location
    return None
