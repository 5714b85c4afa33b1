// RUN: et-opt %s --split-input-file --verify-diagnostics --et-link-lowered-modules

// A call of a lowered module that this process does not hold (here: none is; as when the IR of
// a model that composes one is saved and read again by another process) cannot be linked.
func.func @gone(%x: tensor<1x8xf32>) -> tensor<1x4xf32> {
  // expected-error @+1 {{etmlir_lowered::m0 is a lowered module that does not exist in this process (composition links LoweredBackendModule objects while they are alive)}}
  %0 = "edge.custom_op"(%x) {args = {}, op = "etmlir_lowered::m0", schema = "etmlir_lowered::m0(Tensor a0) -> Tensor"} : (tensor<1x8xf32>) -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}
