#include "cli.hpp"

#include <boost/program_options.hpp>
#include <torch/version.h>

#include <iostream>

#include "pnp/config.hpp"
#include "pnp/config/cli.hpp"
#include "pnp/core.hpp"
#include "pnp/messages.hpp"

namespace po = boost::program_options;

namespace pnp::recon {

namespace {
const char* kUsage =
    "usage: mpirun -n R pnp_recon CONFIG.toml [options]\n"
    "\n"
    "Distributed plug-and-play CT reconstruction: every MPI rank owns one tile of the image\n"
    "and runs  z = x - gamma A^T(Ax - y),  x = clamp(D(z, sigma))  with a neural denoiser D.\n"
    "A volume (problem.slices, or a 3D DXchange problem.sinogram) is split into z-slabs of whole\n"
    "slices, one per rank (distributed.plane_ranks ranks per slab split its plane into tiles),\n"
    "denoised slice by slice in batches, or by a 3D denoiser (denoiser.dim = 3) with a z-halo.\n"
    "Writes an HDF5 file with the reconstruction, per-phase timings [iterations x ranks],\n"
    "metrics, the decomposition and full provenance (docs/output_schema.md).\n";
}  // namespace

Cli parse_cli(int argc, char** argv, int rank) {
  Cli cli;
  std::string output;
  bool force = false, resume = false;
  po::options_description opts("Options");
  opts.add_options()("help,h", "print this help and exit")(
      "help-config", "print every configuration key with its default, type, range and meaning")(
      "set,s", po::value<std::vector<std::string>>(&cli.sets)->composing(),
      "override a configuration key, e.g. --set compile.mode=pre --set problem.size=1024; "
      "validated like the file (repeatable)")("output,o", po::value<std::string>(&output),
                                              "output HDF5 file (overrides output.file)")(
      "force,f", po::bool_switch(&force), "overwrite an existing output file")(
      "resume", po::bool_switch(&resume),
      "continue from output.checkpoint when it exists (= --set output.resume=true); it must come from the same "
      "configuration and rank count")(
      "dry-run,n", po::bool_switch(&cli.dry_run),
      "print the plan (problem size, ranks, tiles, halo, memory per rank, compile mode and backend) and exit")(
      "print-config", po::bool_switch(&cli.print_config), "print the effective configuration as TOML and exit")(
      "check-compile", po::bool_switch(&cli.check_compile),
      "try compile.backend on a small input of the configured denoiser (for inductor: Python, torch, "
      "the exporter and the cache), compare it with eager, print the result and exit (0 ok, 1 failed)")(
      "version", "print the version and exit")(
      "defaults", po::bool_switch(&cli.defaults),
      "allow a configuration that sets no key: run every default (a 256^2 DRUNet problem)");
  const po::variables_map vm = parse_config_command_line(argc, argv, opts, cli.config, "pnp_recon");
  cli.exit_now = true;
  if (vm.count("help")) {
    if (rank == 0)
      std::cout << kUsage << "\n" << opts
                << "\nExit codes: 0 success, 2 bad configuration, command line or input file, 1 other failure\n"
                   "(also a rank that makes no progress for distributed.timeout_s), 75 stopped with a checkpoint\n"
                   "after SIGTERM or SIGUSR1 or at output.stop_after (resume with --resume).\n"
                   "A failure prints one `error: ...` line for the job (rank 0, naming the ranks that\n"
                   "failed); no rank is left waiting. An empty configuration is refused unless --defaults.\n"
                   "Configuration: TOML sections [problem] [solver] [denoiser] [compile] [distributed]\n"
                   "[output]; see --help-config. Example: mpirun -n 2 pnp_recon input/demo.toml\n";
    return cli;
  }
  if (vm.count("help-config")) {
    if (rank == 0) std::cout << config_reference();
    return cli;
  }
  if (vm.count("version")) {
    if (rank == 0) {
      auto p = basic_provenance("pnp_recon");
      std::cout << "pnp_recon " << p.version << " (commit " << p.git_commit << ", torch " << TORCH_VERSION << ")\n";
    }
    return cli;
  }
  cli.exit_now = false;
  if (cli.config.empty()) throw InputError("no configuration file given (usage: pnp_recon CONFIG.toml; see --help)");
  if (vm.count("output")) {
    if (output.empty()) throw InputError("--output: the output file name is empty");
    cli.sets.push_back("output.file=\"" + output + "\"");
  }
  if (force) cli.sets.push_back("output.force=true");
  if (resume) cli.sets.push_back("output.resume=true");
  return cli;
}

void require_configured(const Cli& cli, const Config& cfg) {
  if (cli.defaults) return;
  for (const auto& key : cfg.given)
    if (key.rfind("output.", 0) != 0) return;
  throw InputError("the configuration " + clip_value(cli.config) +
                   " sets no key: every default would run (see pnp_recon --help-config for the keys, or pass "
                   "--defaults to run the defaults)");
}

}  // namespace pnp::recon
