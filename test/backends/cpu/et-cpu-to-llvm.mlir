// RUN: et-opt %s --et-cpu-to-llvm | FileCheck %s

// Loops, memrefs and arith become the LLVM dialect; a buffer the code allocates goes
// through the payload's allocator (generic functions, defined in payload_c/shim.c); the
// entry point keeps its C interface wrapper.
// CHECK-NOT: linalg.
// CHECK-NOT: memref.
// CHECK: llvm.func @forward(
// CHECK: llvm.call @_mlir_memref_to_llvm_alloc
// CHECK: llvm.fadd
// CHECK: llvm.call @_mlir_memref_to_llvm_free
// CHECK: llvm.func @_mlir_ciface_forward(
#id = affine_map<(d0) -> (d0)>
func.func @forward(%x: memref<?xf32>, %out: memref<?xf32>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %tmp = memref.alloc(%n) : memref<?xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : memref<?xf32>) outs(%tmp : memref<?xf32>) {
  ^bb0(%in: f32, %o: f32):
    %s = arith.addf %in, %in : f32
    linalg.yield %s : f32
  }
  memref.copy %tmp, %out : memref<?xf32> to memref<?xf32>
  memref.dealloc %tmp : memref<?xf32>
  return
}
