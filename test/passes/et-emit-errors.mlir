// RUN: et-opt %s --split-input-file --verify-diagnostics --et-emit=%t.pte

// An intermediate allocation with no planned memory cannot be written (an unplanned output can:
// the caller provides its memory).
// expected-error @+1 {{et-emit: etx.alloc tensor<2xf32> at}}
module {
  func.func @main() attributes {etx.method = "forward"} {
    %0 = "etx.alloc"() {type = tensor<2xf32>} : () -> !etx.value
    %1 = "etx.alloc"() {type = tensor<2xf32>} : () -> !etx.value
    "etx.kernel_call"(%0, %1) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
    "etx.output"(%1) : (!etx.value) -> ()
    return
  }
}

// -----

// An edge module has to go through et-to-out-variants and et-plan-memory first.
// expected-error @+1 {{et-emit: no etx method in the module (run et-to-out-variants and et-plan-memory first)}}
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
