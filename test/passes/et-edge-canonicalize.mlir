// RUN: et-opt %s --split-input-file --et-edge-canonicalize | FileCheck %s

// No-op copies fold into their input; dead and duplicate edge ops go away.
// CHECK-LABEL: func.func @noop_copies(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NOT: edge.clone
// CHECK-NOT: edge.permute_copy
// CHECK-NOT: edge.view_copy
// CHECK: %[[R:.*]] = "edge.relu"(%arg0)
// CHECK-NEXT: %[[S:.*]] = "edge.add_tensor"(%[[R]], %[[R]], %{{.*}})
// CHECK-NEXT: return %[[S]]
func.func @noop_copies(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %0 = "edge.clone"(%x) {memory_format = "torch.contiguous_format"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "edge.permute_copy"(%0) {dims = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "edge.view_copy"(%1) {size = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = "edge.relu"(%2) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = "edge.relu"(%2) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %dead = "edge.sigmoid"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = "edge.add_tensor"(%3, %4, %one) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
  return %5 : tensor<2x3xf32>
}

// -----

// Copies that change something stay: a real permutation, a slice that drops rows,
// a view between two different factorizations of dynamic dims, a dim-order change.
// CHECK-LABEL: func.func @real_copies
// CHECK: edge.permute_copy
// CHECK: edge.slice_copy_tensor
// CHECK: edge.view_copy
// CHECK: edge.to_dim_order_copy
func.func @real_copies(%x: tensor<3x3xf32>, %y: tensor<?x?xf32>, %n: tensor<i64>, %z: tensor<1x2x3x4xf32>) -> (tensor<3x3xf32>, tensor<2x3xf32>, tensor<?x?xf32>, tensor<1x2x3x4xf32>) {
  %0 = "edge.permute_copy"(%x) {dims = array<i64: 1, 0>} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %1 = "edge.slice_copy_tensor"(%x) {dim = 0 : i64, start = 1 : i64, end = 3 : i64, step = 1 : i64} : (tensor<3x3xf32>) -> tensor<2x3xf32>
  %2 = "edge.view_copy"(%y, %n, %n) {size = array<i64: -9223372036854775808, -9223372036854775808>} : (tensor<?x?xf32>, tensor<i64>, tensor<i64>) -> tensor<?x?xf32>
  %3 = "edge.to_dim_order_copy"(%z) {dim_order = array<i64: 0, 2, 3, 1>, non_blocking = false} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return %0, %1, %2, %3 : tensor<3x3xf32>, tensor<2x3xf32>, tensor<?x?xf32>, tensor<1x2x3x4xf32>
}

// -----

// A full slice with step 1 and a single-input cat are identities.
// CHECK-LABEL: func.func @full_slice
// CHECK-NEXT: return %arg0
func.func @full_slice(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  %0 = "edge.slice_copy_tensor"(%x) {dim = 1 : i64, start = 0 : i64, end = 9223372036854775807 : i64, step = 1 : i64} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  %1 = "edge.cat"(%0) {dim = 0 : i64} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  return %1 : tensor<4x5xf32>
}
