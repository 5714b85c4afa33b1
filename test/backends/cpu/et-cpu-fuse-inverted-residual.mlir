// RUN: et-opt %s --split-input-file --pass-pipeline='builtin.module(et-cpu-fuse-inverted-residual)' | FileCheck %s

// MobileNetV2's block: 1x1 (bias, ReLU6) -> depthwise 3x3 (bias, ReLU6) -> 1x1 plus the block's input becomes
// one call with each step's operands and epilogue, where the projection was. The wide buffer goes; the narrow
// one stays, as the bufferization put a later tensor there, which a later call writes whole before reading.
// CHECK-LABEL: func.func @block
// CHECK: %[[N:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: call @etmlir_uk_depthwise_conv2d_nchw_chw_ep
// CHECK: call @etmlir_uk_inverted_residual_ep(%[[X:.*]], %[[P1:.*]], %[[B1:.*]], %[[M1:.*]], %[[LO:.*]], %[[HI:.*]], %[[F:.*]], %[[C1:.*]], %[[C1]], %[[B1]], %[[M2:.*]], %[[LO]], %[[HI]], %[[C1]], %[[C1]], %[[P2:.*]], %[[Y:.*]], %[[B3:.*]], %[[X]], %[[M3:.*]], %[[LO]], %[[HI]])
// CHECK-NEXT: %[[D:.*]] = memref.cast %[[N]]
// CHECK-NEXT: call @etmlir_uk_conv2d_packed_ep(%[[X]], %[[P1]], %[[D]],
// CHECK: func.func private @etmlir_uk_inverted_residual_ep(memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, i64, f32, f32, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64, i64, memref<?xf32, strided<[?], offset: ?>>, i64, f32, f32, i64, i64, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, f32, f32)
!m4 = memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
!m3 = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!m1 = memref<?xf32, strided<[?], offset: ?>>
func.func private @etmlir_uk_conv2d_packed_ep(!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32)
func.func private @etmlir_uk_depthwise_conv2d_nchw_chw_ep(!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64)
func.func @block(%arg0: memref<1x4x8x8xf32>, %p1: memref<2x4x14xf32>, %f: memref<16x3x3xf32>, %p2: memref<1x16x14xf32>, %b1: memref<16xf32>, %b3: memref<4xf32>, %y: memref<1x4x8x8xf32>) {
  %c1 = arith.constant 1 : i64
  %cd = arith.constant 1 : i64
  %m1 = arith.constant 146 : i64
  %m2 = arith.constant 146 : i64
  %m3 = arith.constant 10 : i64
  %lo = arith.constant 0.0 : f32
  %hi = arith.constant 6.0 : f32
  %x = memref.cast %arg0 : memref<1x4x8x8xf32> to !m4
  %pp1 = memref.cast %p1 : memref<2x4x14xf32> to !m3
  %pp2 = memref.cast %p2 : memref<1x16x14xf32> to !m3
  %ff = memref.cast %f : memref<16x3x3xf32> to !m3
  %bb1 = memref.cast %b1 : memref<16xf32> to !m1
  %bb3 = memref.cast %b3 : memref<4xf32> to !m1
  %wide = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %e = memref.cast %wide : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%x, %pp1, %e, %c1, %c1, %c1, %c1, %c1, %c1, %bb1, %e, %m1, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  %narrow = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %d = memref.cast %narrow : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_depthwise_conv2d_nchw_chw_ep(%e, %ff, %d, %c1, %c1, %cd, %cd, %bb1, %d, %m2, %lo, %hi, %c1, %c1) : (!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64) -> ()
  memref.dealloc %wide : memref<1x16x8x8xf32>
  %yy = memref.cast %y : memref<1x4x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%d, %pp2, %yy, %c1, %c1, %c1, %c1, %c1, %c1, %bb3, %x, %m3, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  %d2 = memref.cast %narrow : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%x, %pp1, %d2, %c1, %c1, %c1, %c1, %c1, %c1, %bb1, %d2, %m2, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  memref.dealloc %narrow : memref<1x16x8x8xf32>
  return
}

// -----

// A later call that accumulates into the narrow buffer reads the depthwise output: left as it is.
// CHECK-LABEL: func.func @read_later
// CHECK-NOT: etmlir_uk_inverted_residual_ep
!m4 = memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
!m3 = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!m1 = memref<?xf32, strided<[?], offset: ?>>
func.func private @etmlir_uk_conv2d_packed_ep(!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32)
func.func private @etmlir_uk_depthwise_conv2d_nchw_chw_ep(!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64)
func.func @read_later(%arg0: memref<1x4x8x8xf32>, %p1: memref<2x4x14xf32>, %f: memref<16x3x3xf32>, %p2: memref<1x16x14xf32>, %b1: memref<16xf32>, %b3: memref<4xf32>, %y: memref<1x4x8x8xf32>) {
  %c1 = arith.constant 1 : i64
  %cd = arith.constant 1 : i64
  %m1 = arith.constant 146 : i64
  %m2 = arith.constant 146 : i64
  %m3 = arith.constant 10 : i64
  %lo = arith.constant 0.0 : f32
  %hi = arith.constant 6.0 : f32
  %x = memref.cast %arg0 : memref<1x4x8x8xf32> to !m4
  %pp1 = memref.cast %p1 : memref<2x4x14xf32> to !m3
  %pp2 = memref.cast %p2 : memref<1x16x14xf32> to !m3
  %ff = memref.cast %f : memref<16x3x3xf32> to !m3
  %bb1 = memref.cast %b1 : memref<16xf32> to !m1
  %bb3 = memref.cast %b3 : memref<4xf32> to !m1
  %wide = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %e = memref.cast %wide : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%x, %pp1, %e, %c1, %c1, %c1, %c1, %c1, %c1, %bb1, %e, %m1, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  %narrow = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %d = memref.cast %narrow : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_depthwise_conv2d_nchw_chw_ep(%e, %ff, %d, %c1, %c1, %cd, %cd, %bb1, %d, %m2, %lo, %hi, %c1, %c1) : (!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64) -> ()
  memref.dealloc %wide : memref<1x16x8x8xf32>
  %yy = memref.cast %y : memref<1x4x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%d, %pp2, %yy, %c1, %c1, %c1, %c1, %c1, %c1, %bb3, %x, %m3, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  %c0 = arith.constant 0 : i64
  call @etmlir_uk_conv2d_packed_ep(%x, %pp1, %d, %c1, %c1, %c1, %c1, %c1, %c1, %bb1, %d, %c0, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  memref.dealloc %narrow : memref<1x16x8x8xf32>
  return
}

// -----

// An expansion that accumulates into its buffer (mode 0) reads what it held before: left as it is.
// CHECK-LABEL: func.func @accumulating_expansion
// CHECK-NOT: etmlir_uk_inverted_residual_ep
!m4 = memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
!m3 = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!m1 = memref<?xf32, strided<[?], offset: ?>>
func.func private @etmlir_uk_conv2d_packed_ep(!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32)
func.func private @etmlir_uk_depthwise_conv2d_nchw_chw_ep(!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64)
func.func @accumulating_expansion(%arg0: memref<1x4x8x8xf32>, %p1: memref<2x4x14xf32>, %f: memref<16x3x3xf32>, %p2: memref<1x16x14xf32>, %b1: memref<16xf32>, %b3: memref<4xf32>, %y: memref<1x4x8x8xf32>) {
  %c1 = arith.constant 1 : i64
  %cd = arith.constant 1 : i64
  %m1 = arith.constant 0 : i64
  %m2 = arith.constant 146 : i64
  %m3 = arith.constant 10 : i64
  %lo = arith.constant 0.0 : f32
  %hi = arith.constant 6.0 : f32
  %x = memref.cast %arg0 : memref<1x4x8x8xf32> to !m4
  %pp1 = memref.cast %p1 : memref<2x4x14xf32> to !m3
  %pp2 = memref.cast %p2 : memref<1x16x14xf32> to !m3
  %ff = memref.cast %f : memref<16x3x3xf32> to !m3
  %bb1 = memref.cast %b1 : memref<16xf32> to !m1
  %bb3 = memref.cast %b3 : memref<4xf32> to !m1
  %wide = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %e = memref.cast %wide : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%x, %pp1, %e, %c1, %c1, %c1, %c1, %c1, %c1, %bb1, %e, %m1, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  %narrow = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %d = memref.cast %narrow : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_depthwise_conv2d_nchw_chw_ep(%e, %ff, %d, %c1, %c1, %cd, %cd, %bb1, %d, %m2, %lo, %hi, %c1, %c1) : (!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64) -> ()
  memref.dealloc %wide : memref<1x16x8x8xf32>
  %yy = memref.cast %y : memref<1x4x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%d, %pp2, %yy, %c1, %c1, %c1, %c1, %c1, %c1, %bb3, %x, %m3, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  memref.dealloc %narrow : memref<1x16x8x8xf32>
  return
}

// -----

// Work between the calls (the fused call runs where the projection was): left as it is.
// CHECK-LABEL: func.func @work_between
// CHECK: linalg.fill
// CHECK-NOT: etmlir_uk_inverted_residual_ep
!m4 = memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
!m3 = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!m1 = memref<?xf32, strided<[?], offset: ?>>
func.func private @etmlir_uk_conv2d_packed_ep(!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32)
func.func private @etmlir_uk_depthwise_conv2d_nchw_chw_ep(!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64)
func.func @work_between(%arg0: memref<1x4x8x8xf32>, %p1: memref<2x4x14xf32>, %f: memref<16x3x3xf32>, %p2: memref<1x16x14xf32>, %b1: memref<16xf32>, %b3: memref<4xf32>, %y: memref<1x4x8x8xf32>) {
  %c1 = arith.constant 1 : i64
  %cd = arith.constant 1 : i64
  %m1 = arith.constant 146 : i64
  %m2 = arith.constant 146 : i64
  %m3 = arith.constant 10 : i64
  %lo = arith.constant 0.0 : f32
  %hi = arith.constant 6.0 : f32
  %x = memref.cast %arg0 : memref<1x4x8x8xf32> to !m4
  %pp1 = memref.cast %p1 : memref<2x4x14xf32> to !m3
  %pp2 = memref.cast %p2 : memref<1x16x14xf32> to !m3
  %ff = memref.cast %f : memref<16x3x3xf32> to !m3
  %bb1 = memref.cast %b1 : memref<16xf32> to !m1
  %bb3 = memref.cast %b3 : memref<4xf32> to !m1
  %wide = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %e = memref.cast %wide : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%x, %pp1, %e, %c1, %c1, %c1, %c1, %c1, %c1, %bb1, %e, %m1, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  %narrow = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %d = memref.cast %narrow : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_depthwise_conv2d_nchw_chw_ep(%e, %ff, %d, %c1, %c1, %cd, %cd, %bb1, %d, %m2, %lo, %hi, %c1, %c1) : (!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64) -> ()
  memref.dealloc %wide : memref<1x16x8x8xf32>
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%arg0 : memref<1x4x8x8xf32>)
  %yy = memref.cast %y : memref<1x4x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%d, %pp2, %yy, %c1, %c1, %c1, %c1, %c1, %c1, %bb3, %x, %m3, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  memref.dealloc %narrow : memref<1x16x8x8xf32>
  return
}

// -----

// A dilated depthwise convolution is not the kernel's: left as it is.
// CHECK-LABEL: func.func @dilated
// CHECK-NOT: etmlir_uk_inverted_residual_ep
!m4 = memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
!m3 = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!m1 = memref<?xf32, strided<[?], offset: ?>>
func.func private @etmlir_uk_conv2d_packed_ep(!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32)
func.func private @etmlir_uk_depthwise_conv2d_nchw_chw_ep(!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64)
func.func @dilated(%arg0: memref<1x4x8x8xf32>, %p1: memref<2x4x14xf32>, %f: memref<16x3x3xf32>, %p2: memref<1x16x14xf32>, %b1: memref<16xf32>, %b3: memref<4xf32>, %y: memref<1x4x8x8xf32>) {
  %c1 = arith.constant 1 : i64
  %cd = arith.constant 2 : i64
  %m1 = arith.constant 146 : i64
  %m2 = arith.constant 146 : i64
  %m3 = arith.constant 10 : i64
  %lo = arith.constant 0.0 : f32
  %hi = arith.constant 6.0 : f32
  %x = memref.cast %arg0 : memref<1x4x8x8xf32> to !m4
  %pp1 = memref.cast %p1 : memref<2x4x14xf32> to !m3
  %pp2 = memref.cast %p2 : memref<1x16x14xf32> to !m3
  %ff = memref.cast %f : memref<16x3x3xf32> to !m3
  %bb1 = memref.cast %b1 : memref<16xf32> to !m1
  %bb3 = memref.cast %b3 : memref<4xf32> to !m1
  %wide = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %e = memref.cast %wide : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%x, %pp1, %e, %c1, %c1, %c1, %c1, %c1, %c1, %bb1, %e, %m1, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  %narrow = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %d = memref.cast %narrow : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_depthwise_conv2d_nchw_chw_ep(%e, %ff, %d, %c1, %c1, %cd, %cd, %bb1, %d, %m2, %lo, %hi, %c1, %c1) : (!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64) -> ()
  memref.dealloc %wide : memref<1x16x8x8xf32>
  %yy = memref.cast %y : memref<1x4x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%d, %pp2, %yy, %c1, %c1, %c1, %c1, %c1, %c1, %bb3, %x, %m3, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  memref.dealloc %narrow : memref<1x16x8x8xf32>
  return
}

// -----

// The projection writes the block's input in place: a band's output rows would overwrite input rows a later
// band still reads. Left as it is.
// CHECK-LABEL: func.func @in_place
// CHECK-NOT: etmlir_uk_inverted_residual_ep
!m4 = memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
!m3 = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!m1 = memref<?xf32, strided<[?], offset: ?>>
func.func private @etmlir_uk_conv2d_packed_ep(!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32)
func.func private @etmlir_uk_depthwise_conv2d_nchw_chw_ep(!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64)
func.func @in_place(%arg0: memref<1x4x8x8xf32>, %p1: memref<2x4x14xf32>, %f: memref<16x3x3xf32>, %p2: memref<1x16x14xf32>, %b1: memref<16xf32>, %b3: memref<4xf32>, %y: memref<1x4x8x8xf32>) {
  %c1 = arith.constant 1 : i64
  %cd = arith.constant 1 : i64
  %m1 = arith.constant 146 : i64
  %m2 = arith.constant 146 : i64
  %m3 = arith.constant 10 : i64
  %lo = arith.constant 0.0 : f32
  %hi = arith.constant 6.0 : f32
  %x = memref.cast %arg0 : memref<1x4x8x8xf32> to !m4
  %pp1 = memref.cast %p1 : memref<2x4x14xf32> to !m3
  %pp2 = memref.cast %p2 : memref<1x16x14xf32> to !m3
  %ff = memref.cast %f : memref<16x3x3xf32> to !m3
  %bb1 = memref.cast %b1 : memref<16xf32> to !m1
  %bb3 = memref.cast %b3 : memref<4xf32> to !m1
  %wide = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %e = memref.cast %wide : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%x, %pp1, %e, %c1, %c1, %c1, %c1, %c1, %c1, %bb1, %e, %m1, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  %narrow = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %d = memref.cast %narrow : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_depthwise_conv2d_nchw_chw_ep(%e, %ff, %d, %c1, %c1, %cd, %cd, %bb1, %d, %m2, %lo, %hi, %c1, %c1) : (!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64) -> ()
  memref.dealloc %wide : memref<1x16x8x8xf32>
  %yy = memref.cast %arg0 : memref<1x4x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%d, %pp2, %yy, %c1, %c1, %c1, %c1, %c1, %c1, %bb3, %x, %m3, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  memref.dealloc %narrow : memref<1x16x8x8xf32>
  return
}

// -----

// The projection adds the depthwise output itself as its residual: left as it is.
// CHECK-LABEL: func.func @residual_of_the_depthwise_output
// CHECK-NOT: etmlir_uk_inverted_residual_ep
!m4 = memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
!m3 = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!m1 = memref<?xf32, strided<[?], offset: ?>>
func.func private @etmlir_uk_conv2d_packed_ep(!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32)
func.func private @etmlir_uk_depthwise_conv2d_nchw_chw_ep(!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64)
func.func @residual_of_the_depthwise_output(%arg0: memref<1x4x8x8xf32>, %p1: memref<2x4x14xf32>, %f: memref<16x3x3xf32>, %p2: memref<1x16x14xf32>, %b1: memref<16xf32>, %b3: memref<4xf32>, %y: memref<1x4x8x8xf32>) {
  %c1 = arith.constant 1 : i64
  %cd = arith.constant 1 : i64
  %m1 = arith.constant 146 : i64
  %m2 = arith.constant 146 : i64
  %m3 = arith.constant 10 : i64
  %lo = arith.constant 0.0 : f32
  %hi = arith.constant 6.0 : f32
  %x = memref.cast %arg0 : memref<1x4x8x8xf32> to !m4
  %pp1 = memref.cast %p1 : memref<2x4x14xf32> to !m3
  %pp2 = memref.cast %p2 : memref<1x16x14xf32> to !m3
  %ff = memref.cast %f : memref<16x3x3xf32> to !m3
  %bb1 = memref.cast %b1 : memref<16xf32> to !m1
  %bb3 = memref.cast %b3 : memref<4xf32> to !m1
  %wide = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %e = memref.cast %wide : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%x, %pp1, %e, %c1, %c1, %c1, %c1, %c1, %c1, %bb1, %e, %m1, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  %narrow = memref.alloc() {alignment = 64 : i64} : memref<1x16x8x8xf32>
  %d = memref.cast %narrow : memref<1x16x8x8xf32> to !m4
  call @etmlir_uk_depthwise_conv2d_nchw_chw_ep(%e, %ff, %d, %c1, %c1, %cd, %cd, %bb1, %d, %m2, %lo, %hi, %c1, %c1) : (!m4, !m3, !m4, i64, i64, i64, i64, !m1, !m4, i64, f32, f32, i64, i64) -> ()
  memref.dealloc %wide : memref<1x16x8x8xf32>
  %yy = memref.cast %y : memref<1x4x8x8xf32> to !m4
  call @etmlir_uk_conv2d_packed_ep(%d, %pp2, %yy, %c1, %c1, %c1, %c1, %c1, %c1, %bb3, %d, %m3, %lo, %hi) : (!m4, !m3, !m4, i64, i64, i64, i64, i64, i64, !m1, !m4, i64, f32, f32) -> ()
  memref.dealloc %narrow : memref<1x16x8x8xf32>
  return
}
