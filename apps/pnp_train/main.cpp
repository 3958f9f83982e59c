// pnp_train: trains a denoiser of the IR on synthetic CT-like images (docs/training.md).
//   pnp_train CONFIG.toml [--set section.key=value]... [--resume] [--device D] [--dry-run] [--help-config]
// The training is in src/train (pnp/training.hpp); this file owns the command line.
#include <boost/program_options.hpp>

#include <iostream>

#include "pnp/config/cli.hpp"
#include "pnp/training.hpp"
#include "pnp/validate.hpp"

namespace po = boost::program_options;

using namespace pnp;
using namespace pnp::training;

int main(int argc, char** argv) {
  std::string config;
  std::vector<std::string> sets;
  std::string device;
  bool resume = false, dry_run = false, force = false;
  po::options_description opts(
      "pnp_train: train a denoiser of the pnp IR (DnCNN, DRUNet, UNet) on synthetic CT-like images\n\n"
      "Usage: pnp_train CONFIG.toml [--set section.key=value]... [options]\n\n"
      "Writes output.weights (HDF5, the layout pnp_recon's denoiser.weights reads), a JSON sidecar\n"
      "recording the training, an HDF5 log (loss, learning rate, validation PSNR) and checkpoints.\n"
      "See docs/training.md; --help-config lists every key.\n\nOptions");
  opts.add_options()("help,h", "print this help and exit")("help-config", "print every config key and exit")(
      "set", po::value(&sets)->composing(), "override a key: --set train.steps=200 (repeatable)")(
      "resume", po::bool_switch(&resume), "continue from output.checkpoint (= --set output.resume=true)")(
      "force", po::bool_switch(&force), "overwrite existing outputs (= --set output.force=true)")(
      "device", po::value(&device), "cpu, cuda or auto (= --set train.device=...)")(
      "dry-run", po::bool_switch(&dry_run), "print the effective config and the model size, then exit");
  try {
    const po::variables_map vm = parse_config_command_line(argc, argv, opts, config, "pnp_train");
    if (vm.count("help")) {
      std::cout << opts << "\nExample: pnp_train input/train_dncnn.toml --set train.steps=2000\n";
      return 0;
    }
    if (vm.count("help-config")) {
      std::cout << train_config_reference();
      return 0;
    }
    if (config.empty()) throw InputError("a config file is required: pnp_train CONFIG.toml (see --help)");
    if (resume) sets.push_back("output.resume=true");
    if (force) sets.push_back("output.force=true");
    if (!device.empty()) sets.push_back("train.device=" + device);
    TrainConfig cfg = load_train_config(config, sets);
    if (dry_run) {
      nn::Graph g = nn::build(model_spec(cfg.model));
      std::cout << cfg.to_toml() << "# " << g.architecture << ": " << g.parameter_count() << " parameters ("
                << g.parameter_count() * 4 / 1024 << " KiB as float32), alignment " << g.alignment()
                << ", receptive radius " << nn::receptive_radius(g) << "\n";
      return 0;
    }
    // No output may be another output or an input (the configuration, the training images).
    validate::require_distinct({{"output.weights", cfg.output.weights},
                                {"output.log", cfg.output.log},
                                {"output.checkpoint", cfg.output.checkpoint},
                                {"output.sidecar", cfg.output.sidecar}},
                               {{"the configuration", config}, {"data.stack", cfg.data.stack}});
    TrainResult r = run_training(cfg, std::cout);
    return r.finished || cfg.train.stop_after > 0 ? 0 : 1;
  } catch (...) {
    return report_error();
  }
}
