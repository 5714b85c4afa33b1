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

// -----

// A result typed dynamic though its size is fixed (a split's slices, which the
// edge level types alike), computed by a generic whose body asserts on the data
// (a batch norm's divisor): the asserts stay in @forward and leave the clone, so
// the computation folds away and the sizes are constants. @forward keeps its assert.
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x8xf32>) -> tensor<2x?xf32>
// CHECK: cf.assert
// CHECK-LABEL: func.func @forward_shapes(%arg0: tensor<2x8xf32>) -> tensor<2xi64>
// CHECK-NOT: linalg.
// CHECK-NOT: cf.assert
// CHECK: arith.constant dense<[2, 4]> : tensor<2xi64>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x?xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x8xf32>) outs(%e : tensor<2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = math.sqrt %in : f32
    %ok = arith.cmpf one, %s, %zero : f32
    cf.assert %ok, "unimplemented: tensor with zero element"
    %d = arith.divf %in, %s : f32
    linalg.yield %d : f32
  } -> tensor<2x8xf32>
  %slice = tensor.extract_slice %y[0, 4] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %cast = tensor.cast %slice : tensor<2x4xf32> to tensor<2x?xf32>
  return %cast : tensor<2x?xf32>
}
