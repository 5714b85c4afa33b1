// RUN: et-opt %s --split-input-file --et-to-edge | FileCheck %s

// torch.cond as imported: scf.if on the predicate's truth. The ops in both branches become edge
// ops, the scf.if's result and the predicate's operand take their edge types, and a branch
// that computes a dynamic size gets its bound (the result: the larger of the branches').
// CHECK-LABEL: func.func @main
// CHECK: %[[GT:.*]] = "edge.gt_scalar"
// CHECK: %[[C:.*]] = "etcf.predicate"(%[[GT]]) : (tensor<i1>) -> i1
// CHECK: %[[R:.*]] = scf.if %[[C]] -> (tensor<?xf32>) {
// CHECK:   %[[SIN:.*]] = "edge.sin"(%arg1) {etmlir.upper_bounds = [array<i64: 8>]}
// CHECK:   scf.yield %[[SIN]] : tensor<?xf32>
// CHECK: } else {
// CHECK:   %[[CAT:.*]] = "edge.cat"(%arg1, %arg1) {dim = 0 : i64, etmlir.upper_bounds = [array<i64: 16>]}
// CHECK:   scf.yield %[[CAT]] : tensor<?xf32>
// CHECK: } {etmlir.upper_bounds = [array<i64: 16>]}
// CHECK: "edge.neg"(%[[R]]) {etmlir.upper_bounds = [array<i64: 16>]}
func.func @main(%arg0: !torch.vtensor<[],f32>, %arg1: !torch.vtensor<[?],f32> {etmlir.dynamic_dims = {"0" = {max = 8 : i64, min = 2 : i64, symbol = "s0"}}}) -> !torch.vtensor<[?],f32> {
  %int0 = torch.constant.int 0
  %0 = torch.aten.gt.Scalar %arg0, %int0 : !torch.vtensor<[],f32>, !torch.int -> !torch.vtensor<[],i1>
  %1 = "etcf.predicate"(%0) : (!torch.vtensor<[],i1>) -> i1
  %2 = scf.if %1 -> (!torch.vtensor<[?],f32>) {
    %4 = torch.aten.sin %arg1 : !torch.vtensor<[?],f32> -> !torch.vtensor<[?],f32>
    scf.yield %4 : !torch.vtensor<[?],f32>
  } else {
    %4 = torch.prim.ListConstruct %arg1, %arg1 : (!torch.vtensor<[?],f32>, !torch.vtensor<[?],f32>) -> !torch.list<vtensor>
    %int0_1 = torch.constant.int 0
    %5 = torch.aten.cat %4, %int0_1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[?],f32>
    scf.yield %5 : !torch.vtensor<[?],f32>
  }
  %3 = torch.aten.neg %2 : !torch.vtensor<[?],f32> -> !torch.vtensor<[?],f32>
  return %3 : !torch.vtensor<[?],f32>
}

// -----

// while_loop as imported: scf.while whose carried values (the region arguments) take their
// edge types along with the results; values from above (%arg0) are read directly.
// CHECK-LABEL: func.func @main
// CHECK: %[[W:.*]]:2 = scf.while (%[[I:.*]] = %{{.*}}, %[[ACC:.*]] = %arg1) : (tensor<i64>, tensor<3xf32>) -> (tensor<i64>, tensor<3xf32>) {
// CHECK:   %[[LT:.*]] = "edge.lt_tensor"(%[[I]], %arg0)
// CHECK:   %[[C:.*]] = "etcf.predicate"(%[[LT]]) : (tensor<i1>) -> i1
// CHECK:   scf.condition(%[[C]]) %[[I]], %[[ACC]] : tensor<i64>, tensor<3xf32>
// CHECK: } do {
// CHECK: ^bb0(%[[I2:.*]]: tensor<i64>, %[[ACC2:.*]]: tensor<3xf32>):
// CHECK:   %[[NEXT:.*]] = "edge.add_scalar"(%[[I2]]
// CHECK:   %[[SUM:.*]] = "edge.add_tensor"(%[[ACC2]], %[[ACC2]]
// CHECK:   scf.yield %[[NEXT]], %[[SUM]] : tensor<i64>, tensor<3xf32>
// CHECK: return %[[W]]#0, %[[W]]#1 : tensor<i64>, tensor<3xf32>
func.func @main(%arg0: !torch.vtensor<[],si64>, %arg1: !torch.vtensor<[3],f32>) -> (!torch.vtensor<[],si64>, !torch.vtensor<[3],f32>) {
  %0 = torch.vtensor.literal(dense<0> : tensor<si64>) : !torch.vtensor<[],si64>
  %1:2 = scf.while (%arg2 = %0, %arg3 = %arg1) : (!torch.vtensor<[],si64>, !torch.vtensor<[3],f32>) -> (!torch.vtensor<[],si64>, !torch.vtensor<[3],f32>) {
    %2 = torch.aten.lt.Tensor %arg2, %arg0 : !torch.vtensor<[],si64>, !torch.vtensor<[],si64> -> !torch.vtensor<[],i1>
    %3 = "etcf.predicate"(%2) : (!torch.vtensor<[],i1>) -> i1
    scf.condition(%3) %arg2, %arg3 : !torch.vtensor<[],si64>, !torch.vtensor<[3],f32>
  } do {
  ^bb0(%arg2: !torch.vtensor<[],si64>, %arg3: !torch.vtensor<[3],f32>):
    %int1 = torch.constant.int 1
    %2 = torch.aten.add.Scalar %arg2, %int1, %int1 : !torch.vtensor<[],si64>, !torch.int, !torch.int -> !torch.vtensor<[],si64>
    %3 = torch.aten.add.Tensor %arg3, %arg3, %int1 : !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.int -> !torch.vtensor<[3],f32>
    scf.yield %2, %3 : !torch.vtensor<[],si64>, !torch.vtensor<[3],f32>
  }
  return %1#0, %1#1 : !torch.vtensor<[],si64>, !torch.vtensor<[3],f32>
}
