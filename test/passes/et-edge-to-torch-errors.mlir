// RUN: et-opt %s --verify-diagnostics --et-edge-to-torch

// An op that is not an edge op has no torch form: the error names it, at its location.
func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{et-edge-to-torch: no torch-dialect form for 'arith.negf'}}
  %0 = "arith.negf"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
