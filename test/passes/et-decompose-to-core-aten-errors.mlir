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

// -----

// The pass takes the torch dialect: an edge module is refused at its first edge op.
func.func @edge_level(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{et-decompose-to-core-aten expects a torch-dialect module; found 'edge.relu' (an edge-dialect op): the module is already at the edge level (et-to-edge ran)}}
  %0 = "edge.relu"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// Options are checked before the pass runs: one line naming the option and the expected form.
// RUN: not et-opt %s --et-decompose-to-core-aten="keep=aten.nonexistent.op" 2>&1 | FileCheck %s --check-prefix=KEEP
// RUN: not et-opt %s --et-decompose-to-core-aten="keep=aten.linear.default,linear" 2>&1 | FileCheck %s --check-prefix=KEEPFORM
// RUN: not et-opt %s --et-decompose-to-core-aten="kep=aten.linear.default" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// KEEP: et-opt: error: et-decompose-to-core-aten: option keep=aten.nonexistent.op: unknown op 'aten.nonexistent.op' (ops are named like aten.linear.default or aten::add.Tensor; custom ops must be registered first, e.g. with --load)
// KEEPFORM: et-opt: error: et-decompose-to-core-aten: option keep=aten.linear.default,linear: unknown op 'linear'
// UNKNOWN: et-opt: error: et-decompose-to-core-aten: unknown option 'kep'; did you mean 'keep'? (options: keep=<comma-separated list>)
