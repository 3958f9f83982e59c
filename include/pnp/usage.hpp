// The usage text of a small program whose first argument is required (pnp_h5probe, pnp_fuzz).
#pragma once

#include <cstdio>
#include <cstring>

namespace pnp {

// Without arguments prints `usage` to stderr and returns 2 (bad usage); with --help or -h first,
// prints it to stdout and returns 0; otherwise returns -1: the program goes on.
inline int usage_exit_code(int argc, char** argv, const char* usage) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fprintf(argc < 2 ? stderr : stdout, "%s", usage);
    return argc < 2 ? 2 : 0;
  }
  return -1;
}

}  // namespace pnp
