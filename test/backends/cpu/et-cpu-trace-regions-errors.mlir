// RUN: not et-opt %s --split-input-file --et-cpu-trace-regions 2>&1 | FileCheck %s

// The regions are the delegate entry point's; a module without one is not a cpu delegate.
// CHECK: error: et-cpu-trace-regions: the module has no func.func @forward
func.func @main(%a: memref<4xf32>, %out: memref<4xf32>) {
  memref.copy %a, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

// Bracketing twice would nest every region in a copy of itself.
// CHECK: error: et-cpu-trace-regions: the module's regions are already bracketed (etmlir.cpu_regions is set)
module attributes {etmlir.cpu_regions = []} {
  func.func @forward(%a: memref<4xf32>, %out: memref<4xf32>) {
    return
  }
}
