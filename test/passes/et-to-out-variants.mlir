// RUN: et-opt %s --split-input-file --load=%S/Inputs/custom_ops.py --et-to-out-variants | FileCheck %s

// Each edge op becomes its out-variant kernel; attributes and Scalars become values in schema
// order, results become allocations, inputs and outputs become etx.input / etx.output.
// CHECK-LABEL: func.func @main() attributes {etx.method = "forward"}
// CHECK: %[[X:.*]] = "etx.input"() {index = 0 : i64, type = tensor<2x3xf32>}
// CHECK: %[[ONE:.*]] = "etx.const"() {value = 1 : i64}
// CHECK: %[[SUM:.*]] = "etx.alloc"() {type = tensor<2x3xf32>}
// CHECK: "etx.kernel_call"(%[[X]], %[[X]], %[[ONE]], %[[SUM]]) {debug_handle = 1 : i64, etmlir.edge_op = "edge.add_tensor", kernel = "aten::add.out", operandSegmentSizes = array<i32: 3, 1>}
// CHECK: %[[W:.*]] = "etx.constant"() {etmlir.param = "w", type = tensor<3x3xf32>, value = dense_resource<w> : tensor<3x3xf32>}
// CHECK: %[[MM:.*]] = "etx.alloc"() {type = tensor<2x3xf32>}
// CHECK: "etx.kernel_call"(%[[SUM]], %[[W]], %[[MM]]) {debug_handle = 2 : i64, etmlir.edge_op = "edge.mm", kernel = "aten::mm.out"
// CHECK: %[[R:.*]] = "etx.alloc"() {type = tensor<2x3xf32>}
// CHECK: "etx.kernel_call"(%[[MM]], %[[R]]) {debug_handle = 3 : i64, etmlir.edge_op = "edge.relu", kernel = "aten::relu.out"
// CHECK: "etx.output"(%[[R]])
// CHECK-NEXT: return
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %0 = "edge.add_tensor"(%x, %x, %one) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
  %w = "edge.constant"() {etmlir.param = "w", value = dense_resource<w> : tensor<3x3xf32>} : () -> tensor<3x3xf32>
  %1 = "edge.mm"(%0, %w) : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %2 = "edge.relu"(%1) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %2 : tensor<2x3xf32>
}
{-#
  dialect_resources: {
    builtin: {
      w: "0x04000000000000000000803F0000004000004040000080400000A0400000C0400000E04000000041"
    }
  }
#-}

// -----

// Dynamic dims: inputs take their upper bounds from etmlir.dynamic_dims, results from
// etmlir.upper_bounds; a size query becomes an etmlir_prim kernel writing an Int, and a list with
// run-time sizes is an etx.list of Int values. A function other than main keeps its name.
// CHECK-LABEL: func.func @dynamic() attributes {etx.method = "dynamic"}
// CHECK: %[[X:.*]] = "etx.input"() {index = 0 : i64, type = tensor<1x?xf32>, upper_bounds = array<i64: 1, 16>}
// CHECK: %[[DIM:.*]] = "etx.const"() {value = 1 : i64}
// CHECK: %[[T:.*]] = "etx.alloc"() {type = i64}
// CHECK: "etx.kernel_call"(%[[X]], %[[DIM]], %[[T]]) {{.*}}kernel = "etmlir_prim::sym_size.int"
// CHECK: %[[FOUR:.*]] = "etx.const"() {value = 4 : i64}
// CHECK: %[[SIZES:.*]] = "etx.list"(%[[FOUR]], %[[T]]) {kind = "int"}
// CHECK: %[[OUT:.*]] = "etx.alloc"() {type = tensor<4x?xf32>, upper_bounds = array<i64: 4, 16>}
// CHECK: "etx.kernel_call"(%[[X]], %[[SIZES]], %{{.*}}, %[[OUT]]) {{.*}}kernel = "aten::expand_copy.out"
func.func @dynamic(%x: tensor<1x?xf32> {etmlir.dynamic_dims = {"1" = {max = 16 : i64, min = 2 : i64, symbol = "s0"}}}) -> tensor<4x?xf32> {
  %t = "edge.sym_size_int"(%x) {dim = 1 : i64} : (tensor<1x?xf32>) -> tensor<i64>
  %0 = "edge.expand_copy"(%x, %t) {etmlir.upper_bounds = [array<i64: 4, 16>], implicit = false, size = array<i64: 4, -9223372036854775808>} : (tensor<1x?xf32>, tensor<i64>) -> tensor<4x?xf32>
  return %0 : tensor<4x?xf32>
}

// -----

// Several results are several outs; a Tensor[] result is one out list of allocations.
// CHECK-LABEL: func.func @multi
// CHECK: %[[A:.*]] = "etx.alloc"() {type = tensor<2x4xf32>}
// CHECK: %[[B:.*]] = "etx.alloc"() {type = tensor<2x1xf32>}
// CHECK: %[[C:.*]] = "etx.alloc"() {type = tensor<2x1xf32>}
// CHECK: "etx.kernel_call"({{.*}}, %[[A]], %[[B]], %[[C]]) {{.*}}kernel = "aten::native_layer_norm.out", operandSegmentSizes = array<i32: 5, 3>}
// CHECK: %[[S0:.*]] = "etx.alloc"() {type = tensor<2x2xf32>}
// CHECK: %[[S1:.*]] = "etx.alloc"() {type = tensor<2x2xf32>}
// CHECK: %[[L:.*]] = "etx.list"(%[[S0]], %[[S1]]) {kind = "tensor"}
// CHECK: "etx.kernel_call"(%[[A]], {{.*}}, %[[L]]) {{.*}}kernel = "aten::split_with_sizes_copy.out", operandSegmentSizes = array<i32: 3, 1>}
// CHECK: "etx.output"(%[[S1]], %[[B]])
func.func @multi(%x: tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x1xf32>) {
  %0:3 = "edge.native_layer_norm"(%x) {eps = 1.000000e-05 : f64, normalized_shape = array<i64: 4>, operandSegmentSizes = array<i32: 1, 0, 0, 0>} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %1:2 = "edge.split_with_sizes_copy"(%0#0) {dim = 1 : i64, split_sizes = array<i64: 2, 2>} : (tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
  return %1#1, %0#1 : tensor<2x2xf32>, tensor<2x1xf32>
}

// -----

// A custom op calls its registered out variant, with its constant arguments as values.
// CHECK-LABEL: func.func @custom
// CHECK: %[[F:.*]] = "etx.const"() {value = 2.500000e+00 : f64}
// CHECK: %[[D:.*]] = "etx.const"() {value = array<i64: 0, 1>}
// CHECK: "etx.kernel_call"(%{{.*}}, %[[F]], %[[D]], %{{.*}}) {{.*}}etmlir.edge_op = "edge.custom_op", kernel = "etmlir_test::scale_by.out"
func.func @custom(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "edge.custom_op"(%x) {args = {dims = array<i64: 0, 1>, factor = 2.500000e+00 : f64}, op = "etmlir_test::scale_by", schema = "etmlir_test::scale_by(Tensor x, float factor, int[] dims) -> Tensor"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// A constant cast to a dynamic type in front of a variadic operand (et-to-edge joins edge.cat's
// operand types) stays a constant of its own static type: a constant has no run-time size.
// CHECK-LABEL: func.func @cast_constant()
// CHECK: "etx.constant"() {type = tensor<2x1x4xf32>, value = dense<1.000000e+00> : tensor<2x1x4xf32>}
// CHECK: "etx.kernel_call"({{.*}}) {{.*}}kernel = "aten::cat.out"
func.func @cast_constant(%x: tensor<2x3x4xf32>) -> tensor<2x4x4xf32> {
  %c = "edge.constant"() {value = dense<1.0> : tensor<2x1x4xf32>} : () -> tensor<2x1x4xf32>
  %a = tensor.cast %c : tensor<2x1x4xf32> to tensor<2x?x4xf32>
  %b = tensor.cast %x : tensor<2x3x4xf32> to tensor<2x?x4xf32>
  %0 = "edge.cat"(%a, %b) {dim = 1 : i64} : (tensor<2x?x4xf32>, tensor<2x?x4xf32>) -> tensor<2x4x4xf32>
  return %0 : tensor<2x4x4xf32>
}

// -----

// A value read out of a tensor (`x.item()`) becomes an etmlir_prim kernel writing a scalar slot of
// the result's kind (a Double for a float), which later ops take as their Scalar argument.
// CHECK-LABEL: func.func @item()
// CHECK: %[[X:.*]] = "etx.input"()
// CHECK: %[[V:.*]] = "etx.alloc"() {type = f64}
// CHECK: "etx.kernel_call"(%[[X]], %[[V]]) {{.*}}kernel = "etmlir_prim::_local_scalar_dense"
// CHECK: "etx.kernel_call"(%[[X]], %[[V]], %{{.*}}) {{.*}}kernel = "aten::mul.Scalar_out"
func.func @item(%x: tensor<f32>) -> tensor<f32> {
  %0 = "edge.local_scalar_dense"(%x) : (tensor<f32>) -> tensor<f64>
  %1 = "edge.mul_scalar"(%x, %0) : (tensor<f32>, tensor<f64>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Program state (a buffer forward mutates): the state argument becomes an etx.state with its
// initial value, not an input. The kernel computing the new value writes it into the state
// (add may write over its own `self`), so no copy is left; readers of the new value read the state.
// CHECK-LABEL: func.func @counter()
// CHECK: %[[X:.*]] = "etx.input"() {index = 0 : i64, type = tensor<3xf32>}
// CHECK: %[[N:.*]] = "etx.state"() {name = "n", type = tensor<3xf32>, value = dense<0.000000e+00> : tensor<3xf32>}
// CHECK: "etx.kernel_call"(%[[N]], %{{.*}}, %{{.*}}, %[[N]]) {{.*}}kernel = "aten::add.Scalar_out"
// CHECK: %[[Y:.*]] = "etx.alloc"() {type = tensor<3xf32>}
// CHECK: "etx.kernel_call"(%[[X]], %[[N]], %[[Y]]) {{.*}}kernel = "aten::mul.out"
// CHECK-NOT: aten::clone.out
// CHECK: "etx.output"(%[[Y]])
func.func @counter(%x: tensor<3xf32>, %n: tensor<3xf32> {etmlir.state = "n", etmlir.state_initial = dense<0.0> : tensor<3xf32>})
    -> (tensor<3xf32>, tensor<3xf32> {etmlir.state = "n"}) {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %0 = "edge.add_scalar"(%n, %one, %one) : (tensor<3xf32>, tensor<i64>, tensor<i64>) -> tensor<3xf32>
  %1 = "edge.mul_tensor"(%x, %0) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %1, %0 : tensor<3xf32>, tensor<3xf32>
}

// -----

// The old value is read after the new one is computed (and the new value is also an output):
// the new value keeps its own allocation and a copy writes it into the state at the end. An
// output that is the state itself is copied out first, so the next call cannot overwrite it.
// CHECK-LABEL: func.func @late_reader()
// CHECK: %[[X:.*]] = "etx.input"()
// CHECK: %[[S:.*]] = "etx.state"() {name = "s"
// CHECK: %[[NEW:.*]] = "etx.alloc"() {type = tensor<3xf32>}
// CHECK: "etx.kernel_call"(%[[S]], %[[X]], %{{.*}}, %[[NEW]]) {{.*}}kernel = "aten::add.out"
// CHECK: "etx.kernel_call"(%[[X]], %[[S]], %[[PROD:.*]]) {{.*}}kernel = "aten::mul.out"
// CHECK: %[[OLD:.*]] = "etx.alloc"() {type = tensor<3xf32>}
// CHECK: "etx.kernel_call"(%[[S]], %[[NONE:.*]], %[[OLD]]) {{.*}}etmlir.edge_op = "output 2 = state 's'", kernel = "aten::clone.out"
// CHECK: "etx.kernel_call"(%[[NEW]], %[[NONE]], %[[S]]) {{.*}}etmlir.edge_op = "state update 's'", kernel = "aten::clone.out"
// CHECK: "etx.output"(%[[PROD]], %[[NEW]], %[[OLD]])
func.func @late_reader(%x: tensor<3xf32>, %s: tensor<3xf32> {etmlir.state = "s", etmlir.state_initial = dense<1.0> : tensor<3xf32>})
    -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32> {etmlir.state = "s"}) {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %0 = "edge.add_tensor"(%s, %x, %one) : (tensor<3xf32>, tensor<3xf32>, tensor<i64>) -> tensor<3xf32>
  %1 = "edge.mul_tensor"(%x, %s) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %1, %0, %s, %0 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
