// Philox4x32-10, the counter-based generator behind every device RNG op: a
// pure function of (seed, counter), so any thread can draw any element.
#pragma once

#include <cstdint>

namespace openneuron::kernels::detail {

struct PhiloxBlock {
  uint32_t v[4];
};

inline PhiloxBlock philox(uint64_t seed, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0,
           c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return PhiloxBlock{{c0, c1, c2, c3}};
}

inline float u01(uint32_t x) { return static_cast<float>(x >> 8) * 0x1.0p-24f; }  // [0, 1)
inline float u01_open0(uint32_t x) {  // (0, 1]
  return static_cast<float>((x >> 8) + 1) * 0x1.0p-24f;
}

}  // namespace openneuron::kernels::detail
