// RUN: et-opt %s --split-input-file --verify-diagnostics --et-verify-memory-plan

// A valid plan: the two tensors share bytes but are never live at the same time.
func.func @ok() attributes {etx.arenas = [{name = "planned", size = 64 : i64}], etx.memory_plan = {alignment = 16 : i64, policy = "largest-first"}, etx.method = "forward"} {
  %0 = "etx.input"() {index = 0 : i64, mem_id = 0 : i64, offset = 0 : i64, size = 32 : i64, type = tensor<2x4xf32>} : () -> !etx.value
  %1 = "etx.alloc"() {mem_id = 0 : i64, offset = 32 : i64, size = 32 : i64, type = tensor<2x4xf32>} : () -> !etx.value
  "etx.kernel_call"(%0, %1) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  %2 = "etx.alloc"() {mem_id = 0 : i64, offset = 0 : i64, size = 32 : i64, type = tensor<2x4xf32>} : () -> !etx.value
  "etx.kernel_call"(%1, %2) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  "etx.output"(%2) : (!etx.value) -> ()
  return
}

// -----

// A corrupted plan: the relu reads %0 (line 19) while writing %1 (line 20) over half of it.
// expected-error @+1 {{:20) [16, 48) overlap while both are live (instructions 1..2)}}
func.func @overlap() attributes {etx.arenas = [{name = "planned", size = 48 : i64}], etx.memory_plan = {alignment = 16 : i64, policy = "largest-first"}, etx.method = "forward"} {
  %0 = "etx.input"() {index = 0 : i64, mem_id = 0 : i64, offset = 0 : i64, size = 32 : i64, type = tensor<2x4xf32>} : () -> !etx.value
  %1 = "etx.alloc"() {mem_id = 0 : i64, offset = 16 : i64, size = 32 : i64, type = tensor<2x4xf32>} : () -> !etx.value
  "etx.kernel_call"(%0, %1) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  "etx.output"(%1) : (!etx.value) -> ()
  return
}

// -----

// Past the end of its arena, misaligned, and an intermediate that was never planned.
// expected-error @+3 {{:34) has no planned memory}}
// expected-error @+2 {{:33: offset 8 is not 16-byte aligned}}
// expected-error @+1 {{:33: ends at 40, past the end of arena 'planned' (32 bytes)}}
func.func @broken() attributes {etx.arenas = [{name = "planned", size = 32 : i64}], etx.memory_plan = {alignment = 16 : i64, policy = "largest-first"}, etx.method = "forward"} {
  %0 = "etx.input"() {index = 0 : i64, mem_id = 0 : i64, offset = 8 : i64, size = 32 : i64, type = tensor<2x4xf32>} : () -> !etx.value
  %1 = "etx.alloc"() {type = tensor<2x4xf32>} : () -> !etx.value
  "etx.kernel_call"(%0, %1) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  %2 = "etx.alloc"() {mem_id = 0 : i64, offset = 0 : i64, size = 32 : i64, type = tensor<2x4xf32>} : () -> !etx.value
  "etx.kernel_call"(%1, %2) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  "etx.output"(%2) : (!etx.value) -> ()
  return
}

// -----

// Planned placements must come all together.
func.func @partial() attributes {etx.method = "forward"} {
  // expected-error @+1 {{etx.alloc: a planned value needs all of mem_id, offset and size (has mem_id)}}
  %1 = "etx.alloc"() {mem_id = 0 : i64, type = tensor<2x4xf32>} : () -> !etx.value
  "etx.output"(%1) : (!etx.value) -> ()
  return
}
