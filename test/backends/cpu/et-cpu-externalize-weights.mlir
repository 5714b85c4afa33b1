// RUN: et-opt %s --split-input-file --et-cpu-externalize-weights="min-bytes=16" | FileCheck %s
// RUN: et-opt %s --split-input-file --et-cpu-externalize-weights | FileCheck %s --check-prefix=DEFAULT

// A weight of at least min-bytes loses its initializer and becomes an external symbol
// (linked from raw bytes later); the module records its value; uses follow the rename.
// Small and splat constants stay in the IR.
// CHECK: module attributes {etmlir.cpu.external_weights = {etmlir_w0 = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00]> : tensor<5xf32>}}
// CHECK: memref.global @etmlir_w0 : memref<5xf32> {alignment = 64 : i64}
// CHECK: memref.global "private" constant @small : memref<2xf32> = dense<[1.000000e+00, 2.000000e+00]>
// CHECK: memref.global "private" constant @splat : memref<8xf32> = dense<1.000000e+00>
// CHECK: memref.get_global @etmlir_w0 : memref<5xf32>
// CHECK: memref.get_global @small
// The default (4096 bytes) leaves these small weights alone.
// DEFAULT-NOT: etmlir.cpu.external_weights
// DEFAULT: memref.global "private" constant @big
module {
  memref.global "private" constant @big : memref<5xf32> = dense<[1.0, 2.0, 3.0, 4.0, 5.0]>
  memref.global "private" constant @small : memref<2xf32> = dense<[1.0, 2.0]>
  memref.global "private" constant @splat : memref<8xf32> = dense<1.0>
  func.func @forward(%out: memref<5xf32>) {
    %0 = memref.get_global @big : memref<5xf32>
    %1 = memref.get_global @small : memref<2xf32>
    %2 = memref.get_global @splat : memref<8xf32>
    memref.copy %0, %out : memref<5xf32> to memref<5xf32>
    return
  }
}
