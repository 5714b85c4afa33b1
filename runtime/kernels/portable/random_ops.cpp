// Random kernels: rand, randn, randperm, dropout, drawing from the method's generator.
//
// Every number comes from KernelContext::generator() (Philox-4x32-10, see
// etmlir/runtime/generator.h); without one these kernels fail. Each block of
// the generator gives four 32-bit words, used as follows (the last block of
// a call may be partly used; its unused words are skipped):
//
//   rand      float32: 24 bits per value, (w >> 8) * 2^-24, in [0, 1)
//             float16 / bfloat16: 11 / 8 bits, so every value is exact and < 1
//             float64: two words per value, 53 bits, in [0, 1)
//   randn     Box-Muller: u1 in (0, 1], u2 in [0, 1) give r = sqrt(-2 ln u1),
//             r cos(2 pi u2) and r sin(2 pi u2); 24-bit uniforms for float32,
//             float16 and bfloat16 (computed in float, rounded once; values
//             lie within +-5.8), 53-bit ones for float64 (within +-8.6)
//   randperm  Fisher-Yates from the last element down, each swap index
//             unbiased (Lemire's multiply-and-reject on 32-bit words)
//   native_dropout  one word per element: kept iff w < (1 - p) * 2^32
//
// Values are not PyTorch's (a different generator), only their distribution.
// A seed fixes them, except that randn's last bits come from the C library's
// log, sin and cos, which may round differently on another platform.
#include <cmath>
#include <cstring>

#include "etmlir/runtime/generator.h"
#include "generated/random.h"
#include "kernel_util.h"

namespace etmlir {
namespace {

using kutil::BFloat16;
using kutil::Half;

constexpr float kTwoPiF = 6.28318530717958647692f;
constexpr double kTwoPi = 6.28318530717958647692;

Error need_generator(KernelContext& ctx, Generator** generator) {
  *generator = ctx.generator();
  if (*generator == nullptr) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "this kernel draws random numbers, but its caller gave no generator (a Method passes its own; "
                    "a direct call must pass one, e.g. kernels.call(..., seed=n))");
  }
  return Error::ok();
}

// Resizes a factory's out to its `size` argument.
Error resize_to_size(KernelContext& ctx, Span<const int64_t> size, Tensor& out) {
  if (size.size() > static_cast<size_t>(kMaxDims)) {
    return ctx.fail(ErrorCode::InvalidArgument, "size has %zu dims; at most %d are supported", size.size(), kMaxDims);
  }
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] < 0) {
      return ctx.fail(ErrorCode::InvalidArgument, "size must be non-negative, got %lld at dim %zu",
                      static_cast<long long>(size[d]), d);
    }
  }
  return kutil::resize_out(ctx, out, size.data(), static_cast<int32_t>(size.size()));
}

// Fills out[0, n) with kPerBlock values per generator block: make(words, values).
template <int kPerBlock, typename T, typename Make>
void fill_blocks(Generator& gen, T* out, int64_t n, Make make) {
  const int64_t full = n / kPerBlock;
  const int64_t rest = n - full * kPerBlock;
  const uint64_t first = gen.reserve(static_cast<uint64_t>(full + (rest > 0 ? 1 : 0)));
  for (int64_t b = 0; b < full; ++b) {
    uint32_t w[4];
    gen.block(first + static_cast<uint64_t>(b), w);
    make(w, out + b * kPerBlock);
  }
  if (rest > 0) {
    uint32_t w[4];
    T values[kPerBlock];
    gen.block(first + static_cast<uint64_t>(full), w);
    make(w, values);
    for (int64_t k = 0; k < rest; ++k) out[full * kPerBlock + k] = values[k];
  }
}

// 53 uniform bits of two words, scaled to [0, 1).
inline double unit_double(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) * 0x1p-53;
}

// Uniform [0, 1) values with the storage type's precision (so a value never rounds up to 1).
template <typename T>
void fill_uniform(Generator& gen, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, double>) {
    fill_blocks<2>(gen, out, n, [](const uint32_t* w, double* v) {
      v[0] = unit_double(w[0], w[1]);
      v[1] = unit_double(w[2], w[3]);
    });
  } else {
    // Mantissa digits: every value k * 2^-digits is exact in T.
    constexpr int kDigits = std::is_same_v<T, Half> ? 11 : std::is_same_v<T, BFloat16> ? 8 : 24;
    constexpr float kScale = 1.0f / static_cast<float>(1u << kDigits);
    fill_blocks<4>(gen, out, n, [](const uint32_t* w, T* v) {
      for (int k = 0; k < 4; ++k) v[k] = kutil::convert<T>(static_cast<float>(w[k] >> (32 - kDigits)) * kScale);
    });
  }
}

// Standard normal values (Box-Muller).
template <typename T>
void fill_normal(Generator& gen, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, double>) {
    fill_blocks<2>(gen, out, n, [](const uint32_t* w, double* v) {
      const double u1 = 1.0 - unit_double(w[0], w[1]);  // (0, 1]: log stays finite
      const double u2 = unit_double(w[2], w[3]);
      const double r = std::sqrt(-2.0 * std::log(u1));
      v[0] = r * std::cos(kTwoPi * u2);
      v[1] = r * std::sin(kTwoPi * u2);
    });
  } else {
    fill_blocks<4>(gen, out, n, [](const uint32_t* w, T* v) {
      for (int k = 0; k < 4; k += 2) {
        const float u1 = static_cast<float>((w[k] >> 8) + 1) * 0x1p-24f;  // (0, 1]
        const float u2 = static_cast<float>(w[k + 1] >> 8) * 0x1p-24f;
        const float r = std::sqrt(-2.0f * std::log(u1));
        v[k] = kutil::convert<T>(r * std::cos(kTwoPiF * u2));
        v[k + 1] = kutil::convert<T>(r * std::sin(kTwoPiF * u2));
      }
    });
  }
}

// rand and randn: float32, float64, float16, bfloat16 outs.
template <bool kNormal>
Error random_fill(KernelContext& ctx, Span<const int64_t> size, Tensor& out) {
  Generator* gen = nullptr;
  ET_CHECK_OK(need_generator(ctx, &gen));
  ET_CHECK_OK(resize_to_size(ctx, size, out));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kNormal) {
      fill_normal(*gen, out.data_as<T>(), out.numel());
    } else {
      fill_uniform(*gen, out.data_as<T>(), out.numel());
    }
  };
  switch (out.dtype()) {
    case ScalarType::Float: run(float{}); break;
    case ScalarType::Double: run(double{}); break;
    case ScalarType::Half: run(Half{}); break;
    case ScalarType::BFloat16: run(BFloat16{}); break;
    default: return kutil::unsupported_dtype(ctx, "out", out.dtype(), "float32, float64, float16, bfloat16");
  }
  return Error::ok();
}

// 32-bit words from consecutive generator blocks.
class WordStream {
 public:
  explicit WordStream(Generator& gen) : gen_(gen) {}
  uint32_t next() {
    if (pos_ == 4) {
      gen_.next(words_);
      pos_ = 0;
    }
    return words_[pos_++];
  }
  // Uniform in [0, range), unbiased (Lemire, "Fast Random Integer Generation in an Interval", 2019).
  uint32_t below(uint32_t range) {
    uint64_t m = static_cast<uint64_t>(next()) * range;
    if (static_cast<uint32_t>(m) < range) {
      const uint32_t threshold = static_cast<uint32_t>(-range) % range;
      while (static_cast<uint32_t>(m) < threshold) m = static_cast<uint64_t>(next()) * range;
    }
    return static_cast<uint32_t>(m >> 32);
  }
  // Uniform in [0, range) for ranges beyond 32 bits (rejection below a multiple of range).
  uint64_t below64(uint64_t range) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    uint64_t x;
    do {
      x = (static_cast<uint64_t>(next()) << 32) | next();
    } while (x >= limit);
    return x % range;
  }

 private:
  Generator& gen_;
  uint32_t words_[4] = {};
  int pos_ = 4;
};

// The largest n whose values 0..n-1 are all exact in dtype (0 if unsupported).
int64_t randperm_limit(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Int64: return INT64_MAX;
    case ScalarType::Int32: return int64_t{1} << 31;
    case ScalarType::Int16: return int64_t{1} << 15;
    case ScalarType::Int8: return int64_t{1} << 7;
    case ScalarType::UInt8: return int64_t{1} << 8;
    case ScalarType::Double: return (int64_t{1} << 53) + 1;
    case ScalarType::Float: return (int64_t{1} << 24) + 1;
    case ScalarType::Half: return (int64_t{1} << 11) + 1;
    case ScalarType::BFloat16: return (int64_t{1} << 8) + 1;
    default: return 0;
  }
}

template <typename T>
void shuffle_range(Generator& gen, T* out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = kutil::convert<T>(k);
  WordStream words(gen);
  for (int64_t i = n - 1; i > 0; --i) {
    const uint64_t range = static_cast<uint64_t>(i) + 1;
    const int64_t j = static_cast<int64_t>(range <= UINT32_MAX ? words.below(static_cast<uint32_t>(range))
                                                               : words.below64(range));
    const T t = out[i];
    out[i] = out[j];
    out[j] = t;
  }
}

// native_dropout's training mode: mask = w < threshold, out = (x * mask) * scale
// computed in C (float for float16/bfloat16, as PyTorch's mul does).
template <typename T, typename C>
void dropout_train(Generator& gen, const T* x, T* out, bool* mask, int64_t n, uint64_t threshold, C scale) {
  const int64_t blocks = (n + 3) / 4;
  const uint64_t first = gen.reserve(static_cast<uint64_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) {
    uint32_t w[4];
    gen.block(first + static_cast<uint64_t>(b), w);
    const int64_t base = b * 4;
    const int64_t m = n - base < 4 ? n - base : 4;
    for (int64_t k = 0; k < m; ++k) {
      const bool keep = w[k] < threshold;
      mask[base + k] = keep;
      out[base + k] = kutil::convert<T>((kutil::convert<C>(x[base + k]) * static_cast<C>(keep)) * scale);
    }
  }
}

}  // namespace

namespace portable {

Error rand_out(KernelContext& ctx, Span<const int64_t> size, Tensor& out) {
  return random_fill<false>(ctx, size, out);
}

Error randn_out(KernelContext& ctx, Span<const int64_t> size, Tensor& out) {
  return random_fill<true>(ctx, size, out);
}

Error randperm_out(KernelContext& ctx, int64_t n, Tensor& out) {
  Generator* gen = nullptr;
  ET_CHECK_OK(need_generator(ctx, &gen));
  if (n < 0) return ctx.fail(ErrorCode::InvalidArgument, "n must be non-negative, got %lld", static_cast<long long>(n));
  const int64_t limit = randperm_limit(out.dtype());
  if (limit == 0) {
    return kutil::unsupported_dtype(ctx, "out", out.dtype(),
                                    "int64, int32, int16, int8, uint8, float32, float64, float16, bfloat16");
  }
  if (n > limit) {
    return ctx.fail(ErrorCode::InvalidArgument,
                    "n is %lld, but out's dtype %s holds 0..n-1 exactly only for n <= %lld", static_cast<long long>(n),
                    dtype_name(out.dtype()), static_cast<long long>(limit));
  }
  ET_CHECK_OK(kutil::resize_out(ctx, out, &n, 1));
  kutil::dispatch_storage(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) shuffle_range(*gen, out.data_as<T>(), n);
  });
  return Error::ok();
}

Error native_dropout_out(KernelContext& ctx, const Tensor& input, double p, std::optional<bool> train, Tensor& out0,
                         Tensor& out1) {
  const ScalarType dtype = input.dtype();
  if (!kutil::is_floating(dtype)) {
    return kutil::unsupported_dtype(ctx, "input", dtype, "float32, float64, float16, bfloat16");
  }
  if (out0.dtype() != dtype) {
    return ctx.fail(ErrorCode::InvalidArgument, "out0 has dtype %s; expected input's dtype %s",
                    dtype_name(out0.dtype()), dtype_name(dtype));
  }
  ET_CHECK_OK(kutil::check_rank(ctx, input, "input"));
  ET_CHECK_OK(kutil::resize_out(ctx, out0, input.sizes(), input.dim(), "out0"));
  ET_CHECK_OK(kutil::resize_out(ctx, out1, input.sizes(), input.dim(), "out1"));
  const int64_t n = input.numel();
  if (n == 0) return Error::ok();  // PyTorch's empty mask has input's dtype: any out1 dtype will do
  if (out1.dtype() != ScalarType::Bool) {
    return ctx.fail(ErrorCode::InvalidArgument, "out1 (the mask) has dtype %s; expected bool",
                    dtype_name(out1.dtype()));
  }
  bool* mask = out1.data_as<bool>();
  const bool training = !train.has_value() || *train;
  if (!training) {  // identity, every element kept
    if (out0.mutable_data() != input.data()) std::memcpy(out0.mutable_data(), input.data(), input.nbytes());
    for (int64_t i = 0; i < n; ++i) mask[i] = true;
    return Error::ok();
  }
  if (!(p >= 0.0 && p <= 1.0)) {
    return ctx.fail(ErrorCode::InvalidArgument, "dropout probability p must be in [0, 1], got %g", p);
  }
  Generator* gen = nullptr;
  ET_CHECK_OK(need_generator(ctx, &gen));
  const double keep = 1.0 - p;
  const double scale = keep == 0.0 ? 0.0 : 1.0 / keep;
  // P(w < threshold) = threshold / 2^32, within 2^-32 of keep (exactly 1 for p = 0, 0 for p = 1).
  const uint64_t threshold = keep >= 1.0 ? (uint64_t{1} << 32) : static_cast<uint64_t>(keep * 0x1p32);
  switch (dtype) {
    case ScalarType::Float:
      dropout_train(*gen, input.data_as<float>(), out0.data_as<float>(), mask, n, threshold, static_cast<float>(scale));
      break;
    case ScalarType::Double:
      dropout_train(*gen, input.data_as<double>(), out0.data_as<double>(), mask, n, threshold, scale);
      break;
    case ScalarType::Half:
      dropout_train(*gen, input.data_as<Half>(), out0.data_as<Half>(), mask, n, threshold, static_cast<float>(scale));
      break;
    case ScalarType::BFloat16:
      dropout_train(*gen, input.data_as<BFloat16>(), out0.data_as<BFloat16>(), mask, n, threshold,
                    static_cast<float>(scale));
      break;
    default: break;
  }
  return Error::ok();
}

}  // namespace portable
}  // namespace etmlir
