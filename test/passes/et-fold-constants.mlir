// RUN: et-opt %s --split-input-file --mlir-print-debuginfo --et-fold-constants | FileCheck %s
// RUN: et-opt %s --split-input-file --et-fold-constants="max-bytes=16" | FileCheck %s --check-prefix=LIMIT

// A linear layer's transposed weight is computed once, here: the permute becomes a constant
// named after the weight, with the permute's location, and the weight itself goes away.
// CHECK-LABEL: func.func @permute_of_a_constant
// CHECK-NOT: edge.permute_copy
// CHECK-NOT: etmlir.param = "w"
// CHECK: %[[W:.*]] = "edge.constant"() {etmlir.param = "w.permute_copy", value = dense<{{\[}}[1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00], [3.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>} : () -> tensor<3x2xf32> loc(#[[LOC:loc[0-9]*]])
// CHECK: "edge.add_tensor"(%arg0, %[[W]], %{{.*}})
// CHECK: #[[LOC]] = loc("model.py":7:3)
// The result is 24 bytes: over a 16-byte limit it stays.
// LIMIT-LABEL: func.func @permute_of_a_constant
// LIMIT: "edge.constant"() {etmlir.param = "w"
// LIMIT: "edge.permute_copy"
func.func @permute_of_a_constant(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %w = "edge.constant"() {etmlir.param = "w", value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %0 = "edge.permute_copy"(%w) {dims = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32> loc("model.py":7:3)
  %1 = "edge.add_tensor"(%x, %0, %one) : (tensor<3x2xf32>, tensor<3x2xf32>, tensor<i64>) -> tensor<3x2xf32>
  return %1 : tensor<3x2xf32>
}

// -----

// Weights imported from a model are dense_resource blobs; the fold reads the blob.
// CHECK-LABEL: func.func @permute_of_a_resource
// CHECK-NOT: dense_resource
// CHECK: "edge.constant"() {etmlir.param = "fc.weight.permute_copy", value = dense<{{\[}}[0.000000e+00, 3.000000e+00, 6.000000e+00], [1.000000e+00, 4.000000e+00, 7.000000e+00], [2.000000e+00, 5.000000e+00, 8.000000e+00]]> : tensor<3x3xf32>}
// CHECK-NOT: edge.permute_copy
func.func @permute_of_a_resource(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %w = "edge.constant"() {etmlir.param = "fc.weight", value = dense_resource<fc.weight> : tensor<3x3xf32>} : () -> tensor<3x3xf32>
  %0 = "edge.permute_copy"(%w) {dims = array<i64: 1, 0>} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %1 = "edge.add_tensor"(%x, %0, %one) : (tensor<3x3xf32>, tensor<3x3xf32>, tensor<i64>) -> tensor<3x3xf32>
  return %1 : tensor<3x3xf32>
}
{-#
  dialect_resources: {
    builtin: {
      fc.weight: "0x04000000000000000000803F0000004000004040000080400000A0400000C0400000E04000000041"
    }
  }
#-}

// -----

// A chain folds op by op, and the intermediate constant goes away too. Elementwise
// arithmetic on constants folds, Scalar operands included.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT: "edge.constant"() {value = dense<1> : tensor<i64>}
// CHECK-NEXT: %[[C:.*]] = "edge.constant"() {etmlir.param = "w.permute_copy.view_copy.mul_scalar", value = dense<[2.000000e+00, 8.000000e+00, 4.000000e+00, 1.000000e+01, 6.000000e+00, 1.200000e+01]> : tensor<6xf32>}
// CHECK-NEXT: %[[R:.*]] = "edge.add_tensor"(%arg0, %[[C]], %{{.*}})
// CHECK-NEXT: return %[[R]]
func.func @chain(%x: tensor<6xf32>) -> tensor<6xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %two = "edge.constant"() {value = dense<2.0> : tensor<f64>} : () -> tensor<f64>
  %w = "edge.constant"() {etmlir.param = "w", value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %0 = "edge.permute_copy"(%w) {dims = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = "edge.view_copy"(%0) {size = array<i64: 6>} : (tensor<3x2xf32>) -> tensor<6xf32>
  %2 = "edge.mul_scalar"(%1, %two) : (tensor<6xf32>, tensor<f64>) -> tensor<6xf32>
  %3 = "edge.add_tensor"(%x, %2, %one) : (tensor<6xf32>, tensor<6xf32>, tensor<i64>) -> tensor<6xf32>
  return %3 : tensor<6xf32>
}

// -----

// An op with an operand computed at run time stays, as does an op that is not on the
// allow-list (random, factory, or anything else) and an op whose result is returned.
// CHECK-LABEL: func.func @left_alone
// CHECK: "edge.cat"(%{{.*}}, %arg0)
// CHECK: "edge.rand"()
// CHECK: "edge.full_like"
// CHECK: "edge.relu"
// CHECK: %[[T:.*]] = "edge.t_copy"
// CHECK: return %{{.*}}, %[[T]]
func.func @left_alone(%x: tensor<2xf32>) -> (tensor<4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<1x2xf32>) {
  %w = "edge.constant"() {etmlir.param = "w", value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %m = "edge.constant"() {etmlir.param = "m", value = dense<[[1.0, 2.0]]> : tensor<1x2xf32>} : () -> tensor<1x2xf32>
  %zero = "edge.constant"() {value = dense<0.0> : tensor<f64>} : () -> tensor<f64>
  %0 = "edge.cat"(%w, %x) {dim = 0 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>
  %1 = "edge.rand"() {size = array<i64: 2>, dtype = f32} : () -> tensor<2xf32>
  %2 = "edge.full_like"(%w, %zero) : (tensor<2xf32>, tensor<f64>) -> tensor<2xf32>
  %3 = "edge.relu"(%w) : (tensor<2xf32>) -> tensor<2xf32>
  %4 = "edge.t_copy"(%m) : (tensor<1x2xf32>) -> tensor<1x2xf32>
  return %0, %1, %2, %3, %4 : tensor<4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<1x2xf32>
}

// -----

// A constant that a folded op and a kept op both use stays for the kept one.
// CHECK-LABEL: func.func @shared_constant
// CHECK-DAG: %[[W:.*]] = "edge.constant"() {etmlir.param = "w", value = dense<{{\[}}[1.000000e+00, 2.000000e+00]]> : tensor<1x2xf32>}
// CHECK-DAG: %[[T:.*]] = "edge.constant"() {etmlir.param = "w.transpose_copy_int", value = dense<{{\[}}[1.000000e+00], [2.000000e+00]]> : tensor<2x1xf32>}
// CHECK: "edge.mm"(%arg0, %[[T]])
// CHECK: "edge.mm"(%[[W]], %arg1)
func.func @shared_constant(%x: tensor<1x2xf32>, %y: tensor<2x1xf32>) -> (tensor<1x1xf32>, tensor<1x1xf32>) {
  %w = "edge.constant"() {etmlir.param = "w", value = dense<[[1.0, 2.0]]> : tensor<1x2xf32>} : () -> tensor<1x2xf32>
  %0 = "edge.transpose_copy_int"(%w) {dim0 = 0 : i64, dim1 = 1 : i64} : (tensor<1x2xf32>) -> tensor<2x1xf32>
  %1 = "edge.mm"(%x, %0) : (tensor<1x2xf32>, tensor<2x1xf32>) -> tensor<1x1xf32>
  %2 = "edge.mm"(%w, %y) : (tensor<1x2xf32>, tensor<2x1xf32>) -> tensor<1x1xf32>
  return %1, %2 : tensor<1x1xf32>, tensor<1x1xf32>
}

// -----

// Results keep the op's element type, bit for bit; within the limit a small fold still happens.
// CHECK-LABEL: func.func @dtypes
// CHECK: "edge.constant"() {etmlir.param = "idx.to_copy", value = dense<[3, -1]> : tensor<2xi32>}
// CHECK: "edge.constant"() {etmlir.param = "mask.unsqueeze_copy", value = dense<{{\[}}[true, false]]> : tensor<1x2xi1>}
// LIMIT-LABEL: func.func @dtypes
// LIMIT-NOT: edge.to_copy
// LIMIT-NOT: edge.unsqueeze_copy
func.func @dtypes(%x: tensor<2xi32>, %y: tensor<1x2xi1>) -> (tensor<2xi32>, tensor<1x2xi1>) {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %idx = "edge.constant"() {etmlir.param = "idx", value = dense<[3, -1]> : tensor<2xi64>} : () -> tensor<2xi64>
  %mask = "edge.constant"() {etmlir.param = "mask", value = dense<[true, false]> : tensor<2xi1>} : () -> tensor<2xi1>
  %0 = "edge.to_copy"(%idx) {dtype = i32, non_blocking = false} : (tensor<2xi64>) -> tensor<2xi32>
  %1 = "edge.add_tensor"(%x, %0, %one) : (tensor<2xi32>, tensor<2xi32>, tensor<i64>) -> tensor<2xi32>
  %2 = "edge.unsqueeze_copy"(%mask) {dim = 0 : i64} : (tensor<2xi1>) -> tensor<1x2xi1>
  %3 = "edge.logical_and"(%y, %2) : (tensor<1x2xi1>, tensor<1x2xi1>) -> tensor<1x2xi1>
  return %1, %3 : tensor<2xi32>, tensor<1x2xi1>
}
