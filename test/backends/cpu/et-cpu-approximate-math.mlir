// RUN: et-opt %s --split-input-file --et-cpu-approximate-math | FileCheck %s

// exp inside a reduction: no libm call is left; exp is built from floor, the exponent bits and a
// polynomial; the reduction's add may be reordered (reassoc), so LLVM vectorizes the sum.
// CHECK-LABEL: func.func @softmax_denominator
// CHECK-NOT: math.exp
// CHECK: math.floor
// CHECK: arith.fptosi {{.*}} : f32 to i32
// CHECK: arith.shli
// CHECK: arith.bitcast {{.*}} : i32 to f32
// CHECK: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : f32
// CHECK: linalg.yield
func.func @softmax_denominator(%x: memref<4x8xf32>, %acc: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%acc : memref<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    %s = arith.addf %e, %out : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// An elementwise body gets `contract` only: no reordering where nothing is reduced. tanh and erf
// become arithmetic too, each with its small-argument polynomial selected below a threshold.
// CHECK-LABEL: func.func @activations
// CHECK-NOT: math.tanh
// CHECK-NOT: math.erf
// CHECK-NOT: math.exp
// CHECK-NOT: reassoc
// CHECK: arith.mulf {{.*}} fastmath<contract>
// CHECK: arith.select
// CHECK: linalg.yield
func.func @activations(%x: memref<16xf32>, %y: memref<16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                  iterator_types = ["parallel"]}
      ins(%x : memref<16xf32>) outs(%y : memref<16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = math.tanh %in : f32
    %e = math.erf %t : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// f64 is left alone (the approximations are f32), and so is anything outside a linalg body's flags.
// CHECK-LABEL: func.func @double
// CHECK: math.exp %{{.*}} : f64
// CHECK: arith.addf %{{.*}}, %{{.*}} : f64
func.func @double(%x: f64) -> f64 {
  %e = math.exp %x : f64
  %s = arith.addf %e, %x : f64
  return %s : f64
}
