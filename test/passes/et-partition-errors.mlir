// RUN: et-opt %s --split-input-file --verify-diagnostics --et-partition="backend=nested"
// Options are checked before any pass runs: a bad one is a command-line error naming the
// option, the value and what is accepted (exit status 1, no traceback).
// RUN: not et-opt %s --et-partition="backend=nope" 2>&1 | FileCheck %s --check-prefix=BACKEND
// RUN: not et-opt %s --et-partition="backend=nested ops=edge.bogus" 2>&1 | FileCheck %s --check-prefix=OPS
// RUN: not et-opt %s --et-partition="backend=nested skip-ops=aten.relu.default" 2>&1 | FileCheck %s --check-prefix=SKIP
// RUN: not et-opt %s --et-partition="backend=nested min-group-size=0" 2>&1 | FileCheck %s --check-prefix=MIN
// RUN: not et-opt %s --et-partition="backend=nested min-group-size=two" 2>&1 | FileCheck %s --check-prefix=INT
// RUN: not et-opt %s --et-partition="backend=nested group=2" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// BACKEND: et-opt: error: et-partition: option backend=nope: unknown value 'nope' (one of: {{.*}}nested{{.*}})
// OPS: et-opt: error: et-partition: option ops=edge.bogus: unknown op 'edge.bogus'{{.*}}(edge ops are named like edge.add_tensor, edge.mm)
// SKIP: et-opt: error: et-partition: option skip-ops=aten.relu.default: unknown op 'aten.relu.default'
// MIN: et-opt: error: et-partition: option min-group-size=0: must be >= 1
// INT: et-opt: error: et-partition: option 'min-group-size' expects an integer, got 'two'
// UNKNOWN: et-opt: error: et-partition: unknown option 'group' (options: backend=<{{.*}}>, min-group-size=<int >= 1>, ops=<comma-separated list>, skip-ops=<comma-separated list>)

// Partitioning works on the edge level: a torch-dialect module is refused at its first torch op.
func.func @torch_level(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  // expected-error @+1 {{et-partition expects an edge-dialect module; found 'torch.aten.relu' (a torch-dialect op): run --et-to-edge first}}
  %0 = torch.aten.relu %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// An etx module is past partitioning.
// expected-error @+1 {{et-partition expects an edge-dialect module; found function @main (an etx method): the module is already at the etx level}}
func.func @main() attributes {etx.method = "forward"} {
  return
}
