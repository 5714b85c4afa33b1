// RUN: not et-opt %s --split-input-file --et-tosa-convert-edge 2>&1 | FileCheck %s

// The partitioner never offers these; a module that holds one anyway gets an error naming the
// op and its source line, not a crash.
// CHECK: model.py:7:1: error: et-tosa-convert-edge: edge.convolution: grouped convolution with 2 groups of 4 channels is not converted (only groups=1 and depthwise)
func.func @forward(%x: tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32> {
  %w = "edge.constant"() {value = dense<1.0> : tensor<4x2x1x1xf32>} : () -> tensor<4x2x1x1xf32>
  %0 = "edge.convolution"(%x, %w) {dilation = array<i64: 1, 1>, groups = 2 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 0>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<1x4x6x6xf32>, tensor<4x2x1x1xf32>) -> tensor<1x4x6x6xf32> loc("model.py":7:1)
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// CHECK: model.py:9:1: error: et-tosa-convert-edge: edge.embedding has no TOSA conversion
func.func @forward(%t: tensor<10x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  %0 = "edge.embedding"(%t, %i) {padding_idx = -1 : i64, scale_grad_by_freq = false, sparse = false} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32> loc("model.py":9:1)
  return %0 : tensor<3x4xf32>
}
