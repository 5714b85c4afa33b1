"""Parse and run pass pipelines that mix etmlir's Python passes with upstream MLIR passes.

MLIR's pipeline parser cannot name a pass written in Python, so we parse the
textual pipeline ourselves:

    builtin.module(et-decompose-to-core-aten{keep=aten.linear.default},canonicalize,func.func(cse))

Each top-level element is either one of our registered passes (added to the
PassManager as a Python callable) or upstream text (handed to MLIR as is,
nested pipelines included). Everything runs in one PassManager, so MLIR's IR
printing and failure reporting cover both kinds.

Python passes run on the module only: a Python pass anchored on `func.func`
inside a module-level PassManager aborts the process (DESIGN.md), so nesting
one under `func.func(...)` is rejected with an error instead.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from etmlir.passes.levels import level_problem
from etmlir.passes.registry import PassFailure, PassInfo, PassOptionError, all_passes, emit_error, get_pass

if TYPE_CHECKING:
    from etmlir.compile_progress import Stage


class PipelineError(ValueError):
    """A pipeline string that cannot be parsed or names an unknown pass."""


@dataclasses.dataclass(frozen=True)
class PipelineElement:
    """One top-level pipeline element: `name{options}` or `anchor(nested...)`."""

    name: str
    options: str = ""
    nested: str | None = None  # the text between parentheses for nested pipelines

    def text(self) -> str:
        out = self.name
        if self.options:
            out += "{" + self.options + "}"
        if self.nested is not None:
            out += "(" + self.nested + ")"
        return out


def split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside (), {} or quotes."""
    parts: list[str] = []
    depth = 0
    quote = False
    current = ""
    for ch in text:
        if ch == '"':
            quote = not quote
        elif not quote and ch in "({":
            depth += 1
        elif not quote and ch in ")}":
            depth -= 1
            if depth < 0:
                raise PipelineError(f"unbalanced ')' or '}}' in pipeline '{text}'")
        if ch == "," and depth == 0 and not quote:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if depth != 0 or quote:
        raise PipelineError(f"unbalanced brackets or quotes in pipeline '{text}'")
    if current.strip():
        parts.append(current.strip())
    return [p for p in parts if p]


def parse_element(text: str) -> PipelineElement:
    name_end = len(text)
    for i, ch in enumerate(text):
        if ch in "{(":
            name_end = i
            break
    name = text[:name_end].strip()
    rest = text[name_end:].strip()
    if not name:
        raise PipelineError(f"pipeline element '{text}' has no pass name")
    options = ""
    if rest.startswith("{"):
        close = _matching(rest, 0)
        options = rest[1:close]
        rest = rest[close + 1 :].strip()
    nested = None
    if rest.startswith("("):
        close = _matching(rest, 0)
        nested = rest[1:close]
        rest = rest[close + 1 :].strip()
    if rest:
        raise PipelineError(f"unexpected '{rest}' after pass '{name}' in pipeline")
    return PipelineElement(name, options, nested)


def _matching(text: str, start: int) -> int:
    pairs = {"(": ")", "{": "}"}
    stack = []
    for i in range(start, len(text)):
        if text[i] in pairs:
            stack.append(pairs[text[i]])
        elif stack and text[i] == stack[-1]:
            stack.pop()
            if not stack:
                return i
    raise PipelineError(f"unbalanced brackets in '{text}'")


def parse_pipeline(text: str) -> list[PipelineElement]:
    """Parse `builtin.module(a,b{x=1},func.func(c))` (the wrapper is optional)."""
    elements = [parse_element(p) for p in split_top_level(text.strip())]
    if len(elements) == 1 and elements[0].name == "builtin.module" and elements[0].nested is not None:
        return [parse_element(p) for p in split_top_level(elements[0].nested)]
    return elements


def _python_passes_in(text: str) -> list[str]:
    found = []
    for part in split_top_level(text):
        element = parse_element(part)
        if get_pass(element.name) is not None:
            found.append(element.name)
        if element.nested is not None:
            found.extend(_python_passes_in(element.nested))
    return found


def _python_pass_callback(info: PassInfo, options: dict, internal_errors: list[BaseException] | None) -> Callable:
    def run(op: ir.Operation, pass_) -> None:
        try:
            with op.context:  # passes build types and attributes without naming the context
                if info.level is not None:
                    problem = level_problem(op, info.flag, info.level)
                    if problem is not None:
                        emit_error(*problem)
                        raise PassFailure()
                info.run(op, **options)
        except PassFailure:
            pass_.signal_pass_failure()
        except ir.MLIRError as error:  # an upstream pipeline the pass ran failed on this IR: its diagnostics
            for diagnostic in error.error_diagnostics or []:
                diagnostic.location.emit_error(f"{info.flag}: {diagnostic.message}")
            if not error.error_diagnostics:
                op.location.emit_error(f"{info.flag}: {error}")
            pass_.signal_pass_failure()
        except Exception as exc:  # a bug in the pass: report it as a diagnostic, never crash the host
            op.location.emit_error(f"internal error in pass '{info.flag}': {type(exc).__name__}: {exc}")
            # The caller re-raises it once MLIR is done (its traceback intact); without one to
            # take it, the traceback is printed on request only.
            if internal_errors is not None:
                internal_errors.append(exc)
            elif os.environ.get("ETMLIR_DEBUG", "") not in ("", "0"):
                traceback.print_exc(file=sys.stderr)
            pass_.signal_pass_failure()

    return run


def build_pass_manager(elements: Sequence[PipelineElement], context: ir.Context,
                       internal_errors: list[BaseException] | None = None) -> PassManager:
    """A module-anchored PassManager running `elements` in order.

    An exception escaping a Python pass (a bug: user errors are diagnostics) fails the run
    with an "internal error" diagnostic and is appended to `internal_errors`, so the caller
    can tell a bug from bad input and re-raise it with its traceback.
    """
    with context:
        pm = PassManager("builtin.module")
        for element in elements:
            info = get_pass(element.name)
            if info is not None:
                if element.nested is not None:
                    raise PipelineError(f"pass '{element.name}' takes no nested pipeline")
                try:
                    options = info.parse_options(element.options)
                except PassOptionError as exc:
                    raise PipelineError(str(exc)) from None
                pm.add(_python_pass_callback(info, options, internal_errors), name=info.flag, argument=info.flag,
                       description=info.description)
                continue
            if element.nested is not None:
                nested_python = _python_passes_in(element.nested)
                if nested_python:
                    raise PipelineError(
                        f"Python pass '{nested_python[0]}' cannot be nested under '{element.name}'; "
                        "etmlir passes run on the whole module")
            try:
                pm.add(element.text())
            except (ValueError, ir.MLIRError) as exc:
                ours = ", ".join(p.flag for p in all_passes())
                raise PipelineError(
                    f"unknown pass or bad options '{element.text()}': {str(exc).strip()}\n"
                    f"  etmlir passes: {ours}; upstream passes use mlir-opt's names") from None
        return pm


def run_pipeline(module: ir.Module | ir.Operation, pipeline: str | Sequence[PipelineElement],
                 print_ir_after_all: bool = False, stage: "Stage | None" = None) -> None:
    """Run `pipeline` on `module` in place; raises ir.MLIRError (with diagnostics) on failure.

    With a progress `stage` (etmlir.compile_progress) each element runs in a PassManager of its
    own, so that the stage's bar can name the pass running and count the ones done.
    """
    operation = module.operation
    elements = parse_pipeline(pipeline) if isinstance(pipeline, str) else list(pipeline)
    if stage is not None:
        for element in elements:
            stage.status(element.name)
            run_pipeline(module, [element], print_ir_after_all)
            stage.advance()
        return
    internal_errors: list[BaseException] = []
    pm = build_pass_manager(elements, operation.context, internal_errors)
    if print_ir_after_all:
        pm.enable_ir_printing(print_after_all=True, print_module_scope=True, large_elements_limit=16)
    try:
        pm.run(operation)
    except ir.MLIRError as error:
        if internal_errors:  # a bug in a pass: keep its traceback as the cause
            raise error from internal_errors[0]
        raise
