// Backward kernels of the core set (training graphs).
#include "kernel_util.h"
#include "generated/backward.h"

namespace etmlir {
namespace portable {}  // namespace portable
}  // namespace etmlir
