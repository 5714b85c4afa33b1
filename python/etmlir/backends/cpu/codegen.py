"""linalg on tensors -> native object code: the `cpu` backend's code generator.

Steps, each an MLIR pass pipeline run on the delegate's module:

1. `tensor-level`: fuse elementwise producers into consumers
   (`linalg-fuse-elementwise-ops`), so a bias add, a clamp and a residual add
   become one loop nest instead of three passes over memory. That pass also
   folds reshapes into neighbouring ops by rewriting them as generics, which
   turns a `linalg.matmul` next to a reshape (nanoGPT's linears) into a
   generic no microkernel takes, so contractions and the reshapes feeding
   them are fenced off first (`_fence_contractions`); `fuse_elementwise`
   still keeps the unfused module if a contraction did not survive.
2. `shapes`: when a result has a dynamic size, a second entry point
   `@forward_shapes` is derived from `@forward`: it returns every result's
   sizes, and `resolve-ranked-shaped-type-result-dims` reduces it to
   arithmetic on the input sizes (the computation itself folds away).
3. `bufferize`: one-shot bufferization, results become out-parameters
   (destination-passing style: the code writes into the runtime's buffers).
4. `microkernels` (`ukernels.py`): matmul, batch matmul and the two 2-d
   convolution forms become calls to the payload's C microkernels.
5. `llvm`: loops, vectors, memrefs (allocations through the payload's
   arena allocator: `use-generic-functions`), arith, math -> LLVM dialect.
6. MLIR's ExecutionEngine compiles the LLVM dialect for this machine
   (opt level 2) and writes the object file, which `link.py` links with the
   microkernels into the payload's shared object.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from etmlir.program import clone_module, find_function

# Canonicalization after fusion also inlines the fences (`_fence_contractions`) again.
TENSOR_LEVEL = "builtin.module(func.func(linalg-fuse-elementwise-ops),canonicalize,cse)"
SHAPES_LEVEL = "builtin.module(resolve-ranked-shaped-type-result-dims,canonicalize,cse,symbol-dce)"
BUFFERIZE = (
    "builtin.module(one-shot-bufferize{bufferize-function-boundaries=1 "
    "function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{hoist-static-allocs=1 modify-public-functions=1},"
    "canonicalize,cse,buffer-deallocation-pipeline,func.func(refback-munge-memref-copy))"
)
TO_LLVM = (
    "builtin.module(func.func(convert-linalg-to-loops,refback-expand-ops-for-llvm),"
    "convert-vector-to-scf{full-unroll=1},expand-strided-metadata,lower-affine,convert-scf-to-cf,"
    "convert-vector-to-llvm,finalize-memref-to-llvm{use-generic-functions=1},convert-math-to-llvm,"
    "convert-arith-to-llvm,convert-index-to-llvm,convert-cf-to-llvm,convert-func-to-llvm,"
    "convert-ub-to-llvm,reconcile-unrealized-casts)"
)

CONTRACTIONS = ("linalg.matmul", "linalg.batch_matmul", "linalg.conv_2d_nchw_fchw",
                "linalg.depthwise_conv_2d_nchw_chw")

ENTRY = "forward"
SHAPES_ENTRY = "forward_shapes"


def run(module: ir.Module, pipeline: str) -> None:
    with module.context:
        PassManager.parse(pipeline).run(module.operation)


def count_ops(module: ir.Module, names: tuple[str, ...]) -> int:
    found = 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        found += op.name in names
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _fence(op: ir.Operation) -> None:
    """Move `op` into an `scf.execute_region` of its own (canonicalization inlines it again later)."""
    with op.location, ir.InsertionPoint(op):
        region = ir.Operation.create("scf.execute_region", results=[r.type for r in op.results], regions=1)
    block = region.regions[0].blocks.append()
    for old, new in zip(op.results, region.results):
        old.replace_all_uses_with(new)
    with op.location, ir.InsertionPoint(block):
        ir.Operation.create("scf.yield", operands=list(op.results))
    op.move_before(list(block.operations)[0])


def _fence_contractions(module: ir.Module) -> None:
    """Hide each contraction, and the reshapes feeding it, from reshape folding.

    Elementwise fusion folds a reshape into the linalg op on its other side by
    rewriting that op as a generic; behind an `scf.execute_region` neither the
    contraction's result nor a reshaped operand is next to the other op.
    """
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in CONTRACTIONS:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    with module.context:
        for op in found:
            for value in op.operands:
                owner = value.owner
                if isinstance(owner, (ir.Operation, ir.OpView)) and owner.name in (
                        "tensor.expand_shape", "tensor.collapse_shape"):
                    _fence(owner.operation)
            _fence(op)


def fuse_elementwise(module: ir.Module) -> tuple[ir.Module, bool]:
    """(module after elementwise fusion, True), or (the module unfused, False) if fusion ate a contraction."""
    with module.context:
        fused = clone_module(module)
    _fence_contractions(fused)
    run(fused, TENSOR_LEVEL)
    if count_ops(fused, CONTRACTIONS) < count_ops(module, CONTRACTIONS):
        run(module, "builtin.module(canonicalize,cse)")
        return module, False
    return fused, True


def result_types(func: ir.Operation) -> list[ir.RankedTensorType]:
    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    return [ir.RankedTensorType(t) for t in ftype.results]


def argument_types(func: ir.Operation) -> list[ir.RankedTensorType]:
    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    return [ir.RankedTensorType(t) for t in ftype.inputs]


def add_shapes_function(module: ir.Module) -> bool:
    """Add `@forward_shapes` (every result's sizes as tensor<Nxi64>) when a result is dynamic.

    Returns False (and adds nothing) when every result is static. Raises when
    the sizes cannot be computed without running the delegate's computation.
    """
    forward = find_function(module, ENTRY)
    results = result_types(forward)
    if all(t.has_static_shape for t in results):
        return False
    with module.context, forward.location:
        shapes = forward.clone(ip=ir.InsertionPoint(module.body))
        shapes.attributes["sym_name"] = ir.StringAttr.get(SHAPES_ENTRY)
        total = sum(t.rank for t in results)
        i64 = ir.IntegerType.get_signless(64)
        out_type = ir.RankedTensorType.get([total], i64)
        shapes.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(argument_types(forward), [out_type]))
        block = shapes.regions[0].blocks[0]
        ret = list(block.operations)[-1]
        sizes = []
        with ir.InsertionPoint(ret):
            for value, t in zip(ret.operands, results):
                for d in range(t.rank):
                    if t.is_dynamic_dim(d):
                        index = ir.Operation.create("arith.constant", results=[ir.IndexType.get()],
                                                    attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), d)})
                        dim = ir.Operation.create("tensor.dim", results=[ir.IndexType.get()],
                                                  operands=[value, index.result])
                        size = ir.Operation.create("arith.index_cast", results=[i64], operands=[dim.result])
                    else:
                        size = ir.Operation.create("arith.constant", results=[i64],
                                                   attributes={"value": ir.IntegerAttr.get(i64, t.shape[d])})
                    sizes.append(size.result)
            packed = ir.Operation.create("tensor.from_elements", results=[out_type], operands=sizes)
            ir.Operation.create("func.return", operands=[packed.result])
        ret.erase()
    run(module, SHAPES_LEVEL)
    shapes = find_function(module, SHAPES_ENTRY)
    leftover = [op.name for op in shapes.regions[0].blocks[0].operations if op.name.startswith("linalg.")]
    if leftover:
        raise ValueError("the delegate's output sizes depend on its computation "
                         f"({', '.join(sorted(set(leftover)))} left in @{SHAPES_ENTRY})")
    return True
