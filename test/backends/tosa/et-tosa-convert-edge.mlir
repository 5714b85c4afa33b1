// RUN: et-opt %s --split-input-file --et-tosa-convert-edge | FileCheck %s

// A convolution is channels-last in TOSA: the input is transposed in, the weight is stored
// OHWI (transposed at compile time), the result transposed back; ReLU is a clamp.
// CHECK-LABEL: func.func @forward
// CHECK-DAG: %[[IN:.*]] = tosa.transpose %arg0 {perms = array<i32: 0, 2, 3, 1>}
// CHECK-DAG: %[[W:.*]] = "tosa.const"(){{.*}}tensor<4x3x3x3xf32>
// CHECK: tosa.conv2d %[[IN]], %[[W]], {{.*}}pad = array<i64: 1, 1, 1, 1>{{.*}} -> tensor<1x8x8x4xf32>
// CHECK: tosa.transpose {{.*}}perms = array<i32: 0, 3, 1, 2>
// CHECK: tosa.clamp {{.*}}min_val = 0.000000e+00 : f32
// CHECK-NOT: edge.
func.func @forward(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %w = "edge.constant"() {value = dense<0.5> : tensor<4x3x3x3xf32>} : () -> tensor<4x3x3x3xf32>
  %b = "edge.constant"() {value = dense<0.25> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "edge.convolution"(%x, %w, %b) {dilation = array<i64: 1, 1>, groups = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0>, output_padding = array<i64: 0, 0>, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>, transposed = false, etmlir.debug_handle = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %1 = "edge.relu"(%0) {etmlir.debug_handle = 2 : i64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return %1 : tensor<1x4x8x8xf32>
}

// -----

// A stride-2 convolution whose last window would be partial: TOSA wants the windows to
// divide exactly, so the bottom/right padding drops the row PyTorch never reads (10 -> 5).
// CHECK-LABEL: func.func @forward
// CHECK: tosa.conv2d {{.*}}pad = array<i64: 1, 0, 1, 0>{{.*}}stride = array<i64: 2, 2>
func.func @forward(%x: tensor<1x3x10x10xf32>) -> tensor<1x2x5x5xf32> {
  %w = "edge.constant"() {value = dense<1.0> : tensor<2x3x3x3xf32>} : () -> tensor<2x3x3x3xf32>
  %0 = "edge.convolution"(%x, %w) {dilation = array<i64: 1, 1>, groups = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 0>, output_padding = array<i64: 0, 0>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>, transposed = false} : (tensor<1x3x10x10xf32>, tensor<2x3x3x3xf32>) -> tensor<1x2x5x5xf32>
  return %0 : tensor<1x2x5x5xf32>
}

// -----

// addmm is TOSA's 3-d matmul between reshapes, then the bias add (ranks made equal);
// softmax is max, subtract, exp, sum and a reciprocal multiply along its dim.
// CHECK-LABEL: func.func @forward
// CHECK: tosa.reshape %arg0
// CHECK: tosa.matmul {{.*}} -> tensor<1x2x3xf32>
// CHECK: tosa.add {{.*}}tensor<1x3xf32>
// CHECK: tosa.reduce_max {{.*}}axis = 1 : i32
// CHECK: tosa.exp
// CHECK: tosa.reduce_sum {{.*}}axis = 1 : i32
// CHECK: tosa.reciprocal
// CHECK: tosa.mul
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w = "edge.constant"() {value = dense<0.5> : tensor<4x3xf32>} : () -> tensor<4x3xf32>
  %b = "edge.constant"() {value = dense<1.0> : tensor<3xf32>} : () -> tensor<3xf32>
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %0 = "edge.addmm"(%b, %x, %w, %one, %one) : (tensor<3xf32>, tensor<2x4xf32>, tensor<4x3xf32>, tensor<i64>, tensor<i64>) -> tensor<2x3xf32>
  %1 = "edge.softmax"(%0) {dim = -1 : i64, half_to_float = false} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}
