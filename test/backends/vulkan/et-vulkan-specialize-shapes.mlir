// RUN: et-opt %s --et-vulkan-specialize-shapes=size=64 | FileCheck %s

// The dynamic sequence dim becomes 64 in the arguments, the body and the result; the 0-d size the
// host computed (a sym_size outside the delegate) is pinned to 64 and recorded, so the reshape it
// sizes becomes static too.
// CHECK: module attributes {etmlir.vulkan_pinned = array<i64: 1>}
// CHECK: func.func @forward(%{{.*}}: tensor<1x64x8xf32>, %{{.*}}: tensor<i64>) -> tensor<64x8xf32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<1x64x8xf32>) outs(%{{.*}} : tensor<1x64x8xf32>)
// CHECK: tensor.reshape {{.*}} -> tensor<64x8xf32>
// CHECK: return %{{.*}} : tensor<64x8xf32>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @forward(%x: tensor<1x?x8xf32>, %t: tensor<i64>) -> tensor<?x8xf32> {
  %c1 = arith.constant 1 : index
  %d = tensor.dim %x, %c1 : tensor<1x?x8xf32>
  %e = tensor.empty(%d) : tensor<1x?x8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<1x?x8xf32>) outs(%e : tensor<1x?x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<1x?x8xf32>
  %n = tensor.extract %t[] : tensor<i64>
  %c8 = arith.constant 8 : i64
  %shape = tensor.from_elements %n, %c8 : tensor<2xi64>
  %r = tensor.reshape %0(%shape) : (tensor<1x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
