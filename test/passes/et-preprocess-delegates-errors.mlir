// RUN: et-opt %s --split-input-file --verify-diagnostics --load=%S/Inputs/custom_ops.py --et-preprocess-delegates
// RUN: not et-opt %s --split-input-file --load=%S/Inputs/custom_ops.py --et-preprocess-delegates 2>&1 | FileCheck %s

// A backend that fails is an error at the delegate module, naming the module, the backend and why.

module {
  // expected-error @+1 {{delegate @nosuch_0: no backend 'nosuch' is registered}}
  module @nosuch_0 attributes {etmlir.backend = "nosuch"} {
    func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32> {
      %0 = "edge.relu"(%arg0) {etmlir.debug_handle = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
      return %0 : tensor<4xf32>
    }
  }
}

// -----

// A compile spec the backend does not know.
module {
  // expected-error @+1 {{delegate @nested_0: nested backend: unknown compile spec(s) bogus (known: fold_constants, method, temp_bytes)}}
  module @nested_0 attributes {etmlir.backend = "nested", etmlir.compile_specs = {bogus = "1", fold_constants = "false"}} {
    func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32> {
      %0 = "edge.relu"(%arg0) {etmlir.debug_handle = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
      return %0 : tensor<4xf32>
    }
  }
}

// -----

// A delegate the nested backend's pipeline rejects: the error goes on with the reason its own
// pass gave, at the op's line.
// CHECK: et-preprocess-delegates-errors.mlir:[[# @LINE + 4]]:3: error: delegate @nested_0: nested backend: the delegate does not compile:
// CHECK-NEXT: error: "{{.*}}":[[# @LINE + 5]]:12: 'edge.custom_op': custom op etmlir_test::scale_by_no_out has no out variant
module {
  // expected-error @+1 {{delegate @nested_0: nested backend: the delegate does not compile}}
  module @nested_0 attributes {etmlir.backend = "nested"} {
    func.func @forward(%arg0: tensor<2xf32>) -> tensor<2xf32> {
      %0 = "edge.custom_op"(%arg0) {args = {factor = 2.000000e+00 : f64}, etmlir.debug_handle = 1 : i64, op = "etmlir_test::scale_by_no_out", schema = "etmlir_test::scale_by_no_out(Tensor x, float factor) -> Tensor"} : (tensor<2xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32>
    }
  }
}

// -----

// Every failing delegate is reported, not only the first: an unknown backend, then a dynamic
// input without an upper bound (the nested program cannot plan its memory). The good delegate
// between them does not hide either.
module {
  // expected-error @+1 {{delegate @nosuch_0: no backend 'nosuch' is registered}}
  module @nosuch_0 attributes {etmlir.backend = "nosuch"} {
    func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32> {
      return %arg0 : tensor<4xf32>
    }
  }
  module @nested_0 attributes {etmlir.backend = "nested"} {
    func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32> {
      %0 = "edge.neg"(%arg0) {etmlir.debug_handle = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
      return %0 : tensor<4xf32>
    }
  }
  // expected-error @+1 {{input 0 dim 1 is dynamic with no upper bound}}
  module @nested_1 attributes {etmlir.backend = "nested"} {
    func.func @forward(%arg0: tensor<1x?xf32>) -> tensor<1x?xf32> {
      %0 = "edge.relu"(%arg0) {etmlir.debug_handle = 2 : i64} : (tensor<1x?xf32>) -> tensor<1x?xf32>
      return %0 : tensor<1x?xf32>
    }
  }
}
