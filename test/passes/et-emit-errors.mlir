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
module {
  // expected-error @+1 {{et-emit expects an etx (executable) module; found function @main, which is not an etx method: run --et-to-out-variants first}}
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}

// RUN: not et-opt %s --et-emit="output=%t.pte segment-alignment=3000" 2>&1 | FileCheck %s --check-prefix=SEGALIGN
// RUN: not et-opt %s --et-emit="output=%t.pte segment-alignment=-1" 2>&1 | FileCheck %s --check-prefix=SEGNEG
// SEGALIGN: et-opt: error: et-emit: option segment-alignment=3000: must be a power of two (1, 2, 4, 8, 16, ...)
// SEGNEG: et-opt: error: et-emit: option segment-alignment=-1: must be >= 1
