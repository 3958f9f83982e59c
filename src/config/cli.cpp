#include "pnp/config/cli.hpp"

#include "pnp/core.hpp"

namespace pnp {

namespace po = boost::program_options;

po::variables_map parse_config_command_line(int argc, char** argv, const po::options_description& opts,
                                            std::string& config, const std::string& program) {
  po::options_description hidden;
  hidden.add_options()("config", po::value<std::string>(&config));
  po::positional_options_description pos;
  pos.add("config", 1);
  po::options_description all;
  all.add(opts).add(hidden);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw InputError(std::string(e.what()) + " (see " + program + " --help)");
  }
  return vm;
}

}  // namespace pnp
