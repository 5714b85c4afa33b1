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

// -----

// A linear layer with ReLU: the zero fill before the product and the bias + ReLU after it become
// the kernel's epilogue (mode 37 = zero init | bias after | lower bound keeping NaN, ReLU's
// `cmpf ugt` + select), so neither loop is left.
// CHECK-LABEL: func.func @linear_relu
// CHECK-NOT: linalg.fill
// CHECK-NOT: linalg.generic
// CHECK: %[[MODE:.*]] = arith.constant 37 : i64
// CHECK: call @etmlir_uk_matmul_ep(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[MODE]], %{{.*}}, %{{.*}})
func.func @linear_relu(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %bias: memref<16xf32>, %c: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%bias, %c : memref<16xf32>, memref<4x16xf32>) outs(%c : memref<4x16xf32>) {
  ^bb0(%bv: f32, %v: f32, %o: f32):
    %s = arith.addf %bv, %v : f32
    %p = arith.cmpf ugt, %s, %zero : f32
    %r = arith.select %p, %s, %zero : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A convolution with a bias broadcast before it and ReLU6 after it, writing another buffer: mode
// 146 = bias init | NaN -> 0 below (ogt) | NaN kept above (olt), bounds 0 and 6; the kernel writes
// %y directly and the intermediate buffer goes away.
// CHECK-LABEL: func.func @conv_relu6
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.broadcast
// CHECK: %[[Y:.*]] = memref.cast %arg3
// CHECK: %[[MODE:.*]] = arith.constant 146 : i64
// CHECK: %[[LO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[HI:.*]] = arith.constant 6.000000e+00 : f32
// CHECK: call @etmlir_uk_conv2d_nchw_fchw_ep(%{{.*}}, %{{.*}}, %[[Y]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[MODE]], %[[LO]], %[[HI]])
// CHECK-NOT: linalg.generic
func.func @conv_relu6(%x: memref<1x3x8x8xf32>, %w: memref<4x3x3x3xf32>, %bias: memref<4xf32>, %y: memref<1x4x6x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %six = arith.constant 6.0 : f32
  %o = memref.alloc() : memref<1x4x6x6xf32>
  linalg.broadcast ins(%bias : memref<4xf32>) outs(%o : memref<1x4x6x6xf32>) dimensions = [0, 2, 3]
  linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : memref<1x3x8x8xf32>, memref<4x3x3x3xf32>) outs(%o : memref<1x4x6x6xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%o : memref<1x4x6x6xf32>) outs(%y : memref<1x4x6x6xf32>) {
  ^bb0(%v: f32, %out: f32):
    %p = arith.cmpf ogt, %v, %zero : f32
    %r = arith.select %p, %v, %zero : f32
    %q = arith.cmpf olt, %six, %r : f32
    %t = arith.select %q, %six, %r : f32
    linalg.yield %t : f32
  }
  memref.dealloc %o : memref<1x4x6x6xf32>
  return
}

// -----

// A depthwise convolution whose input is a zero-filled buffer with a copy of %x inside: the kernel
// reads %x and pads it itself (the last two arguments: top 2, left 1); the padded buffer, its fill
// and the copy go away.
// CHECK-LABEL: func.func @depthwise_padded
// CHECK-NOT: linalg.map
// CHECK-NOT: linalg.generic
// CHECK-NOT: memref.subview
// CHECK: %[[X:.*]] = memref.cast %arg0
// CHECK: %[[T:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[L:.*]] = arith.constant 1 : i64
// CHECK-NEXT: call @etmlir_uk_depthwise_conv2d_nchw_chw_ep(%[[X]], {{.*}}, %[[T]], %[[L]]) : {{.*}}, i64, f32, f32, i64, i64) -> ()
func.func @depthwise_padded(%x: memref<1x4x6x6xf32>, %w: memref<4x3x3xf32>, %y: memref<1x4x7x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %p = memref.alloc() : memref<1x4x9x8xf32>
  linalg.map outs(%p : memref<1x4x9x8xf32>) (%init: f32) { linalg.yield %zero : f32 }
  %v = memref.subview %p[0, 0, 2, 1] [1, 4, 6, 6] [1, 1, 1, 1] : memref<1x4x9x8xf32> to memref<1x4x6x6xf32, strided<[288, 72, 8, 1], offset: 17>>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : memref<1x4x6x6xf32>) outs(%v : memref<1x4x6x6xf32, strided<[288, 72, 8, 1], offset: 17>>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%zero : f32) outs(%y : memref<1x4x7x6xf32>)
  linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%p, %w : memref<1x4x9x8xf32>, memref<4x3x3xf32>) outs(%y : memref<1x4x7x6xf32>)
  memref.dealloc %p : memref<1x4x9x8xf32>
  return
}

// -----

// An epilogue the kernel cannot express (a multiply) stays a loop; the zero fill is still absorbed.
// CHECK-LABEL: func.func @scaled
// CHECK-NOT: linalg.fill
// CHECK: %[[MODE:.*]] = arith.constant 1 : i64
// CHECK: call @etmlir_uk_matmul_ep({{.*}}, %[[MODE]],
// CHECK: linalg.generic
// CHECK: arith.mulf
func.func @scaled(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x16xf32>) outs(%c : memref<4x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %two : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// A linear layer with GELU, as a transformer's MLP has it: the product [T, 16] seen as [1, T, 16]
// (expand_shape) by the bias + GELU loop, which writes a buffer of its own with a dynamic size. The
// loop becomes the epilogue (mode 261 = zero init | bias after | GELU << 8); its buffer is made before
// the call and handed over without its unit dim; the product's buffer goes away.
// CHECK-LABEL: func.func @linear_gelu
// CHECK-NOT: linalg.fill
// CHECK: %[[T:.*]] = memref.dim %arg0
// CHECK: %[[Y:.*]] = memref.alloc(%[[T]]) : memref<1x?x16xf32>
// CHECK: %[[Y2:.*]] = memref.collapse_shape %[[Y]] {{\[\[}}0, 1], [2]] : memref<1x?x16xf32> into memref<?x16xf32>
// CHECK: %[[OUT:.*]] = memref.cast %[[Y2]]
// CHECK: %[[MODE:.*]] = arith.constant 261 : i64
// CHECK: call @etmlir_uk_matmul_ep(%{{.*}}, %{{.*}}, %[[OUT]], %{{.*}}, %{{.*}}, %[[MODE]],
// CHECK-NOT: linalg.generic
// CHECK-NOT: math.erf
// CHECK: return %[[Y]]
func.func @linear_gelu(%a: memref<?x8xf32>, %b: memref<8x16xf32>, %bias: memref<16xf32>) -> memref<1x?x16xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %sqrt2 = arith.constant 1.41421354 : f32
  %t = memref.dim %a, %c0 : memref<?x8xf32>
  %c = memref.alloc(%t) : memref<?x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<?x16xf32>)
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x16xf32>) outs(%c : memref<?x16xf32>)
  %e = memref.expand_shape %c [[0, 1], [2]] output_shape [1, %t, 16] : memref<?x16xf32> into memref<1x?x16xf32>
  %y = memref.alloc(%t) : memref<1x?x16xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%bias, %e : memref<16xf32>, memref<1x?x16xf32>) outs(%y : memref<1x?x16xf32>) {
  ^bb0(%bv: f32, %v: f32, %o: f32):
    %s = arith.addf %bv, %v : f32
    %d = arith.divf %s, %sqrt2 : f32
    %f = math.erf %d : f32
    %g = arith.addf %f, %one : f32
    %h = arith.mulf %g, %half : f32
    %r = arith.mulf %s, %h : f32
    linalg.yield %r : f32
  }
  memref.dealloc %c : memref<?x16xf32>
  return %y : memref<1x?x16xf32>
}

// -----

// A linear layer over an image in channels-last order (ConvNeXt's MLP): the product [12, 16] seen as
// [1, 3, 4, 16], its rows split in three dims, by a bias + residual loop writing the function's output.
// The loop becomes the epilogue (mode 13 = zero init | bias after | residual), the output and the
// residual handed over with those dims merged again.
// CHECK-LABEL: func.func @linear_over_image
// CHECK-DAG: %[[Y2:.*]] = memref.collapse_shape %arg3 {{\[\[}}0, 1, 2], [3]] : memref<1x3x4x16xf32> into memref<12x16xf32>
// CHECK-DAG: %[[R2:.*]] = memref.collapse_shape %arg4 {{\[\[}}0, 1, 2], [3]] : memref<1x3x4x16xf32> into memref<12x16xf32>
// CHECK-DAG: %[[MODE:.*]] = arith.constant 13 : i64
// CHECK: call @etmlir_uk_matmul_ep({{.*}}, %[[MODE]],
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @linear_over_image(%a: memref<12x8xf32>, %b: memref<8x16xf32>, %bias: memref<16xf32>,
                             %y: memref<1x3x4x16xf32>, %res: memref<1x3x4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<12x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<12x16xf32>)
  linalg.matmul ins(%a, %b : memref<12x8xf32>, memref<8x16xf32>) outs(%c : memref<12x16xf32>)
  %e = memref.expand_shape %c [[0, 1, 2], [3]] output_shape [1, 3, 4, 16] : memref<12x16xf32> into memref<1x3x4x16xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>,
                                   affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%bias, %e, %res : memref<16xf32>, memref<1x3x4x16xf32>, memref<1x3x4x16xf32>) outs(%y : memref<1x3x4x16xf32>) {
  ^bb0(%bv: f32, %v: f32, %r: f32, %o: f32):
    %s = arith.addf %v, %bv : f32
    %t = arith.addf %s, %r : f32
    linalg.yield %t : f32
  }
  memref.dealloc %c : memref<12x16xf32>
  return
}

// -----

// SiLU after a convolution with a bias broadcast first, written however the body spells it (here
// x / (1 + exp(-x)), not torch-mlir's x * (1 / (1 + exp(-x)))): mode 770 = bias init | SiLU << 8.
// CHECK-LABEL: func.func @conv_silu
// CHECK-NOT: linalg.broadcast
// CHECK: %[[MODE:.*]] = arith.constant 770 : i64
// CHECK: call @etmlir_uk_conv2d_nchw_fchw_ep({{.*}}, %[[MODE]],
// CHECK-NOT: linalg.generic
// CHECK-NOT: math.exp
func.func @conv_silu(%x: memref<1x3x8x8xf32>, %w: memref<4x3x3x3xf32>, %bias: memref<4xf32>, %y: memref<1x4x6x6xf32>) {
  %one = arith.constant 1.0 : f32
  linalg.broadcast ins(%bias : memref<4xf32>) outs(%y : memref<1x4x6x6xf32>) dimensions = [0, 2, 3]
  linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : memref<1x3x8x8xf32>, memref<4x3x3x3xf32>) outs(%y : memref<1x4x6x6xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y : memref<1x4x6x6xf32>) outs(%y : memref<1x4x6x6xf32>) {
  ^bb0(%v: f32, %out: f32):
    %n = arith.negf %v : f32
    %e = math.exp %n : f32
    %d = arith.addf %e, %one : f32
    %r = arith.divf %v, %d : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// What only looks like an activation stays a loop: GELU's tanh form with torch-mlir's constant
// 0.797724 (sqrt(2/pi) is 0.7978846), which is not that function; and sigmoid then a clamp (the
// kernel applies an activation last). Only the zero fills are absorbed (mode 1).
// CHECK-LABEL: func.func @not_activations
// CHECK: call @etmlir_uk_matmul_ep({{.*}}, %{{.*}}, %{{.*}}) :
// CHECK: linalg.generic
// CHECK: math.tanh
// CHECK: %[[MODE:.*]] = arith.constant 1 : i64
// CHECK: call @etmlir_uk_matmul_ep({{.*}}, %[[MODE]],
// CHECK: linalg.generic
// CHECK: math.exp
// CHECK: arith.select
func.func @not_activations(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>, %d: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %k = arith.constant 0.044715 : f32
  %s = arith.constant 0.797724 : f32
  %c3 = arith.constant 3 : i64
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x16xf32>) outs(%c : memref<4x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %p = math.fpowi %v, %c3 : f32, i64
    %q = arith.mulf %p, %k : f32
    %u = arith.addf %v, %q : f32
    %w = arith.mulf %u, %s : f32
    %t = math.tanh %w : f32
    %g = arith.addf %t, %one : f32
    %h = arith.mulf %g, %half : f32
    %r = arith.mulf %v, %h : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%d : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%d : memref<4x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%d : memref<4x16xf32>) outs(%d : memref<4x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    %e = math.exp %n : f32
    %g = arith.addf %e, %one : f32
    %r = arith.divf %one, %g : f32
    %p = arith.cmpf ogt, %r, %half : f32
    %m = arith.select %p, %r, %half : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// Max pooling becomes etmlir_uk_max_pool2d(in, out, kh, kw, strides, dilations, pad top, pad left);
// a -inf filled buffer with a copy of %x inside is taken over like a depthwise convolution's zero
// padding (here top 1, left 2), and the window buffer, only a shape, goes. The output's -inf fill stays
// (the kernel takes the max with what the output holds).
// CHECK-LABEL: func.func @max_pool_padded
// CHECK-NOT: linalg.map
// CHECK-NOT: linalg.generic
// CHECK-NOT: memref.alloc
// CHECK: linalg.fill
// CHECK: %[[X:.*]] = memref.cast %arg0
// CHECK: %[[Y:.*]] = memref.cast %arg1
// CHECK: %[[KH:.*]] = arith.constant 3 : i64
// CHECK-NEXT: %[[KW:.*]] = arith.constant 2 : i64
// CHECK: call @etmlir_uk_max_pool2d(%[[X]], %[[Y]], %[[KH]], %[[KW]], {{.*}}) : (memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, i64, i64, i64, i64, i64, i64, i64, i64) -> ()
// CHECK-NOT: linalg.pooling_nchw_max
// CHECK: func.func private @etmlir_uk_max_pool2d(
func.func @max_pool_padded(%x: memref<1x4x6x6xf32>, %y: memref<1x4x3x4xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %p = memref.alloc() : memref<1x4x8x10xf32>
  linalg.map outs(%p : memref<1x4x8x10xf32>) (%init: f32) { linalg.yield %ninf : f32 }
  %v = memref.subview %p[0, 0, 1, 2] [1, 4, 6, 6] [1, 1, 1, 1] : memref<1x4x8x10xf32> to memref<1x4x6x6xf32, strided<[320, 80, 10, 1], offset: 12>>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : memref<1x4x6x6xf32>) outs(%v : memref<1x4x6x6xf32, strided<[320, 80, 10, 1], offset: 12>>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%ninf : f32) outs(%y : memref<1x4x3x4xf32>)
  %w = memref.alloc() : memref<3x2xf32>
  linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<[2, 2]> : vector<2xi64>}
      ins(%p, %w : memref<1x4x8x10xf32>, memref<3x2xf32>) outs(%y : memref<1x4x3x4xf32>)
  memref.dealloc %p : memref<1x4x8x10xf32>
  memref.dealloc %w : memref<3x2xf32>
  return
}

// -----

// A zero padding is not a max pooling's: the padded buffer stays, and the kernel reads it (pads 0).
// CHECK-LABEL: func.func @max_pool_zero_padded
// CHECK: linalg.map
// CHECK: linalg.generic
// CHECK: %[[P:.*]] = memref.cast %alloc
// CHECK: %[[Z:.*]] = arith.constant 0 : i64
// CHECK-NEXT: %[[Z2:.*]] = arith.constant 0 : i64
// CHECK-NEXT: call @etmlir_uk_max_pool2d(%[[P]], {{.*}}, %[[Z]], %[[Z2]]) :
func.func @max_pool_zero_padded(%x: memref<1x4x6x6xf32>, %y: memref<1x4x3x3xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %p = memref.alloc() : memref<1x4x8x8xf32>
  linalg.map outs(%p : memref<1x4x8x8xf32>) (%init: f32) { linalg.yield %zero : f32 }
  %v = memref.subview %p[0, 0, 1, 1] [1, 4, 6, 6] [1, 1, 1, 1] : memref<1x4x8x8xf32> to memref<1x4x6x6xf32, strided<[256, 64, 8, 1], offset: 9>>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : memref<1x4x6x6xf32>) outs(%v : memref<1x4x6x6xf32, strided<[256, 64, 8, 1], offset: 9>>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%ninf : f32) outs(%y : memref<1x4x3x3xf32>)
  %w = memref.alloc() : memref<3x3xf32>
  linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<[2, 2]> : vector<2xi64>}
      ins(%p, %w : memref<1x4x8x8xf32>, memref<3x3xf32>) outs(%y : memref<1x4x3x3xf32>)
  memref.dealloc %p : memref<1x4x8x8xf32>
  memref.dealloc %w : memref<3x3xf32>
  return
}
