// RUN: et-opt %s --split-input-file --verify-diagnostics --et-edge-verify | FileCheck %s

// A valid edge module passes unchanged.
// CHECK-LABEL: func.func @valid
// CHECK: "edge.convolution"
func.func @valid(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %0 = "edge.convolution"(%x, %w) {dilation = array<i64: 1, 1>, groups = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 0>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

// Ops of other dialects are not edge ops.
func.func @foreign(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'arith.addf' is not an edge op}}
  %0 = arith.addf %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// The dtype table rejects combinations no kernel takes, naming the op, the dtypes and the rule.
func.func @bad_dtypes(%x: tensor<1x3x8x8xi32>, %w: tensor<4x3x3x3xi32>) -> tensor<1x4x6x6xi32> {
  // expected-error @+1 {{'edge.convolution' (aten::convolution) does not accept dtypes (input=i32, weight=i32, result=i32): input must be one of}}
  %0 = "edge.convolution"(%x, %w) {dilation = array<i64: 1, 1>, groups = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 0, 0>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<1x3x8x8xi32>, tensor<4x3x3x3xi32>) -> tensor<1x4x6x6xi32>
  return %0 : tensor<1x4x6x6xi32>
}

// -----

// Operands that must share a dtype.
func.func @mixed(%x: tensor<2x3xf32>, %y: tensor<3x4xf16>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'edge.mm' (aten::mm) does not accept dtypes (self=f32, mat2=f16, result=f32): self, mat2, result must all have the same dtype}}
  %0 = "edge.mm"(%x, %y) : (tensor<2x3xf32>, tensor<3x4xf16>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// A torch-dialect signature is not an edge signature.
// expected-error @+1 {{function signature type !torch.vtensor<[2],f32> is not a ranked builtin tensor}}
func.func @torch_signature(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  return %x : !torch.vtensor<[2],f32>
}

// -----

// Static shapes must work together: pointwise operands broadcast (the error names op, shapes and line).
func.func @no_broadcast(%x: tensor<2x3xf32>, %y: tensor<4x5xf32>) -> tensor<2x3xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  // expected-error @+1 {{'edge.add_tensor' (aten::add.Tensor): shapes do not broadcast: self [2, 3], other [4, 5] (sizes 2 and 4 at dim 0 of the broadcast shape)}}
  %0 = "edge.add_tensor"(%x, %y, %one) : (tensor<2x3xf32>, tensor<4x5xf32>, tensor<i64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Broadcasting shapes (and dynamic dims, checked at run time) verify.
// CHECK-LABEL: func.func @broadcasts
func.func @broadcasts(%x: tensor<2x1xf32>, %y: tensor<3xf32>, %z: tensor<?x3xf32>) -> (tensor<2x3xf32>, tensor<?x3xf32>) {
  %0 = "edge.mul_tensor"(%x, %y) : (tensor<2x1xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = "edge.mul_tensor"(%z, %y) : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<?x3xf32>
}

// -----

// A matrix product's inner dims agree.
func.func @mm_inner(%x: tensor<2x3xf32>, %y: tensor<4x5xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{'edge.mm' (aten::mm): inner dims differ: self [2, 3], mat2 [4, 5] (self has 3 columns, mat2 4 rows)}}
  %0 = "edge.mm"(%x, %y) : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// cat's inputs agree in every dim but the cat dim.
func.func @cat_dims(%x: tensor<2x3xf32>, %y: tensor<4x5xf32>) -> tensor<6x3xf32> {
  // expected-error @+1 {{'edge.cat' (aten::cat): input 1 [4, 5] differs from input 0 [2, 3] in dim 1 (only the cat dim 0 may differ)}}
  %0 = "edge.cat"(%x, %y) {dim = 0 : i64} : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<6x3xf32>
  return %0 : tensor<6x3xf32>
}
