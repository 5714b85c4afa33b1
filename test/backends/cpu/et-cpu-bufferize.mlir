// RUN: et-opt %s --split-input-file --et-cpu-bufferize | FileCheck %s

// Results become out-parameters the runtime passes (destination-passing style), the
// weight a read-only global, and the entry point gets a C interface.
// CHECK: memref.global "private" constant @{{.*}} : memref<4xf32> = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]>
// CHECK: func.func @forward(%[[X:.*]]: memref<2x4xf32>, %[[OUT:.*]]: memref<2x4xf32>) attributes {llvm.emit_c_interface}
// CHECK: memref.get_global
// CHECK: linalg.generic {{.*}} outs(%[[OUT]] : memref<2x4xf32>)
// CHECK: return
// CHECK-NOT: memref.alloc
#bias = affine_map<(d0, d1) -> (d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %b = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %e = tensor.empty() : tensor<2x4xf32>
  %y = linalg.generic {indexing_maps = [#bias, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b, %x : tensor<4xf32>, tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %s = arith.addf %in, %in2 : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// A value returned twice (CSE merged two identical computations whose results leave the delegate
// separately): each repeat is copied, so each result gets an out-parameter of its own (MLIR's
// bufferization crashed on the repeat).
// CHECK-LABEL: func.func @forward(%arg0: memref<4xf32>, %arg1: memref<4xf32>, %arg2: memref<4xf32>)
// CHECK: linalg.generic {{.*}} outs(%arg1 : memref<4xf32>)
// CHECK: linalg.copy ins(%arg1 : memref<4xf32>) outs(%arg2 : memref<4xf32>)
// CHECK-NEXT: return
#id = affine_map<(d0) -> (d0)>
func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %y, %y : tensor<4xf32>, tensor<4xf32>
}
