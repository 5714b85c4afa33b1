#include "portable_kernels.h"

namespace etmlir {

Error register_portable_kernels(KernelRegistry& registry) {
  ET_CHECK_OK(register_binary_kernels(registry));
  ET_CHECK_OK(register_comparison_kernels(registry));
  ET_CHECK_OK(register_unary_kernels(registry));
  ET_CHECK_OK(register_factory_kernels(registry));
  ET_CHECK_OK(register_copy_kernels(registry));
  ET_CHECK_OK(register_matmul_kernels(registry));
  ET_CHECK_OK(register_convolution_kernels(registry));
  ET_CHECK_OK(register_normalization_kernels(registry));
  ET_CHECK_OK(register_softmax_kernels(registry));
  ET_CHECK_OK(register_reduction_kernels(registry));
  ET_CHECK_OK(register_embedding_kernels(registry));
  ET_CHECK_OK(register_upsample_kernels(registry));
  ET_CHECK_OK(register_pooling_kernels(registry));
  ET_CHECK_OK(register_padding_kernels(registry));
  ET_CHECK_OK(register_indexing_kernels(registry));
  ET_CHECK_OK(register_sorting_kernels(registry));
  ET_CHECK_OK(register_random_kernels(registry));
  ET_CHECK_OK(register_distance_kernels(registry));
  ET_CHECK_OK(register_backward_kernels(registry));
  return Error::ok();
}

}  // namespace etmlir
