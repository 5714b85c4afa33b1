// RUN: et-opt %s --et-vulkan-bufferize | FileCheck %s

// Results become out-parameters (what the dispatch graph calls the delegate's outputs), the
// weight a read-only global (a weight buffer uploaded once); no C interface, unlike cpu's.
// CHECK: memref.global "private" constant @{{.*}} : memref<4xf32> = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]>
// CHECK: func.func @forward(%[[X:.*]]: memref<2x4xf32>, %[[OUT:.*]]: memref<2x4xf32>) {
// CHECK: memref.get_global
// CHECK: linalg.generic {{.*}} outs(%[[OUT]] : memref<2x4xf32>)
// CHECK-NOT: llvm.emit_c_interface
#bias = affine_map<(d0, d1) -> (d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %b = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %e = tensor.empty() : tensor<2x4xf32>
  %0 = linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<2x4xf32>, tensor<4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
