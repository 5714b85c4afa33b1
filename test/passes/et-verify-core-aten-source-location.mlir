// RUN: not et-opt %s --et-verify-core-aten 2>&1 | FileCheck %s

// Diagnostics at a location in another file (the model's source) cannot be matched by
// -verify-diagnostics annotations, so this case checks the printed message instead.
// The diagnostic points at the model's source line carried by the op.
// CHECK: model.py:41:8: error: 'torch.aten.linear' (aten.linear.default) is not a Core ATen op
func.func @from_model(%x: !torch.vtensor<[2,3],f32>, %w: !torch.vtensor<[4,3],f32>) -> !torch.vtensor<[2,4],f32> {
  %none = torch.constant.none
  %0 = torch.aten.linear %x, %w, %none : !torch.vtensor<[2,3],f32>, !torch.vtensor<[4,3],f32>, !torch.none -> !torch.vtensor<[2,4],f32> loc("model.py":41:8)
  return %0 : !torch.vtensor<[2,4],f32>
}
