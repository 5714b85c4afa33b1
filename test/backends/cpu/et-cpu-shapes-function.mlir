// RUN: et-opt %s --split-input-file --et-cpu-shapes-function | FileCheck %s

// Static results: nothing to add.
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NOT: @forward_shapes
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}

// -----

// A dynamic result: @forward_shapes returns its sizes, computed from the input's
// (the computation itself folds away: no linalg op is left in it).
// CHECK-LABEL: func.func @forward(%arg0: tensor<?x4xf32>) -> tensor<?x4xf32>
// CHECK-LABEL: func.func @forward_shapes(%arg0: tensor<?x4xf32>) -> tensor<2xi64>
// CHECK-NOT: linalg.
// CHECK: tensor.dim %arg0
// CHECK: tensor.from_elements {{.*}} : tensor<2xi64>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%n) : tensor<?x4xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x4xf32>) outs(%e : tensor<?x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}
