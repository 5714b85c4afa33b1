// RUN: et-opt %s --split-input-file --mlir-print-debuginfo --et-fold-batch-norm | FileCheck %s

// Two output channels, eps = 0: scale = gamma / sqrt(var) = [2 / sqrt(4), 3 / sqrt(9)] = [1, 1];
// W2 = W * scale, b2 = (b - mean) * scale + beta = [(1 - 2) * 1 + 10, (0 - 1) * 1 + 20].
// The folded convolution keeps the batch norm's debug handle in its location, next to its own.
// CHECK-LABEL: func.func @conv_bn
// CHECK-NOT: edge.native_batch_norm_legit_no_training
// CHECK-DAG: %[[W:.*]] = "edge.constant"() {etmlir.param = "conv.weight.bn_folded", value = dense<{{\[}}{{\[}}{{\[}}[1.000000e+00]]], {{\[}}{{\[}}[2.000000e+00]]]]> : tensor<2x1x1x1xf32>}
// CHECK-DAG: %[[B:.*]] = "edge.constant"() {etmlir.param = "conv.weight.bn_folded_bias", value = dense<[9.000000e+00, 1.900000e+01]> : tensor<2xf32>}
// CHECK: %[[Y:.*]] = "edge.convolution"(%arg0, %[[W]], %[[B]]) {{.*}}operandSegmentSizes = array<i32: 1, 1, 1, 0>{{.*}} loc(#[[LOC:loc[0-9]*]])
// CHECK: return %[[Y]]
// CHECK: #[[LOC]] = loc(fused<{etmlir.debug_handle = 2 : i64}>
func.func @conv_bn(%x: tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = "edge.constant"() {etmlir.param = "conv.weight", value = dense<[[[[1.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %b = "edge.constant"() {value = dense<[1.0, 0.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %g = "edge.constant"() {value = dense<[2.0, 3.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %beta = "edge.constant"() {value = dense<[10.0, 20.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %m = "edge.constant"() {value = dense<[2.0, 1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %v = "edge.constant"() {value = dense<[4.0, 9.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %y = "edge.convolution"(%x, %w, %b) {dilation = array<i64: 1, 1>, etmlir.debug_handle = 1 : i64, groups = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32> loc("model.py":3:1)
  %n:3 = "edge.native_batch_norm_legit_no_training"(%y, %g, %beta, %m, %v) {eps = 0.0 : f64, etmlir.debug_handle = 2 : i64, momentum = 1.000000e-01 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>} : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<1x2x2x2xf32>, tensor<0xf32>, tensor<0xf32>) loc("model.py":4:1)
  return %n#0 : tensor<1x2x2x2xf32>
}

// -----

// A convolution whose result something else reads too cannot change: the batch norm stays.
// CHECK-LABEL: func.func @conv_used_twice
// CHECK: "edge.convolution"(%arg0, %{{[^,]*}})
// CHECK: "edge.native_batch_norm_legit_no_training"
func.func @conv_used_twice(%x: tensor<1x1x2x2xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {
  %w = "edge.constant"() {value = dense<1.0> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %m = "edge.constant"() {value = dense<0.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %v = "edge.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %y = "edge.convolution"(%x, %w) {dilation = array<i64: 1, 1>, groups = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 0>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x2x2xf32>
  %n:3 = "edge.native_batch_norm_legit_no_training"(%y, %m, %v) {eps = 1.0e-05 : f64, momentum = 1.000000e-01 : f64, operandSegmentSizes = array<i32: 1, 0, 0, 1, 1>} : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<1x2x2x2xf32>, tensor<0xf32>, tensor<0xf32>)
  return %n#0, %y : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>
}

// -----

// Statistics that are inputs, not constants, cannot be folded either.
// CHECK-LABEL: func.func @running_stats_are_inputs
// CHECK: "edge.native_batch_norm_legit_no_training"
func.func @running_stats_are_inputs(%x: tensor<1x1x2x2xf32>, %m: tensor<2xf32>) -> tensor<1x2x2x2xf32> {
  %w = "edge.constant"() {value = dense<1.0> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %v = "edge.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %y = "edge.convolution"(%x, %w) {dilation = array<i64: 1, 1>, groups = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 0>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x2x2xf32>
  %n:3 = "edge.native_batch_norm_legit_no_training"(%y, %m, %v) {eps = 1.0e-05 : f64, momentum = 1.000000e-01 : f64, operandSegmentSizes = array<i32: 1, 0, 0, 1, 1>} : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<1x2x2x2xf32>, tensor<0xf32>, tensor<0xf32>)
  return %n#0 : tensor<1x2x2x2xf32>
}
