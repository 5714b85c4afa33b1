// Malformed input: MLIR's own diagnostic with file:line:col, exit code 1, no traceback.
// RUN: not et-opt %s 2>&1 | FileCheck %s
// RUN: not et-opt %s --split-input-file --et-verify-core-aten 2>&1 | FileCheck %s --check-prefix=SPLIT
// RUN: not et-opt %t.does-not-exist 2>&1 | FileCheck %s --check-prefix=MISSING

// CHECK: et-opt-malformed-input.mlir:15:1: error: custom op 'torch.constant.int' expected integer value
// CHECK-NOT: Traceback
// SPLIT: et-opt-malformed-input.mlir:15:1: error: custom op 'torch.constant.int' expected integer value
// SPLIT: et-opt-malformed-input.mlir:20:10: error: use of undeclared SSA value name
// SPLIT-NOT: Traceback
// MISSING: et-opt: error: cannot read '{{.*}}does-not-exist': No such file or directory

func.func @f() {
  %0 = torch.constant.int
}

// -----

func.func @g() -> !torch.int {
  return %nope : !torch.int
}
