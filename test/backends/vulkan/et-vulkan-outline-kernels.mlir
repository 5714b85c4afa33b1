// RUN: et-opt %s --et-vulkan-outline-kernels | FileCheck %s

// Each linalg op becomes a kernel of its own, launched with its buffers; the constant it reads
// is cloned into the kernel; views stay on the host.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: func.func @forward(%[[X:.*]]: memref<2x4xf32>, %[[OUT:.*]]: memref<2x4xf32>)
// CHECK: %[[V:.*]] = memref.collapse_shape %[[OUT]]
// CHECK: gpu.launch_func {{ *}}@k0::@k0 {{.*}} args(%[[X]] : memref<2x4xf32>, %[[OUT]] : memref<2x4xf32>)
// CHECK: gpu.launch_func {{ *}}@k1::@k1 {{.*}} args(%[[V]] : memref<8xf32>)
// CHECK: gpu.module @k0 attributes {etmlir.debug_handle = 7 : i64}
// CHECK: gpu.func @k0(%{{.*}}: memref<2x4xf32>, %{{.*}}: memref<2x4xf32>) kernel
// CHECK: arith.constant 2.000000e+00 : f32
// CHECK: linalg.generic
// CHECK: gpu.module @k1
// CHECK: linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
#id1 = affine_map<(d0) -> (d0)>
func.func @forward(%x: memref<2x4xf32>, %out: memref<2x4xf32>) {
  %c = arith.constant 2.0 : f32
  %flat = memref.collapse_shape %out [[0, 1]] : memref<2x4xf32> into memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<2x4xf32>) outs(%out : memref<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %c : f32
    linalg.yield %s : f32
  } loc(fused<{etmlir.debug_handle = 7 : i64}>["model.py":3:1])
  linalg.generic {indexing_maps = [#id1], iterator_types = ["parallel"]} outs(%flat : memref<8xf32>) {
  ^bb0(%o: f32):
    %s = arith.addf %o, %o : f32
    linalg.yield %s : f32
  }
  return
}
