// pnp_h5probe FILE...: reads every object, attribute and dataset of each HDF5 file (datasets
// over 256 MiB in their first 1 MiB) and exits 0 when all read, 2 with one line naming the first
// file that does not. The pnp programs run it on their HDF5 inputs before reading them
// (pnp::io::probe_hdf5), so that a damaged file that crashes or hangs libhdf5 kills this
// process instead of an MPI rank. Links HDF5 and pnp_io only, so it starts in milliseconds.
#include <cstdio>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "pnp/io.hpp"
#include "pnp/usage.hpp"

constexpr char kUsage[] = "usage: pnp_h5probe FILE.h5 [FILE.h5 ...]\n"
    "Reads every object, attribute and dataset of each file (datasets over 256 MiB in their\n"
    "first 1 MiB). Exit 0: every file reads; 2: one line naming the first file that does not. The pnp\n"
    "programs run it on their HDF5 inputs first, so a file that crashes libhdf5 kills this\n"
    "process, not a rank.\n";

int main(int argc, char** argv) {
  if (const int usage = pnp::usage_exit_code(argc, argv, kUsage); usage >= 0) return usage;
#if defined(M_PERTURB)
  // Fill fresh and freed heap memory with a pattern. libhdf5 1.10 trusts indices read from
  // the file (H5HG_read does not check a global-heap index against the heap's size), so a
  // damaged file makes it read a pointer from past an array: from zeroed or stale memory that
  // read is often harmless here and fatal in the program that reads the file next; from the
  // pattern it is an invalid address every time, and the probe is the process that dies.
  mallopt(M_PERTURB, 0xa5);
#endif
  for (int i = 1; i < argc; ++i) {
    const std::string why = pnp::io::whole_file_problem(argv[i]);
    if (!why.empty()) {
      std::fprintf(stderr, "%s\n", why.c_str());
      return 2;
    }
  }
  return 0;
}
