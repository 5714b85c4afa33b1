// RUN: et-opt %s --split-input-file --et-outline-delegates | FileCheck %s
// RUN: et-opt %s --split-input-file --mlir-print-debuginfo --et-outline-delegates | FileCheck %s --check-prefix=LOC

// One group: the ops move into module @nested_0's @forward, keeping their debug handles and
// locations; the call takes the group's live-in (%x) and live-out, and the tag is gone.
// CHECK-LABEL: func.func @single
// CHECK-NEXT: %[[R:.*]] = call @nested_0.forward(%arg0) {etmlir.backend = "nested", etmlir.debug_handle = 4 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[E:.*]] = "edge.exp"(%[[R]]) {etmlir.debug_handle = 3 : i64}
// CHECK-NEXT: return %[[E]]
// CHECK: func.func private @nested_0.forward(tensor<4xf32>) -> tensor<4xf32> attributes {etmlir.backend = "nested"}
// CHECK: module @nested_0 attributes {etmlir.backend = "nested"}
// CHECK-NEXT: func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[A:.*]] = "edge.relu"(%arg0) {etmlir.debug_handle = 1 : i64}
// CHECK-NEXT: %[[B:.*]] = "edge.neg"(%[[A]]) {etmlir.debug_handle = 2 : i64}
// CHECK-NEXT: return %[[B]]
// CHECK-NOT: etmlir.delegation_tag
// LOC: #[[L1:loc[0-9]*]] = loc("model.py":10:5)
// LOC: call @nested_0.forward(%arg0) {{.*}} loc(#[[CALL:loc[0-9]*]])
// LOC: "edge.relu"(%arg0) {etmlir.debug_handle = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32> loc(#[[L1]])
// LOC: #[[CALL]] = loc("nested_0"(#[[L1]]))
func.func @single(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "edge.relu"(%x) {etmlir.debug_handle = 1 : i64, etmlir.delegation_tag = "nested_0"} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":10:5)
  %1 = "edge.neg"(%0) {etmlir.debug_handle = 2 : i64, etmlir.delegation_tag = "nested_0"} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":11:5)
  %2 = "edge.exp"(%1) {etmlir.debug_handle = 3 : i64} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":12:5)
  return %2 : tensor<4xf32>
}

// -----

// Two groups for two backends' worth of tags; each gets its own module and call.
// CHECK-LABEL: func.func @several
// CHECK: %[[A:.*]] = call @nested_0.forward(%arg0)
// CHECK: %[[B:.*]] = "edge.exp"(%[[A]])
// CHECK: %[[C:.*]] = call @nested_1.forward(%[[B]])
// CHECK: return %[[C]]
// CHECK-DAG: module @nested_0
// CHECK-DAG: module @nested_1
func.func @several(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "edge.relu"(%x) {etmlir.delegation_tag = "nested_0"} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "edge.exp"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "edge.neg"(%1) {etmlir.delegation_tag = "nested_1"} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "edge.relu"(%2) {etmlir.delegation_tag = "nested_1"} : (tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// Results used outside: every value read after the group is a live-out (here two), and an op
// between the group's ops that reads its result (the exp) moves after the call.
// CHECK-LABEL: func.func @used_outside
// CHECK: %[[C:.*]]:2 = call @nested_0.forward(%arg0) {{.*}} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT: %[[E:.*]] = "edge.exp"(%[[C]]#0)
// CHECK-NEXT: %[[S:.*]] = "edge.add_tensor"(%[[E]], %[[C]]#1, %{{.*}})
// CHECK: module @nested_0
// CHECK: return %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>
func.func @used_outside(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %0 = "edge.relu"(%x) {etmlir.delegation_tag = "nested_0"} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "edge.exp"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "edge.neg"(%0) {etmlir.delegation_tag = "nested_0"} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "edge.add_tensor"(%1, %2, %one) : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// A constant used inside travels with the delegate (copied in); the weight used only inside
// leaves the outer function, the scalar the outer add also reads stays there too.
// CHECK-LABEL: func.func @constant_inside
// CHECK-NOT: etmlir.param = "w"
// CHECK: %[[ONE:.*]] = "edge.constant"() {value = dense<1> : tensor<i64>}
// CHECK: %[[C:.*]] = call @nested_0.forward(%arg0)
// CHECK: "edge.add_tensor"(%[[C]], %arg0, %[[ONE]])
// CHECK: module @nested_0
// CHECK: func.func @forward(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK-DAG: "edge.constant"() {value = dense<1> : tensor<i64>}
// CHECK-DAG: %[[W:.*]] = "edge.constant"() {etmlir.param = "w", value = dense<2.000000e+00> : tensor<2x2xf32>}
// CHECK: "edge.mul_tensor"(%arg0, %[[W]])
// CHECK: "edge.add_tensor"
func.func @constant_inside(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %w = "edge.constant"() {etmlir.param = "w", value = dense<2.0> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %0 = "edge.mul_tensor"(%x, %w) {etmlir.delegation_tag = "nested_0"} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %1 = "edge.add_tensor"(%0, %0, %one) {etmlir.delegation_tag = "nested_0"} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<i64>) -> tensor<2x2xf32>
  %2 = "edge.add_tensor"(%1, %x, %one) : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<i64>) -> tensor<2x2xf32>
  return %2 : tensor<2x2xf32>
}

// -----

// A weight the group and an outside op both read stays in the outer function and is passed to
// the delegate as a live-in: the program stores it once, not again inside the payload.
// CHECK-LABEL: func.func @shared_weight
// CHECK: %[[W:.*]] = "edge.constant"() {etmlir.param = "w", value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>}
// CHECK: %[[C:.*]] = call @nested_0.forward(%arg0, %[[W]]) {{.*}} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK: "edge.mul_tensor"(%[[C]], %[[W]])
// CHECK: module @nested_0
// CHECK: func.func @forward(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> tensor<2xf32>
// CHECK-NOT: etmlir.param
// CHECK: "edge.mul_tensor"(%arg0, %arg1)
func.func @shared_weight(%x: tensor<2xf32>) -> tensor<2xf32> {
  %w = "edge.constant"() {etmlir.param = "w", value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = "edge.mul_tensor"(%x, %w) {etmlir.delegation_tag = "nested_0"} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = "edge.mul_tensor"(%0, %w) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

// Dynamic live-ins and live-outs keep their bounds: the delegate's argument gets the input's
// etmlir.dynamic_dims, the call the producer's etmlir.upper_bounds.
// CHECK-LABEL: func.func @dynamic
// CHECK: call @nested_0.forward(%arg0) {etmlir.backend = "nested", etmlir.debug_handle = 1 : i64, etmlir.upper_bounds = [array<i64: 1, 64>]} : (tensor<1x?xf32>) -> tensor<1x?xf32>
// CHECK: func.func @forward(%arg0: tensor<1x?xf32> {etmlir.dynamic_dims = {"1" = {max = 64 : i64}}}) -> tensor<1x?xf32>
func.func @dynamic(%x: tensor<1x?xf32> {etmlir.dynamic_dims = {"1" = {max = 64 : i64, min = 2 : i64, symbol = "s0"}}}) -> tensor<1x?xf32> {
  %0 = "edge.relu"(%x) {etmlir.delegation_tag = "nested_0", etmlir.upper_bounds = [array<i64: 1, 64>]} : (tensor<1x?xf32>) -> tensor<1x?xf32>
  return %0 : tensor<1x?xf32>
}

// -----

// A size query of a member's result that only the group reads is copied in and dropped outside:
// the delegate returns just the result the caller uses, not the queried one too.
// CHECK-LABEL: func.func @size_of_a_member
// CHECK-NEXT: %[[R:.*]] = call @nested_0.forward(%arg0) {{.*}} : (tensor<?x4xf32>) -> tensor<?xf32>
// CHECK-NEXT: return %[[R]]
// CHECK: func.func @forward(%arg0: tensor<?x4xf32>) -> tensor<?xf32>
// CHECK-NEXT: %[[A:.*]] = "edge.relu"(%arg0)
// CHECK-NEXT: %[[N:.*]] = "edge.sym_size_int"(%[[A]]) {dim = 0 : i64}
// CHECK-NEXT: %[[M:.*]] = "edge.view_copy"(%[[A]], %[[N]])
// CHECK-NEXT: return %[[M]]
func.func @size_of_a_member(%x: tensor<?x4xf32>) -> tensor<?xf32> {
  %0 = "edge.relu"(%x) {etmlir.delegation_tag = "nested_0"} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %1 = "edge.sym_size_int"(%0) {dim = 0 : i64} : (tensor<?x4xf32>) -> tensor<i64>
  %2 = "edge.view_copy"(%0, %1) {etmlir.delegation_tag = "nested_0", size = array<i64: -9223372036854775808>} : (tensor<?x4xf32>, tensor<i64>) -> tensor<?xf32>
  return %2 : tensor<?xf32>
}
