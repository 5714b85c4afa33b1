// The portable kernels: plain C++17, every op the zoo models reach at the
// edge level, f32/i64/i32/bool with broadcasting where the op has it.
//
//   etmlir::KernelRegistry registry;
//   etmlir::register_prim_kernels(registry);
//   etmlir::register_portable_kernels(registry);
//
// One file per op family; each family has its own register function so a
// runtime can take only what it needs. Selective build (CMake option
// ETMLIR_SELECTED_OPERATORS) narrows each family to the listed operators.
#pragma once

#include "etmlir/runtime/error.h"
#include "etmlir/runtime/kernel.h"

namespace etmlir {

// Every family below.
Error register_portable_kernels(KernelRegistry& registry);

Error register_binary_kernels(KernelRegistry& registry);       // binary_ops.cpp: add, sub, mul, div, where, logical_and
Error register_comparison_kernels(KernelRegistry& registry);   // comparison_ops.cpp: eq/ne/lt/le/gt/ge
Error register_unary_kernels(KernelRegistry& registry);        // unary_ops.cpp: relu, hardtanh, gelu, logical_not, ...
Error register_factory_kernels(KernelRegistry& registry);      // factory_ops.cpp: full, full_like, scalar_tensor, arange
Error register_copy_kernels(KernelRegistry& registry);         // copy_ops.cpp: view/permute/expand/unsqueeze/split copies
Error register_matmul_kernels(KernelRegistry& registry);       // matmul.cpp: mm, bmm, addmm (blocked gemm.h)
Error register_convolution_kernels(KernelRegistry& registry);  // convolution.cpp
Error register_normalization_kernels(KernelRegistry& registry);// normalization.cpp: batch norm, layer norm
Error register_softmax_kernels(KernelRegistry& registry);      // softmax.cpp
Error register_reduction_kernels(KernelRegistry& registry);    // reduction_ops.cpp: mean, any, sum, amax
Error register_embedding_kernels(KernelRegistry& registry);    // embedding.cpp
Error register_upsample_kernels(KernelRegistry& registry);     // upsample.cpp: upsample_bilinear2d
Error register_pooling_kernels(KernelRegistry& registry);      // pooling.cpp
Error register_padding_kernels(KernelRegistry& registry);      // padding.cpp
Error register_indexing_kernels(KernelRegistry& registry);     // indexing.cpp
Error register_sorting_kernels(KernelRegistry& registry);      // sort_ops.cpp
Error register_random_kernels(KernelRegistry& registry);       // random_ops.cpp
Error register_distance_kernels(KernelRegistry& registry);     // distance.cpp
Error register_backward_kernels(KernelRegistry& registry);     // backward_ops.cpp

}  // namespace etmlir
