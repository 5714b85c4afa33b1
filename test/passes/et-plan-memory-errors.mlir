// RUN: et-opt %s --split-input-file --verify-diagnostics --et-plan-memory="arenas=fast:32"
// RUN: not et-opt %s --et-plan-memory="arenas=fast:lots" 2>&1 | FileCheck %s --check-prefix=BADSPEC
// RUN: not et-opt %s --et-plan-memory="policy=random" 2>&1 | FileCheck %s --check-prefix=BADPOLICY

// Every arena is bounded and the tensors do not fit: the error names the tensor and the room.
// expected-error @+1 {{et-plan-memory: etx.alloc (written by aten::relu.out at}}
func.func @too_small() attributes {etx.method = "forward"} {
  %0 = "etx.input"() {index = 0 : i64, type = tensor<2x4xf32>} : () -> !etx.value
  %1 = "etx.alloc"() {type = tensor<2x4xf32>} : () -> !etx.value
  "etx.kernel_call"(%0, %1) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  "etx.output"(%1) : (!etx.value) -> ()
  return
}

// -----

// Nothing to plan at the etx level yet.
// expected-error @+1 {{et-plan-memory: no etx method in the module (run et-to-out-variants first)}}
module {
  func.func @edge(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}

// BADSPEC: error: et-plan-memory: arena 'fast:lots': size 'lots' is not a byte count (65536, 64k, 2M)
// BADPOLICY: error: et-plan-memory: unknown placement policy 'random' (one of largest-first, smallest-first)
