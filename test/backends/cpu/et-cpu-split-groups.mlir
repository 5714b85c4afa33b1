// RUN: et-opt %s --split-input-file --pass-pipeline='builtin.module(et-cpu-split-groups)' | FileCheck %s

// Two groups of two channels, as torch-mlir lowers Conv2d(4, 4, 3, groups=2): the input, filter and init
// split by tensor.expand_shape, the result merged by tensor.collapse_shape. Each group becomes a dense
// convolution over its channel slice, inserted into the result in turn; the result is split into groups
// again for the collapse (canonicalization folds the pair).
// CHECK-LABEL: func.func @two_groups
// CHECK-NOT: linalg.conv_2d_ngchw_gfchw
// CHECK: %[[X0:.*]] = tensor.extract_slice %arg0[0, 0, 0, 0] [1, 2, 5, 5] [1, 1, 1, 1]
// CHECK: %[[W0:.*]] = tensor.extract_slice %arg1[0, 0, 0, 0] [2, 2, 3, 3] [1, 1, 1, 1]
// CHECK: %[[O0:.*]] = tensor.extract_slice %arg2[0, 0, 0, 0] [1, 2, 3, 3] [1, 1, 1, 1]
// CHECK: %[[C0:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%[[X0]], %[[W0]] : tensor<1x2x5x5xf32>, tensor<2x2x3x3xf32>) outs(%[[O0]] : tensor<1x2x3x3xf32>)
// CHECK: %[[R0:.*]] = tensor.insert_slice %[[C0]] into %arg2[0, 0, 0, 0] [1, 2, 3, 3] [1, 1, 1, 1]
// CHECK: %[[X1:.*]] = tensor.extract_slice %arg0[0, 2, 0, 0] [1, 2, 5, 5] [1, 1, 1, 1]
// CHECK: %[[W1:.*]] = tensor.extract_slice %arg1[2, 0, 0, 0] [2, 2, 3, 3] [1, 1, 1, 1]
// CHECK: %[[O1:.*]] = tensor.extract_slice %[[R0]][0, 2, 0, 0] [1, 2, 3, 3] [1, 1, 1, 1]
// CHECK: %[[C1:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%[[X1]], %[[W1]] : {{.*}}) outs(%[[O1]] : {{.*}})
// CHECK: %[[R1:.*]] = tensor.insert_slice %[[C1]] into %[[R0]][0, 2, 0, 0] [1, 2, 3, 3] [1, 1, 1, 1]
// CHECK: %[[E:.*]] = tensor.expand_shape %[[R1]] {{\[\[}}0], [1, 2], [3], [4]] output_shape [1, 2, 2, 3, 3]
// CHECK: %[[Y:.*]] = tensor.collapse_shape %[[E]]
// CHECK: return %[[Y]]
func.func @two_groups(%x: tensor<1x4x5x5xf32>, %w: tensor<4x2x3x3xf32>, %o: tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32> {
  %xe = tensor.expand_shape %x [[0], [1, 2], [3], [4]] output_shape [1, 2, 2, 5, 5] : tensor<1x4x5x5xf32> into tensor<1x2x2x5x5xf32>
  %we = tensor.expand_shape %w [[0, 1], [2], [3], [4]] output_shape [2, 2, 2, 3, 3] : tensor<4x2x3x3xf32> into tensor<2x2x2x3x3xf32>
  %oe = tensor.expand_shape %o [[0], [1, 2], [3], [4]] output_shape [1, 2, 2, 3, 3] : tensor<1x4x3x3xf32> into tensor<1x2x2x3x3xf32>
  %c = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%xe, %we : tensor<1x2x2x5x5xf32>, tensor<2x2x2x3x3xf32>) outs(%oe : tensor<1x2x2x3x3xf32>) -> tensor<1x2x2x3x3xf32>
  %y = tensor.collapse_shape %c [[0], [1, 2], [3], [4]] : tensor<1x2x2x3x3xf32> into tensor<1x4x3x3xf32>
  return %y : tensor<1x4x3x3xf32>
}

// -----

// A filter folded to a constant in the split shape is collapsed back before it is sliced; the stride
// carries over.
// CHECK-LABEL: func.func @constant_filter
// CHECK: %[[W:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2], [3], [4]] : tensor<2x1x1x3x3xf32> into tensor<2x1x3x3xf32>
// CHECK: tensor.extract_slice %[[W]][1, 0, 0, 0] [1, 1, 3, 3] [1, 1, 1, 1]
// CHECK: linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
// CHECK-NOT: linalg.conv_2d_ngchw_gfchw
func.func @constant_filter(%x: tensor<1x2x5x5xf32>, %o: tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = arith.constant dense<0.5> : tensor<2x1x1x3x3xf32>
  %xe = tensor.expand_shape %x [[0], [1, 2], [3], [4]] output_shape [1, 2, 1, 5, 5] : tensor<1x2x5x5xf32> into tensor<1x2x1x5x5xf32>
  %oe = tensor.expand_shape %o [[0], [1, 2], [3], [4]] output_shape [1, 2, 1, 2, 2] : tensor<1x2x2x2xf32> into tensor<1x2x1x2x2xf32>
  %c = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
      ins(%xe, %w : tensor<1x2x1x5x5xf32>, tensor<2x1x1x3x3xf32>) outs(%oe : tensor<1x2x1x2x2xf32>) -> tensor<1x2x1x2x2xf32>
  %y = tensor.collapse_shape %c [[0], [1, 2], [3], [4]] : tensor<1x2x1x2x2xf32> into tensor<1x2x2x2xf32>
  return %y : tensor<1x2x2x2xf32>
}

// -----

// A 1-d convolution (et-conv1d-to-conv2d gave it a unit height) in two groups: its input's view splits
// other dims too, so the input is collapsed to 4-d before it is sliced; the users get the 5-d result.
// CHECK-LABEL: func.func @one_d
// CHECK: %[[X:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0], [1, 2], [3], [4]] : tensor<2x2x2x1x50xf32> into tensor<2x4x1x50xf32>
// CHECK: tensor.extract_slice %[[X]][0, 2, 0, 0] [2, 2, 1, 50] [1, 1, 1, 1]
// CHECK: linalg.conv_2d_nchw_fchw {dilations = dense<[1, 2]> : tensor<2xi64>
// CHECK: %[[E:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2], [3], [4]] output_shape [2, 2, 3, 1, 46]
// CHECK: tensor.collapse_shape %[[E]] {{\[\[}}0], [1, 2, 3], [4]]
func.func @one_d(%x: tensor<2x4x50xf32>, %w: tensor<2x3x2x1x3xf32>, %o: tensor<2x2x3x1x46xf32>) -> tensor<2x6x46xf32> {
  %xe = tensor.expand_shape %x [[0], [1, 2], [3, 4]] output_shape [2, 2, 2, 1, 50] : tensor<2x4x50xf32> into tensor<2x2x2x1x50xf32>
  %c = linalg.conv_2d_ngchw_gfchw {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%xe, %w : tensor<2x2x2x1x50xf32>, tensor<2x3x2x1x3xf32>) outs(%o : tensor<2x2x3x1x46xf32>) -> tensor<2x2x3x1x46xf32>
  %y = tensor.collapse_shape %c [[0], [1, 2, 3], [4]] : tensor<2x2x3x1x46xf32> into tensor<2x6x46xf32>
  return %y : tensor<2x6x46xf32>
}

// -----

// Dynamic shapes are left alone.
// CHECK-LABEL: func.func @dynamic
// CHECK: linalg.conv_2d_ngchw_gfchw
func.func @dynamic(%x: tensor<?x2x1x5x5xf32>, %w: tensor<2x1x1x3x3xf32>, %o: tensor<?x2x1x3x3xf32>) -> tensor<?x2x1x3x3xf32> {
  %c = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<?x2x1x5x5xf32>, tensor<2x1x1x3x3xf32>) outs(%o : tensor<?x2x1x3x3xf32>) -> tensor<?x2x1x3x3xf32>
  return %c : tensor<?x2x1x3x3xf32>
}
