// Command lines of the programs that take one CONFIG.toml (pnp_recon, pnp_bench, pnp_train).
#pragma once

#include <boost/program_options.hpp>

#include <string>

namespace pnp {

// Parses `opts` plus one positional CONFIG argument, stored into `config` (left as is when
// absent). Boost's parse errors (unknown option, missing value, bad type) become InputError
// naming "<program> --help".
boost::program_options::variables_map parse_config_command_line(int argc, char** argv,
                                                                 const boost::program_options::options_description& opts,
                                                                 std::string& config, const std::string& program);

}  // namespace pnp
