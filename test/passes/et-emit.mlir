// RUN: et-opt %s --et-to-out-variants --et-plan-memory --et-emit=%t.pte -o /dev/null
// RUN: et-verify-pte %t.pte | FileCheck %s --check-prefix=VERIFY
// RUN: et-inspect %t.pte --values | FileCheck %s

// The whole chain from an edge module to a .pte that the C++ FlatBuffers verifier accepts and
// et-inspect reads back: values, operators, the plan, the constant segment, debug locations.
// VERIFY: ok (program {{[0-9]+}} bytes, 1 methods, 1 segments)
// CHECK: program schema v1, header v1
// CHECK: segments: 1
// CHECK-NEXT: 0: constants {{.*}} size {{ +}}36
// CHECK: method 'forward': {{[0-9]+}} values, 2 instructions, 2 operators, 0 delegates
// CHECK: inputs (1):
// CHECK-NEXT: 0: %0 float32[3, 3] arena 0 @ {{[0-9]+}}
// CHECK: outputs (1):
// CHECK-NEXT: float32[3, 3] arena 0 @
// CHECK: arenas:
// CHECK-NEXT: 0: planned {{ +}}96 bytes
// CHECK: aten::add.out  1
// CHECK: aten::relu.out  1
// CHECK: 0: aten::add.out(%0, %{{[0-9]+}}, 1, %{{[0-9]+}})   # {{.*}}:27 (edge.add_tensor)
// CHECK: 1: aten::relu.out(%{{[0-9]+}}, %{{[0-9]+}})   # {{.*}}:28 (edge.relu)
// CHECK: values:
// CHECK: Tensor float32[3, 3] constant @ 0 (36 bytes)
func.func @main(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %w = "edge.constant"() {etmlir.param = "w", value = dense_resource<w> : tensor<3x3xf32>} : () -> tensor<3x3xf32>
  %0 = "edge.add_tensor"(%x, %w, %one) : (tensor<3x3xf32>, tensor<3x3xf32>, tensor<i64>) -> tensor<3x3xf32>
  %1 = "edge.relu"(%0) : (tensor<3x3xf32>) -> tensor<3x3xf32>
  return %1 : tensor<3x3xf32>
}
{-#
  dialect_resources: {
    builtin: {
      w: "0x04000000000000000000803F0000004000004040000080400000A0400000C0400000E04000000041"
    }
  }
#-}
