// Random kernels: rand, randn, randperm, dropout, drawing from the method's generator.
#include "kernel_util.h"
#include "generated/random.h"

namespace etmlir {
namespace portable {}  // namespace portable
}  // namespace etmlir
