// RUN: et-opt %s --split-input-file --et-cpu-report-failures | FileCheck %s

// A run-time check calls the failure hook with the checked edge op's debug handle and the
// message (a NUL-terminated constant, one per distinct message) instead of aborting.
// CHECK: memref.global "private" constant @etmlir_failure_0 : memref<30xi8> = dense<[109, 105, 115, {{.*}}, 116, 0]>
// CHECK-NOT: memref.global
// CHECK-LABEL: func.func @forward
// CHECK-NOT: cf.assert
// CHECK: %[[OK:.*]] = arith.cmpi eq
// CHECK: %[[TRUE:.*]] = arith.constant true
// CHECK: %[[FAILED:.*]] = arith.xori %[[OK]], %[[TRUE]] : i1
// CHECK: scf.if %[[FAILED]] {
// CHECK:   %[[MSG:.*]] = memref.get_global @etmlir_failure_0 : memref<30xi8>
// CHECK:   %[[PTR:.*]] = memref.extract_aligned_pointer_as_index %[[MSG]]
// CHECK:   %[[ADDR:.*]] = arith.index_cast %[[PTR]] : index to i64
// CHECK:   %[[H:.*]] = arith.constant 2 : i32
// CHECK:   func.call @etmlir_cpu_fail(%[[H]], %[[ADDR]]) : (i32, i64) -> ()
// CHECK: scf.if
// CHECK:   memref.get_global @etmlir_failure_0
// CHECK:   arith.constant 3 : i32
// CHECK: func.func private @etmlir_cpu_fail(i32, i64)
func.func @forward(%a: memref<?x4xf32>, %b: memref<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %d0 = memref.dim %a, %c0 : memref<?x4xf32>
  %d1 = memref.dim %b, %c0 : memref<?x4xf32>
  %0 = arith.cmpi eq, %d0, %d1 : index loc(#h2)
  cf.assert %0, "mismatched size for broadcast" loc(#h2)
  cf.assert %0, "mismatched size for broadcast" loc(#h3)
  return
}
#src = loc("model.py":12:0)
#h2 = loc(fused<{etmlir.debug_handle = 2 : i64}>[#src])
#h3 = loc(fused<{etmlir.debug_handle = 3 : i64}>[#src])

// -----

// A check no edge op claims reports handle 0 (the runtime then names the delegate call's line);
// a module without checks is left as it is, with no hook declared.
// CHECK-LABEL: func.func @shapes
// CHECK: arith.constant 0 : i32
// CHECK: call @etmlir_cpu_fail
// CHECK-LABEL: func.func @none
// CHECK-NEXT: return
func.func @shapes(%ok: i1) {
  cf.assert %ok, "view size mismatch"
  return
}
func.func @none() {
  return
}

// -----

// CHECK-LABEL: func.func @unchecked
// CHECK-NOT: etmlir_cpu_fail
func.func @unchecked() {
  return
}
