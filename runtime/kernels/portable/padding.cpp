// Padding kernels: constant, reflection and replication padding.
#include "kernel_util.h"
#include "generated/padding.h"

namespace etmlir {
namespace portable {}  // namespace portable
}  // namespace etmlir
