// pnp_recon's command line.
#pragma once

#include <string>
#include <vector>

#include "pnp/config.hpp"

namespace pnp::recon {

struct Cli {
  std::string config;
  std::vector<std::string> sets;  // --set overrides, then --output / --force as overrides
  bool dry_run = false, print_config = false, check_compile = false;
  bool defaults = false;  // --defaults: a configuration that sets no key may run every default
  bool exit_now = false;  // --help, --help-config or --version was answered
};

// Parses argv; prints --help / --help-config / --version on rank 0. Throws InputError.
Cli parse_cli(int argc, char** argv, int rank);
// Throws InputError when the configuration file and --set name no key outside [output] (every
// default would run without a word), unless --defaults was given.
void require_configured(const Cli& cli, const Config& cfg);

}  // namespace pnp::recon
