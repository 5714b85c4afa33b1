// RUN: et-opt %s --split-input-file --verify-diagnostics --et-fold-constants
// RUN: not et-opt %s --et-fold-constants=max-bytes=-1 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not et-opt %s --et-fold-constants=max-bytes=1k 2>&1 | FileCheck %s --check-prefix=NOTINT
// RUN: not et-opt %s --et-fold-constants=max-byte=10 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// NEGATIVE: et-opt: error: et-fold-constants: option max-bytes=-1: must be >= 0
// NOTINT: et-opt: error: et-fold-constants: option 'max-bytes' expects an integer, got '1k'
// UNKNOWN: et-opt: error: et-fold-constants: unknown option 'max-byte'; did you mean 'max-bytes'? (options: max-bytes=<int >= 0>)

// Folding runs on edge ops: a torch-dialect module is refused at its first torch op.
func.func @torch_level(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  // expected-error @+1 {{et-fold-constants expects an edge-dialect module; found 'torch.aten.relu' (a torch-dialect op): run --et-to-edge first}}
  %0 = torch.aten.relu %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}
