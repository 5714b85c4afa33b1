// RUN: et-opt %s --split-input-file --et-conv1d-to-conv2d | FileCheck %s

// A 1-d convolution with a bias: input and weight get a unit height, stride/padding/dilation a
// leading 1/0/1, and the result's unit dim is squeezed away.
// CHECK-LABEL: func.func @conv1d
// CHECK: %[[X:.*]] = "edge.unsqueeze_copy"(%arg0) {dim = 2 : i64} : (tensor<1x4x10xf32>) -> tensor<1x4x1x10xf32>
// CHECK: %[[W:.*]] = "edge.unsqueeze_copy"(%arg1) {dim = 2 : i64} : (tensor<8x4x3xf32>) -> tensor<8x4x1x3xf32>
// CHECK: %[[Y:.*]] = "edge.convolution"(%[[X]], %[[W]], %arg2) {dilation = array<i64: 1, 1>, groups = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 1>, stride = array<i64: 1, 2>, transposed = false} : (tensor<1x4x1x10xf32>, tensor<8x4x1x3xf32>, tensor<8xf32>) -> tensor<1x8x1x5xf32>
// CHECK: %[[R:.*]] = "edge.squeeze_copy_dim"(%[[Y]]) {dim = 2 : i64} : (tensor<1x8x1x5xf32>) -> tensor<1x8x5xf32>
// CHECK: return %[[R]]
func.func @conv1d(%x: tensor<1x4x10xf32>, %w: tensor<8x4x3xf32>, %b: tensor<8xf32>) -> tensor<1x8x5xf32> {
  %y = "edge.convolution"(%x, %w, %b) {dilation = array<i64: 1>, groups = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0>, output_padding = array<i64: 0>, padding = array<i64: 1>, stride = array<i64: 2>, transposed = false} : (tensor<1x4x10xf32>, tensor<8x4x3xf32>, tensor<8xf32>) -> tensor<1x8x5xf32>
  return %y : tensor<1x8x5xf32>
}

// -----

// 2-d and transposed 1-d convolutions are left alone.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: edge.unsqueeze_copy
// CHECK: "edge.convolution"(%arg0, %arg1) {{.*}} : (tensor<1x4x6x6xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x4x4xf32>
// CHECK: "edge.convolution"(%arg2, %arg3) {{.*}}transposed = true{{.*}} : (tensor<1x4x10xf32>, tensor<4x8x3xf32>) -> tensor<1x8x12xf32>
func.func @left_alone(%x: tensor<1x4x6x6xf32>, %w: tensor<8x4x3x3xf32>, %t: tensor<1x4x10xf32>, %tw: tensor<4x8x3xf32>) -> (tensor<1x8x4x4xf32>, tensor<1x8x12xf32>) {
  %y = "edge.convolution"(%x, %w) {dilation = array<i64: 1, 1>, groups = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 0>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<1x4x6x6xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x4x4xf32>
  %z = "edge.convolution"(%t, %tw) {dilation = array<i64: 1>, groups = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 0>, output_padding = array<i64: 0>, padding = array<i64: 0>, stride = array<i64: 1>, transposed = true} : (tensor<1x4x10xf32>, tensor<4x8x3xf32>) -> tensor<1x8x12xf32>
  return %y, %z : tensor<1x8x4x4xf32>, tensor<1x8x12xf32>
}
