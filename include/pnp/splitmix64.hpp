// The splitmix64 finaliser (Steele et al.): a bijective 64-bit mix, for seeds derived from
// (seed, index) pairs that must not depend on the standard library. Its own header, free of
// the rest of core.hpp, so that CUDA kernels call it too (the power method's start vector).
#pragma once

#include <cstdint>

namespace pnp {

#if defined(__CUDACC__)
__host__ __device__
#endif
constexpr uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace pnp
