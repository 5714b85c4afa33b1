// RUN: et-opt %s --split-input-file --verify-diagnostics --et-decompose-to-core-aten
// RUN: not et-opt %s --split-input-file --et-decompose-to-core-aten 2>&1 | FileCheck %s

// aten.median has no decomposition in PyTorch's table and is not Core ATen; torch-mlir
// has no definition for it either, so it arrives as a generic torch.operator.
// CHECK: et-decompose-to-core-aten-errors.mlir:9:8: error: cannot decompose 'aten.median.default' to Core ATen: PyTorch has no decomposition for it; keep it for a backend that implements it (keep=aten.median.default)
func.func @median(%x: !torch.vtensor<[5],f32>) -> !torch.vtensor<[],f32> {
  // expected-error @+1 {{cannot decompose 'aten.median.default' to Core ATen: PyTorch has no decomposition}}
  %0 = torch.operator "aten.median"(%x) : (!torch.vtensor<[5],f32>) -> !torch.vtensor<[],f32>
  return %0 : !torch.vtensor<[],f32>
}

// -----

// A decomposition that needs a constant gets a run-time value: the argument is named, not guessed.
// CHECK: et-decompose-to-core-aten-errors.mlir:20:8: error: cannot decompose 'aten.transpose.int' to Core ATen: argument 'dim1': operand of type !torch.int is a block argument, not a constant
func.func @runtime_dim(%x: !torch.vtensor<[2,3],f32>, %d: !torch.int) -> !torch.vtensor<[3,2],f32> {
  %int0 = torch.constant.int 0
  // expected-error @+1 {{argument 'dim1': operand of type !torch.int is a block argument, not a constant}}
  %0 = torch.aten.transpose.int %x, %int0, %d : !torch.vtensor<[2,3],f32>, !torch.int, !torch.int -> !torch.vtensor<[3,2],f32>
  return %0 : !torch.vtensor<[3,2],f32>
}
