// RUN: et-opt %s --split-input-file --pass-pipeline='builtin.module(et-torch-to-linalg{attention=1},et-cpu-attention)' | FileCheck %s
// (tm_tensor.attention, which the pass rewrites, is torch-mlir's lowering of a kept attention; et-opt
// does not parse that dialect, so each case starts from the torch op.)

// PyTorch's causal mask (0 where row >= column, else -inf) is recognized and never built: the
// kernel is told `causal` (1) and the scale is 1/sqrt(depth) = 1/sqrt(64).
// CHECK-LABEL: func.func @forward
// CHECK-NOT: tm_tensor.attention
// CHECK-NOT: linalg.generic
// CHECK: bufferization.to_buffer %{{.*}} read_only : tensor<6x?x64xf32> to memref<6x?x64xf32, strided<[?, ?, ?], offset: ?>>
// CHECK: %[[OUT:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<6x?x64xf32>
// CHECK: %[[CAUSAL:.*]] = arith.constant 1 : i64
// CHECK: %[[SCALE:.*]] = arith.constant 1.250000e-01 : f32
// CHECK: call @etmlir_uk_attention(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[CAUSAL]], %[[SCALE]])
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable : memref<6x?x64xf32> to tensor<6x?x64xf32>
// CHECK: func.func private @etmlir_uk_attention(memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, {{.*}}, i64, f32)
func.func @forward(%q: !torch.vtensor<[1,6,?,64],f32>, %k: !torch.vtensor<[1,6,?,64],f32>, %v: !torch.vtensor<[1,6,?,64],f32>) -> !torch.vtensor<[1,6,?,64],f32> {
  %none = torch.constant.none
  %zero = torch.constant.float 0.000000e+00
  %true = torch.constant.bool true
  %false = torch.constant.bool false
  %0 = torch.aten.scaled_dot_product_attention %q, %k, %v, %none, %zero, %true, %none, %false : !torch.vtensor<[1,6,?,64],f32>, !torch.vtensor<[1,6,?,64],f32>, !torch.vtensor<[1,6,?,64],f32>, !torch.none, !torch.float, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[1,6,?,64],f32>
  return %0 : !torch.vtensor<[1,6,?,64],f32>
}

// -----

// Any other mask is passed as it is: f32 to the _mask kernel, boolean to the _bmask one (not causal).
// An explicit scale (0.5) is folded into the query by et-torch-to-linalg, so the kernel's is 1/sqrt(32).
// CHECK-LABEL: func.func @masks
// CHECK: %[[NOT:.*]] = arith.constant 0 : i64
// CHECK: %[[SCALE:.*]] = arith.constant 0.176776692 : f32
// CHECK: call @etmlir_uk_attention_mask(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[NOT]], %[[SCALE]])
// CHECK: call @etmlir_uk_attention_bmask({{.*}}) : (memref<?x?x?xf32, {{.*}}>, memref<?x?x?xf32, {{.*}}>, memref<?x?x?xf32, {{.*}}>, memref<?x?x?xi1, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, {{.*}}>, i64, f32) -> ()
func.func @masks(%q: !torch.vtensor<[4,8,32],f32>, %k: !torch.vtensor<[4,9,32],f32>, %v: !torch.vtensor<[4,9,16],f32>, %m: !torch.vtensor<[4,8,9],f32>, %b: !torch.vtensor<[4,8,9],i1>) -> (!torch.vtensor<[4,8,16],f32>, !torch.vtensor<[4,8,16],f32>) {
  %none = torch.constant.none
  %zero = torch.constant.float 0.000000e+00
  %half = torch.constant.float 5.000000e-01
  %false = torch.constant.bool false
  %0 = torch.aten.scaled_dot_product_attention %q, %k, %v, %m, %zero, %false, %half, %false : !torch.vtensor<[4,8,32],f32>, !torch.vtensor<[4,9,32],f32>, !torch.vtensor<[4,9,16],f32>, !torch.vtensor<[4,8,9],f32>, !torch.float, !torch.bool, !torch.float, !torch.bool -> !torch.vtensor<[4,8,16],f32>
  %1 = torch.aten.scaled_dot_product_attention %q, %k, %v, %b, %zero, %false, %none, %false : !torch.vtensor<[4,8,32],f32>, !torch.vtensor<[4,9,32],f32>, !torch.vtensor<[4,9,16],f32>, !torch.vtensor<[4,8,9],i1>, !torch.float, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[4,8,16],f32>
  return %0, %1 : !torch.vtensor<[4,8,16],f32>, !torch.vtensor<[4,8,16],f32>
}

// -----

// Unmasked, non-causal attention also stays whole (torch-mlir would otherwise decompose it).
// CHECK-LABEL: func.func @unmasked
// CHECK-NOT: linalg.batch_matmul
// CHECK: call @etmlir_uk_attention(
func.func @unmasked(%q: !torch.vtensor<[4,8,32],f32>, %k: !torch.vtensor<[4,9,32],f32>, %v: !torch.vtensor<[4,9,16],f32>) -> !torch.vtensor<[4,8,16],f32> {
  %none = torch.constant.none
  %zero = torch.constant.float 0.000000e+00
  %false = torch.constant.bool false
  %0 = torch.aten.scaled_dot_product_attention %q, %k, %v, %none, %zero, %false, %none, %false : !torch.vtensor<[4,8,32],f32>, !torch.vtensor<[4,9,32],f32>, !torch.vtensor<[4,9,16],f32>, !torch.none, !torch.float, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[4,8,16],f32>
  return %0 : !torch.vtensor<[4,8,16],f32>
}
