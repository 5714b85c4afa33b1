// RUN: et-opt %s --split-input-file --et-torch-to-linalg | FileCheck %s

// torch-mlir's pipelines lower value-semantics torch ops to linalg on builtin tensors;
// the function stays public (private functions would be dropped) without arg attributes.
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: linalg.generic
// CHECK: arith.cmpf ugt
// CHECK-NOT: torch.
func.func private @forward(%x: !torch.vtensor<[2,3],f32> {etmlir.dynamic_dims = {}}) -> !torch.vtensor<[2,3],f32> {
  %0 = torch.aten.relu %x : !torch.vtensor<[2,3],f32> -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}

// -----

// Inference batch norm has no linalg lowering in torch-mlir: PyTorch's reference
// decomposition rewrites it first (into elementwise arithmetic).
// CHECK-LABEL: func.func @batch_norm
// CHECK-NOT: batch_norm
// CHECK: linalg.generic
func.func @batch_norm(%x: !torch.vtensor<[1,2,2,2],f32>) -> !torch.vtensor<[1,2,2,2],f32> {
  %w = torch.vtensor.literal(dense<[1.0, 2.0]> : tensor<2xf32>) : !torch.vtensor<[2],f32>
  %b = torch.vtensor.literal(dense<[0.5, 0.25]> : tensor<2xf32>) : !torch.vtensor<[2],f32>
  %m = torch.vtensor.literal(dense<[0.0, 1.0]> : tensor<2xf32>) : !torch.vtensor<[2],f32>
  %v = torch.vtensor.literal(dense<[1.0, 4.0]> : tensor<2xf32>) : !torch.vtensor<[2],f32>
  %momentum = torch.constant.float 1.000000e-01
  %eps = torch.constant.float 1.000000e-05
  %r:3 = torch.operator "torch.aten._native_batch_norm_legit_no_training"(%x, %w, %b, %m, %v, %momentum, %eps) : (!torch.vtensor<[1,2,2,2],f32>, !torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>, !torch.float, !torch.float) -> (!torch.vtensor<[1,2,2,2],f32>, !torch.vtensor<[0],f32>, !torch.vtensor<[0],f32>)
  return %r#0 : !torch.vtensor<[1,2,2,2],f32>
}

// -----

// GELU's tanh form: torch-mlir's lowering multiplies by 0.797724 for sqrt(2/pi) = 0.7978846, so it is
// decomposed with PyTorch's reference first (x^3 as products, the right constant). The erf form is
// lowered by torch-mlir as it is.
// CHECK-LABEL: func.func @gelu_tanh
// CHECK-NOT: 0.797724
// CHECK: 0.79788456
// CHECK: math.tanh
// CHECK-LABEL: func.func @gelu_erf
// CHECK: math.erf
func.func @gelu_tanh(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
  %tanh = torch.constant.str "tanh"
  %0 = torch.aten.gelu %x, %tanh : !torch.vtensor<[2,3],f32>, !torch.str -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}
func.func @gelu_erf(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
  %none = torch.constant.str "none"
  %0 = torch.aten.gelu %x, %none : !torch.vtensor<[2,3],f32>, !torch.str -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}
