// RUN: et-opt %s --et-vulkan-map-threads | FileCheck %s

// An elementwise kernel: 4x8 = 32 iterations, one per thread, in one workgroup of 64 threads;
// the indices come back out of the flat thread id; the threads past 32 do nothing.
// CHECK: gpu.launch_func {{ *}}@k0::@k0 blocks in (%c1, %c1{{.*}}, %c1{{.*}}) threads in (%c64, %c1{{.*}}, %c1{{.*}})
// A reduction over dim 1 of NCHW (softmax's sum): its parallel dims go first (4x3x5 = 60 threads),
// the reduction is a loop inside each thread.
// CHECK: gpu.launch_func {{ *}}@k1::@k1 blocks in (%c1
// CHECK: gpu.func @k0({{.*}}) kernel attributes {spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>}
// CHECK: gpu.block_id y
// CHECK: gpu.grid_dim x
// CHECK: gpu.thread_id x
// CHECK: arith.cmpi ult, %{{.*}}, %c32 : index
// CHECK: scf.if
// CHECK: arith.divui %{{.*}}, %c8
// CHECK: math.exp
// CHECK: gpu.func @k1
// CHECK: arith.cmpi ult, %{{.*}}, %c60 : index
// CHECK: scf.for %{{.*}} = %c0 to %c7
#id = affine_map<(d0, d1) -> (d0, d1)>
#in = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#out = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
module attributes {gpu.container_module} {
  func.func @forward(%x: memref<4x8xf32>, %y: memref<4x8xf32>, %t: memref<4x7x3x5xf32>, %s: memref<4x3x5xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @k0::@k0 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<4x8xf32>, %y : memref<4x8xf32>)
    gpu.launch_func @k1::@k1 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%t : memref<4x7x3x5xf32>, %s : memref<4x3x5xf32>)
    return
  }
  gpu.module @k0 {
    gpu.func @k0(%x: memref<4x8xf32>, %y: memref<4x8xf32>) kernel {
      linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
          ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
      ^bb0(%a: f32, %o: f32):
        %e = math.exp %a : f32
        linalg.yield %e : f32
      }
      gpu.return
    }
  }
  gpu.module @k1 {
    gpu.func @k1(%t: memref<4x7x3x5xf32>, %s: memref<4x3x5xf32>) kernel {
      linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction", "parallel", "parallel"]}
          ins(%t : memref<4x7x3x5xf32>) outs(%s : memref<4x3x5xf32>) {
      ^bb0(%a: f32, %o: f32):
        %e = arith.addf %a, %o : f32
        linalg.yield %e : f32
      }
      gpu.return
    }
  }
}
