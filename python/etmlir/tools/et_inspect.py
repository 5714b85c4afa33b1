"""et-inspect: print a readable summary of a `.pte` file.

    et-inspect model.pte                 # methods, inputs/outputs, state, arenas, segments, delegates, instructions
    et-inspect model.pte --instructions 0    # leave the instruction listing out
    et-inspect model.pte --values        # also list the whole value table

Reads the file with the flatc-generated reader (`etmlir.schema`) after
checking the header; a file that is not a `.pte`, is truncated or has a bad
header is reported in one line with exit status 1. (`et-verify-pte` runs the
C++ FlatBuffers verifier on the same file.)
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence

from etmlir.executable import pte
from etmlir.executable.dtypes import SCALAR_TYPE_NAMES
from etmlir.executable.io_structure import IOStructure
from etmlir.schema.Dynamism import Dynamism
from etmlir.schema.InstructionKind import InstructionKind
from etmlir.schema.Value import Value

_KIND_NAMES = {v: k for k, v in vars(Value).items() if not k.startswith("_") and isinstance(v, int)}


def _tensor(t: object) -> str:
    dtype = SCALAR_TYPE_NAMES.get(t.dtype, f"dtype{t.dtype}")
    sizes = [int(s) for s in (t.sizes if t.sizes is not None else [])]
    if t.dynamism == Dynamism.Bounded:
        # Dims that may vary show their upper bound as "<=N" (all of them in files without dynamic_dims).
        varies = list(t.dynamicDims) if t.dynamicDims is not None else [True] * len(sizes)
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
        if ins.kindType == InstructionKind.KernelCall and ins.kind.op < len(operators) and ins.kind.args is not None:
            if _text(operators[ins.kind.op].name).startswith("etmlir_prim::") and len(ins.kind.args):
                written.add(int(ins.kind.args[-1]))
    return written


def _value(method: object, index: int, depth: int = 0, runtime: frozenset[int] = frozenset()) -> str:
    """A short rendering of value `index`: `%3` for tensors and run-time values, the literal for constants."""
    values = method.values
    if not 0 <= index < len(values):
        return f"<bad value {index}>"
    v = values[index]
    kind, table = v.valueType, v.value
    if kind == Value.Tensor or index in runtime:
        return f"%{index}"
    if kind == Value.Null:
        return "None"
    if kind in (Value.Int, Value.Double):
        return str(table.value)
    if kind == Value.Bool:
        return str(bool(table.value))
    if kind == Value.String:
        return repr(table.value.decode() if isinstance(table.value, bytes) else table.value)
    if kind in (Value.DoubleList, Value.BoolList):
        return "[" + ", ".join(str(x) for x in (table.items if table.items is not None else [])) + "]"
    if kind in (Value.IntList, Value.TensorList, Value.OptionalTensorList):
        items = table.items if table.items is not None else []
        if depth:
            return f"list%{index}"
        return "[" + ", ".join("None" if i == -1 else _value(method, int(i), depth + 1, runtime)
                               for i in items) + "]"
    return f"<{_KIND_NAMES.get(kind, kind)}>"


def _text(s: object) -> str:
    return s.decode() if isinstance(s, bytes) else str(s)


def describe(data: bytes, name: str = "<buffer>", max_instructions: int = 60, show_values: bool = False) -> str:
    """The summary et-inspect prints for the `.pte` bytes `data`."""
    f = pte.read(data)
    program, header = f.program, f.header
    out = [f"{name}: {len(data):,} bytes, program schema v{program.version}, header v{header.header_version}, "
           f"FlatBuffer {header.program_size:,} bytes"]
    segments = program.segments or []
    out.append(f"segments: {len(segments)} (base offset {header.segment_base_offset:,}, "
               f"aligned to {header.segment_alignment})")
    for i, segment in enumerate(segments):
        role = "constants" if i == program.constantSegment else "delegate payload"
        out.append(f"  {i}: {role:<16} offset {segment.offset:>12,}  size {segment.size:>12,}")
    for method in program.methods or []:
        values = method.values or []
        instructions = method.instructions or []
        operators = method.operators or []
        delegates = method.delegates or []
        out.append(f"method '{_text(method.name)}': {len(values)} values, {len(instructions)} instructions, "
                   f"{len(operators)} operators, {len(delegates)} delegates")
        structure = IOStructure.from_flatbuffer(method.inputStructure, method.outputStructure, method.argNames)
        if structure is not None:  # how the model's call nests inputs (inN) and outputs (outN)
            out.append(f"  call: {structure.describe(_text(method.name))}")
        for label, indices in (("inputs", method.inputs), ("outputs", method.outputs)):
            indices = list(indices) if indices is not None else []
            out.append(f"  {label} ({len(indices)}):")
            for position, index in enumerate(indices):
                v = values[index]
                desc = _tensor(v.value) if v.valueType == Value.Tensor else _KIND_NAMES.get(v.valueType, "?")
                out.append(f"    {position}: %{index} {desc}")
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
            specs = ", ".join(f"{_text(s.key)}={bytes(s.value).decode(errors='replace')}"
                              for s in (delegate.compileSpecs or []))
            out.append(f"  delegate {i}: backend '{_text(delegate.backend)}', payload segment "
                       f"{delegate.payload.segment} ({delegate.payload.size:,} bytes){', ' + specs if specs else ''}")
        calls = Counter()
        for ins in instructions:
            if ins.kindType == InstructionKind.KernelCall and ins.kind.op < len(operators):
                calls[ins.kind.op] += 1
        out.append("  operators (calls):")
        for index, operator in enumerate(operators):
            out.append(f"    {_text(operator.name)}.{_text(operator.overload)}  {calls[index]}")
        debug = {e.handle: e for e in (method.debugInfo or [])}
        runtime = frozenset(_runtime_scalars(method))
        if max_instructions:
            out.append("  instructions:")
        for position, ins in enumerate(instructions[:max_instructions] if max_instructions >= 0 else instructions):
            kind = ins.kindType
            if kind == InstructionKind.KernelCall:
                operator = operators[ins.kind.op] if ins.kind.op < len(operators) else None
                what = f"{_text(operator.name)}.{_text(operator.overload)}" if operator else f"<op {ins.kind.op}>"
                args = ", ".join(_value(method, int(a), 0, runtime)
                                 for a in (ins.kind.args if ins.kind.args is not None else []))
                text = f"{what}({args})"
            elif kind == InstructionKind.DelegateCall:
                values = [_value(method, int(a), 0, runtime)
                          for a in (ins.kind.args if ins.kind.args is not None else [])]
                outs = ins.kind.numOutputs if 0 < ins.kind.numOutputs <= len(values) else 0
                live_ins, live_outs = values[:len(values) - outs], values[len(values) - outs:]
                text = f"delegate {ins.kind.delegate}({', '.join(live_ins)})" + (
                    f" -> {', '.join(live_outs)}" if outs else "")
            elif kind == InstructionKind.JumpFalse:
                text = f"jump_false %{ins.kind.cond} -> {ins.kind.target}"
            elif kind == InstructionKind.Move:
                text = f"move %{ins.kind.from_} -> %{ins.kind.to}"
            elif kind == InstructionKind.Free:
                text = f"free %{ins.kind.value}"
            else:
                text = f"<instruction kind {kind}>"
            entry = debug.get(ins.debugHandle)
            where = f"   # {_text(entry.location)} ({_text(entry.op)})" if entry else ""
            out.append(f"    {position:4}: {text}{where}")
        if 0 <= max_instructions < len(instructions):
            out.append(f"    ... {len(instructions) - max_instructions} more (--instructions -1 lists all)")
        if show_values:
            out.append("  values:")
            for index, v in enumerate(values):
                body = _tensor(v.value) if v.valueType == Value.Tensor else _value(method, index, 0, runtime)
                out.append(f"    %{index}: {_KIND_NAMES.get(v.valueType, '?')} {body}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="et-inspect", description="Print a summary of .pte files.")
    parser.add_argument("files", nargs="+", metavar="PATH.pte")
    parser.add_argument("--instructions", type=int, default=60, metavar="N",
                        help="list the first N instructions (-1: all, 0: none; default 60)")
    parser.add_argument("--values", action="store_true", help="list the value table")
    args = parser.parse_args(argv)
    status = 0
    for path in args.files:
        try:
            with open(path, "rb") as f:
                data = f.read()
            print(describe(data, path, args.instructions, args.values))
        except OSError as error:
            print(f"et-inspect: error: cannot read '{path}': {error.strerror}", file=sys.stderr)
            status = 1
        except pte.PteError as error:
            print(f"et-inspect: error: {path}: {error}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
