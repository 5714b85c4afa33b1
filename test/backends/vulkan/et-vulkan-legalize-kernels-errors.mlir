// RUN: not et-opt %s --et-vulkan-legalize-kernels 2>&1 | FileCheck %s

// Any other f64 arithmetic is an error naming the op and its line.
// CHECK: model.py:4:2: error: et-vulkan-legalize-kernels: 'arith.extf' computes in f64; the vulkan backend's kernels are f32 (no Float64 capability)
module attributes {gpu.container_module} {
  gpu.module @k0 {
    gpu.func @k0(%x: memref<4xf32>, %y: memref<4xf64>) kernel {
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%c0] : memref<4xf32>
      %d = arith.extf %v : f32 to f64 loc("model.py":4:2)
      memref.store %d, %y[%c0] : memref<4xf64>
      gpu.return
    }
  }
}
