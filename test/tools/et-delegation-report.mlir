// RUN: et-opt %s --split-input-file --et-delegation-report | FileCheck %s
// A module with nothing to report on is an error naming what is missing (a delegate's
// declaration is not a function to report on).
// RUN: echo 'module { func.func private @nested_0.forward() attributes {etmlir.backend = "nested"} }' | not et-opt - --et-delegation-report 2>&1 | FileCheck %s --check-prefix=NOFUNC

// NOFUNC: <stdin>:1:1: error: delegation_info: the module has no top-level func.func with a body to report on (it holds: func.func @nested_0.forward)

// After et-outline-delegates: two calls (their ops counted once each, constants not at all),
// an op the backend refused and one no partitioner looked at.
// CHECK-LABEL: == Delegation summary ==
// CHECK-NEXT: delegated subgraphs: 2
// CHECK-NEXT: delegated ops: 4 (66.7% of 6)
// CHECK-NEXT: non-delegated ops: 2 (1 with a recorded reason, 1 without)
// CHECK-EMPTY:
// CHECK-NEXT: == Ops ==
// CHECK-NEXT: | op | delegated | not delegated |
// CHECK-NEXT: |---
// CHECK-NEXT: | edge.add_tensor | 1 | 0 |
// CHECK-NEXT: | edge.addmm | 2 | 0 |
// CHECK-NEXT: | edge.embedding | 0 | 1 |
// CHECK-NEXT: | edge.gelu | 1 | 0 |
// CHECK-NEXT: | edge.relu | 0 | 1 |
// CHECK-NEXT: | total | 4 | 2 |
// CHECK: == Delegated graph ==
// CHECK-NEXT: func @forward(%arg0, %arg1):
// CHECK-NEXT:   %1 = edge.embedding(emb.weight, %arg1) model.py:41
// CHECK-NEXT:   %2:2 = delegate nested_0 [nested] (%arg0, %1): 3 ops (edge.add_tensor x1, edge.addmm x1, edge.gelu x1)
// CHECK-NEXT:   %3 = edge.relu(%2#0) model.py:46
// CHECK-NEXT:   %4 = delegate nested_1 [nested] (%3): 1 op (edge.addmm x1), payload 16 B
// CHECK-NEXT:   return %4, %2#1
// CHECK: == Why not delegated ==
// CHECK-NEXT: edge.embedding #1 at model.py:41
// CHECK-NEXT:     nested: edge.embedding is not an op the backend supports
// CHECK-NEXT: 1 non-delegated op with no recorded reason (no partitioner looked at it): edge.relu x1
// CHECK-NEXT: // -----
module {
  func.func @forward(%x: tensor<2x4xf32>, %idx: tensor<2xi64>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %w = "edge.constant"() {etmlir.param = "emb.weight", value = dense<1.0> : tensor<8x4xf32>} : () -> tensor<8x4xf32>
    %0 = "edge.embedding"(%w, %idx) {padding_idx = -1 : i64, scale_grad_by_freq = false, sparse = false, etmlir.debug_handle = 1 : i64, etmlir.not_delegated = {nested = "edge.embedding is not an op the backend supports"}} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32> loc(#emb)
    %1:2 = call @nested_0.forward(%x, %0) {etmlir.backend = "nested", etmlir.debug_handle = 10 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) loc(#fc1)
    %2 = "edge.relu"(%1#0) {etmlir.debug_handle = 5 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("model.py":46:8)
    %3 = call @nested_1.forward(%2) {etmlir.backend = "nested", etmlir.debug_handle = 11 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc(#fc2)
    return %3, %1#1 : tensor<2x4xf32>, tensor<2x4xf32>
  }
  module @nested_0 attributes {etmlir.backend = "nested"} {
    func.func @forward(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
      %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
      %w = "edge.constant"() {etmlir.param = "fc1.weight", value = dense<0.5> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
      %b = "edge.constant"() {etmlir.param = "fc1.bias", value = dense<0.1> : tensor<4xf32>} : () -> tensor<4xf32>
      %0 = "edge.addmm"(%b, %arg0, %w, %one, %one) {etmlir.debug_handle = 2 : i64} : (tensor<4xf32>, tensor<2x4xf32>, tensor<4x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x4xf32> loc(#fc1)
      %1 = "edge.add_tensor"(%0, %arg1, %one) {etmlir.debug_handle = 3 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<i64>) -> tensor<2x4xf32> loc("model.py":44:12)
      %2 = "edge.gelu"(%1) {approximate = "none", etmlir.debug_handle = 4 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("model.py":45:12)
      return %2, %1 : tensor<2x4xf32>, tensor<2x4xf32>
    }
  }
  func.func private @nested_0.forward(tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) attributes {etmlir.backend = "nested"}
  // After the backend's preprocess: a payload (its size is shown) and compile specs (ignored).
  module @nested_1 attributes {etmlir.backend = "nested", etmlir.compile_specs = {key = "value"}, etmlir.payload = dense_resource<nested_1.payload> : tensor<16xui8>} {
    func.func @forward(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
      %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
      %w = "edge.constant"() {etmlir.param = "fc2.weight", value = dense<0.5> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
      %b = "edge.constant"() {etmlir.param = "fc2.bias", value = dense<0.1> : tensor<4xf32>} : () -> tensor<4xf32>
      %0 = "edge.addmm"(%b, %arg0, %w, %one, %one) {etmlir.debug_handle = 6 : i64} : (tensor<4xf32>, tensor<2x4xf32>, tensor<4x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x4xf32> loc(#fc2)
      return %0 : tensor<2x4xf32>
    }
  }
  func.func private @nested_1.forward(tensor<2x4xf32>) -> tensor<2x4xf32> attributes {etmlir.backend = "nested"}
}
#emb = loc("model.py":41:8)
#fc1 = loc("model.py":43:12)
#fc2 = loc("model.py":47:8)
{-#
  dialect_resources: {
    builtin: {
      nested_1.payload: "0x0400000000010203040506070809101112131415"
    }
  }
#-}

// -----

// Tagged by two partitioners, not outlined yet: each tag is a subgraph of its backend. A run
// of consecutive ops with one tag is one line, with its live-ins and live-outs; constants are
// named by their parameter or value. A refusal from each backend, at the user's frame of a
// fused location.
// CHECK-LABEL: == Delegation summary ==
// CHECK-NEXT: delegated subgraphs: 2
// CHECK-NEXT: delegated ops: 3 (60.0% of 5)
// CHECK-NEXT: non-delegated ops: 2 (1 with a recorded reason, 1 without)
// CHECK-NEXT:   nested: 1 subgraph, 2 ops delegated, 1 refused
// CHECK-NEXT:   xnn: 1 subgraph, 1 op delegated, 1 refused
// CHECK: | edge.add_tensor | 1 | 1 |
// CHECK-NEXT: | edge.exp | 0 | 1 |
// CHECK-NEXT: | edge.mm | 1 | 0 |
// CHECK-NEXT: | edge.relu | 1 | 0 |
// CHECK-NEXT: | total | 3 | 2 |
// CHECK: == Delegated graph ==
// CHECK-NEXT: func @forward(%arg0):
// CHECK-NEXT:   %3 = tagged nested_0 [nested] (%arg0): 2 ops (edge.add_tensor x1, edge.mm x1)
// CHECK-NEXT:   %4 = edge.exp(%3) mlp.py:12
// CHECK-NEXT:   %5 = tagged xnn_1 [xnn] (%4): 1 op (edge.relu x1)
// CHECK-NEXT:   %6 = edge.add_tensor(%5, %3, 1) mlp.py:14
// CHECK-NEXT:   return %6
// CHECK: == Why not delegated ==
// CHECK-NEXT: edge.exp #3 at mlp.py:12
// CHECK-NEXT:     nested: edge.exp is not an op the backend supports
// CHECK-NEXT:     xnn: f32 exp is slow
// CHECK-NEXT: 1 non-delegated op with no recorded reason (no partitioner looked at it): edge.add_tensor x1
// CHECK-NEXT: // -----
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %w = "edge.constant"() {etmlir.param = "fc.weight", value = dense<0.5> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %0 = "edge.mm"(%x, %w) {etmlir.debug_handle = 1 : i64, etmlir.delegation_tag = "nested_0"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("mlp.py":10:8)
  %1 = "edge.add_tensor"(%0, %x, %one) {etmlir.debug_handle = 2 : i64, etmlir.delegation_tag = "nested_0"} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<i64>) -> tensor<2x4xf32> loc("mlp.py":11:8)
  %2 = "edge.exp"(%1) {etmlir.debug_handle = 3 : i64, etmlir.not_delegated = {nested = "edge.exp is not an op the backend supports", xnn = "f32 exp is slow"}} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc(fused["mlp.py":12:8, "torch/nn/functional.py":100:4])
  %3 = "edge.relu"(%2) {etmlir.debug_handle = 4 : i64, etmlir.delegation_tag = "xnn_1"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("mlp.py":13:8)
  %4 = "edge.add_tensor"(%3, %1, %one) {etmlir.debug_handle = 5 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<i64>) -> tensor<2x4xf32> loc("mlp.py":14:8)
  return %4 : tensor<2x4xf32>
}

// -----

// No partitioner ran: every op (a size query included) is counted as not delegated, with no
// reason; an op without a location of its own points into this file.
// CHECK-LABEL: == Delegation summary ==
// CHECK-NEXT: delegated subgraphs: 0
// CHECK-NEXT: delegated ops: 0 (0.0% of 3)
// CHECK-NEXT: non-delegated ops: 3 (0 with a recorded reason, 3 without)
// CHECK: | edge.relu | 0 | 1 |
// CHECK-NEXT: | edge.sym_size_int | 0 | 1 |
// CHECK-NEXT: | edge.view_copy | 0 | 1 |
// CHECK-NEXT: | total | 0 | 3 |
// CHECK: == Delegated graph ==
// CHECK-NEXT: func @plain(%arg0):
// CHECK-NEXT:   %0 = edge.relu(%arg0) plain.py:3
// CHECK-NEXT:   %1 = edge.sym_size_int(%0) plain.py:4
// CHECK-NEXT:   %2 = edge.view_copy(%0, %1) {{.*}}et-delegation-report.mlir:{{[0-9]+}}
// CHECK-NEXT:   return %2
// CHECK: == Why not delegated ==
// CHECK-NEXT: 3 non-delegated ops with no recorded reason (no partitioner looked at them): edge.relu x1, edge.sym_size_int x1, edge.view_copy x1
// CHECK-NOT: // -----
func.func @plain(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = "edge.relu"(%x) {etmlir.debug_handle = 1 : i64} : (tensor<?x4xf32>) -> tensor<?x4xf32> loc("plain.py":3:4)
  %1 = "edge.sym_size_int"(%0) {dim = 0 : i64, etmlir.debug_handle = 2 : i64} : (tensor<?x4xf32>) -> tensor<i64> loc("plain.py":4:4)
  %2 = "edge.view_copy"(%0, %1) {size = array<i64: -9223372036854775808, 4>, etmlir.debug_handle = 3 : i64} : (tensor<?x4xf32>, tensor<i64>) -> tensor<?x4xf32>
  return %2 : tensor<?x4xf32>
}
