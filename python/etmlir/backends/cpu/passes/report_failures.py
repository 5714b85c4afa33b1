"""et-cpu-report-failures: a failed run-time check returns an error to the runtime instead of aborting.

torch-mlir's lowering checks what it cannot prove at compile time, such as
two dynamic sizes a broadcast needs equal, with `cf.assert`. MLIR lowers a
failed assert to `abort()`: one bad input would kill the process that runs
the model. This pass turns each assert in the payload's functions into a
call of the payload's failure hook with the debug handle of the edge op the
check came from (read off its location, tagged by `et-edge-to-torch`) and
the message:

    %0 = arith.cmpi eq, %dim, %dim_0 : index                       loc(mul_tensor, handle 2)
    cf.assert %0, "mismatched size for broadcast"                  loc(mul_tensor, handle 2)

becomes

    %0 = arith.cmpi eq, %dim, %dim_0 : index
    %true = arith.constant true
    %1 = arith.xori %0, %true : i1
    scf.if %1 {
      %m = memref.get_global @etmlir_failure_0 : memref<30xi8>       // the message, NUL-terminated
      %p = memref.extract_aligned_pointer_as_index %m : memref<30xi8> -> index
      %a = arith.index_cast %p : index to i64
      func.call @etmlir_cpu_fail(%c2_i32, %a) : (i32, i64) -> ()
    }

`etmlir_cpu_fail` (payload_c/shim.c) does not return: the runtime called the
entry point through `etmlir_cpu_run`, which returns the failure to it, and
the runtime reports it against that edge op's source line (PAYLOAD.md,
"Failures"). The checks run on the calling thread, before the loops they
guard (the microkernels' worker threads never reach one).
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.cpu.ir_util import declare_function, ops_named
from etmlir.frontend.locations import location_debug_handles
from etmlir.passes.registry import register_pass

FAIL = "etmlir_cpu_fail"
_MESSAGE_PREFIX = "etmlir_failure_"


def _symbol_names(module: ir.Operation) -> set[str]:
    return {ir.StringAttr(op.operation.attributes["sym_name"]).value
            for op in module.regions[0].blocks[0].operations if "sym_name" in op.operation.attributes}


def report_failures(module: ir.Operation) -> int:
    """Replace every `cf.assert` by a call of the failure hook; returns how many."""
    asserts = ops_named(module, ("cf.assert",))
    if not asserts:
        return 0
    taken = _symbol_names(module)
    body = module.regions[0].blocks[0]
    with module.context, ir.Location.unknown():
        i1, i8 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(8)
        i32, i64, index = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64), ir.IndexType.get()
        globals_by_message: dict[str, tuple[str, ir.Type]] = {}
        for op in asserts:
            message = ir.StringAttr(op.attributes["msg"]).value
            if message not in globals_by_message:
                name = next(f"{_MESSAGE_PREFIX}{i}" for i in range(len(taken) + len(asserts) + 1)
                            if f"{_MESSAGE_PREFIX}{i}" not in taken)
                taken.add(name)
                data = message.encode("utf-8")[:255] + b"\0"
                memref = ir.MemRefType.get([len(data)], i8)
                values = ", ".join(str(b if b < 128 else b - 256) for b in data)
                with ir.Location.unknown(), ir.InsertionPoint.at_block_begin(body):
                    ir.Operation.create("memref.global", attributes={
                        "sym_name": ir.StringAttr.get(name),
                        "sym_visibility": ir.StringAttr.get("private"),
                        "type": ir.TypeAttr.get(memref),
                        "initial_value": ir.Attribute.parse(f"dense<[{values}]> : tensor<{len(data)}xi8>"),
                        "constant": ir.UnitAttr.get(),
                    })
                globals_by_message[message] = (name, memref)
            name, memref = globals_by_message[message]
            handles = location_debug_handles(op.location)
            with op.location, ir.InsertionPoint(op):
                true = ir.Operation.create("arith.constant", results=[i1],
                                           attributes={"value": ir.IntegerAttr.get(i1, 1)}).result
                failed = ir.Operation.create("arith.xori", results=[i1], operands=[op.operands[0], true]).result
                branch = ir.Operation.create("scf.if", operands=[failed], regions=2)
            block = branch.regions[0].blocks.append()
            with op.location, ir.InsertionPoint(block):
                text = ir.Operation.create("memref.get_global", results=[memref],
                                           attributes={"name": ir.FlatSymbolRefAttr.get(name)}).result
                pointer = ir.Operation.create("memref.extract_aligned_pointer_as_index", results=[index],
                                              operands=[text]).result
                address = ir.Operation.create("arith.index_cast", results=[i64], operands=[pointer]).result
                handle = ir.Operation.create("arith.constant", results=[i32], attributes={
                    "value": ir.IntegerAttr.get(i32, handles[0] if handles else 0)}).result
                ir.Operation.create("func.call", operands=[handle, address],
                                    attributes={"callee": ir.FlatSymbolRefAttr.get(FAIL)})
                ir.Operation.create("scf.yield")
            op.erase()
        declare_function(module, FAIL, [i32, i64])
    return len(asserts)


@register_pass("et-cpu-report-failures")
def report_failures_pass(module: ir.Operation) -> None:
    """et-cpu-report-failures: `cf.assert` -> a call of the payload's failure hook with the op's debug handle."""
    report_failures(module)
