// RUN: et-opt %s --split-input-file --verify-diagnostics --load=%S/Inputs/custom_ops.py --et-to-out-variants
// RUN: not et-opt %s --split-input-file --load=%S/Inputs/custom_ops.py --et-to-out-variants=functions=nope 2>&1 | FileCheck %s --check-prefix=FUNCTIONS
// FUNCTIONS: error: et-to-out-variants: functions=nope: no function @nope with a body in the module (functions: custom_no_out)

// A custom op without a registered `.out` overload.
func.func @custom_no_out(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{custom op etmlir_test::scale_by_no_out has no out variant: register `etmlir_test::scale_by_no_out.out}}
  %0 = "edge.custom_op"(%x) {args = {factor = 2.0 : f64}, op = "etmlir_test::scale_by_no_out", schema = "etmlir_test::scale_by_no_out(Tensor x, float factor) -> Tensor"} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// A Scalar argument computed by a tensor op cannot be a constant value in the program.
func.func @runtime_scalar(%x: tensor<3xf32>, %y: tensor<3xf64>) -> tensor<3xf32> {
  %s = "edge.sum_dim_intlist"(%y) {dim = array<i64: 0>, keepdim = false} : (tensor<3xf64>) -> tensor<f64>
  // expected-error @+1 {{argument `other` of 'edge.mul_scalar' is a Scalar computed at run time by a tensor op}}
  %0 = "edge.mul_scalar"(%x, %s) : (tensor<3xf32>, tensor<f64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// A dynamic input dim needs an upper bound to be planned.
// expected-error @+1 {{input 0 dim 1 is dynamic with no upper bound}}
func.func @unbounded(%x: tensor<1x?xf32>) -> tensor<1x?xf32> {
  return %x : tensor<1x?xf32>
}

// -----

// A torch-dialect module has not been through et-to-edge: refused at its first torch op, not crashed on.
func.func @torch_level(%x: !torch.vtensor<[2,3],f32>, %y: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
  // expected-error @+1 {{et-to-out-variants expects an edge-dialect module; found 'torch.constant.int' (a torch-dialect op): run --et-to-edge first (after --et-decompose-to-core-aten)}}
  %int1 = torch.constant.int 1
  %0 = torch.aten.add.Tensor %x, %y, %int1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}

// -----

// Only types say torch here: the function is reported.
// expected-error @+1 {{et-to-out-variants expects an edge-dialect module; found function @torch_types (with torch-dialect types)}}
func.func @torch_types(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  return %x : !torch.vtensor<[2],f32>
}

// -----

// Converting twice: the module is already at the etx level.
// expected-error @+1 {{et-to-out-variants expects an edge-dialect module; found function @main (an etx method): the module is already at the etx level (et-to-out-variants ran)}}
func.func @main() attributes {etx.method = "forward"} {
  return
}
