"""et-inspect: print a readable summary of a `.pte` file.

    et-inspect model.pte                 # methods, inputs/outputs, state, arenas, segments, delegates, instructions
    et-inspect model.pte --instructions 0    # leave the instruction listing out
    et-inspect model.pte --values        # also list the whole value table
    et-inspect --check-against runtime-manifest.json model.pte   # would that runtime load it? (et-manifest)
    et-inspect --trace out.ettrace model.pte      # time per op (et-run --trace); --sort, --top, --perfetto out.json
    et-inspect --html graph.html model.pte [--trace out.ettrace]   # the program graph as one HTML page

A file is read in three steps, so that a damaged one is reported, never crashed on:

1. the header is checked against the file (`pte.read_header`);
2. the program FlatBuffer goes through the same verifier the C++ loader runs
   (`executable/flatbuffer_verifier.py`), which names the bad place:

       et-inspect: error: bad.pte: malformed program: method 0 ('forward') > value 0 > value (Tensor) >
       sizes: the sizes vector of 1,048,576 8-byte items at byte 3,812 (8,388,612 bytes) runs past the
       end of the program (3,848 bytes)

   (one line, exit status 1). Only then does the flatc-generated reader, which trusts every
   offset, read it;
3. the runtime's own loader (`etmlir._runtime`, when it is built) loads the bytes, without
   running anything. A file whose FlatBuffer is sound but whose contents the runtime refuses
   (a value index out of range, an operator that does not exist) is still summarized, with
   `<bad ...>` where an index points nowhere, and the runtime's reason follows on stderr
   (exit status 1).

Names that are not UTF-8 print with backslash escapes. Exit status: 0 when every file was read
and loads, 1 when one could not be read or is refused, 2 for a bug in et-inspect itself
(`etmlir.tools.cli`; `--debug` or ETMLIR_DEBUG=1 shows the traceback).
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections import Counter
from collections.abc import Sequence

from etmlir.devtools import signing
from etmlir.executable import pte
from etmlir.executable.dtypes import SCALAR_TYPE_NAMES
from etmlir.executable.io_structure import IOStructure, StructureError
from etmlir.schema.Dynamism import Dynamism
from etmlir.schema.InstructionKind import InstructionKind
from etmlir.schema.Value import Value
from etmlir.tools.cli import ToolError, run_tool
from etmlir.tools.inspect_views import SORT_KEYS, html_view, trace_table

_KIND_NAMES = {v: k for k, v in vars(Value).items() if not k.startswith("_") and isinstance(v, int)}
_INSTRUCTION_NAMES = {v: k for k, v in vars(InstructionKind).items() if not k.startswith("_") and isinstance(v, int)}


def _text(s: object) -> str:
    """A FlatBuffer string as text: bytes that are not UTF-8 print as escapes; an absent string is ''."""
    if s is None:
        return ""
    return s.decode(errors="backslashreplace") if isinstance(s, bytes) else str(s)


def _ints(vector: object) -> list[int]:
    return [int(x) for x in vector] if vector is not None else []


def _tensor(t: object) -> str:
    if t is None:  # the union says Tensor but the table is absent
        return "<tensor without its table>"
    dtype = SCALAR_TYPE_NAMES.get(t.dtype, f"dtype{t.dtype}")
    sizes = _ints(t.sizes)
    if t.dynamism == Dynamism.Bounded:
        # Dims that may vary show their upper bound as "<=N" (all of them in files without dynamic_dims).
        varies = [bool(v) for v in t.dynamicDims] if t.dynamicDims is not None else [True] * len(sizes)
        varies += [True] * (len(sizes) - len(varies))
        text = f"{dtype}[{', '.join(f'<={s}' if v else str(s) for s, v in zip(sizes, varies))}]"
    else:
        text = f"{dtype}[{', '.join(str(s) for s in sizes)}]"
    if t.allocation is not None:
        text += f" arena {t.allocation.memId} @ {t.allocation.offset}"
        if t.initial is not None:
            text += f", initial value @ {t.initial.offset} ({t.initial.size:,} bytes)"
    elif t.constant is not None:
        text += f" constant @ {t.constant.offset} ({t.constant.size:,} bytes)"
    return text


def _runtime_scalars(method: object) -> set[int]:
    """Values a kernel writes that are not tensors (the Ints `etmlir_prim::` size queries produce)."""
    operators = method.operators or []
    written = set()
    for ins in method.instructions or []:
        if ins.kindType == InstructionKind.KernelCall and ins.kind is not None and ins.kind.op < len(operators):
            args = _ints(ins.kind.args)
            if _text(operators[ins.kind.op].name).startswith("etmlir_prim::") and args:
                written.add(args[-1])
    return written


def _value(method: object, index: int, depth: int = 0, runtime: frozenset[int] = frozenset()) -> str:
    """A short rendering of value `index`: `%3` for tensors and run-time values, the literal for constants."""
    values = method.values or []
    if not 0 <= index < len(values):
        return f"<bad value {index}>"
    v = values[index]
    kind, table = v.valueType, v.value
    if kind == Value.Tensor or index in runtime:
        return f"%{index}"
    if kind == Value.Null:
        return "None"
    if table is None:  # a kind this reader does not know, or the kind without its table
        return f"<{_KIND_NAMES.get(kind, f'value kind {kind}')}>"
    if kind in (Value.Int, Value.Double):
        return str(table.value)
    if kind == Value.Bool:
        return str(bool(table.value))
    if kind == Value.String:
        return repr(_text(table.value))
    if kind in (Value.DoubleList, Value.BoolList):
        return "[" + ", ".join(str(x) for x in (table.items if table.items is not None else [])) + "]"
    if kind in (Value.IntList, Value.TensorList, Value.OptionalTensorList):
        if depth:
            return f"list%{index}"
        return "[" + ", ".join("None" if i == -1 else _value(method, i, depth + 1, runtime)
                               for i in _ints(table.items)) + "]"
    return f"<{_KIND_NAMES.get(kind, kind)}>"


def _value_summary(values: list, index: int) -> str:
    """`%3 f32[2, 4] ...` for an input, output or state entry (`<bad value 9>` when it points nowhere)."""
    if not 0 <= index < len(values):
        return f"<bad value {index}>"
    v = values[index]
    return f"%{index} " + (_tensor(v.value) if v.valueType == Value.Tensor else _KIND_NAMES.get(v.valueType, "?"))


def _instruction(method: object, ins: object, runtime: frozenset[int]) -> str:
    operators = method.operators or []
    kind, body = ins.kindType, ins.kind
    if body is None:
        return f"<{_INSTRUCTION_NAMES.get(kind, f'instruction kind {kind}')} without its table>"
    if kind == InstructionKind.KernelCall:
        operator = operators[body.op] if body.op < len(operators) else None
        what = f"{_text(operator.name)}.{_text(operator.overload)}" if operator else f"<bad operator {body.op}>"
        return f"{what}({', '.join(_value(method, a, 0, runtime) for a in _ints(body.args))})"
    if kind == InstructionKind.DelegateCall:
        args = [_value(method, a, 0, runtime) for a in _ints(body.args)]
        outs = body.numOutputs if 0 < body.numOutputs <= len(args) else 0
        live_ins, live_outs = args[:len(args) - outs], args[len(args) - outs:]
        delegates = method.delegates or []
        target = f"delegate {body.delegate}" if body.delegate < len(delegates) else f"<bad delegate {body.delegate}>"
        return f"{target}({', '.join(live_ins)})" + (f" -> {', '.join(live_outs)}" if outs else "")
    if kind == InstructionKind.JumpFalse:
        return f"jump_false %{body.cond} -> {body.target}"
    if kind == InstructionKind.Move:
        return f"move %{body.from_} -> %{body.to}"
    if kind == InstructionKind.Free:
        return f"free %{body.value}"
    return f"<instruction kind {kind}>"


def _call_structure(method: object) -> str | None:
    """How the model's call nests inputs (inN) and outputs (outN), or None for a flat method."""
    try:
        structure = IOStructure.from_flatbuffer(method.inputStructure, method.outputStructure, method.argNames)
    except StructureError as error:
        return f"<malformed call structure: {error}>"
    return structure.describe(_text(method.name)) if structure is not None else None


def describe(data: bytes, name: str = "<buffer>", max_instructions: int = 60, show_values: bool = False) -> str:
    """The summary et-inspect prints for the `.pte` bytes `data` (PteError when they are not one)."""
    f = pte.read(data)
    program, header = f.program, f.header
    out = [f"{name}: {len(data):,} bytes, program schema v{program.version}, header v{header.header_version}, "
           f"FlatBuffer {header.program_size:,} bytes"]
    segments = program.segments or []
    out.append(f"segments: {len(segments)} (base offset {header.segment_base_offset:,}, "
               f"aligned to {header.segment_alignment})")
    cases = program.bundledCases or []
    case_segments = {t.data.segment for c in cases for t in (c.inputs or []) + (c.expectedOutputs or [])
                     if t.data is not None}
    for i, segment in enumerate(segments):
        role = ("constants" if i == program.constantSegment else "bundled test data" if i in case_segments
                else "delegate payload")
        out.append(f"  {i}: {role:<17} offset {segment.offset:>12,}  size {segment.size:>12,}")
    if cases:  # a bundled program (etmlir.devtools.bundle): et-run --verify runs them
        out.append(f"bundled test cases: {len(cases)} (et-run --verify runs them)")
        for i, case in enumerate(cases):
            label = f" '{_text(case.name)}'" if case.name else ""

            def shapes(tensors: object) -> str:
                return ", ".join(f"{SCALAR_TYPE_NAMES.get(t.scalarType, f'type {t.scalarType}')}"
                                 f"{list(_ints(t.sizes))}" for t in (tensors or []))
            out.append(f"  {i}{label}: method '{_text(case.method)}', inputs ({shapes(case.inputs)}) -> expected "
                       f"({shapes(case.expectedOutputs)}), atol {case.atol:g}, rtol {case.rtol:g}")
    for method in program.methods or []:
        values = method.values or []
        instructions = method.instructions or []
        operators = method.operators or []
        delegates = method.delegates or []
        out.append(f"method '{_text(method.name)}': {len(values)} values, {len(instructions)} instructions, "
                   f"{len(operators)} operators, {len(delegates)} delegates")
        call = _call_structure(method)
        if call is not None:
            out.append(f"  call: {call}")
        for label, indices in (("inputs", _ints(method.inputs)), ("outputs", _ints(method.outputs))):
            out.append(f"  {label} ({len(indices)}):")
            for position, index in enumerate(indices):
                out.append(f"    {position}: {_value_summary(values, index)}")
        if method.state:  # tensors the method keeps across calls (the model's mutated buffers)
            out.append(f"  state ({len(method.state)}):")
            for entry in method.state:
                v = values[entry.value] if 0 <= entry.value < len(values) else None
                desc = _tensor(v.value) if v is not None and v.valueType == Value.Tensor else "<not a tensor>"
                out.append(f"    {_text(entry.name)}: %{entry.value} {desc}")
        out.append("  arenas:" if method.arenas else "  arenas: none (nothing planned)")
        for mem_id, arena in enumerate(method.arenas or []):
            out.append(f"    {mem_id}: {_text(arena.name):<10} {arena.size:>12,} bytes")
        for i, delegate in enumerate(delegates):
            specs = ", ".join(f"{_text(s.key)}={_text(bytes(s.value) if s.value is not None else b'')}"
                              for s in (delegate.compileSpecs or []))
            payload = delegate.payload
            where = (f"payload segment {payload.segment} ({payload.size:,} bytes)" if payload is not None
                     else "no payload")
            out.append(f"  delegate {i}: backend '{_text(delegate.backend)}', {where}{', ' + specs if specs else ''}")
            # Native code or data, and who signed it (the runtime runs native code only when allowed or signed).
            try:
                blob = f.segment(payload.segment)[payload.offset:payload.offset + payload.size] if payload else None
            except pte.PteError:
                blob = None
            out.append(f"    {signing.describe_delegate(delegate, blob)}")
            from etmlir.backends.payload_header import payload_summary

            summary = payload_summary(blob) if blob is not None else None
            if summary:
                out.append(f"    body: {summary}")
        calls = Counter()
        for ins in instructions:
            if ins.kindType == InstructionKind.KernelCall and ins.kind is not None and ins.kind.op < len(operators):
                calls[ins.kind.op] += 1
        out.append("  operators (calls):")
        for index, operator in enumerate(operators):
            out.append(f"    {_text(operator.name)}.{_text(operator.overload)}  {calls[index]}")
        debug = {e.handle: e for e in (method.debugInfo or [])}
        runtime = frozenset(_runtime_scalars(method))
        if max_instructions:
            out.append("  instructions:")
        for position, ins in enumerate(instructions[:max_instructions] if max_instructions >= 0 else instructions):
            entry = debug.get(ins.debugHandle)
            # `# model.py:41 (edge.softmax) in layers.3.attn`: the module only when the file names one
            module = f" in {_text(entry.modulePath)}" if entry and entry.modulePath else ""
            where = f"   # {_text(entry.location)} ({_text(entry.op)}){module}" if entry else ""
            out.append(f"    {position:4}: {_instruction(method, ins, runtime)}{where}")
        if 0 <= max_instructions < len(instructions):
            out.append(f"    ... {len(instructions) - max_instructions} more (--instructions -1 lists all)")
        if show_values:
            out.append("  values:")
            for index, v in enumerate(values):
                body = _tensor(v.value) if v.valueType == Value.Tensor else _value(method, index, 0, runtime)
                out.append(f"    %{index}: {_KIND_NAMES.get(v.valueType, f'kind {v.valueType}')} {body}")
    return "\n".join(out)


def extract_payload(data: bytes, method_name: str | None, index: int, body_only: bool = True) -> bytes:
    """The bytes of delegate `index` of a method (the first method when None): the body after the shared
    payload header (what the backend's own tools read, e.g. a TOSA FlatBuffer), or the whole payload."""
    from etmlir.backends.payload_header import read_payload

    f = pte.read(data)
    methods = f.program.methods or []
    method = next((m for m in methods if method_name is None or _text(m.name) == method_name), None)
    if method is None:
        raise ToolError(f"no method '{method_name}' (methods: {', '.join(_text(m.name) for m in methods)})")
    delegates = method.delegates or []
    if not 0 <= index < len(delegates):
        raise ToolError(f"method '{_text(method.name)}' has {len(delegates)} delegate(s); there is no delegate {index}")
    payload = delegates[index].payload
    if payload is None:
        raise ToolError(f"delegate {index} of method '{_text(method.name)}' has no payload")
    blob = bytes(f.segment(payload.segment)[payload.offset:payload.offset + payload.size])
    if not body_only:
        return blob
    try:
        return read_payload(blob)[1]
    except ValueError as error:
        raise ToolError(f"delegate {index}'s payload: {error}") from None


def runtime_refusal(data: bytes) -> str | None:
    """Why the C++ runtime's loader refuses `data`, or None when it loads it (or no runtime is built).

    Loading checks the header, the FlatBuffer and every index and size in the methods; it does
    not initialize delegates, so no payload (native code included) runs.
    """
    try:
        from etmlir import _runtime
    except ImportError:  # a source tree without the extension: the Python checks still ran
        return None
    try:
        _runtime.Program.from_bytes(data)
    except _runtime.Error as error:  # its message may quote names from the file: keep it to one printable line
        message = " ".join(str(error).split()) or "refused without a message"
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    return None


def _instruction_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if n < -1:
        raise argparse.ArgumentTypeError(f"{n}: use -1 to list all instructions, 0 for none, N for the first N")
    return n


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            if stat.S_ISCHR(os.fstat(f.fileno()).st_mode):  # /dev/zero would be read forever (a pipe is fine)
                raise ToolError(f"cannot read '{path}': it is a device, not a .pte file")
            return f.read()
    except IsADirectoryError:
        raise ToolError(f"cannot read '{path}': it is a directory") from None
    except OSError as error:
        raise ToolError(f"cannot read '{path}': {error.strerror or error}") from None


def _inspect(path: str, max_instructions: int, show_values: bool) -> None:
    """Print one file's summary; ToolError (after the summary, if one could be made) when it is bad."""
    data = _read(path)
    try:
        text = describe(data, path, max_instructions, show_values)
    except pte.PteError as error:
        raise ToolError(f"{path}: {error}") from None
    print(text, flush=True)
    refusal = runtime_refusal(data)
    if refusal is not None:
        raise ToolError(f"{path}: the runtime refuses to load it: {refusal}")


def _check_against(path: str, manifest: object) -> bool:
    """Print whether `manifest`'s runtime can load the file (`--check-against`); False when it cannot."""
    from etmlir.devtools.manifest import check_loadable

    data = _read(path)
    try:
        pte.read(data)
    except pte.PteError as error:
        raise ToolError(f"{path}: {error}") from None
    report = check_loadable(data, manifest)
    report.program = path
    print(report.format(), flush=True)
    return report.ok


def _trace_views(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """`--trace` (the Inspector's table, `--perfetto`) and `--html` for one file (`inspect_views`)."""
    if len(args.files) != 1:
        parser.error("--trace and --html take one .pte file")
    if args.perfetto is not None and args.trace is None:
        parser.error("--perfetto needs --trace (the events to export)")
    if args.top < 0:
        parser.error(f"--top {args.top}: use 0 for every row, N for the first N")
    if args.trace is not None:
        print(trace_table(args.files[0], args.trace, args.sort, args.top, args.perfetto), flush=True)
    if args.html is not None:
        print(html_view(args.files[0], args.html, args.trace), flush=True)
    return 0


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="et-inspect", description="Print a summary of .pte files.")
    parser.add_argument("files", nargs="+", metavar="PATH.pte")
    parser.add_argument("--instructions", type=_instruction_count, default=60, metavar="N",
                        help="list the first N instructions (-1: all, 0: none; default 60)")
    parser.add_argument("--values", action="store_true", help="list the value table")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    parser.add_argument("--check-against", metavar="MANIFEST.json",
                        help="instead of the summary, check each file against a runtime manifest (et-manifest) and "
                             "list what that runtime lacks, with method, instruction and source line; exit status 1 "
                             "when something is missing")
    parser.add_argument("--trace", metavar="TRACE.ettrace",
                        help="instead of the summary, the time per op of this trace of the file (et-run --trace, "
                             "Method.trace(...).save): op, source line, module, backend, calls, median, p90, share")
    parser.add_argument("--sort", choices=SORT_KEYS, default="total", help="--trace: order the rows (default total)")
    parser.add_argument("--top", type=int, default=30, metavar="N",
                        help="--trace: the first N rows (0: all; default 30)")
    parser.add_argument("--perfetto", metavar="OUT.json",
                        help="--trace: also write the trace as Chrome trace-event JSON (ui.perfetto.dev)")
    parser.add_argument("--html", metavar="OUT.html",
                        help="write the program graph as one self-contained HTML page (ops coloured by their share "
                             "of the time with --trace)")
    parser.add_argument("--extract-payload", type=int, metavar="DELEGATE",
                        help="write delegate DELEGATE's payload body (after the shared payload header: a TOSA "
                             "FlatBuffer for the tosa backend) to --out; --method picks the method")
    parser.add_argument("--method", metavar="NAME", help="--extract-payload: the method (default: the first)")
    parser.add_argument("--whole-payload", action="store_true",
                        help="--extract-payload: write the whole payload, header included")
    parser.add_argument("--out", metavar="FILE", help="--extract-payload: where to write it")
    args = parser.parse_args(argv)
    status = 0
    if args.extract_payload is not None:
        if args.out is None or len(args.files) != 1:
            parser.error("--extract-payload takes one PATH.pte and --out FILE")
        try:
            blob = extract_payload(_read(args.files[0]), args.method, args.extract_payload,
                                   body_only=not args.whole_payload)
        except pte.PteError as error:
            raise ToolError(f"{args.files[0]}: {error}") from None
        with open(args.out, "wb") as out:
            out.write(blob)
        print(f"wrote {len(blob):,} bytes to {args.out}")
        return 0
    if args.trace is not None or args.html is not None or args.perfetto is not None:
        return _trace_views(parser, args)
    if args.check_against is not None:
        from etmlir.devtools.manifest import ManifestError, load_manifest

        try:
            manifest = load_manifest(args.check_against)
        except ManifestError as error:
            raise ToolError(str(error)) from None
        for path in args.files:
            try:
                status |= 0 if _check_against(path, manifest) else 1
            except ToolError as error:
                print(f"et-inspect: error: {error}", file=sys.stderr, flush=True)
                status = 1
        return status
    for path in args.files:  # one bad file does not hide the others' summaries
        try:
            _inspect(path, args.instructions, args.values)
        except ToolError as error:
            print(f"et-inspect: error: {error}", file=sys.stderr, flush=True)
            status = 1
    return status


def main(argv: Sequence[str] | None = None) -> int:
    return run_tool("et-inspect", _main, argv)


if __name__ == "__main__":
    sys.exit(main())
