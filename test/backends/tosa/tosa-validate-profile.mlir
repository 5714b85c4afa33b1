// RUN: not et-opt %s --pass-pipeline='builtin.module(et-tosa-convert-edge,tosa-attach-target{profiles=pro_int level=8k specification_version=1.0},tosa-validate{strict-op-spec-alignment})' 2>&1 | FileCheck %s

// The backend validates every graph for its profile and level (pipeline.py) with MLIR's
// tosa-validate (strict: profiles are checked only then). A float graph checked against
// PRO-INT is refused at the op, with the edge op's source line (et-tosa-convert-edge keeps
// each op's location).
// CHECK: model.py:12:5: error: 'tosa.exp' op illegal: requires any of [pro_fp] profiles/extensions to be specified in the target environment
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = "edge.exp"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("model.py":12:5)
  return %0 : tensor<2x4xf32>
}
