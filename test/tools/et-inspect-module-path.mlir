// RUN: et-opt %s --et-to-out-variants --et-plan-memory --et-emit=%t.pte -o /dev/null
// RUN: et-inspect %t.pte | FileCheck %s

// A location that records the op's nn.Module (`etmlir.module_path`, as etmlir.export writes it)
// reaches the .pte's debug info: et-inspect names the module after each instruction's source line.
// The innermost frame outside torch is the source line (model.py:12, not the caller's 30).
// An op of the model's own forward (path "") and one with no path get no module.
// CHECK: 0: aten::add.out({{.*}})   # model.py:12 (edge.add_tensor) in layers.3.attn{{$}}
// CHECK: 1: aten::relu.out({{.*}})   # model.py:31 (edge.relu){{$}}
// CHECK: 2: aten::neg.out({{.*}})   # model.py:32 (edge.neg){{$}}
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %0 = "edge.add_tensor"(%x, %x, %one) {etmlir.debug_handle = 1 : i64} : (tensor<3xf32>, tensor<3xf32>, tensor<i64>) -> tensor<3xf32> loc(#attn)
  %1 = "edge.relu"(%0) {etmlir.debug_handle = 2 : i64} : (tensor<3xf32>) -> tensor<3xf32> loc(#root)
  %2 = "edge.neg"(%1) {etmlir.debug_handle = 3 : i64} : (tensor<3xf32>) -> tensor<3xf32> loc("model.py":32:0)
  return %2 : tensor<3xf32>
}
#attn = loc(fused<{etmlir.module_path = "layers.3.attn"}>[callsite("torch/nn/modules/linear.py":134:0 at callsite("model.py":12:0 at "model.py":30:0))])
#root = loc(fused<{etmlir.module_path = ""}>["model.py":31:0])
