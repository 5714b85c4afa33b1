// Pooling kernels: max/avg/adaptive pooling in 1-3 spatial dims.
#include "kernel_util.h"
#include "generated/pooling.h"

namespace etmlir {
namespace portable {}  // namespace portable
}  // namespace etmlir
