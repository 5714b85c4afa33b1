"""The executable level: every zoo model to a `.pte` that the C++ FlatBuffers verifier accepts and
`et-inspect` reads back; the emitted FlatBuffer round-trips every value and instruction kind; bad
files are reported, not crashed on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from torch_mlir import ir

from etmlir.dialects import attrs
import etmlir
from etmlir import models
from etmlir.dialects import new_context
from etmlir.executable import pte
from etmlir.executable.dtypes import ELEMENT_TYPES
from etmlir.passes.fold_constants import fold
from etmlir.program import clone_module
from etmlir.schema.InstructionKind import InstructionKind
from etmlir.schema.Value import Value
from etmlir.tools import et_inspect

VERIFY_PTE = Path(sys.executable).parent / "et-verify-pte"


def _verify(path: Path) -> subprocess.CompletedProcess:
    assert VERIFY_PTE.exists(), f"{VERIFY_PTE} was not built (pip install -e . builds it)"
    return subprocess.run([str(VERIFY_PTE), str(path)], capture_output=True, text=True)


@pytest.mark.parametrize("name", models.ZOO)
def test_zoo_model_to_pte_verifies_and_reads_back(pte_zoo, edge_zoo, name, tmp_path):
    program = pte_zoo[name]
    path = tmp_path / f"{name}.pte"
    program.save(path)
    result = _verify(path)
    assert result.returncode == 0, result.stderr
    assert "ok (program" in result.stdout

    f = pte.read(path.read_bytes())
    (method,) = f.program.methods
    assert method.name == b"forward"
    edge = edge_zoo[name]
    # Inputs and outputs keep their dtype and (upper-bound) sizes.
    for specs, indices in ((edge.inputs, method.inputs), (edge.outputs, method.outputs)):
        assert len(specs) == len(indices)
        for spec, index in zip(specs, indices):
            tensor = method.values[index].value
            assert method.values[index].valueType == Value.Tensor
            assert tensor.dtype == ELEMENT_TYPES[spec.dtype][0]
            assert list(tensor.sizes) == list(spec.upper_bounds)
    # One kernel call per edge op that et-fold-constants left, naming the op's out variant.
    folded = clone_module(edge.module)
    assert len(method.instructions) == sum(edge.op_histogram().values()) - len(fold(folded.operation))
    kernels = {f"{o.name.decode()}.{o.overload.decode()}" for o in method.operators}
    assert kernels == set(program.kernel_histogram())
    # Every planned tensor lies inside its arena; the arenas are what the plan says.
    plan = program.memory_plan()
    assert [a.size for a in method.arenas] == plan.arena_sizes
    for value in method.values:
        if value.valueType == Value.Tensor and value.value.allocation is not None:
            allocation = value.value.allocation
            assert allocation.offset + value.value.nbytes <= method.arenas[allocation.memId].size
    # Weights are stored once, byte for byte, in the aligned constant segment.
    constants = f.segment(f.program.constantSegment)
    assert (f.header.segment_base_offset + f.program.segments[0].offset) % f.header.segment_alignment == 0
    stored = [v.value for v in method.values if v.valueType == Value.Tensor and v.value.constant is not None]
    kept = _constant_params(program)
    for name_, weight in edge.weight_buffers.items():
        if name_ not in kept:  # only used by folded ops: its folded results are stored instead
            assert any(k.startswith(name_ + ".") for k in kept), name_
            continue
        data = np.ascontiguousarray(weight).tobytes()
        assert any(constants[t.constant.offset:t.constant.offset + t.constant.size] == data for t in stored), name_
    # et-inspect prints the summary.
    text = et_inspect.describe(path.read_bytes(), str(path), max_instructions=5)
    assert "method 'forward'" in text and "arenas:" in text and "constants" in text


def _constant_params(program: etmlir.ExecutorchProgram) -> set[str]:
    """The `etmlir.param` names of the constants an etx module still uses."""
    params = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "etx.constant" and attrs.PARAM in op.attributes:
            params.add(ir.StringAttr(op.attributes[attrs.PARAM]).value)
        return ir.WalkResult.ADVANCE

    program.module.operation.walk(visit)
    return params


def test_dynamic_program_plans_at_the_upper_bound(pte_zoo):
    f = pte.read(pte_zoo["nanogpt"].buffer)
    method = f.program.methods[0]
    tokens = method.values[method.inputs[0]].value
    assert list(tokens.sizes) == [1, 256] and tokens.dynamism == 1  # Bounded
    # The sequence length is read at run time by size-query kernels.
    assert any(o.name == b"etmlir_prim::sym_size" for o in method.operators)


def test_ours_is_no_larger_than_the_naive_plan_and_multi_arena_respects_capacity(edge_zoo):
    et = edge_zoo["mobilenet_v2"].to_executorch(etmlir.ExecutorchConfig(arenas=("fast:64k", "slow")))
    plan = et.memory_plan()
    assert plan.arena_sizes[0] <= 65536 and plan.tensor_counts[0] > 0
    assert plan.total_bytes <= plan.naive_bytes
    table = str(plan)
    assert "fast" in table and "slow" in table and "sum of tensor bytes" in table
    method = pte.read(et.buffer).program.methods[0]
    assert [a.name for a in method.arenas] == [b"fast", b"slow"]


def test_to_executorch_leaves_the_edge_program_unchanged(edge_zoo):
    edge = edge_zoo["mlp"]
    before = edge.mlir(debug_info=False)
    edge.to_executorch()
    assert edge.mlir(debug_info=False) == before


_ALL_KINDS = r'''
module {
  "etx.payload"() {sym_name = "blob", backend = "nested", data = "opaque bytes", compile_specs = {level = "2"}} : () -> ()
  func.func @main() attributes {etx.method = "forward", etx.arenas = [{name = "planned", size = 64 : i64}]} {
    %x = "etx.input"() {index = 0 : i64, type = tensor<2x2xf32>, mem_id = 0 : i64, offset = 0 : i64, size = 16 : i64} : () -> !etx.value
    %c = "etx.constant"() {type = tensor<2xi64>, value = dense<[7, 9]> : tensor<2xi64>} : () -> !etx.value
    %n = "etx.none"() : () -> !etx.value
    %b = "etx.const"() {value = true} : () -> !etx.value
    %i = "etx.const"() {value = -3 : i64} : () -> !etx.value
    %d = "etx.const"() {value = 2.5 : f64} : () -> !etx.value
    %s = "etx.const"() {value = "tanh"} : () -> !etx.value
    %il = "etx.const"() {value = array<i64: 4, 5>} : () -> !etx.value
    %dl = "etx.const"() {value = array<f64: 0.5>} : () -> !etx.value
    %bl = "etx.const"() {value = array<i1: true, false>} : () -> !etx.value
    %slot = "etx.alloc"() {type = i64} : () -> !etx.value
    %dyn = "etx.list"(%i, %slot) {kind = "int"} : (!etx.value, !etx.value) -> !etx.value
    %tl = "etx.list"(%x, %c) {kind = "tensor"} : (!etx.value, !etx.value) -> !etx.value
    %ol = "etx.list"(%x, %n) {kind = "optional_tensor"} : (!etx.value, !etx.value) -> !etx.value
    %y = "etx.alloc"() {type = tensor<2x2xf32>, mem_id = 0 : i64, offset = 16 : i64, size = 16 : i64} : () -> !etx.value
    "etx.kernel_call"(%x, %n, %b, %i, %d, %s, %il, %dl, %bl, %dyn, %tl, %ol, %y) {kernel = "etmlir_test::everything.out", debug_handle = 7 : i64, operandSegmentSizes = array<i32: 12, 1>} : (!etx.value, !etx.value, !etx.value, !etx.value, !etx.value, !etx.value, !etx.value, !etx.value, !etx.value, !etx.value, !etx.value, !etx.value, !etx.value) -> ()
    %z = "etx.alloc"() {type = tensor<2x2xf32>, mem_id = 0 : i64, offset = 32 : i64, size = 16 : i64} : () -> !etx.value
    "etx.delegate_call"(%y, %z) {backend = "nested", payload = "blob", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
    "etx.jump_false"(%b) {target = 5 : i64} : (!etx.value) -> ()
    "etx.move"(%z, %y) : (!etx.value, !etx.value) -> ()
    "etx.free"(%y) : (!etx.value) -> ()
    "etx.output"(%z) : (!etx.value) -> ()
    return
  }
}
'''


def test_flatbuffer_round_trip_of_every_value_and_instruction_kind():
    with new_context() as ctx, ir.Location.unknown(ctx):
        module = ir.Module.parse(_ALL_KINDS)
        data = etmlir.serialize(module)
    f = pte.read(data)
    method = f.program.methods[0]
    v = method.values
    kinds = [x.valueType for x in v]
    assert kinds[:2] == [Value.Tensor, Value.Tensor]
    assert v[1].value.constant is not None
    assert np.frombuffer(f.segment(0)[v[1].value.constant.offset:][:16], np.int64).tolist() == [7, 9]
    by_kind = {k: [x.value for x in v if x.valueType == k] for k in set(kinds)}
    assert [bool(x.value) for x in by_kind[Value.Bool]] == [True]
    assert -3 in [x.value for x in by_kind[Value.Int]]
    assert [x.value for x in by_kind[Value.Double]] == [2.5]
    assert [x.value for x in by_kind[Value.String]] == [b"tanh"]
    assert [list(x.items) for x in by_kind[Value.DoubleList]] == [[0.5]]
    assert [list(map(bool, x.items)) for x in by_kind[Value.BoolList]] == [[True, False]]
    int_lists = [[v[i].value.value for i in x.items] for x in by_kind[Value.IntList]]
    assert [4, 5] in int_lists and [-3, 0] in int_lists  # a run-time Int slot starts at 0
    assert [list(x.items) for x in by_kind[Value.TensorList]] == [[0, 1]]
    assert [list(x.items) for x in by_kind[Value.OptionalTensorList]] == [[0, -1]]
    assert Value.Null in kinds
    ins = method.instructions
    assert [i.kindType for i in ins] == [InstructionKind.KernelCall, InstructionKind.DelegateCall,
                                         InstructionKind.JumpFalse, InstructionKind.Move, InstructionKind.Free]
    assert ins[0].debugHandle == 7 and len(ins[0].kind.args) == 13
    assert (method.operators[0].name, method.operators[0].overload) == (b"etmlir_test::everything", b"out")
    assert ins[2].kind.target == 5
    (delegate,) = method.delegates
    assert delegate.backend == b"nested"
    assert [(s.key, bytes(s.value)) for s in delegate.compileSpecs] == [(b"level", b"2")]
    assert f.segment(delegate.payload.segment) == b"opaque bytes"
    assert [a.size for a in method.arenas] == [64]


def test_corrupt_files_are_reported_not_crashed_on(pte_zoo, tmp_path):
    good = bytearray(pte_zoo["seed_cnn"].buffer)
    cases = {
        "truncated": bytes(good[:100]),
        "empty": b"",
        "bad_magic": b"XXXX" + bytes(good[4:]),
        "bad_identifier": bytes(good[:68]) + b"NOPE" + bytes(good[72:]),
    }
    for label, data in cases.items():
        path = tmp_path / f"{label}.pte"
        path.write_bytes(data)
        with pytest.raises(pte.PteError):
            pte.read(data)
        result = subprocess.run([sys.executable, "-m", "etmlir.tools.et_inspect", str(path)],
                                capture_output=True, text=True)
        assert result.returncode == 1 and result.stderr.startswith("et-inspect: error:"), (label, result.stderr)
        assert "Traceback" not in result.stderr
        assert _verify(path).returncode == 1, label


def test_unplanned_inputs_and_outputs_are_left_to_the_caller(edge_zoo):
    et = edge_zoo["mlp"].to_executorch(etmlir.ExecutorchConfig(alloc_inputs=False, alloc_outputs=False))
    method = pte.read(et.buffer).program.methods[0]
    for index in list(method.inputs) + list(method.outputs):
        tensor = method.values[index].value
        assert tensor.allocation is None and tensor.constant is None
    assert et.memory_plan().total_bytes < edge_zoo["mlp"].to_executorch().memory_plan().total_bytes
