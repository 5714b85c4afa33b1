// RUN: et-opt %s --split-input-file --verify-diagnostics --et-to-edge

// A dtype the edge op's kernels do not accept is rejected before anything is rewritten.
func.func @softmax_on_ints(%x: !torch.vtensor<[2,3],si64>) -> !torch.vtensor<[2,3],si64> {
  %int1 = torch.constant.int 1
  %false = torch.constant.bool false
  // expected-error @+1 {{'edge.softmax' (aten::_softmax) does not accept dtypes (self=i64, result=i64): self must be one of bf16, f16, f32, f64}}
  %0 = torch.aten._softmax %x, %int1, %false : !torch.vtensor<[2,3],si64>, !torch.int, !torch.bool -> !torch.vtensor<[2,3],si64>
  return %0 : !torch.vtensor<[2,3],si64>
}

// -----

// An op outside Core ATen has no edge form: the error names it and where it is.
func.func @not_core(%x: !torch.vtensor<[2,3],f32>, %w: !torch.vtensor<[4,3],f32>) -> !torch.vtensor<[2,4],f32> {
  %none = torch.constant.none
  // expected-error @+1 {{'aten.linear.default' is not Core ATen and has no edge op; run et-decompose-to-core-aten first}}
  %0 = torch.aten.linear %x, %w, %none : !torch.vtensor<[2,3],f32>, !torch.vtensor<[4,3],f32>, !torch.none -> !torch.vtensor<[2,4],f32>
  return %0 : !torch.vtensor<[2,4],f32>
}

// -----

// An attribute argument must be a constant at the edge level.
func.func @runtime_dim(%x: !torch.vtensor<[2,3],f32>, %d: !torch.int) -> !torch.vtensor<[2,3],f32> {
  %false = torch.constant.bool false
  // expected-error @+1 {{argument 'dim' of 'aten._softmax.default': operand of type !torch.int is a block argument, not a constant}}
  %0 = torch.aten._softmax %x, %d, %false : !torch.vtensor<[2,3],f32>, !torch.int, !torch.bool -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}

// -----

// A custom op PyTorch does not know (never registered) cannot be passed through.
func.func @unknown_custom(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  // expected-error @+1 {{PyTorch has no operator 'nowhere.mystery_op.default'}}
  %0 = torch.operator "nowhere.mystery_op"(%x) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}

// -----

// Scalar arithmetic on a run-time size outside the sym_* families has no edge form.
func.func @unsupported_size_arithmetic(%x: !torch.vtensor<[?],f32> {etmlir.dynamic_dims = {"0" = {max = 8 : i64, min = 2 : i64, symbol = "s0"}}}) -> !torch.vtensor<[?],f32> {
  %int0 = torch.constant.int 0
  %n = torch.aten.size.int %x, %int0 : !torch.vtensor<[?],f32>, !torch.int -> !torch.int
  // expected-error @+1 {{scalar op 'aten.Bool.int' on a value known only at run time has no edge form}}
  %b = torch.aten.Bool.int %n : !torch.int -> !torch.bool
  return %x : !torch.vtensor<[?],f32>
}
