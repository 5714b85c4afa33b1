// RUN: not et-opt %s --split-input-file --et-vulkan-outline-kernels 2>&1 | FileCheck %s

// A host op the dispatch graph cannot express is an error naming it and its line.
// CHECK: model.py:9:1: error: et-vulkan-outline-kernels: 'memref.load' cannot run on the host of a vulkan delegate
func.func @forward(%x: memref<4xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %x[%c0] : memref<4xf32> loc("model.py":9:1)
  memref.store %v, %out[] : memref<f32>
  return
}

// -----

// CHECK: model.py:12:1: error: et-vulkan-outline-kernels: the module has no func.func @forward
module {
  func.func @main(%x: memref<4xf32>) {
    return
  }
} loc("model.py":12:1)
