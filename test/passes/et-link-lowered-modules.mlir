// RUN: et-opt %s --split-input-file --mlir-elide-elementsattrs-if-larger=16 --load=%S/Inputs/lowered_modules.py --et-link-lowered-modules | FileCheck %s
// As to_edge runs it, before et-assign-debug-handles: the outer ops get handles above the delegate's.
// RUN: et-opt %s --split-input-file --mlir-elide-elementsattrs-if-larger=16 --load=%S/Inputs/lowered_modules.py --et-link-lowered-modules --et-assign-debug-handles | FileCheck %s --check-prefix=HANDLES

// Inputs/lowered_modules.py lowers two small models whole to the nested backend, in this process:
//   etmlir_lowered::m0  relu(Linear(8, 4)):    tensor<1x8xf32> -> tensor<1x4xf32>, debug handles 1-3
//   etmlir_lowered::m1  sigmoid(Linear(4, 2)): tensor<1x4xf32> -> tensor<1x2xf32>, debug handles 1-3
// The input is what et-to-edge makes of a model that calls them. The payload's bytes are the
// backend's business; these tests check that one is there, of a nonzero size.

// One call: it becomes a call of the delegate's declaration; the lowered module's delegate
// (its ops, handles, compile specs, debug-handle map and payload) is copied in as @nested_0 and
// records which lowered module it came from. Nothing else changes.
// CHECK-LABEL: func.func @one
// CHECK-NEXT: %[[N:.*]] = "edge.neg"(%arg0) : (tensor<1x8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT: %[[C:.*]] = call @nested_0.forward(%[[N]]) {etmlir.backend = "nested"} : (tensor<1x8xf32>) -> tensor<1x4xf32>
// CHECK-NEXT: "edge.constant"
// CHECK-NEXT: "edge.mul_scalar"(%[[C]],
// CHECK-NOT: edge.custom_op
// CHECK: module @nested_0 attributes {etmlir.backend = "nested", etmlir.compile_specs = {}, etmlir.debug_handle_map = {"1" = array<i64: 1>, "2" = array<i64: 2>, "3" = array<i64: 3>}, etmlir.lowered_from = "etmlir_lowered::m0", etmlir.payload = {{.+}} : tensor<{{[1-9][0-9]*}}xui8>} {
// CHECK-NEXT: func.func @forward(%arg0: tensor<1x8xf32>) -> tensor<1x4xf32>
// CHECK: "edge.permute_copy"({{.*}}) {dims = array<i64: 1, 0>, etmlir.debug_handle = 1 : i64}
// CHECK: "edge.addmm"({{.*}}) {etmlir.debug_handle = 2 : i64}
// CHECK: "edge.relu"({{.*}}) {etmlir.debug_handle = 3 : i64}
// CHECK: func.func private @nested_0.forward(tensor<1x8xf32>) -> tensor<1x4xf32> attributes {etmlir.backend = "nested"}
// HANDLES-LABEL: func.func @one
// HANDLES-NEXT: "edge.neg"(%arg0) {etmlir.debug_handle = 4 : i64}
// HANDLES-NEXT: call @nested_0.forward({{.*}}) {etmlir.backend = "nested", etmlir.debug_handle = 5 : i64}
// HANDLES-NEXT: "edge.constant"
// HANDLES-NEXT: "edge.mul_scalar"({{.*}}) {etmlir.debug_handle = 6 : i64}
// HANDLES: module @nested_0 {{.*}}etmlir.debug_handle_map = {"1" = array<i64: 1>, "2" = array<i64: 2>, "3" = array<i64: 3>}
func.func @one(%x: tensor<1x8xf32>) -> tensor<1x4xf32> {
  %0 = "edge.neg"(%x) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %1 = "edge.custom_op"(%0) {args = {}, op = "etmlir_lowered::m0", schema = "etmlir_lowered::m0(Tensor a0) -> Tensor"} : (tensor<1x8xf32>) -> tensor<1x4xf32>
  %2 = "edge.constant"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>
  %3 = "edge.mul_scalar"(%1, %2) : (tensor<1x4xf32>, tensor<i64>) -> tensor<1x4xf32>
  return %3 : tensor<1x4xf32>
}

// -----

// Two calls of one lowered module share one delegate (the .pte stores its payload once).
// CHECK-LABEL: func.func @twice
// CHECK-NEXT: %[[A:.*]] = call @nested_0.forward(%arg0) {etmlir.backend = "nested"}
// CHECK-NEXT: %[[B:.*]] = call @nested_0.forward(%arg1) {etmlir.backend = "nested"}
// CHECK: "edge.add_tensor"(%[[A]], %[[B]],
// CHECK: module @nested_0 attributes {{.*}}etmlir.lowered_from = "etmlir_lowered::m0"
// CHECK: func.func private @nested_0.forward
// CHECK-NOT: module @nested_1
func.func @twice(%x: tensor<1x8xf32>, %y: tensor<1x8xf32>) -> tensor<1x4xf32> {
  %0 = "edge.custom_op"(%x) {args = {}, op = "etmlir_lowered::m0", schema = "etmlir_lowered::m0(Tensor a0) -> Tensor"} : (tensor<1x8xf32>) -> tensor<1x4xf32>
  %1 = "edge.custom_op"(%y) {args = {}, op = "etmlir_lowered::m0", schema = "etmlir_lowered::m0(Tensor a0) -> Tensor"} : (tensor<1x8xf32>) -> tensor<1x4xf32>
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %2 = "edge.add_tensor"(%0, %1, %one) : (tensor<1x4xf32>, tensor<1x4xf32>, tensor<i64>) -> tensor<1x4xf32>
  return %2 : tensor<1x4xf32>
}

// -----

// Two lowered modules whose handles collide (both 1-3): the second copy is renumbered above every
// handle in the module (4-6) and compiled again, so its debug-handle map names the new handles;
// its weights, which belonged to the lowered module's program, are now in the IR.
// CHECK-LABEL: func.func @two
// CHECK-NEXT: %[[A:.*]] = call @nested_0.forward(%arg0) {etmlir.backend = "nested"} : (tensor<1x8xf32>) -> tensor<1x4xf32>
// CHECK-NEXT: call @nested_1.forward(%[[A]]) {etmlir.backend = "nested"} : (tensor<1x4xf32>) -> tensor<1x2xf32>
// CHECK: module @nested_0 attributes {{.*}}etmlir.debug_handle_map = {"1" = array<i64: 1>, "2" = array<i64: 2>, "3" = array<i64: 3>}, etmlir.lowered_from = "etmlir_lowered::m0"
// CHECK: func.func private @nested_0.forward(tensor<1x8xf32>) -> tensor<1x4xf32>
// CHECK: module @nested_1 attributes {etmlir.backend = "nested", etmlir.compile_specs = {}, etmlir.debug_handle_map = {"4" = array<i64: 4>, "5" = array<i64: 5>, "6" = array<i64: 6>}, etmlir.lowered_from = "etmlir_lowered::m1", etmlir.payload = {{.+}} : tensor<{{[1-9][0-9]*}}xui8>} {
// CHECK-NEXT: func.func @forward(%arg0: tensor<1x4xf32>) -> tensor<1x2xf32>
// CHECK-DAG: "edge.constant"() {etmlir.param = "lin.weight", value = dense<[{{.*}}]> : tensor<2x4xf32>}
// CHECK-DAG: "edge.constant"() {etmlir.param = "lin.bias", value = dense<[{{.*}}]> : tensor<2xf32>}
// CHECK: "edge.permute_copy"({{.*}}etmlir.debug_handle = 4 : i64
// CHECK: "edge.addmm"({{.*}}) {etmlir.debug_handle = 5 : i64}
// CHECK: "edge.sigmoid"({{.*}}) {etmlir.debug_handle = 6 : i64}
// CHECK: func.func private @nested_1.forward(tensor<1x4xf32>) -> tensor<1x2xf32> attributes {etmlir.backend = "nested"}
func.func @two(%x: tensor<1x8xf32>) -> tensor<1x2xf32> {
  %0 = "edge.custom_op"(%x) {args = {}, op = "etmlir_lowered::m0", schema = "etmlir_lowered::m0(Tensor a0) -> Tensor"} : (tensor<1x8xf32>) -> tensor<1x4xf32>
  %1 = "edge.custom_op"(%0) {args = {}, op = "etmlir_lowered::m1", schema = "etmlir_lowered::m1(Tensor a0) -> Tensor"} : (tensor<1x4xf32>) -> tensor<1x2xf32>
  return %1 : tensor<1x2xf32>
}

// -----

// A module that already has a delegate (@nested_0, handles 2 and 9): the linked one takes the
// next free name, and as handle 2 is taken its handles start above the largest (10).
// CHECK-LABEL: func.func @existing
// CHECK-NEXT: %[[L:.*]] = call @nested_1.forward(%arg0) {etmlir.backend = "nested"} : (tensor<1x8xf32>) -> tensor<1x4xf32>
// CHECK-NEXT: call @nested_0.forward(%[[L]]) {etmlir.backend = "nested", etmlir.debug_handle = 9 : i64}
// CHECK: module @nested_0 attributes {etmlir.backend = "nested", etmlir.compile_specs = {}, etmlir.debug_handle_map = {"2" = array<i64: 2>}, etmlir.payload = dense<[1, 2, 3]> : tensor<3xui8>}
// CHECK: module @nested_1 attributes {etmlir.backend = "nested", etmlir.compile_specs = {}, etmlir.debug_handle_map = {"10" = array<i64: 10>, "11" = array<i64: 11>, "12" = array<i64: 12>}, etmlir.lowered_from = "etmlir_lowered::m0", etmlir.payload = {{.+}} : tensor<{{[1-9][0-9]*}}xui8>}
// CHECK: func.func private @nested_1.forward(tensor<1x8xf32>) -> tensor<1x4xf32> attributes {etmlir.backend = "nested"}
func.func @existing(%x: tensor<1x8xf32>) -> tensor<1x4xf32> {
  %0 = "edge.custom_op"(%x) {args = {}, op = "etmlir_lowered::m0", schema = "etmlir_lowered::m0(Tensor a0) -> Tensor"} : (tensor<1x8xf32>) -> tensor<1x4xf32>
  %1 = call @nested_0.forward(%0) {etmlir.backend = "nested", etmlir.debug_handle = 9 : i64} : (tensor<1x4xf32>) -> tensor<1x4xf32>
  return %1 : tensor<1x4xf32>
}
func.func private @nested_0.forward(tensor<1x4xf32>) -> tensor<1x4xf32> attributes {etmlir.backend = "nested"}
module @nested_0 attributes {etmlir.backend = "nested", etmlir.compile_specs = {}, etmlir.debug_handle_map = {"2" = array<i64: 2>}, etmlir.payload = dense<[1, 2, 3]> : tensor<3xui8>} {
  func.func @forward(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {
    %0 = "edge.relu"(%arg0) {etmlir.debug_handle = 2 : i64} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    return %0 : tensor<1x4xf32>
  }
}

// -----

// Other custom ops are not calls of lowered modules: left as they are.
// CHECK-LABEL: func.func @other
// CHECK-NEXT: "edge.custom_op"(%arg0) {{.*}}op = "etmlir_test::scale_by"
// CHECK-NOT: module @
func.func @other(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "edge.custom_op"(%x) {args = {dims = array<i64: 0, 1>, factor = 2.500000e+00 : f64}, op = "etmlir_test::scale_by", schema = "etmlir_test::scale_by(Tensor x, float factor, int[] dims) -> Tensor"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
