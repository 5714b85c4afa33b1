// RUN: et-opt %s --split-input-file --et-cpu-trace-regions | FileCheck %s

// The addmm's fill and microkernel call are one region (both carry handle 2); the fused loop nest
// whose body came from the addmm's bias add (2) and the tanh (3) is a second one. Allocations and
// deallocations stay outside; the module records what each region covers.
// CHECK: module attributes {etmlir.cpu_regions = [array<i64: 2>, array<i64: 2, 3>]}
// CHECK-LABEL: func.func @forward
// CHECK: memref.alloc
// CHECK: %[[R1:.*]] = arith.constant 1 : i32
// CHECK: %[[H2:.*]] = arith.constant 2 : i32
// CHECK: call @etmlir_cpu_region_begin(%[[R1]], %[[H2]]) : (i32, i32) -> ()
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: call @etmlir_uk_matmul
// CHECK: %[[E1:.*]] = arith.constant 1 : i32
// CHECK-NEXT: call @etmlir_cpu_region_end(%[[E1]]) : (i32) -> ()
// CHECK: %[[R2:.*]] = arith.constant 2 : i32
// CHECK: call @etmlir_cpu_region_begin(%[[R2]], %{{.*}})
// CHECK-NEXT: linalg.generic
// CHECK: linalg.yield
// CHECK-NEXT: }
// CHECK: %[[E2:.*]] = arith.constant 2 : i32
// CHECK-NEXT: call @etmlir_cpu_region_end(%[[E2]])
// CHECK-NEXT: memref.dealloc
// CHECK: func.func private @etmlir_cpu_region_begin(i32, i32)
// CHECK: func.func private @etmlir_cpu_region_end(i32)
module {
  func.func private @etmlir_uk_matmul(memref<2x8xf32>, memref<8x16xf32>, memref<2x16xf32>)
  func.func @forward(%a: memref<2x8xf32>, %w: memref<8x16xf32>, %b: memref<16xf32>, %out: memref<2x16xf32>) {
    %cst = arith.constant 0.0 : f32 loc(#h2)
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x16xf32> loc(#h2)
    linalg.fill ins(%cst : f32) outs(%alloc : memref<2x16xf32>) loc(#h2)
    func.call @etmlir_uk_matmul(%a, %w, %alloc) : (memref<2x8xf32>, memref<8x16xf32>, memref<2x16xf32>) -> () loc(#h2)
    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%b, %alloc : memref<16xf32>, memref<2x16xf32>) outs(%out : memref<2x16xf32>) {
    ^bb0(%in: f32, %in_1: f32, %o: f32):
      %0 = arith.addf %in, %in_1 : f32 loc(#h2)
      %1 = math.tanh %0 : f32 loc(#h3)
      linalg.yield %1 : f32 loc(#h3)
    } loc(#h3)
    memref.dealloc %alloc : memref<2x16xf32> loc(#h3)
    return
  }
}
#src = loc("model.py":12:0)
#h2 = loc(fused<{etmlir.debug_handle = 2 : i64}>[#src])
#h3 = loc(fused<{etmlir.debug_handle = 3 : i64}>[#src])

// -----

// Code no edge op claims (no debug handle in its location) is in no region, and only the entry
// point is bracketed: the shapes function's work is not the model's.
// CHECK: module attributes {etmlir.cpu_regions = []}
// CHECK-LABEL: func.func @forward
// CHECK-NOT: etmlir_cpu_region_begin
// CHECK: memref.copy
// CHECK-LABEL: func.func @forward_shapes
// CHECK-NOT: etmlir_cpu_region
// CHECK: return
module {
  func.func @forward(%a: memref<4xf32>, %out: memref<4xf32>) {
    memref.copy %a, %out : memref<4xf32> to memref<4xf32>
    return
  }
  func.func @forward_shapes(%a: memref<4xf32>, %out: memref<4xf32>) {
    memref.copy %a, %out : memref<4xf32> to memref<4xf32> loc(#h4)
    return
  }
}
#h4 = loc(fused<{etmlir.debug_handle = 4 : i64}>["model.py":3:0])
