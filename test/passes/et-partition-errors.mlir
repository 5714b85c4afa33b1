// RUN: et-opt %s --verify-diagnostics --et-partition="backend=nope"

// expected-error @below {{et-partition: no backend 'nope' is registered (registered: cpu, nested)}}
module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "edge.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
