// RUN: et-opt %s --split-input-file --et-assign-debug-handles | FileCheck %s
// RUN: et-opt %s --split-input-file --et-assign-debug-handles --et-assign-debug-handles | FileCheck %s

// Every edge op but constants gets an id, in program order; running it again changes nothing.
// CHECK-LABEL: func.func @in_order
// CHECK: "edge.constant"() {value = dense<1> : tensor<i64>}
// CHECK: "edge.relu"(%arg0) {etmlir.debug_handle = 1 : i64}
// CHECK: "edge.add_tensor"({{.*}}) {etmlir.debug_handle = 2 : i64}
// CHECK: "edge.sym_size_int"(%arg0) {dim = 0 : i64, etmlir.debug_handle = 3 : i64}
func.func @in_order(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<i64>) {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %0 = "edge.relu"(%x) : (tensor<?xf32>) -> tensor<?xf32>
  %1 = "edge.add_tensor"(%0, %x, %one) : (tensor<?xf32>, tensor<?xf32>, tensor<i64>) -> tensor<?xf32>
  %2 = "edge.sym_size_int"(%x) {dim = 0 : i64} : (tensor<?xf32>) -> tensor<i64>
  return %1, %2 : tensor<?xf32>, tensor<i64>
}

// -----

// Handles are stable: ops that have one keep it, new ops get ids above the largest, also
// inside an outlined delegate's nested module.
// CHECK-LABEL: func.func @kept
// CHECK: "edge.relu"(%arg0) {etmlir.debug_handle = 8 : i64}
// CHECK: call @nested_0.forward(%{{.*}}) {etmlir.backend = "nested", etmlir.debug_handle = 9 : i64}
// CHECK: "edge.neg"(%{{.*}}) {etmlir.debug_handle = 5 : i64}
// CHECK: module @nested_0
// CHECK: "edge.relu"(%arg0) {etmlir.debug_handle = 10 : i64}
// CHECK: "edge.neg"(%{{.*}}) {etmlir.debug_handle = 7 : i64}
module {
  func.func @kept(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "edge.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    %1 = func.call @nested_0.forward(%0) {etmlir.backend = "nested"} : (tensor<4xf32>) -> tensor<4xf32>
    %2 = "edge.neg"(%1) {etmlir.debug_handle = 5 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %2 : tensor<4xf32>
  }
  func.func private @nested_0.forward(tensor<4xf32>) -> tensor<4xf32> attributes {etmlir.backend = "nested"}
  module @nested_0 attributes {etmlir.backend = "nested"} {
    func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = "edge.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
      %1 = "edge.neg"(%0) {etmlir.debug_handle = 7 : i64} : (tensor<4xf32>) -> tensor<4xf32>
      return %1 : tensor<4xf32>
    }
  }
}
