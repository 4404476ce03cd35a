// A stable 64-bit hash for names and checks of files that outlive the process (cache files).
#pragma once

#include <cstdint>
#include <string>

namespace sol {

// FNV-1a from a seeded basis, finished with the splitmix64 mixer: stable across processes and
// builds, for cache file names. Two seeds give a file name and an independent check stored inside.
inline uint64_t hash64(const std::string& data, uint64_t seed) noexcept {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9e3779b97f4a7c15ull);
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

}  // namespace sol
