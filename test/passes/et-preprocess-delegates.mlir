// RUN: et-opt %s --split-input-file --mlir-elide-elementsattrs-if-larger=16 --et-preprocess-delegates | FileCheck %s
// Twice in a row: the second run finds every payload in place and changes nothing.
// RUN: et-opt %s --split-input-file --mlir-elide-elementsattrs-if-larger=16 --et-preprocess-delegates --et-preprocess-delegates | FileCheck %s

// The input is what et-outline-delegates leaves. The payload's bytes are the backend's business
// (and its format changes); these tests check that there is one, of a nonzero size, in ui8.

// One delegate, as et-outline-delegates leaves it: the nested module gets its payload, empty
// compile specs and the nested backend's identity debug-handle map (one entry per handle inside);
// the delegate's @forward stays (the report and debugging read it), the call and the outer ops
// are untouched.
// CHECK-LABEL: func.func @single
// CHECK-NEXT: %[[R:.*]] = call @nested_0.forward(%arg0) {etmlir.backend = "nested", etmlir.debug_handle = 3 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: "edge.exp"(%[[R]]) {etmlir.debug_handle = 4 : i64}
// CHECK: func.func private @nested_0.forward(tensor<4xf32>) -> tensor<4xf32> attributes {etmlir.backend = "nested"}
// CHECK-NEXT: module @nested_0 attributes {etmlir.backend = "nested", etmlir.compile_specs = {}, etmlir.debug_handle_map = {"1" = array<i64: 1>, "2" = array<i64: 2>}, etmlir.payload = {{.+}} : tensor<{{[1-9][0-9]*}}xui8>} {
// CHECK-NEXT: func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[A:.*]] = "edge.relu"(%arg0) {etmlir.debug_handle = 1 : i64}
// CHECK-NEXT: %[[B:.*]] = "edge.neg"(%[[A]]) {etmlir.debug_handle = 2 : i64}
// CHECK-NEXT: return %[[B]]
module {
  func.func @single(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = call @nested_0.forward(%arg0) {etmlir.backend = "nested", etmlir.debug_handle = 3 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "edge.exp"(%0) {etmlir.debug_handle = 4 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @nested_0.forward(tensor<4xf32>) -> tensor<4xf32> attributes {etmlir.backend = "nested"}
  module @nested_0 attributes {etmlir.backend = "nested"} {
    func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32> {
      %0 = "edge.relu"(%arg0) {etmlir.debug_handle = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":10:5)
      %1 = "edge.neg"(%0) {etmlir.debug_handle = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":11:5)
      return %1 : tensor<4xf32>
    }
  }
}

// -----

// Every delegate module is compiled, each with its own compile specs: specs already on a module
// (here set by the partitioner's compile_specs) are kept as they are. A builtin.module without
// etmlir.backend is not a delegate and gets nothing. The map keys are the handles inside each
// delegate (5; 9), whatever they are.
// CHECK-LABEL: module @nested_0 attributes {etmlir.backend = "nested", etmlir.compile_specs = {}, etmlir.debug_handle_map = {"5" = array<i64: 5>}, etmlir.payload = {{.+}} : tensor<{{[1-9][0-9]*}}xui8>}
// CHECK: func.func @forward(%arg0: tensor<1x?xf32> {etmlir.dynamic_dims = {"1" = {max = 64 : i64}}}) -> tensor<1x?xf32>
// CHECK-LABEL: module @nested_1 attributes {etmlir.backend = "nested", etmlir.compile_specs = {fold_constants = "false", temp_bytes = "4096"}, etmlir.debug_handle_map = {"9" = array<i64: 9>}, etmlir.payload = {{.+}} : tensor<{{[1-9][0-9]*}}xui8>}
// CHECK: "edge.constant"() {etmlir.param = "w", value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>}
// CHECK: "edge.mul_tensor"
// CHECK-LABEL: module @plain {
// CHECK-NOT: etmlir.
module {
  module @nested_0 attributes {etmlir.backend = "nested"} {
    func.func @forward(%arg0: tensor<1x?xf32> {etmlir.dynamic_dims = {"1" = {max = 64 : i64}}}) -> tensor<1x?xf32> {
      %0 = "edge.relu"(%arg0) {etmlir.debug_handle = 5 : i64, etmlir.upper_bounds = [array<i64: 1, 64>]} : (tensor<1x?xf32>) -> tensor<1x?xf32>
      return %0 : tensor<1x?xf32>
    }
  }
  module @nested_1 attributes {etmlir.backend = "nested", etmlir.compile_specs = {fold_constants = "false", temp_bytes = "4096"}} {
    func.func @forward(%arg0: tensor<2xf32>) -> tensor<2xf32> {
      %w = "edge.constant"() {etmlir.param = "w", value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
      %0 = "edge.mul_tensor"(%arg0, %w) {etmlir.debug_handle = 9 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32>
    }
  }
  module @plain {
    func.func @forward(%arg0: tensor<2xf32>) -> tensor<2xf32> {
      return %arg0 : tensor<2xf32>
    }
  }
}

// -----

// A delegate that already has a payload is left alone (lowering twice compiles each delegate
// once): its bytes stay, and it gets no compile specs or debug-handle map it did not have. Even
// an unknown backend is not asked for, as nothing is compiled. The other delegate is compiled.
// CHECK-LABEL: module @nosuch_0 attributes {etmlir.backend = "nosuch", etmlir.payload = dense<[1, 2, 3]> : tensor<3xui8>} {
// CHECK-LABEL: module @nested_0 attributes {etmlir.backend = "nested", etmlir.compile_specs = {}, etmlir.debug_handle_map = {"2" = array<i64: 2>}, etmlir.payload = {{.+}} : tensor<{{[1-9][0-9]*}}xui8>}
module {
  module @nosuch_0 attributes {etmlir.backend = "nosuch", etmlir.payload = dense<[1, 2, 3]> : tensor<3xui8>} {
    func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32> {
      %0 = "edge.relu"(%arg0) {etmlir.debug_handle = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
      return %0 : tensor<4xf32>
    }
  }
  module @nested_0 attributes {etmlir.backend = "nested"} {
    func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32> {
      %0 = "edge.neg"(%arg0) {etmlir.debug_handle = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
      return %0 : tensor<4xf32>
    }
  }
}
