"""et-opt: an mlir-opt-style driver for etmlir's Python passes mixed with upstream MLIR passes.

    et-opt model.mlir --pass-pipeline='builtin.module(et-decompose-to-core-aten,canonicalize)'
    et-opt model.mlir --et-decompose-to-core-aten='keep=aten.linear.default' --et-verify-core-aten
    et-opt model.mlir --et-to-edge --et-to-out-variants --et-plan-memory --et-emit=model.pte
    et-opt --list-passes
    et-opt partitioned.mlir --et-outline-delegates --et-delegation-report

Input is read from a file or stdin ('-'); the torch dialect, every upstream
dialect and (from later issues) ours are registered. Errors are MLIR
diagnostics printed as `file:line:col: error: message` with exit code 1,
never a Python traceback (set ETMLIR_DEBUG=1 to see one for internal errors).
`--et-delegation-report` prints, after the passes, what was delegated and why
the rest was not (`etmlir.devtools.delegation_info`) instead of the IR.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from etmlir.devtools.delegation_info import delegation_info
from etmlir.dialects import new_context
from etmlir.passes.pipeline import PipelineElement, PipelineError, build_pass_manager, parse_pipeline
from etmlir.passes.registry import all_passes, get_pass
from etmlir.tools import diagnostics

SPLIT_MARKER = "// -----"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="et-opt", description="Run etmlir and upstream MLIR passes on an MLIR file.",
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
    return parser


def _list_passes() -> str:
    lines = ["etmlir passes (upstream MLIR passes are also accepted, by their mlir-opt names):"]
    for info in all_passes():
        lines.append(f"  --{info.flag:<32} {info.description}")
        for name, option in info.options.items():
            lines.append(f"      {name}={option.kind.__name__:<24} {option.help}")
    return "\n".join(lines)


def _pass_flags(extra: Sequence[str]) -> list[PipelineElement]:
    """Turn leftover `--name[=options]` arguments into pipeline elements, in command-line order."""
    context = new_context()  # only to ask MLIR whether an upstream pass of that name exists
    elements = []
    for arg in extra:
        if not arg.startswith("--"):
            raise PipelineError(f"unexpected argument '{arg}'")
        name, _, options = arg[2:].partition("=")
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


def _process_chunk(chunk: str, first_line: int, args: argparse.Namespace, input_name: str,
                   elements: Sequence[PipelineElement]) -> tuple[str | None, list[str]]:
    """Parse and transform one chunk: (output text or None on failure, problems to print)."""
    context = new_context()
    collector = diagnostics.Collector(context)
    output = None
    try:
        with context:
            # Pad so the parser's line numbers are the original file's.
            module = ir.Module.parse("\n" * (first_line - 1) + chunk)
            pm = build_pass_manager(elements, context)
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
        collector.add_error(error)
    finally:
        collector.detach()
    found = collector.diagnostics
    if args.verify_diagnostics:
        problems = diagnostics.verify(found, diagnostics.parse_expectations(chunk, first_line), input_name)
        return (output if output is not None else ""), problems
    problems = [d.render(input_name) for d in found]
    return output, problems


def main(argv: Sequence[str] | None = None) -> int:
    args, extra = _parser().parse_known_args(argv)
    if args.list_passes:
        print(_list_passes())
        return 0
    if args.pass_pipeline and extra:
        print("et-opt: error: give passes either with --pass-pipeline or as flags, not both", file=sys.stderr)
        return 1
    input_name = "<stdin>" if args.input == "-" else args.input
    for path in args.load:
        try:
            code = compile(open(path, encoding="utf-8").read(), path, "exec")
        except (OSError, SyntaxError) as exc:
            print(f"et-opt: error: cannot load '{path}': {exc}", file=sys.stderr)
            return 1
        exec(code, {"__name__": "__etmlir_load__", "__file__": path})  # noqa: S102 - user-requested
    try:
        text = sys.stdin.read() if args.input == "-" else open(args.input, encoding="utf-8").read()
    except OSError as exc:
        print(f"et-opt: error: cannot read '{args.input}': {exc.strerror}", file=sys.stderr)
        return 1
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
        print(f"et-opt: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug in et-opt itself: one line, traceback on request
        if os.environ.get("ETMLIR_DEBUG"):
            raise
        print(f"et-opt: internal error: {type(exc).__name__}: {exc} (set ETMLIR_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return 2
    if args.verify_diagnostics and failed:
        return 1
    result = f"\n{SPLIT_MARKER}\n".join(o.rstrip("\n") for o in outputs) + "\n" if outputs else ""
    if args.output == "-":
        sys.stdout.write(result)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(result)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
