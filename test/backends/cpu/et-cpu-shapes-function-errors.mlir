// RUN: not et-opt %s --split-input-file --et-cpu-shapes-function 2>&1 | FileCheck %s

// The pass derives @forward_shapes from the delegate's entry point, which must exist.
// CHECK: error: et-cpu-shapes-function: the module has no func.func @forward
func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}

// -----

// Output sizes that only the computation knows (here: read from the input's data)
// cannot be derived without running it.
// CHECK: error: et-cpu-shapes-function: the delegate's output sizes depend on its computation
#id = affine_map<(d0) -> (d0)>
func.func @forward(%x: tensor<4xi64>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0 : i64
  %e = tensor.empty() : tensor<4xi64>
  %sum = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4xi64>) outs(%e : tensor<4xi64>) {
  ^bb0(%in: i64, %out: i64):
    %s = arith.addi %in, %in : i64
    linalg.yield %s : i64
  } -> tensor<4xi64>
  %first = tensor.extract %sum[%c0] : tensor<4xi64>
  %n = arith.index_cast %first : i64 to index
  %out = tensor.empty(%n) : tensor<?xf32>
  return %out : tensor<?xf32>
}
