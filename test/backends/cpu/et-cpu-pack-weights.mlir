// RUN: et-opt %s --split-input-file --pass-pipeline='builtin.module(et-cpu-pack-weights{panel-rows=2 panel-width=4 winograd-min-channels=1 winograd2-min-channels=1})' | FileCheck %s
// RUN: not et-opt %s --split-input-file --pass-pipeline='builtin.module(et-cpu-pack-weights{panel-rows=-1})' 2>&1 | FileCheck %s --check-prefix=BAD

// A panel size the kernels cannot have is refused before anything is packed.
// BAD: et-cpu-pack-weights: option panel-rows=-1: must be >= 0

// A matmul by a constant B reads it from panels packed at compile time: [ceil(N / 4), K, 4], panel p
// holding columns [4p, 4p + 4) row by row, zeros past N. The plain kernel becomes the packed _ep kernel
// with mode 0 (accumulate, no bounds); the old global goes, as nothing else reads it.
// CHECK-NOT: @w :
// CHECK: memref.global "private" constant @w_panels : memref<2x2x4xf32> = dense<{{\[}}{{\[}}[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00], [7.000000e+00, 8.000000e+00, 9.000000e+00, 1.000000e+01]], {{\[}}[5.000000e+00, 6.000000e+00, 0.000000e+00, 0.000000e+00], [1.100000e+01, 1.200000e+01, 0.000000e+00, 0.000000e+00]]]> {alignment = 64 : i64}
// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.*]] = memref.get_global @w_panels : memref<2x2x4xf32>
// CHECK: %[[B:.*]] = memref.cast %[[P]] : memref<2x2x4xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
// CHECK: %[[MODE:.*]] = arith.constant 0 : i64
// CHECK: call @etmlir_uk_matmul_packed_ep(%{{.*}}, %[[B]], %[[C:.*]], %{{.*}}, %[[C]], %[[MODE]], %{{.*}}, %{{.*}})
// CHECK-NOT: call @etmlir_uk_matmul(
// CHECK: func.func private @etmlir_uk_matmul_packed_ep(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, i64, f32, f32)
module {
  memref.global "private" constant @w : memref<2x6xf32> = dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [7.0, 8.0, 9.0, 10.0, 11.0, 12.0]]>
  func.func private @etmlir_uk_matmul(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>)
  func.func @forward(%a: memref<5x2xf32>, %c: memref<5x6xf32>) {
    %0 = memref.get_global @w : memref<2x6xf32>
    %a1 = memref.cast %a : memref<5x2xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
    %b1 = memref.cast %0 : memref<2x6xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
    %c1 = memref.cast %c : memref<5x6xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
    func.call @etmlir_uk_matmul(%a1, %b1, %c1) : (memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>) -> ()
    return
  }
}

// -----

// An _ep call keeps its epilogue operands; a global something else reads too stays beside its panels,
// and a second matmul by the same weight shares the one packed copy.
// CHECK: memref.global "private" constant @w_panels : memref<1x2x4xf32>
// CHECK: memref.global "private" constant @w : memref<2x3xf32>
// CHECK-LABEL: func.func @forward
// CHECK: memref.copy
// CHECK: call @etmlir_uk_matmul_packed_ep(%{{.*}}, %{{.*}}, %{{.*}}, %[[BIAS:.*]], %[[RES:.*]], %[[MODE:.*]], %[[LO:.*]], %[[HI:.*]]) :
// CHECK: call @etmlir_uk_matmul_packed_ep(%{{.*}}, %{{.*}}, %{{.*}}, %[[BIAS]], %[[RES]], %[[MODE]], %[[LO]], %[[HI]]) :
module {
  memref.global "private" constant @w : memref<2x3xf32> = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]>
  func.func private @etmlir_uk_matmul_ep(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, i64, f32, f32)
  func.func @forward(%a: memref<5x2xf32>, %c: memref<5x3xf32>, %bias: memref<3xf32>, %copy: memref<2x3xf32>) {
    %0 = memref.get_global @w : memref<2x3xf32>
    memref.copy %0, %copy : memref<2x3xf32> to memref<2x3xf32>
    %a1 = memref.cast %a : memref<5x2xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
    %b1 = memref.cast %0 : memref<2x3xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
    %c1 = memref.cast %c : memref<5x3xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
    %bias1 = memref.cast %bias : memref<3xf32> to memref<?xf32, strided<[?], offset: ?>>
    %mode = arith.constant 37 : i64
    %lo = arith.constant 0.0 : f32
    %hi = arith.constant 0.0 : f32
    func.call @etmlir_uk_matmul_ep(%a1, %b1, %c1, %bias1, %c1, %mode, %lo, %hi) : (memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, i64, f32, f32) -> ()
    func.call @etmlir_uk_matmul_ep(%a1, %b1, %c1, %bias1, %c1, %mode, %lo, %hi) : (memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, i64, f32, f32) -> ()
    return
  }
}

// -----

// Left alone: a B that is an argument, a splat, and a B whose padding to whole panels would more than
// double it (N = 1 -> 4 at width 4).
// CHECK-LABEL: func.func @forward
// CHECK-NOT: packed
// CHECK-COUNT-3: call @etmlir_uk_matmul(
// CHECK-NOT: packed
module {
  memref.global "private" constant @splat : memref<2x4xf32> = dense<1.0>
  memref.global "private" constant @ragged : memref<2x1xf32> = dense<[[1.0], [2.0]]>
  func.func private @etmlir_uk_matmul(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>)
  func.func @forward(%a: memref<?x?xf32, strided<[?, ?], offset: ?>>, %b: memref<?x?xf32, strided<[?, ?], offset: ?>>, %c: memref<?x?xf32, strided<[?, ?], offset: ?>>) {
    func.call @etmlir_uk_matmul(%a, %b, %c) : (memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>) -> ()
    %0 = memref.get_global @splat : memref<2x4xf32>
    %s = memref.cast %0 : memref<2x4xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
    func.call @etmlir_uk_matmul(%a, %s, %c) : (memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>) -> ()
    %1 = memref.get_global @ragged : memref<2x1xf32>
    %r = memref.cast %1 : memref<2x1xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
    func.call @etmlir_uk_matmul(%a, %r, %c) : (memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>) -> ()
    return
  }
}

// -----

// A convolution's filter [F, C, KH, KW] is A = [F, C*KH*KW] in panels of 2 rows: [ceil(F / 2), K, 2],
// panel p holding rows 2p and 2p + 1 column by column, zeros past F. The call gains the window (kh, kw)
// after the strides and dilations, and the plain kernel the epilogue operands.
// CHECK: memref.global "private" constant @f_panels : memref<2x2x2xf32> = dense<{{\[}}{{\[}}[1.000000e+00, 3.000000e+00], [2.000000e+00, 4.000000e+00]], {{\[}}[5.000000e+00, 0.000000e+00], [6.000000e+00, 0.000000e+00]]]>
// CHECK-LABEL: func.func @forward
// CHECK: %[[KH:.*]] = arith.constant 2 : i64
// CHECK: %[[KW:.*]] = arith.constant 1 : i64
// CHECK: call @etmlir_uk_conv2d_packed_ep(%{{.*}}, %{{.*}}, %[[OUT:[^,]*]], %[[S:[^,]*]], %[[S]], %[[S]], %[[S]], %[[KH]], %[[KW]], %{{.*}}, %[[OUT]], %{{.*}}, %{{.*}}, %{{.*}}) :
// CHECK: func.func private @etmlir_uk_conv2d_packed_ep(memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, i64, i64, i64, i64, i64, memref<?xf32, strided<[?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, f32, f32)
module {
  memref.global "private" constant @f : memref<3x1x2x1xf32> = dense<[[[[1.0], [2.0]]], [[[3.0], [4.0]]], [[[5.0], [6.0]]]]>
  func.func private @etmlir_uk_conv2d_nchw_fchw(memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, i64, i64, i64)
  func.func @forward(%in: memref<1x1x4x4xf32>, %out: memref<1x3x3x4xf32>) {
    %0 = memref.get_global @f : memref<3x1x2x1xf32>
    %i = memref.cast %in : memref<1x1x4x4xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %w = memref.cast %0 : memref<3x1x2x1xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %o = memref.cast %out : memref<1x3x3x4xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %one = arith.constant 1 : i64
    func.call @etmlir_uk_conv2d_nchw_fchw(%i, %w, %o, %one, %one, %one, %one) : (memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, i64, i64, i64) -> ()
    return
  }
}

// -----

// A 3x3 stride-1 convolution with enough channels (here 1) and output tiles goes through Winograd
// F(m x m, 3x3): its filter g becomes U = G g G^T, each of the (m + 2)^2 elements an [F, C] matrix in
// row panels, one after another: [(m + 2)^2 * ceil(F / 2), C, 2]. 16 x 32 outputs have 32 tiles of 4 x 4
// (m = 4); 8 x 16 outputs 8 of those but 32 of 2 x 2 (m = 2: for g = the centre tap, U = u u^T with
// u = (0, .5, -.5, 0)). The calls lose their strides and dilations. The same filter with 4 tiles, or at
// stride 2, reads the plain row panels; the old global goes.
// CHECK-NOT: @g :
// CHECK: memref.global "private" constant @g_winograd4 : memref<36x1x2xf32>
// CHECK: memref.global "private" constant @g_winograd2 : memref<16x1x2xf32> = dense<{{\[}}{{\[}}[0.000000e+00, 0.000000e+00]], {{\[}}[0.000000e+00, 0.000000e+00]], {{\[}}[0.000000e+00, 0.000000e+00]], {{\[}}[0.000000e+00, 0.000000e+00]], {{\[}}[0.000000e+00, 0.000000e+00]], {{\[}}[2.500000e-01, 0.000000e+00]], {{\[}}[-2.500000e-01, 0.000000e+00]], {{\[}}[0.000000e+00, 0.000000e+00]], {{\[}}[0.000000e+00, 0.000000e+00]], {{\[}}[-2.500000e-01, 0.000000e+00]], {{\[}}[2.500000e-01, 0.000000e+00]],
// CHECK: memref.global "private" constant @g_panels : memref<1x9x2xf32>
// CHECK-LABEL: func.func @forward
// CHECK: %[[U4:.*]] = memref.get_global @g_winograd4
// CHECK: %[[UC4:.*]] = memref.cast %[[U4]]
// CHECK: call @etmlir_uk_conv2d_winograd_ep(%{{.*}}, %[[UC4]], %[[BIG:[^,]*]], %{{.*}}, %[[BIG]], %{{.*}}, %{{.*}}, %{{.*}}) :
// CHECK: %[[U:.*]] = memref.get_global @g_winograd2
// CHECK: %[[UC:.*]] = memref.cast %[[U]]
// CHECK: call @etmlir_uk_conv2d_winograd_ep(%{{.*}}, %[[UC]], %[[OUT:[^,]*]], %{{.*}}, %[[OUT]], %{{.*}}, %{{.*}}, %{{.*}}) :
// CHECK-COUNT-2: call @etmlir_uk_conv2d_packed_ep(
// CHECK: func.func private @etmlir_uk_conv2d_winograd_ep(memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, f32, f32)
module {
  memref.global "private" constant @g : memref<1x1x3x3xf32> = dense<[[[[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]]]>
  func.func private @etmlir_uk_conv2d_nchw_fchw(memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, i64, i64, i64)
  func.func @forward(%in: memref<1x1x10x18xf32>, %out: memref<1x1x8x16xf32>, %small: memref<1x1x4x4xf32>, %half: memref<1x1x4x8xf32>, %bigin: memref<1x1x18x34xf32>, %bigout: memref<1x1x16x32xf32>) {
    %0 = memref.get_global @g : memref<1x1x3x3xf32>
    %w = memref.cast %0 : memref<1x1x3x3xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %i = memref.cast %in : memref<1x1x10x18xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %o = memref.cast %out : memref<1x1x8x16xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %s = memref.cast %small : memref<1x1x4x4xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %h = memref.cast %half : memref<1x1x4x8xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %bi = memref.cast %bigin : memref<1x1x18x34xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %bo = memref.cast %bigout : memref<1x1x16x32xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %one = arith.constant 1 : i64
    %two = arith.constant 2 : i64
    func.call @etmlir_uk_conv2d_nchw_fchw(%bi, %w, %bo, %one, %one, %one, %one) : (memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, i64, i64, i64) -> ()
    func.call @etmlir_uk_conv2d_nchw_fchw(%i, %w, %o, %one, %one, %one, %one) : (memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, i64, i64, i64) -> ()
    func.call @etmlir_uk_conv2d_nchw_fchw(%i, %w, %s, %one, %one, %one, %one) : (memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, i64, i64, i64) -> ()
    func.call @etmlir_uk_conv2d_nchw_fchw(%i, %w, %h, %two, %two, %one, %one) : (memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, i64, i64, i64) -> ()
    return
  }
}

// -----

// F(4x4) with 9 to 31 tiles of 4x4 takes twice winograd-min-channels (here 2): the 2-channel filter at
// 12 x 12 (9 tiles, every output real) goes through it, the 1-channel one through F(2x2) (36 tiles of
// 2x2). At 13 x 13, the 4x4 tiles compute 16 x 16 (66% real, under 3/4): F(2x2) (49 tiles).
// CHECK-DAG: memref.global "private" constant @two_winograd4 : memref<36x2x2xf32>
// CHECK-DAG: memref.global "private" constant @two_winograd2 : memref<16x2x2xf32>
// CHECK-DAG: memref.global "private" constant @one_winograd2 : memref<16x1x2xf32>
// CHECK-LABEL: func.func @forward
// CHECK: memref.get_global @two_winograd4
// CHECK: call @etmlir_uk_conv2d_winograd_ep(
// CHECK: memref.get_global @two_winograd2
// CHECK: call @etmlir_uk_conv2d_winograd_ep(
// CHECK: memref.get_global @one_winograd2
// CHECK: call @etmlir_uk_conv2d_winograd_ep(
// CHECK-NOT: @one_winograd4
module {
  memref.global "private" constant @two : memref<2x2x3x3xf32> = dense<[[[[-2.0, -1.0, 0.0], [1.0, 2.0, -2.0], [-1.0, 0.0, 1.0]], [[2.0, -2.0, -1.0], [0.0, 1.0, 2.0], [-2.0, -1.0, 0.0]]], [[[1.0, 2.0, -2.0], [-1.0, 0.0, 1.0], [2.0, -2.0, -1.0]], [[0.0, 1.0, 2.0], [-2.0, -1.0, 0.0], [1.0, 2.0, -2.0]]]]>
  memref.global "private" constant @one : memref<1x1x3x3xf32> = dense<[[[[0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 2.0]]]]>
  func.func private @etmlir_uk_conv2d_nchw_fchw(memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, i64, i64, i64)
  func.func @forward(%in2: memref<1x2x15x15xf32>, %out12: memref<1x2x12x12xf32>, %out13: memref<1x2x13x13xf32>, %in1: memref<1x1x14x14xf32>, %out1: memref<1x1x12x12xf32>) {
    %0 = memref.get_global @two : memref<2x2x3x3xf32>
    %1 = memref.get_global @one : memref<1x1x3x3xf32>
    %w2 = memref.cast %0 : memref<2x2x3x3xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %w1 = memref.cast %1 : memref<1x1x3x3xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %i2 = memref.cast %in2 : memref<1x2x15x15xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %o12 = memref.cast %out12 : memref<1x2x12x12xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %o13 = memref.cast %out13 : memref<1x2x13x13xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %i1 = memref.cast %in1 : memref<1x1x14x14xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %o1 = memref.cast %out1 : memref<1x1x12x12xf32> to memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>
    %one = arith.constant 1 : i64
    func.call @etmlir_uk_conv2d_nchw_fchw(%i2, %w2, %o12, %one, %one, %one, %one) : (memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, i64, i64, i64) -> ()
    func.call @etmlir_uk_conv2d_nchw_fchw(%i2, %w2, %o13, %one, %one, %one, %one) : (memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, i64, i64, i64) -> ()
    func.call @etmlir_uk_conv2d_nchw_fchw(%i1, %w1, %o1, %one, %one, %one, %one) : (memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, i64, i64, i64) -> ()
    return
  }
}
