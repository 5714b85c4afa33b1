// RUN: et-opt %s --split-input-file --et-partition="backend=nested skip-ops=edge.exp" | FileCheck %s
// RUN: et-opt %s --split-input-file --et-partition="backend=nested skip-ops=edge.exp min-group-size=2" | FileCheck %s --check-prefix=MIN
// RUN: et-opt %s --split-input-file --et-partition="backend=nested skip-ops=edge.exp" --et-outline-delegates | FileCheck %s --check-prefix=OUT

// The cycle case. relu, neg and add are supported, exp is skipped. One group {relu, neg, add}
// would need exp's result, which needs relu's: a cycle. So relu + neg form nested_0 and the add,
// which reads exp, starts nested_1; outlining then works.
// CHECK-LABEL: func.func @cycle
// CHECK: "edge.relu"(%arg0) {etmlir.delegation_tag = "nested_0"}
// CHECK: "edge.exp"(%{{.*}}) {etmlir.not_delegated = {nested = "edge.exp is in skip_ops"}}
// CHECK: "edge.neg"(%{{.*}}) {etmlir.delegation_tag = "nested_0"}
// CHECK: "edge.add_tensor"(%{{.*}}) {etmlir.delegation_tag = "nested_1"}
// MIN-LABEL: func.func @cycle
// MIN: "edge.relu"(%arg0) {etmlir.delegation_tag = "nested_0"}
// MIN: "edge.add_tensor"(%{{.*}}) {etmlir.not_delegated = {nested = "edge.add_tensor: in a group of 1 op(s), below min_group_size=2"}}
// OUT-LABEL: func.func @cycle
// OUT: %[[A:.*]]:2 = call @nested_0.forward(%arg0)
// OUT: %[[E:.*]] = "edge.exp"(%[[A]]#0)
// OUT: call @nested_1.forward(%[[A]]#1, %[[E]])
func.func @cycle(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %0 = "edge.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "edge.exp"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "edge.neg"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "edge.add_tensor"(%2, %1, %one) : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// A skipped op in a chain splits it: relu and neg cannot share a group around the exp.
// CHECK-LABEL: func.func @refusals
// CHECK: "edge.relu"(%arg0) {etmlir.delegation_tag = "nested_0"}
// CHECK: "edge.exp"(%{{.*}}) {etmlir.not_delegated = {nested = "edge.exp is in skip_ops"}}
// CHECK: "edge.neg"(%{{.*}}) {etmlir.delegation_tag = "nested_1"}
func.func @refusals(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "edge.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "edge.exp"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "edge.neg"(%1) : (tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
