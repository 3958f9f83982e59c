// Links the installed pnp::pnp_core and prints its provenance.
#include <pnp/core.hpp>

#include <cstdio>

int main() {
  const pnp::Provenance p = pnp::basic_provenance("consumer");
  std::printf("program=%s version=%s commit=%s\n", p.program.c_str(), p.version.c_str(),
              p.git_commit.c_str());
  const pnp::Box b{0, 4, 0, 8};
  if (p.program != "consumer" || p.version != PNP_EXPECTED_VERSION || p.git_commit.empty() ||
      b.size() != 32) {
    std::fprintf(stderr, "error: unexpected provenance from the installed pnp\n");
    return 1;
  }
  return 0;
}
