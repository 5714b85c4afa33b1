// RUN: et-opt %s --split-input-file --et-cpu-microkernels | FileCheck %s

// A matmul becomes a call of the payload's microkernel on fully dynamic strided memrefs.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: linalg.matmul
// CHECK: %[[A:.*]] = memref.cast %arg0 : memref<2x8xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
// CHECK: call @etmlir_uk_matmul(%[[A]], %{{.*}}, %{{.*}})
// CHECK: func.func private @etmlir_uk_matmul(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>)
func.func @forward(%a: memref<2x8xf32>, %b: memref<8x4xf32>, %c: memref<2x4xf32>) {
  linalg.matmul ins(%a, %b : memref<2x8xf32>, memref<8x4xf32>) outs(%c : memref<2x4xf32>)
  return
}

// -----

// A convolution passes its strides and dilations after the operands, as i64 constants.
// CHECK-LABEL: func.func @conv
// CHECK: %[[S0:.*]] = arith.constant 2 : i64
// CHECK: %[[S1:.*]] = arith.constant 2 : i64
// CHECK: %[[D0:.*]] = arith.constant 1 : i64
// CHECK: %[[D1:.*]] = arith.constant 1 : i64
// CHECK: call @etmlir_uk_conv2d_nchw_fchw(%{{.*}}, %{{.*}}, %{{.*}}, %[[S0]], %[[S1]], %[[D0]], %[[D1]])
// CHECK: func.func private @etmlir_uk_conv2d_nchw_fchw
func.func @conv(%x: memref<1x3x8x8xf32>, %w: memref<4x3x3x3xf32>, %y: memref<1x4x3x3xf32>) {
  linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
    ins(%x, %w : memref<1x3x8x8xf32>, memref<4x3x3x3xf32>) outs(%y : memref<1x4x3x3xf32>)
  return
}

// -----

// No kernel takes f64: the matmul stays for the generic lowering, and nothing is declared.
// CHECK-LABEL: func.func @double
// CHECK: linalg.matmul
// CHECK-NOT: call
// CHECK-NOT: etmlir_uk_
func.func @double(%a: memref<2x8xf64>, %b: memref<8x4xf64>, %c: memref<2x4xf64>) {
  linalg.matmul ins(%a, %b : memref<2x8xf64>, memref<8x4xf64>) outs(%c : memref<2x4xf64>)
  return
}
