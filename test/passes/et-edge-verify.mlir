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
