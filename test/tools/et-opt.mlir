// Python and upstream passes mix in one pipeline, in order, with options.
// RUN: et-opt %s --pass-pipeline='builtin.module(et-decompose-to-core-aten{keep=aten.relu.default},canonicalize,func.func(cse),et-verify-core-aten)' | FileCheck %s
// The same as per-pass flags, and from stdin.
// RUN: et-opt --et-decompose-to-core-aten --canonicalize --et-verify-core-aten < %s | FileCheck %s
// IR printing after every pass covers Python passes too.
// RUN: et-opt %s --mlir-print-ir-after-all --et-decompose-to-core-aten --cse -o /dev/null 2>&1 | FileCheck %s --check-prefix=PRINT
// --list-passes shows every etmlir pass with its one-line description and options.
// RUN: et-opt --list-passes | FileCheck %s --check-prefix=LIST
// Pipeline errors are one line each and exit 1.
// RUN: not et-opt %s --pass-pipeline='builtin.module(no-such-pass)' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not et-opt %s --pass-pipeline='builtin.module(func.func(et-verify-core-aten))' 2>&1 | FileCheck %s --check-prefix=NESTED
// RUN: not et-opt %s --et-verify-core-aten='bogus=1' 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not et-opt %s --no-such-flag 2>&1 | FileCheck %s --check-prefix=FLAG

// CHECK-LABEL: func.func @f
// CHECK: torch.aten.permute
// CHECK: torch.aten.mm
// CHECK-NOT: torch.aten.linear
// CHECK: return

// PRINT: IR Dump After et-decompose-to-core-aten
// PRINT: torch.aten.mm
// PRINT: IR Dump After CSE

// LIST: --et-decompose-to-core-aten {{.*}}rewrite non-Core-ATen ops into Core ATen ops
// LIST-NEXT: keep=<comma-separated list>
// LIST: --et-verify-core-aten {{.*}}report every op outside Core ATen with its source location

// UNKNOWN: et-opt: error: unknown pass or bad options 'no-such-pass'
// NESTED: et-opt: error: Python pass 'et-verify-core-aten' cannot be nested under 'func.func'
// OPTION: et-opt: error: et-verify-core-aten: unknown option 'bogus' (options: keep=<comma-separated list>)
// FLAG: et-opt: error: unknown option or pass '--no-such-flag'

func.func @f(%x: !torch.vtensor<[2,3],f32>, %w: !torch.vtensor<[4,3],f32>) -> !torch.vtensor<[2,4],f32> {
  %none = torch.constant.none
  %0 = torch.aten.linear %x, %w, %none : !torch.vtensor<[2,3],f32>, !torch.vtensor<[4,3],f32>, !torch.none -> !torch.vtensor<[2,4],f32>
  return %0 : !torch.vtensor<[2,4],f32>
}
