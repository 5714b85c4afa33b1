// Indexing kernels: gather, scatter, index, index_put, index_select, masked ops, nonzero.
#include "kernel_util.h"
#include "generated/indexing.h"

namespace etmlir {
namespace portable {}  // namespace portable
}  // namespace etmlir
