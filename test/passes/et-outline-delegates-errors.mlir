// RUN: et-opt %s --split-input-file --verify-diagnostics --et-outline-delegates

// A tagged group that would contain a cycle: the exp is outside the group, reads its relu and
// feeds its add, so one call could not run both. (et-partition never tags such a group.)
func.func @cycle(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %0 = "edge.relu"(%x) {etmlir.delegation_tag = "nested_0"} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{delegation group 'nested_0' would contain a cycle: 'edge.exp'}}
  %1 = "edge.exp"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "edge.add_tensor"(%0, %1, %one) {etmlir.delegation_tag = "nested_0"} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

func.func @bad_tag(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{delegation tag 'nested' is not of the form <backend>_<n>}}
  %0 = "edge.relu"(%x) {etmlir.delegation_tag = "nested"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
