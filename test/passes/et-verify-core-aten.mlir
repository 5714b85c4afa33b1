// RUN: et-opt %s --split-input-file --verify-diagnostics --et-verify-core-aten | FileCheck %s
// RUN: et-opt %s --split-input-file --et-verify-core-aten="keep=aten.linear.default,aten.median" -o /dev/null

// A Core ATen module passes unchanged: core ops, symbolic-size arithmetic, structure.
// CHECK-LABEL: func.func @core
// CHECK: torch.aten.addmm
// CHECK: torch.aten.size.int
// CHECK: torch.aten.mul.int
func.func @core(%x: !torch.vtensor<[?,3],f32>, %w: !torch.vtensor<[3,4],f32>, %b: !torch.vtensor<[4],f32>) -> (!torch.vtensor<[?,4],f32>, !torch.int) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %0 = torch.aten.addmm %b, %x, %w, %int1, %int1 : !torch.vtensor<[4],f32>, !torch.vtensor<[?,3],f32>, !torch.vtensor<[3,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[?,4],f32>
  %1 = torch.aten.size.int %x, %int0 : !torch.vtensor<[?,3],f32>, !torch.int -> !torch.int
  %2 = torch.aten.mul.int %1, %1 : !torch.int, !torch.int -> !torch.int
  return %0, %2 : !torch.vtensor<[?,4],f32>, !torch.int
}

// -----

// Every non-core op is reported, each at its own location.
func.func @not_core(%x: !torch.vtensor<[2,3],f32>, %w: !torch.vtensor<[4,3],f32>) -> !torch.vtensor<[],f32> {
  %none = torch.constant.none
  // expected-error @+1 {{'torch.aten.linear' (aten.linear.default) is not a Core ATen op}}
  %0 = torch.aten.linear %x, %w, %none : !torch.vtensor<[2,3],f32>, !torch.vtensor<[4,3],f32>, !torch.none -> !torch.vtensor<[2,4],f32>
  // expected-error @+1 {{'torch.operator' (aten.median.default) is not a Core ATen op}}
  %1 = torch.operator "aten.median"(%0) : (!torch.vtensor<[2,4],f32>) -> !torch.vtensor<[],f32>
  return %1 : !torch.vtensor<[],f32>
}
