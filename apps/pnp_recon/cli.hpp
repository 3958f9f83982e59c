// pnp_recon's command line.
#pragma once

#include <string>
#include <vector>

namespace pnp::recon {

struct Cli {
  std::string config;
  std::vector<std::string> sets;  // --set overrides, then --output / --force as overrides
  bool dry_run = false, print_config = false, check_compile = false;
  bool exit_now = false;  // --help, --help-config or --version was answered
};

// Parses argv; prints --help / --help-config / --version on rank 0. Throws InputError.
Cli parse_cli(int argc, char** argv, int rank);

}  // namespace pnp::recon
