// RUN: et-opt %s --split-input-file --verify-diagnostics --et-plan-memory="arenas=fast:32"
// Options are checked before any pass runs (one line naming the option and what it accepts):
// RUN: not et-opt %s --et-plan-memory="arenas=fast:lots" 2>&1 | FileCheck %s --check-prefix=BADSPEC
// RUN: not et-opt %s --et-plan-memory="arenas=fast:99999999999999999999G" 2>&1 | FileCheck %s --check-prefix=HUGEARENA
// RUN: not et-opt %s --et-plan-memory="policy=random" 2>&1 | FileCheck %s --check-prefix=BADPOLICY
// RUN: not et-opt %s --et-plan-memory="algorithm=best-fi" 2>&1 | FileCheck %s --check-prefix=BADALGO
// RUN: not et-opt %s --et-plan-memory="alignment=3" 2>&1 | FileCheck %s --check-prefix=ALIGN3
// RUN: not et-opt %s --et-plan-memory="alignment=1180591620717411303424" 2>&1 | FileCheck %s --check-prefix=ALIGNHUGE
// RUN: not et-opt %s --et-plan-memory="alignment=sixteen" 2>&1 | FileCheck %s --check-prefix=ALIGNWORD
// RUN: not et-opt %s --et-plan-memory="alloc-inputs=maybe" 2>&1 | FileCheck %s --check-prefix=BOOL
// RUN: not et-opt %s --et-plan-memory="foo=1" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// Every arena is bounded and the tensors do not fit: the error names the tensor and the room.
// expected-error @+1 {{et-plan-memory: etx.alloc (written by aten::relu.out at}}
func.func @too_small() attributes {etx.method = "forward"} {
  %0 = "etx.input"() {index = 0 : i64, type = tensor<2x4xf32>} : () -> !etx.value
  %1 = "etx.alloc"() {type = tensor<2x4xf32>} : () -> !etx.value
  "etx.kernel_call"(%0, %1) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  "etx.output"(%1) : (!etx.value) -> ()
  return
}

// -----

// Nothing to plan at the etx level yet.
module {
  // expected-error @+1 {{et-plan-memory expects an etx (executable) module; found function @edge, which is not an etx method: run --et-to-out-variants first}}
  func.func @edge(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}

// -----

// A tensor bigger than any plan can address is an error at the op (no int64 overflow in the attributes).
func.func @huge() attributes {etx.method = "forward"} {
  %0 = "etx.input"() {index = 0 : i64, type = tensor<2xf32>} : () -> !etx.value
  // expected-error @+1 {{et-plan-memory: etx.alloc (written by aten::relu.out at}}
  %1 = "etx.alloc"() {type = tensor<1000000000000x1000000000000x100000000xf32>} : () -> !etx.value
  "etx.kernel_call"(%0, %1) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  "etx.output"(%1) : (!etx.value) -> ()
  return
}

// -----

// An element type the .pte cannot describe has no size to plan.
func.func @complex() attributes {etx.method = "forward"} {
  %0 = "etx.input"() {index = 0 : i64, type = tensor<2xf32>} : () -> !etx.value
  // expected-error @+1 {{element type complex<f32> has no .pte ScalarType (supported: ui8, i8, i16, i32, i64, f16, f32, f64, i1, bf16)}}
  %1 = "etx.alloc"() {type = tensor<2xcomplex<f32>>} : () -> !etx.value
  "etx.kernel_call"(%0, %1) {kernel = "aten::relu.out", operandSegmentSizes = array<i32: 1, 1>} : (!etx.value, !etx.value) -> ()
  "etx.output"(%1) : (!etx.value) -> ()
  return
}

// -----

// A torch-dialect module is two passes away from the etx level.
func.func @torch_level(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  // expected-error @+1 {{et-plan-memory expects an etx (executable) module; found 'torch.aten.relu' (a torch-dialect op): run --et-to-edge and --et-to-out-variants first}}
  %0 = torch.aten.relu %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}

// BADSPEC: et-opt: error: et-plan-memory: option arenas=fast:lots: arena 'fast:lots': size 'lots' is not a byte count (65536, 64k, 2M)
// HUGEARENA: et-opt: error: et-plan-memory: option arenas=fast:99999999999999999999G: arena 'fast' is larger than a plan can address (9223372036854775807 bytes)
// BADPOLICY: et-opt: error: et-plan-memory: option policy=random: unknown value 'random' (one of: largest-first, smallest-first)
// BADALGO: et-opt: error: et-plan-memory: option algorithm=best-fi: unknown value 'best-fi'; did you mean 'best-fit'? (one of: auto, best-fit, shared-objects)
// ALIGN3: et-opt: error: et-plan-memory: option alignment=3: must be a power of two (1, 2, 4, 8, 16, ...)
// ALIGNHUGE: et-opt: error: et-plan-memory: option alignment=1180591620717411303424: must be <= 1073741824
// ALIGNWORD: et-opt: error: et-plan-memory: option 'alignment' expects an integer, got 'sixteen'
// BOOL: et-opt: error: et-plan-memory: option 'alloc-inputs' expects true or false, got 'maybe'
// UNKNOWN: et-opt: error: et-plan-memory: unknown option 'foo' (options: algorithm=<auto | best-fit | shared-objects>, alignment=<int in [1, 1073741824]>, {{.*}})
