// RUN: et-opt %s --split-input-file --et-decompose-to-core-aten --mlir-print-debuginfo | FileCheck %s
// RUN: et-opt %s --split-input-file --pass-pipeline='builtin.module(et-decompose-to-core-aten{keep=aten.linear.default})' | FileCheck %s --check-prefix=KEEP
// RUN: et-opt %s --split-input-file --et-decompose-to-core-aten --et-verify-core-aten -o /dev/null

// linear without bias becomes permute + mm; every new op keeps the linear's location.
// CHECK-LABEL: func.func @linear_no_bias
// CHECK-NOT: torch.aten.linear
// CHECK: %[[T:.*]] = torch.aten.permute %arg1, %{{.*}} {{.*}} -> !torch.vtensor<[3,4],f32> loc(#[[LOC:loc[0-9]*]])
// CHECK: torch.aten.mm %arg0, %[[T]] {{.*}} -> !torch.vtensor<[2,4],f32> loc(#[[LOC]])
// CHECK: #[[LOC]] = loc("model.py":41:8)
// KEEP-LABEL: func.func @linear_no_bias
// KEEP: torch.aten.linear
func.func @linear_no_bias(%x: !torch.vtensor<[2,3],f32>, %w: !torch.vtensor<[4,3],f32>) -> !torch.vtensor<[2,4],f32> {
  %none = torch.constant.none
  %0 = torch.aten.linear %x, %w, %none : !torch.vtensor<[2,3],f32>, !torch.vtensor<[4,3],f32>, !torch.none -> !torch.vtensor<[2,4],f32> loc("model.py":41:8)
  return %0 : !torch.vtensor<[2,4],f32>
}

// -----

// A dynamic dim stays dynamic: the decomposition reads it back with aten.size.int.
// CHECK-LABEL: func.func @linear_dynamic_batch
// CHECK: %[[N:.*]] = torch.aten.size.int %arg0
// CHECK: torch.aten.view %arg0, %{{.*}} -> !torch.vtensor<[?,64],f32>
// CHECK: torch.aten.addmm %arg2
// CHECK: torch.prim.ListConstruct %{{.*}}, %[[N]], %{{.*}}
// CHECK: torch.aten.view {{.*}} -> !torch.vtensor<[1,?,128],f32>
func.func @linear_dynamic_batch(%x: !torch.vtensor<[1,?,64],f32>, %w: !torch.vtensor<[128,64],f32>, %b: !torch.vtensor<[128],f32>) -> !torch.vtensor<[1,?,128],f32> {
  %0 = torch.aten.linear %x, %w, %b : !torch.vtensor<[1,?,64],f32>, !torch.vtensor<[128,64],f32>, !torch.vtensor<[128],f32> -> !torch.vtensor<[1,?,128],f32>
  return %0 : !torch.vtensor<[1,?,128],f32>
}

// -----

// A Tensor[] result: split.Tensor becomes split_with_sizes, and the unpack reads its elements (PyTorch
// decomposes it, so it does not stay as edge.split_copy_tensor although the edge dialect declares that).
// CHECK-LABEL: func.func @split
// CHECK: torch.aten.split_with_sizes
// CHECK-NOT: torch.aten.split.Tensor
// CHECK: return
func.func @split(%x: !torch.vtensor<[4,6],f32>) -> (!torch.vtensor<[4,3],f32>, !torch.vtensor<[4,3],f32>) {
  %int3 = torch.constant.int 3
  %int1 = torch.constant.int 1
  %0 = torch.aten.split.Tensor %x, %int3, %int1 : !torch.vtensor<[4,6],f32>, !torch.int, !torch.int -> !torch.list<vtensor>
  %1:2 = torch.prim.ListUnpack %0 : !torch.list<vtensor> -> !torch.vtensor<[4,3],f32>, !torch.vtensor<[4,3],f32>
  return %1#0, %1#1 : !torch.vtensor<[4,3],f32>, !torch.vtensor<[4,3],f32>
}

// -----

// Core ops are left exactly as they are.
// CHECK-LABEL: func.func @already_core
// CHECK-NEXT: %[[R:.*]] = torch.aten.relu %arg0
// CHECK-NEXT: return %[[R]]
func.func @already_core(%x: !torch.vtensor<[3],f32>) -> !torch.vtensor<[3],f32> {
  %0 = torch.aten.relu %x : !torch.vtensor<[3],f32> -> !torch.vtensor<[3],f32>
  return %0 : !torch.vtensor<[3],f32>
}

// -----

// Overloads the edge dialect declares are Core ATen here: a *_copy op called directly (view_copy),
// and a non-core view whose copy variant it declares (unfold -> edge.unfold_copy).
// CHECK-LABEL: func.func @edge_declared
// CHECK: %[[V:.*]] = torch.aten.view_copy %arg0
// CHECK-NEXT: %[[U:.*]] = torch.aten.unfold %[[V]]
// CHECK-NEXT: return %[[U]]
func.func @edge_declared(%x: !torch.vtensor<[2,6],f32>) -> !torch.vtensor<[4,3],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int3 = torch.constant.int 3
  %int12 = torch.constant.int 12
  %size = torch.prim.ListConstruct %int12 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.view_copy %x, %size : !torch.vtensor<[2,6],f32>, !torch.list<int> -> !torch.vtensor<[12],f32>
  %1 = torch.aten.unfold %0, %int0, %int3, %int3 : !torch.vtensor<[12],f32>, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[4,3],f32>
  return %1 : !torch.vtensor<[4,3],f32>
}
