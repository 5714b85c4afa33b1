"""et-opt: an mlir-opt-style driver for etmlir's Python passes mixed with upstream MLIR passes.

    et-opt model.mlir --pass-pipeline='builtin.module(et-decompose-to-core-aten,canonicalize)'
    et-opt model.mlir --et-decompose-to-core-aten='keep=aten.linear.default' --et-verify-core-aten
    et-opt model.mlir --et-to-edge --et-to-out-variants --et-plan-memory --et-emit=model.pte
    et-opt --list-passes
    et-opt partitioned.mlir --et-outline-delegates --et-delegation-report

Input is read from a file or stdin ('-'); the torch dialect, every upstream
dialect and ours are registered. Errors in the input are MLIR diagnostics
printed as `file:line:col: error: message`; errors on the command line (an
unknown pass, a bad pass option, an unreadable file) are one line
`et-opt: error: ...`. Either way the exit status is 1 and there is never a
Python traceback: a bug in etmlir is one line `et-opt: internal error: ...`
with exit status 2 (`etmlir.tools.cli`; `--debug` or ETMLIR_DEBUG=1 shows the
traceback). Input nested deeper than MAX_NESTING brackets is refused before
MLIR's parser, which recurses once per level, can overflow the stack.
`--et-delegation-report` prints, after the passes, what was delegated and why
the rest was not (`etmlir.devtools.delegation_info`) instead of the IR.
"""

from __future__ import annotations

import argparse
import re
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from etmlir.devtools.delegation_info import delegation_info
from etmlir.dialects import new_context
from etmlir.passes.pipeline import PipelineElement, PipelineError, build_pass_manager, parse_pipeline
from etmlir.passes.registry import all_passes, get_pass
from etmlir.tools import diagnostics
from etmlir.tools.cli import ToolError, debug_requested, run_tool

SPLIT_MARKER = "// -----"
# Deepest bracket/brace/region nesting accepted. MLIR's parser (and printer and verifier) recurse
# once per level: 4,000 nested modules parse on an 8 MB stack, 5,000 overflow it (a segfault,
# measured). At 1,000 levels, nested modules, generic-form regions, scf.if, arrays, dictionaries,
# tuples, affine maps, locations and dense literals all parse, verify, canonicalize and print
# within a 2 MB stack (measured): a 4x margin on the usual 8 MB.
MAX_NESTING = 1000


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as ToolError: one line and exit status 1, like every input error."""

    def error(self, message: str) -> NoReturn:
        raise ToolError(f"{message} (see et-opt --help)")


def _parser() -> argparse.ArgumentParser:
    # allow_abbrev=False: a pass flag must never be taken for an abbreviated et-opt option
    # (`--list` is not `--list-passes`); unknown flags are left over as passes.
    parser = _Parser(
        prog="et-opt", description="Run etmlir and upstream MLIR passes on an MLIR file.", allow_abbrev=False,
        epilog="Passes can also be given one by one as flags, in order: --et-verify-core-aten, "
               "--canonicalize, --et-decompose-to-core-aten='keep=aten.linear.default'.")
    parser.add_argument("input", nargs="?", default="-", help="input .mlir file ('-' for stdin)")
    parser.add_argument("-o", dest="output", default="-", help="output file ('-' for stdout)")
    parser.add_argument("--pass-pipeline", help="textual pipeline, e.g. 'builtin.module(et-verify-core-aten)'")
    parser.add_argument("--list-passes", action="store_true", help="list etmlir's passes and their options")
    parser.add_argument("--split-input-file", action="store_true",
                        help=f"process each chunk separated by '{SPLIT_MARKER}' on its own")
    parser.add_argument("--verify-diagnostics", action="store_true",
                        help="check diagnostics against expected-error/warning/note/remark annotations")
    parser.add_argument("--load", action="append", default=[], metavar="FILE.py",
                        help="run a Python file first, e.g. one registering custom ops with torch.library")
    parser.add_argument("--et-delegation-report", action="store_true",
                        help="after the passes, print the delegation report (delegated subgraphs and ops, "
                             "per-op counts, the delegated graph, why ops were not delegated) instead of the IR")
    parser.add_argument("--mlir-print-ir-after-all", action="store_true", help="print the IR after each pass")
    parser.add_argument("--mlir-print-debuginfo", action="store_true", help="print locations in the output")
    parser.add_argument("--mlir-elide-elementsattrs-if-larger", type=int, default=None, metavar="N",
                        help="elide constant payloads with more than N elements")
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an internal error (as ETMLIR_DEBUG=1 does)")
    return parser


def _list_passes() -> str:
    lines = ["etmlir passes (upstream MLIR passes are also accepted, by their mlir-opt names):"]
    for info in all_passes():
        lines.append(f"  --{info.flag:<32} {info.description}")
        for name, option in info.options.items():
            lines.append(f"      {name}=<{option.form()}>  {option.help}")
    return "\n".join(lines)


def _pass_flags(extra: Sequence[str]) -> list[PipelineElement]:
    """Turn leftover `--name[=options]` arguments into pipeline elements, in command-line order."""
    context = new_context()  # only to ask MLIR whether an upstream pass of that name exists
    elements = []
    for arg in extra:
        if not arg.startswith("--"):
            raise PipelineError(f"unexpected argument '{arg}'")
        name, _, options = arg[2:].partition("=")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise PipelineError(f"unknown option or pass '{arg[:80]}' (see et-opt --help, --list-passes)")
        if get_pass(name) is None:
            try:
                with context:
                    PassManager.parse(f"builtin.module({name})")
            except (ValueError, ir.MLIRError):
                raise PipelineError(f"unknown option or pass '--{name}' (see et-opt --help, --list-passes)") from None
        options = options.strip('"').strip("'")
        if name == "et-emit" and options and "=" not in options:
            options = f"output={options}"  # --et-emit=out.pte
        elements.append(PipelineElement(name, options))
    return elements


def _chunks(text: str, split: bool) -> list[tuple[str, int]]:
    """(chunk text, first line number) pairs."""
    if not split:
        return [(text, 1)]
    chunks, current, start = [], [], 1
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if line.strip() == SPLIT_MARKER:
            chunks.append(("".join(current), start))
            current, start = [], number + 1
        else:
            current.append(line)
    chunks.append(("".join(current), start))
    return chunks


def _report(module: ir.Module, input_name: str) -> str:
    """The delegation report, with source lines in the parsed buffer ('-:12') named after the input."""
    return re.sub(r"(?<!\S)-:(?=\d)", f"{input_name}:", str(delegation_info(module)))


def nesting_problem(text: str) -> tuple[int, int, int] | None:
    """(line, column, depth) where `text` first nests deeper than MAX_NESTING, or None.

    Counts (), [], {} and <> outside string literals and comments (`->`, `<=` and `>=`
    are not brackets): an upper bound on how deep MLIR's recursive-descent parser goes.
    """
    depth = 0
    for match in _NESTING_TOKENS.finditer(text):
        token = match.group()
        if token in "([{<":
            depth += 1
            if depth > MAX_NESTING:
                line = text.count("\n", 0, match.start()) + 1
                column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
                return line, column, depth
        elif token in ")]}>":
            depth = max(depth - 1, 0)
    return None


# String literals, comments, the arrow and comparisons are skipped whole; single brackets counted.
_NESTING_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|->|[<>]=|[()\[\]{}<>]')


def _process_chunk(chunk: str, first_line: int, args: argparse.Namespace, input_name: str,
                   elements: Sequence[PipelineElement]) -> tuple[str | None, list[str]]:
    """Parse and transform one chunk: (output text or None on failure, problems to print).

    A bug in a pass (an exception other than its diagnostics) is re-raised here, once MLIR
    has finished, for `run_tool` to report as an internal error.
    """
    context = new_context()
    collector = diagnostics.Collector(context)
    output = None
    internal_errors: list[BaseException] = []
    try:
        too_deep = nesting_problem(chunk)
        if too_deep is not None:
            line, column, depth = too_deep
            collector.diagnostics.append(diagnostics.Diagnostic(
                "error", f"input nests more than {MAX_NESTING} levels deep (brackets, braces and regions); "
                         f"et-opt accepts at most {MAX_NESTING}, as MLIR's parser recurses once per level",
                "-", first_line - 1 + line, column))
        else:
            with context:
                # Pad so the parser's line numbers are the original file's. End with a newline:
                # MLIR's lexer reads past the end of a buffer that stops inside a resource blob's
                # string (`w: "` at EOF: a segfault, measured), and a newline ends any string.
                source = "\n" * (first_line - 1) + chunk
                module = ir.Module.parse(source if source.endswith("\n") else source + "\n")
                pm = build_pass_manager(elements, context, internal_errors)
                if args.mlir_print_ir_after_all:
                    pm.enable_ir_printing(print_after_all=True, print_module_scope=True,
                                          large_elements_limit=args.mlir_elide_elementsattrs_if_larger)
                pm.run(module.operation)
                if args.et_delegation_report:
                    try:
                        output = _report(module, input_name)
                    except ValueError as exc:  # nothing to report on: a problem with the input, not a bug
                        collector.diagnostics.append(diagnostics.Diagnostic("error", str(exc), "-", first_line, 1))
                else:
                    output = module.operation.get_asm(enable_debug_info=args.mlir_print_debuginfo,
                                                      large_elements_limit=args.mlir_elide_elementsattrs_if_larger)
                    # The bindings cannot name the parsed buffer; show the input's name, as mlir-opt does.
                    output = output.replace('loc("-":', f'loc("{input_name}":')
    except ir.MLIRError as error:
        if internal_errors:
            raise internal_errors[0] from None
        collector.add_error(error)
    finally:
        collector.detach()
    found = collector.diagnostics
    if args.verify_diagnostics:
        problems = diagnostics.verify(found, diagnostics.parse_expectations(chunk, first_line), input_name)
        return (output if output is not None else ""), problems
    problems = [d.render(input_name) for d in found]
    return output, problems


def _load(path: str) -> None:
    """Run a user's Python file (custom ops, backends); any failure in it is the user's, not ours."""
    try:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec")
    except OSError as exc:
        raise ToolError(f"cannot load '{path}': {exc.strerror or exc}") from None
    except (SyntaxError, ValueError) as exc:  # ValueError: null bytes, undecodable source
        raise ToolError(f"cannot load '{path}': {type(exc).__name__}: {exc}") from None
    try:
        exec(code, {"__name__": "__etmlir_load__", "__file__": path})  # noqa: S102 - user-requested
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: the file must not end et-opt
        if isinstance(exc, Exception) and _debug:
            raise
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
        where = f" (at {path}:{frames[-1].lineno})" if frames else ""
        raise ToolError(f"--load {path} raised {type(exc).__name__}: {exc}{where}") from None


def _read_input(path: str) -> str:
    """The input as text; bytes that are not UTF-8 are an error naming where they are."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except OSError as exc:
        raise ToolError(f"cannot read '{path}': {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        name = "<stdin>" if path == "-" else path
        raise ToolError(f"{name}:{line}:{column}: not UTF-8 text (byte 0x{data[exc.start]:02x}); "
                        "MLIR files are UTF-8") from None


def _write_output(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise ToolError(f"cannot write '{path}': {exc.strerror or exc}") from None


_debug = False  # --debug / ETMLIR_DEBUG: let a --load file's exception through with its traceback


def _main(argv: Sequence[str] | None) -> int:
    global _debug
    args, extra = _parser().parse_known_args(argv)
    _debug = args.debug or debug_requested(argv)
    if args.list_passes:
        print(_list_passes())
        return 0
    if args.pass_pipeline and extra:
        raise ToolError("give passes either with --pass-pipeline or as flags, not both")
    if args.mlir_elide_elementsattrs_if_larger is not None and args.mlir_elide_elementsattrs_if_larger < 0:
        raise ToolError("--mlir-elide-elementsattrs-if-larger must be >= 0")
    input_name = "<stdin>" if args.input == "-" else args.input
    for path in args.load:
        _load(path)
    text = _read_input(args.input)
    outputs, failed = [], False
    try:
        elements = parse_pipeline(args.pass_pipeline) if args.pass_pipeline else _pass_flags(extra)
        for chunk, first_line in _chunks(text, args.split_input_file):
            output, problems = _process_chunk(chunk, first_line, args, input_name, elements)
            for problem in problems:
                print(problem, file=sys.stderr)
            failed |= bool(problems) if args.verify_diagnostics else output is None
            if output is not None:
                outputs.append(output)
    except PipelineError as exc:
        raise ToolError(str(exc)) from None
    if args.verify_diagnostics and failed:
        return 1
    result = f"\n{SPLIT_MARKER}\n".join(o.rstrip("\n") for o in outputs) + "\n" if outputs else ""
    _write_output(args.output, result)
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """The `et-opt` command: every failure is a message and an exit status (etmlir.tools.cli)."""
    return run_tool("et-opt", _main, argv)


if __name__ == "__main__":
    sys.exit(main())
