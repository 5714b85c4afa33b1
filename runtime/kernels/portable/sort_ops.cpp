// Sorting and selection kernels: sort, topk, argmax/argmin, max/min along a dim.
#include "kernel_util.h"
#include "generated/sorting.h"

namespace etmlir {
namespace portable {}  // namespace portable
}  // namespace etmlir
