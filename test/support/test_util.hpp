// Helpers shared by tests: scratch files and paths into the source tree.
#pragma once
#include <filesystem>
#include <string>
#include <unistd.h>

namespace pnp::test {
inline std::filesystem::path source_dir() { return PNP_SOURCE_DIR; }
// A fresh per-process scratch directory under the build tree, removed by the caller if wanted.
inline std::filesystem::path scratch_dir(const std::string& name) {
  auto d = std::filesystem::path(PNP_BINARY_DIR) / "test_scratch" / (name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}
}  // namespace pnp::test
