// Distance kernels: cdist, pdist.
#include "kernel_util.h"
#include "generated/distance.h"

namespace etmlir {
namespace portable {}  // namespace portable
}  // namespace etmlir
