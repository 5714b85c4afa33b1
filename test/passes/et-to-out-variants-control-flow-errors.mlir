// RUN: et-opt %s --split-input-file --verify-diagnostics --et-to-out-variants

// An op inside a branch that cannot be lowered is reported at that op (its source line), and
// the branch's result is not reported again.
func.func @branch_op(%p: tensor<i1>, %x: tensor<3xf32>, %y: tensor<3xf64>) -> tensor<3xf32> {
  %c = "etcf.predicate"(%p) : (tensor<i1>) -> i1
  %r = scf.if %c -> (tensor<3xf32>) {
    %s = "edge.sum_dim_intlist"(%y) {dim = array<i64: 0>, keepdim = false} : (tensor<3xf64>) -> tensor<f64>
    // expected-error @+1 {{argument `other` of 'edge.mul_scalar' is a Scalar computed at run time by a tensor op}}
    %0 = "edge.mul_scalar"(%x, %s) : (tensor<3xf32>, tensor<f64>) -> tensor<3xf32>
    scf.yield %0 : tensor<3xf32>
  } else {
    scf.yield %x : tensor<3xf32>
  }
  return %r : tensor<3xf32>
}

// -----

// A loop-carried value whose size changes from one iteration to the next has no bound (et-to-edge
// records none for what the loop computes from it): the op in the loop body is reported.
func.func @growing(%p: tensor<i1>, %x: tensor<?xf32> {etmlir.dynamic_dims = {"0" = {max = 8 : i64, min = 1 : i64, symbol = "s0"}}}) -> tensor<?xf32> {
  %r = scf.while (%a = %x) : (tensor<?xf32>) -> tensor<?xf32> {
    %c = "etcf.predicate"(%p) : (tensor<i1>) -> i1
    scf.condition(%c) %a : tensor<?xf32>
  } do {
  ^bb0(%a: tensor<?xf32>):
    // expected-error @+1 {{result type tensor<?xf32> is dynamic but has no `etmlir.upper_bounds`}}
    %0 = "edge.cat"(%a, %a) {dim = 0 : i64} : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    scf.yield %0 : tensor<?xf32>
  }
  return %r : tensor<?xf32>
}
