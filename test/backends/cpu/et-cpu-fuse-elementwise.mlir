// RUN: et-opt %s --split-input-file --et-cpu-fuse-elementwise | FileCheck %s

// A linear layer's bias add, ReLU and "+ 1" fuse into one loop nest after the matmul,
// which stays a linalg.matmul (the microkernels take it later).
// CHECK-LABEL: func.func @forward
// CHECK: linalg.matmul
// CHECK: linalg.generic
// CHECK: arith.addf
// CHECK: arith.cmpf ugt
// CHECK: arith.select
// CHECK: arith.addf
// CHECK: linalg.yield
// CHECK-NOT: linalg.generic
// CHECK: return
#bias = affine_map<(d0, d1) -> (d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<2x8xf32>, tensor<8x4xf32>) outs(%init : tensor<2x4xf32>) -> tensor<2x4xf32>
  %biased = linalg.generic {indexing_maps = [#bias, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b, %mm : tensor<4xf32>, tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %s = arith.addf %in, %in2 : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%biased : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %c = arith.cmpf ugt, %in, %zero : f32
    %r = arith.select %c, %in, %zero : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %plus = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%relu : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %p = arith.addf %in, %one : f32
    linalg.yield %p : f32
  } -> tensor<2x4xf32>
  return %plus : tensor<2x4xf32>
}

// -----

// A reshape feeding a matmul (nanoGPT's [B, T, C] -> [B*T, C] linears) is fenced: reshape
// folding would otherwise rewrite the matmul as a linalg.generic no microkernel takes.
// CHECK-LABEL: func.func @reshaped_operand
// CHECK: tensor.collapse_shape
// CHECK: linalg.matmul
// CHECK-NOT: scf.execute_region
func.func @reshaped_operand(%x: tensor<1x2x8xf32>, %w: tensor<8x4xf32>) -> tensor<1x2x4xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %flat = tensor.collapse_shape %x [[0, 1], [2]] : tensor<1x2x8xf32> into tensor<2x8xf32>
  %e = tensor.empty() : tensor<2x4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mm = linalg.matmul ins(%flat, %w : tensor<2x8xf32>, tensor<8x4xf32>) outs(%init : tensor<2x4xf32>) -> tensor<2x4xf32>
  %out = tensor.expand_shape %mm [[0, 1], [2]] output_shape [1, 2, 4] : tensor<2x4xf32> into tensor<1x2x4xf32>
  return %out : tensor<1x2x4xf32>
}
