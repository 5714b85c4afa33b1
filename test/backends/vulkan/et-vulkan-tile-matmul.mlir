// RUN: et-opt %s --et-vulkan-tile-matmul | FileCheck %s
// RUN: et-opt %s --et-vulkan-tile-matmul=tile=8 | FileCheck %s --check-prefix=TILE8

// A matmul kernel becomes a tiled product: a 16 x 32 slice of A and a 32 x 16 slice of B in Workgroup
// memory (two 16-wide K steps per barrier pair here, K = 30; four where K allows), a barrier after
// loading them and one after using them, guarded edges; the launch gets ceil(N/16) x ceil(M/16)
// workgroups of 16x16 threads.
// CHECK: gpu.launch_func {{ *}}@k0::@k0 blocks in (%c3, %c2, %{{.*}}) threads in (%c16, %c16{{.*}}, %{{.*}})
// CHECK: gpu.func @k0({{.*}}) kernel attributes {etmlir.tiled = "16x16", spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [16, 16, 1]>}
// CHECK: memref.alloc() : memref<16x32xf32, #spirv.storage_class<Workgroup>>
// CHECK: memref.alloc() : memref<32x16xf32, #spirv.storage_class<Workgroup>>
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK: gpu.barrier
// TILE8: gpu.launch_func {{ *}}@k0::@k0 blocks in (%c5, %c3, %{{.*}}) threads in (%c8, %c8{{.*}}, %{{.*}})
// TILE8: etmlir.tiled = "8x8"
// TILE8: memref<8x32xf32, #spirv.storage_class<Workgroup>>

// A product with custom indexing maps (a transposed operand) is left to et-vulkan-map-threads.
// CHECK: gpu.func @k1
// CHECK-NOT: etmlir.tiled
// CHECK: linalg.matmul

// A convolution is an implicit GEMM: F = 8 rows, 2 x 5 x 5 = 50 output pixels, reduction over 3 x 3 x 3;
// the input pixel of each tile element comes from the stride (2) and the dilation (1).
// CHECK: gpu.func @k2({{.*}}) kernel attributes {etmlir.tiled = "16x16"
// CHECK: arith.constant 27 : index
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<2x3x11x11xf32>
// CHECK: gpu.barrier
module attributes {gpu.container_module} {
  func.func @forward(%a: memref<20x30xf32>, %b: memref<30x40xf32>, %c: memref<20x40xf32>, %bt: memref<40x30xf32>,
                     %x: memref<2x3x11x11xf32>, %w: memref<8x3x3x3xf32>, %y: memref<2x8x5x5xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @k0::@k0 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<20x30xf32>, %b : memref<30x40xf32>, %c : memref<20x40xf32>)
    gpu.launch_func @k1::@k1 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<20x30xf32>, %bt : memref<40x30xf32>, %c : memref<20x40xf32>)
    gpu.launch_func @k2::@k2 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<2x3x11x11xf32>, %w : memref<8x3x3x3xf32>, %y : memref<2x8x5x5xf32>)
    return
  }
  gpu.module @k0 {
    gpu.func @k0(%a: memref<20x30xf32>, %b: memref<30x40xf32>, %c: memref<20x40xf32>) kernel {
      linalg.matmul ins(%a, %b : memref<20x30xf32>, memref<30x40xf32>) outs(%c : memref<20x40xf32>)
      gpu.return
    }
  }
  gpu.module @k1 {
    gpu.func @k1(%a: memref<20x30xf32>, %bt: memref<40x30xf32>, %c: memref<20x40xf32>) kernel {
      linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
          ins(%a, %bt : memref<20x30xf32>, memref<40x30xf32>) outs(%c : memref<20x40xf32>)
      gpu.return
    }
  }
  gpu.module @k2 {
    gpu.func @k2(%x: memref<2x3x11x11xf32>, %w: memref<8x3x3x3xf32>, %y: memref<2x8x5x5xf32>) kernel {
      linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
          ins(%x, %w : memref<2x3x11x11xf32>, memref<8x3x3x3xf32>) outs(%y : memref<2x8x5x5xf32>)
      gpu.return
    }
  }
}
