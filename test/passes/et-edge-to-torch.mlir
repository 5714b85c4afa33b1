// RUN: et-opt %s --split-input-file --et-edge-to-torch | FileCheck %s

// Each edge op is rebuilt from its entry in the generated op table: tensors become
// !torch.vtensor values, 0-d constants used as Scalars become torch constants, and
// attributes become the torch constants and lists the ATen schema takes.
// CHECK-LABEL: func.func @forward(%arg0: !torch.vtensor<[2,8],f32>, %arg1: !torch.vtensor<[8,4],f32>, %arg2: !torch.vtensor<[4],f32>) -> !torch.vtensor<[2,4],f32>
// CHECK: %[[ONE:.*]] = torch.constant.int 1
// CHECK: %[[MM:.*]] = torch.aten.addmm %arg2, %arg0, %arg1, %[[ONE]], %{{.*}} : !torch.vtensor<[4],f32>, !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4],f32>
// CHECK: %[[R:.*]] = torch.aten.relu %[[MM]] : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32>
// CHECK: return %[[R]] : !torch.vtensor<[2,4],f32>
// CHECK-NOT: edge.
func.func @forward(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %0 = "edge.addmm"(%b, %x, %w, %one, %one) : (tensor<4xf32>, tensor<2x8xf32>, tensor<8x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x4xf32>
  %1 = "edge.relu"(%0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %1 : tensor<2x4xf32>
}

// -----

// Attributes: permute's dims become a list of torch ints; a weight becomes a literal.
// CHECK-LABEL: func.func @attributes
// CHECK: torch.vtensor.literal(dense<{{.*}}> : tensor<2x3xf32>) : !torch.vtensor<[2,3],f32>
// CHECK: %[[L:.*]] = torch.prim.ListConstruct %{{.*}}, %{{.*}} : (!torch.int, !torch.int) -> !torch.list<int>
// CHECK: torch.aten.permute %{{.*}}, %[[L]] : !torch.vtensor<[2,3],f32>, !torch.list<int> -> !torch.vtensor<[3,2],f32>
func.func @attributes() -> tensor<3x2xf32> {
  %w = "edge.constant"() {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %0 = "edge.permute_copy"(%w) {dims = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// A size used as a tensor (returned, or an operand of a tensor op) goes through NumToTensor.
// CHECK-LABEL: func.func @size_as_tensor
// CHECK: %[[SIZE:.*]] = torch.aten.size.int %arg0, %{{.*}} : !torch.vtensor<[?],f32>, !torch.int -> !torch.int
// CHECK: %[[T:.*]] = torch.prim.NumToTensor.Scalar %[[SIZE]] : !torch.int -> !torch.vtensor<[],si64>
// CHECK: %[[SUM:.*]] = torch.aten.add.Tensor %[[T]], %[[T]], %{{.*}} : !torch.vtensor<[],si64>, !torch.vtensor<[],si64>, !torch.int -> !torch.vtensor<[],si64>
// CHECK: return %[[T]], %[[SUM]]
func.func @size_as_tensor(%x: tensor<?xf32>) -> (tensor<i64>, tensor<i64>) {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %0 = "edge.sym_size_int"(%x) {dim = 0 : i64} : (tensor<?xf32>) -> tensor<i64>
  %1 = "edge.add_tensor"(%0, %0, %one) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<i64>
  return %0, %1 : tensor<i64>, tensor<i64>
}
