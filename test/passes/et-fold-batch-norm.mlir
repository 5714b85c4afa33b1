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

// A convolution whose result something else reads too cannot change: the batch norm becomes a multiply-add
// by per-channel constants instead (scale = 1 / sqrt(1 + 1e-5), shift = 0), shaped [C, 1, 1] to broadcast.
// CHECK-LABEL: func.func @conv_used_twice
// CHECK: %[[Y:.*]] = "edge.convolution"(%arg0, %{{[^,]*}})
// CHECK-NOT: edge.native_batch_norm_legit_no_training
// CHECK-DAG: %[[S:.*]] = "edge.constant"() {etmlir.param = "bn.bn_scale", value = dense<0.999994993> : tensor<2x1x1xf32>}
// CHECK-DAG: %[[T:.*]] = "edge.constant"() {etmlir.param = "bn.bn_shift", value = dense<0.000000e+00> : tensor<2x1x1xf32>}
// CHECK-DAG: %[[ONE:.*]] = "edge.constant"() {value = dense<1> : tensor<i64>}
// CHECK: %[[M:.*]] = "edge.mul_tensor"(%[[Y]], %[[S]])
// CHECK: %[[A:.*]] = "edge.add_tensor"(%[[M]], %[[T]], %[[ONE]])
// CHECK: return %[[A]], %[[Y]]
func.func @conv_used_twice(%x: tensor<1x1x2x2xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {
  %w = "edge.constant"() {value = dense<1.0> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %m = "edge.constant"() {etmlir.param = "bn.running_mean", value = dense<0.0> : tensor<2xf32>} : () -> tensor<2xf32>
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

// -----

// A linear layer without a bias (mm), its rows viewed as [1, 2, 2] and back (channels stay last), then a
// batch norm over the channels (LeViT's BatchNorm1d): folded into the weight's columns and a bias, the mm
// becomes an addmm. eps = 0: scale = [4 / sqrt(4), 3 / sqrt(9)] = [2, 1] multiplies the weight's columns;
// the bias is shift = beta - mean * scale = [10 - 2 * 2, 20 - 1 * 1].
// CHECK-LABEL: func.func @mm_views_bn
// CHECK-NOT: edge.native_batch_norm_legit_no_training
// CHECK-DAG: %[[W:.*]] = "edge.constant"() {etmlir.param = "fc.weight.bn_folded", value = dense<{{\[}}[2.000000e+00, 2.000000e+00], [6.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>}
// CHECK-DAG: %[[B:.*]] = "edge.constant"() {etmlir.param = "fc.weight.bn_folded_bias", value = dense<[6.000000e+00, 1.900000e+01]> : tensor<2xf32>}
// CHECK-DAG: %[[ONE:.*]] = "edge.constant"() {value = dense<1> : tensor<i64>}
// CHECK: %[[Y:.*]] = "edge.addmm"(%[[B]], %arg0, %[[W]], %[[ONE]], %[[ONE]]) {etmlir.debug_handle = 1 : i64}
// CHECK: %[[V:.*]] = "edge.view_copy"(%[[Y]])
// CHECK: %[[R:.*]] = "edge.view_copy"(%[[V]])
// CHECK: return %[[R]]
func.func @mm_views_bn(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %w = "edge.constant"() {etmlir.param = "fc.weight", value = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %g = "edge.constant"() {value = dense<[4.0, 3.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %beta = "edge.constant"() {value = dense<[10.0, 20.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %m = "edge.constant"() {value = dense<[2.0, 1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %v = "edge.constant"() {value = dense<[4.0, 9.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %y = "edge.mm"(%x, %w) {etmlir.debug_handle = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %y3 = "edge.view_copy"(%y) {size = array<i64: 1, 2, 2>} : (tensor<2x2xf32>) -> tensor<1x2x2xf32>
  %y2 = "edge.view_copy"(%y3) {size = array<i64: 2, 2>} : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
  %n:3 = "edge.native_batch_norm_legit_no_training"(%y2, %g, %beta, %m, %v) {eps = 0.0 : f64, etmlir.debug_handle = 2 : i64, momentum = 1.000000e-01 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>} : (tensor<2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x2xf32>, tensor<0xf32>, tensor<0xf32>)
  return %n#0 : tensor<2x2xf32>
}

// -----

// An addmm (a linear layer with a bias, alpha = beta = 1) and a batch norm right after it: bias folded too,
// b2 = b * scale + shift = [(1 - 2) * 1 + 10, (0 - 1) * 1 + 20].
// CHECK-LABEL: func.func @addmm_bn
// CHECK-NOT: edge.native_batch_norm_legit_no_training
// CHECK-DAG: %[[B:.*]] = "edge.constant"() {etmlir.param = "fc.weight.bn_folded_bias", value = dense<[9.000000e+00, 1.900000e+01]> : tensor<2xf32>}
// CHECK: %[[Y:.*]] = "edge.addmm"(%[[B]], %arg0,
// CHECK: return %[[Y]]
func.func @addmm_bn(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %w = "edge.constant"() {etmlir.param = "fc.weight", value = dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %b = "edge.constant"() {value = dense<[1.0, 0.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %g = "edge.constant"() {value = dense<[2.0, 3.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %beta = "edge.constant"() {value = dense<[10.0, 20.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %m = "edge.constant"() {value = dense<[2.0, 1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %v = "edge.constant"() {value = dense<[4.0, 9.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %y = "edge.addmm"(%b, %x, %w, %one, %one) : (tensor<2xf32>, tensor<3x2xf32>, tensor<2x2xf32>, tensor<i64>, tensor<i64>) -> tensor<3x2xf32>
  %n:3 = "edge.native_batch_norm_legit_no_training"(%y, %g, %beta, %m, %v) {eps = 0.0 : f64, momentum = 1.000000e-01 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>} : (tensor<3x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<3x2xf32>, tensor<0xf32>, tensor<0xf32>)
  return %n#0 : tensor<3x2xf32>
}

// -----

// A view that moves the channels out of the last dim: not a per-column scale of the product, so no fold into
// the weight; the multiply-add (over dim 1 of the batch norm's own input) still replaces the batch norm.
// CHECK-LABEL: func.func @mm_view_changes_last_dim
// CHECK: "edge.mm"
// CHECK: "edge.mul_tensor"
// CHECK: "edge.add_tensor"
// CHECK-NOT: edge.native_batch_norm_legit_no_training
func.func @mm_view_changes_last_dim(%x: tensor<2x4xf32>) -> tensor<4x2xf32> {
  %w = "edge.constant"() {value = dense<1.0> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %m = "edge.constant"() {value = dense<0.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %v = "edge.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %y = "edge.mm"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %y2 = "edge.view_copy"(%y) {size = array<i64: 4, 2>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %n:3 = "edge.native_batch_norm_legit_no_training"(%y2, %m, %v) {eps = 1.0e-05 : f64, momentum = 1.000000e-01 : f64, operandSegmentSizes = array<i32: 1, 0, 0, 1, 1>} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<0xf32>, tensor<0xf32>)
  return %n#0 : tensor<4x2xf32>
}
