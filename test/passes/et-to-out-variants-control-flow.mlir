// RUN: et-opt %s --split-input-file --et-to-out-variants | FileCheck %s
// RUN: et-opt %s --split-input-file --et-to-out-variants --et-plan-memory --et-verify-memory-plan | FileCheck %s --check-prefix=PLAN

// scf.if: the result gets a slot before the branch; each branch moves its value into it. The
// predicate tensor itself is the jump's condition; the jump over the else branch is on a
// constant false. Targets are instruction indices: 0 jump, 1 sin, 2 move, 3 jump, 4 move.
// CHECK-LABEL: func.func @main()
// CHECK: %[[P:.*]] = "etx.input"() {index = 0 : i64, type = tensor<i1>}
// CHECK: %[[X:.*]] = "etx.input"() {index = 1 : i64, type = tensor<3xf32>}
// CHECK: %[[R:.*]] = "etx.alloc"() {type = tensor<3xf32>}
// CHECK: "etx.jump_false"(%[[P]]) {target = 4 : i64}
// CHECK: %[[SIN:.*]] = "etx.alloc"() {type = tensor<3xf32>}
// CHECK: "etx.kernel_call"(%[[X]], %[[SIN]]) {{.*}}kernel = "aten::sin.out"
// CHECK: "etx.move"(%[[SIN]], %[[R]])
// CHECK: %[[FALSE:.*]] = "etx.const"() {value = false}
// CHECK: "etx.jump_false"(%[[FALSE]]) {target = 5 : i64}
// CHECK: "etx.move"(%[[X]], %[[R]])
// CHECK: "etx.output"(%[[R]])
func.func @main(%p: tensor<i1>, %x: tensor<3xf32>) -> tensor<3xf32> {
  %c = "etcf.predicate"(%p) : (tensor<i1>) -> i1
  %r = scf.if %c -> (tensor<3xf32>) {
    %0 = "edge.sin"(%x) : (tensor<3xf32>) -> tensor<3xf32>
    scf.yield %0 : tensor<3xf32>
  } else {
    scf.yield %x : tensor<3xf32>
  }
  return %r : tensor<3xf32>
}

// -----

// scf.while: the carried values get slots, initialized by moves; the condition region runs at
// instruction 2, its jump leaves the loop (target 10, the end), the body's values are moved
// into the slots and a jump on false goes back to 2. The results are the slots.
// CHECK-LABEL: func.func @loop()
// CHECK: %[[N:.*]] = "etx.input"() {index = 0 : i64
// CHECK: %[[X:.*]] = "etx.input"() {index = 1 : i64
// CHECK: %[[ZERO:.*]] = "etx.constant"()
// CHECK: %[[I:.*]] = "etx.alloc"() {type = tensor<i64>}
// CHECK: %[[ACC:.*]] = "etx.alloc"() {type = tensor<3xf32>}
// CHECK: "etx.move"(%[[ZERO]], %[[I]])
// CHECK: "etx.move"(%[[X]], %[[ACC]])
// CHECK: %[[LT:.*]] = "etx.alloc"() {type = tensor<i1>}
// CHECK: "etx.kernel_call"(%[[I]], %[[N]], %[[LT]]) {{.*}}kernel = "aten::lt.Tensor_out"
// CHECK: "etx.jump_false"(%[[LT]]) {target = 10 : i64}
// CHECK: "etx.kernel_call"(%[[ACC]], %[[X]], {{.*}}kernel = "aten::add.out"
// CHECK: kernel = "aten::mul.out"
// CHECK: "etx.kernel_call"(%[[I]], {{.*}}kernel = "aten::add.out"
// CHECK: "etx.move"(%{{.*}}, %[[I]])
// CHECK: "etx.move"(%{{.*}}, %[[ACC]])
// CHECK: %[[FALSE:.*]] = "etx.const"() {value = false}
// CHECK: "etx.jump_false"(%[[FALSE]]) {target = 2 : i64}
// CHECK: "etx.output"(%[[I]], %[[ACC]])

// The inputs are read inside the loop (%n by the condition, %x by the body), so they stay live
// until the backward jump: what the loop allocates after their last reads never takes their
// bytes (offsets 0 and 16), though each read is the last in program order.
// PLAN-LABEL: func.func @loop()
// PLAN: "etx.input"() {index = 0 : i64, mem_id = 0 : i64, offset = 0 : i64
// PLAN: "etx.input"() {index = 1 : i64, mem_id = 0 : i64, offset = 16 : i64
// PLAN-NOT: offset = {{0|16}} : i64
// PLAN: "etx.output"
func.func @loop(%n: tensor<i64>, %x: tensor<3xf32>) -> (tensor<i64>, tensor<3xf32>) {
  %zero = "edge.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %r:2 = scf.while (%i = %zero, %acc = %x) : (tensor<i64>, tensor<3xf32>) -> (tensor<i64>, tensor<3xf32>) {
    %lt = "edge.lt_tensor"(%i, %n) : (tensor<i64>, tensor<i64>) -> tensor<i1>
    %c = "etcf.predicate"(%lt) : (tensor<i1>) -> i1
    scf.condition(%c) %i, %acc : tensor<i64>, tensor<3xf32>
  } do {
  ^bb0(%i: tensor<i64>, %acc: tensor<3xf32>):
    %a0 = "edge.add_tensor"(%acc, %x, %one) : (tensor<3xf32>, tensor<3xf32>, tensor<i64>) -> tensor<3xf32>
    %a1 = "edge.mul_tensor"(%a0, %a0) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %i1 = "edge.add_tensor"(%i, %one, %one) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<i64>
    scf.yield %i1, %a1 : tensor<i64>, tensor<3xf32>
  }
  return %r#0, %r#1 : tensor<i64>, tensor<3xf32>
}

// -----

// A loop that swaps its carried values moves one through a temporary first, so the second
// move does not read a slot the first has overwritten.
// CHECK-LABEL: func.func @main()
// CHECK: %[[A:.*]] = "etx.alloc"() {type = tensor<2xf32>}
// CHECK: %[[B:.*]] = "etx.alloc"() {type = tensor<2xf32>}
// CHECK: "etx.jump_false"
// CHECK: "etx.kernel_call"
// CHECK-NEXT: %[[T:.*]] = "etx.alloc"() {type = tensor<2xf32>}
// CHECK-NEXT: "etx.move"(%[[B]], %[[T]])
// CHECK-NEXT: "etx.move"(%[[T]], %[[A]])
// CHECK-NEXT: "etx.move"(%{{.*}}, %[[B]])
func.func @main(%p: tensor<i1>, %a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
  %r:2 = scf.while (%x = %a, %y = %b) : (tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
    %c = "etcf.predicate"(%p) : (tensor<i1>) -> i1
    scf.condition(%c) %x, %y : tensor<2xf32>, tensor<2xf32>
  } do {
  ^bb0(%x: tensor<2xf32>, %y: tensor<2xf32>):
    %s = "edge.add_tensor"(%x, %y, %one) : (tensor<2xf32>, tensor<2xf32>, tensor<i64>) -> tensor<2xf32>
    scf.yield %y, %s : tensor<2xf32>, tensor<2xf32>
  }
  return %r#0 : tensor<2xf32>
}

// -----

// A dynamic result is planned at the largest upper bound of the branches' values.
// CHECK-LABEL: func.func @main()
// CHECK: "etx.alloc"() {type = tensor<?xf32>, upper_bounds = array<i64: 16>}
func.func @main(%p: tensor<i1>, %x: tensor<?xf32> {etmlir.dynamic_dims = {"0" = {max = 8 : i64, min = 1 : i64, symbol = "s0"}}}) -> tensor<?xf32> {
  %c = "etcf.predicate"(%p) : (tensor<i1>) -> i1
  %r = scf.if %c -> (tensor<?xf32>) {
    scf.yield %x : tensor<?xf32>
  } else {
    %0 = "edge.cat"(%x, %x) {dim = 0 : i64, etmlir.upper_bounds = [array<i64: 16>]} : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    scf.yield %0 : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}
