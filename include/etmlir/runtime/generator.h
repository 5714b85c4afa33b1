// Generator: the runtime's random number generator, Philox-4x32-10.
//
// A Method owns one (in its method allocator, from load on; seeded with
// kDefaultSeed; Method::set_seed reseeds it) and hands it to every kernel it
// calls through KernelContext::generator(). The random kernels (rand, randn,
// randperm, native_dropout) draw from it; a caller that gives none (a direct
// kernel call without a seed) makes them fail, never draw from a hidden global.
//
// Philox-4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel Random Numbers: As
// Easy as 1, 2, 3", SC'11; the generator PyTorch uses on CUDA) is counter-
// based: block i of a stream is ten rounds of a keyed bijection of the
// counter i, giving four 32-bit words. The key is the 64-bit seed; the state
// is the seed plus a 64-bit count of blocks drawn. Why this one: 16 bytes of
// state and no tables; it passes TestU01's BigCrush; and any block can be
// computed directly, so a kernel reserves the n blocks it needs and fills its
// output in any order (vectorizable loops, threads later) with the same
// numbers. It is not PyTorch's CPU generator (mt19937): values differ from
// torch.rand for the same seed; only their distribution is the same.
//
//   uint64_t first = gen->reserve(blocks);          // blocks first .. first+blocks-1 are this call's
//   uint32_t w[4];
//   gen->block(first + i, w);
//
// Deterministic: a seed and the sequence of kernel calls fix every number.
// Header-only; no allocation; not thread-safe (a Method runs on one thread).
#pragma once

#include <cstdint>

namespace etmlir {

class Generator {
 public:
  // The seed of a Method that was never seeded (and of et-run without --seed).
  static constexpr uint64_t kDefaultSeed = 0;

  explicit Generator(uint64_t seed = kDefaultSeed) { set_seed(seed); }

  // Restarts the stream of `seed` from its first block.
  void set_seed(uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t seed() const { return seed_; }
  // Blocks drawn since the last set_seed.
  uint64_t offset() const { return offset_; }

  // Reserves `blocks` consecutive blocks and returns the counter of the first.
  uint64_t reserve(uint64_t blocks) {
    uint64_t first = offset_;
    offset_ += blocks;
    return first;
  }
  // The four words of block `counter` of this seed's stream.
  void block(uint64_t counter, uint32_t out[4]) const {
    const uint32_t ctr[4] = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0};
    const uint32_t key[2] = {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)};
    philox4x32_10(ctr, key, out);
  }
  // The next block (reserve(1) and block()).
  void next(uint32_t out[4]) { block(offset_++, out); }

  // Philox-4x32 with 10 rounds on a 128-bit counter and a 64-bit key (the
  // Random123 reference function, checked against its known-answer vectors).
  static void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // multipliers
    constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; ++round) {
      const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
      const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
      c1 = static_cast<uint32_t>(p1);
      c3 = static_cast<uint32_t>(p0);
      c0 = n0;
      c2 = n2;
      k0 += kW0;
      k1 += kW1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
  }

 private:
  uint64_t seed_ = kDefaultSeed;
  uint64_t offset_ = 0;
};

}  // namespace etmlir
