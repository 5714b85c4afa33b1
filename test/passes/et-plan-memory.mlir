// RUN: et-opt %s --split-input-file --et-plan-memory | FileCheck %s
// RUN: et-opt %s --split-input-file --et-plan-memory="arenas=fast:32,slow" | FileCheck %s --check-prefix=ARENAS
// RUN: et-opt %s --split-input-file --et-plan-memory="alloc-inputs=false alloc-outputs=false" | FileCheck %s --check-prefix=NOIO
// RUN: et-opt %s --split-input-file --et-plan-memory="arenas=fast:32,slow print-summary" -o %t 2>&1 | FileCheck %s --check-prefix=SUMMARY

// A chain of 32-byte tensors: each lives from its definition to its last use, so two
// alternating slots suffice (the input is planned too, live from the start).
// CHECK-LABEL: func.func @main()
// CHECK-SAME: etx.arenas = [{name = "planned", size = 64 : i64}]
// CHECK-SAME: etx.memory_plan = {algorithm = "auto", alignment = 16 : i64, policy = "largest-first"}
// CHECK: "etx.input"() {index = 0 : i64, mem_id = 0 : i64, offset = 0 : i64, size = 32 : i64
// CHECK: "etx.alloc"() {mem_id = 0 : i64, offset = 32 : i64, size = 32 : i64
// CHECK: "etx.alloc"() {mem_id = 0 : i64, offset = 0 : i64, size = 32 : i64
// CHECK: "etx.alloc"() {mem_id = 0 : i64, offset = 32 : i64, size = 32 : i64

// Two arenas, largest first into the 32-byte fast one until it is full, the rest into slow.
// ARENAS-LABEL: func.func @main()
// ARENAS-SAME: etx.arenas = [{capacity = 32 : i64, name = "fast", size = 32 : i64}, {name = "slow", size = 32 : i64}]
// ARENAS: "etx.input"() {index = 0 : i64, mem_id = 0 : i64, offset = 0 : i64
// ARENAS: "etx.alloc"() {mem_id = 1 : i64, offset = 0 : i64
// ARENAS: "etx.alloc"() {mem_id = 0 : i64, offset = 0 : i64
// ARENAS: "etx.alloc"() {mem_id = 1 : i64, offset = 0 : i64

// Inputs and outputs left to the user: only the two intermediates are planned.
// NOIO-LABEL: func.func @main()
// NOIO-SAME: etx.arenas = [{name = "planned", size = 64 : i64}]
// NOIO: "etx.input"() {index = 0 : i64, type = tensor<2x4xf32>}
// NOIO: "etx.alloc"() {mem_id = 0 : i64, offset = 0 : i64, size = 32 : i64
// NOIO: "etx.alloc"() {mem_id = 0 : i64, offset = 32 : i64, size = 32 : i64
// NOIO: "etx.alloc"() {type = tensor<2x4xf32>}

// SUMMARY: method 'forward': memory plan: largest-first, auto, alignment 16
// SUMMARY: fast   0
// SUMMARY-SAME: 32
// SUMMARY: total
// SUMMARY-SAME: 64{{ +}}4{{ +}}128{{ +}}0.500
func.func @main() attributes {etx.method = "forward"} {
  %0 = "etx.input"() {index = 0 : i64, type = tensor<2x4xf32>} : () -> !etx.value
  %1 = "etx.alloc"() {type = tensor<2x4xf32>} : () -> !etx.value
  "etx.kernel_call"(%0, %1) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  %2 = "etx.alloc"() {type = tensor<2x4xf32>} : () -> !etx.value
  "etx.kernel_call"(%1, %2) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  %3 = "etx.alloc"() {type = tensor<2x4xf32>} : () -> !etx.value
  "etx.kernel_call"(%2, %3) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  "etx.output"(%3) : (!etx.value) -> ()
  return
}

// -----

// Dynamic dims are planned at their upper bound (8x4xf32 = 128 bytes, 8x8xf32 = 256); tensors
// held by a list stay live until the list's last use (the cat), so all three overlap there;
// Int slots (type i64) take no arena memory. Largest first: the cat output gets offset 0.
// CHECK-LABEL: func.func @dynamic()
// CHECK-SAME: etx.arenas = [{name = "planned", size = 512 : i64}]
// CHECK: "etx.input"() {index = 0 : i64, mem_id = 0 : i64, offset = 256 : i64, size = 128 : i64, type = tensor<?x4xf32>, upper_bounds = array<i64: 8, 4>}
// CHECK: "etx.alloc"() {type = i64}
// CHECK: "etx.alloc"() {mem_id = 0 : i64, offset = 384 : i64, size = 128 : i64
// CHECK: "etx.alloc"() {mem_id = 0 : i64, offset = 0 : i64, size = 256 : i64
func.func @dynamic() attributes {etx.method = "dynamic"} {
  %0 = "etx.input"() {index = 0 : i64, type = tensor<?x4xf32>, upper_bounds = array<i64: 8, 4>} : () -> !etx.value
  %d = "etx.const"() {value = 0 : i64} : () -> !etx.value
  %n = "etx.alloc"() {type = i64} : () -> !etx.value
  "etx.kernel_call"(%0, %d, %n) {kernel = "etmlir_prim::sym_size.int", operandSegmentSizes = array<i32: 2, 1>} : (!etx.value, !etx.value, !etx.value) -> ()
  %1 = "etx.alloc"() {type = tensor<?x4xf32>, upper_bounds = array<i64: 8, 4>} : () -> !etx.value
  "etx.kernel_call"(%0, %1) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  %l = "etx.list"(%0, %1) {kind = "tensor"} : (!etx.value, !etx.value) -> !etx.value
  %2 = "etx.alloc"() {type = tensor<?x8xf32>, upper_bounds = array<i64: 8, 8>} : () -> !etx.value
  "etx.kernel_call"(%l, %d, %2) {kernel = "aten::cat.out", operandSegmentSizes = array<i32: 2, 1>} : (!etx.value, !etx.value, !etx.value) -> ()
  "etx.output"(%2) : (!etx.value) -> ()
  return
}

// -----

// Program state lives for the whole method: no other tensor shares its bytes, although the two
// 32-byte intermediates could otherwise have used them.
// CHECK-LABEL: func.func @state()
// CHECK-SAME: etx.arenas = [{name = "planned", size = 96 : i64}]
// CHECK: "etx.state"() {mem_id = 0 : i64, name = "s", offset = [[S:[0-9]+]] : i64, size = 32 : i64
// CHECK-NOT: offset = [[S]] :
// CHECK: "etx.output"
func.func @state() attributes {etx.method = "forward"} {
  %s = "etx.state"() {name = "s", type = tensor<2x4xf32>, value = dense<0.0> : tensor<2x4xf32>} : () -> !etx.value
  %1 = "etx.alloc"() {type = tensor<2x4xf32>} : () -> !etx.value
  "etx.kernel_call"(%s, %1) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  %2 = "etx.alloc"() {type = tensor<2x4xf32>} : () -> !etx.value
  "etx.kernel_call"(%1, %2) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  %3 = "etx.alloc"() {type = tensor<2x4xf32>} : () -> !etx.value
  "etx.kernel_call"(%2, %3) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  "etx.output"(%3) : (!etx.value) -> ()
  return
}
