// pnp_bench: the denoiser sweep (architecture x shape x backend, timed, with roofline counts) or,
// with --ceilings, the machine's measured ceilings. The work is in src/benchmark (pnp/benchmark.hpp).
#include <ATen/Context.h>

#include <boost/program_options.hpp>

#include <iostream>
#include <optional>
#include <sstream>

#include "pnp/benchmark.hpp"
#include "pnp/config.hpp"
#include "pnp/config/cli.hpp"
#include "pnp/io.hpp"

using namespace pnp;
using namespace pnp::benchmark;

namespace {

namespace po = boost::program_options;

// The command line: the mode (sweep, --ceilings or --scaling) and its options.
struct Cli {
  std::string config, output, device;
  bool quick = false, force = false, ceilings = false, scaling = false, help = false;
  std::string ranks_list = "1,2,4,8,16,32,64", modes_list;
  std::vector<std::string> sets;
  ScalingOptions so;
  po::options_description opts{"Options"};
};

void parse_cli(int argc, char** argv, Cli& c) {
  ScalingOptions& so = c.so;
  c.opts.add_options()("help,h", "print this help and exit")(
      "quick", po::bool_switch(&c.quick), "run a tiny grid on the CPU (CI; seconds) instead of the configured one")(
      "output,o", po::value<std::string>(&c.output), "output HDF5 file (overrides output.file)")(
      "force,f", po::bool_switch(&c.force), "overwrite an existing output file")(
      "ceilings", po::bool_switch(&c.ceilings),
      "instead of a sweep, measure the device's ceilings: copy bandwidth, TF32/FP32/BF16 (and on a GPU FP8) matrix products "
      "and the DRUNet 3x3 convolution (TF32, BF16); writes /ceilings to --output (default pnp_ceilings.h5)")(
      "device", po::value<std::string>(&c.device), "with --ceilings: cpu, cuda or cuda:N (default: cuda if present)")(
      "scaling", po::bool_switch(&c.scaling),
      "instead of a sweep, the scaling model of a pnp_recon CONFIG: predicted iteration time and efficiency "
      "for --ranks, slabs and grids, halo modes input and layer (measured compute of the busiest rank's "
      "workload on this device, communication from the exact plans through an alpha-beta model); writes "
      "/scaling to --output (default pnp_scaling.h5)")(
      "ranks", po::value<std::string>(&c.ranks_list), "with --scaling: rank counts, comma-separated")(
      "halo-modes", po::value<std::string>(&c.modes_list), "with --scaling: input, layer or input,layer (default)")(
      "set", po::value<std::vector<std::string>>(&c.sets), "with --scaling: override a configuration key (section.key=value)")(
      "timed", po::value<int>(&so.timed), "with --scaling: timed calls per measured workload (median)")(
      "gpus-per-node", po::value<int>(&so.link.gpus_per_node), "with --scaling: GPUs per node (8)")(
      "intra-gbps", po::value<double>(&so.link.intra_gb_per_s), "with --scaling: intra-node GB/s each way (450: NVLink 4)")(
      "intra-latency-us", po::value<double>(&so.link.intra_latency_us), "with --scaling: intra-node latency per message, us (5, assumed)")(
      "inter-gbps", po::value<double>(&so.link.inter_gb_per_s), "with --scaling: inter-node GB/s per GPU (50: one NDR 400 Gb/s HCA)")(
      "inter-latency-us", po::value<double>(&so.link.inter_latency_us), "with --scaling: inter-node latency per message, us (8, assumed)");
  c.help = parse_config_command_line(argc, argv, c.opts, c.config, "pnp_bench").count("help") > 0;
}

void print_help(const Cli& c) {
  std::cout << "pnp_bench CONFIG.toml [--quick] [--output FILE] [--force]\n"
               "pnp_bench --ceilings [--device cuda] [--quick] [--output FILE] [--force]\n"
               "pnp_bench --scaling RECON.toml [--ranks 1,2,4,...] [--halo-modes input,layer] [--set k=v]...\n"
               "          [--output FILE] [--force]\n\n"
               "The denoiser sweep: architecture x shape x backend, timed (warm-up calls, then timed calls\n"
               "each synchronised and timed with device events; stable = mean of the last ones), with\n"
               "roofline counts, one HDF5 row per configuration (docs/output_schema.md, /results).\n"
               "CONFIG sections: [sweep] architectures channels batch shapes backends warmup timed stable\n"
               "device dtype sigma seed; [native] channels_last fuse autotune cuda_graph warmup_calls\n"
               "cudnn_fused_bf16 cudnn_epilogues cudnn_graph_convs cudnn_benchmark upsample_conv narrow_convs wgmma_convs nhwc_kernels; [inductor] mode cache_dir compile_jobs (packages compiled in parallel\n"
               "before timing; $PNP_INDUCTOR_MODE / $PNP_CACHE_DIR override);\n"
               "[models.<arch>] features blocks; [torch_compile] timeout_s; [output] file force.\n"
               "Backends: eager, native, inductor, and the peer: torch_compile and torch_compile_max_autotune\n"
               "(deepinv 0.5's own module with the same weights under torch.compile, timed the same way by\n"
               "python -m pnp_peer; a row over torch_compile.timeout_s is recorded as skipped, 'time cap').\n"
               "Example: input/sweep.toml (all five arms).\n\n"
            << c.opts;
}

// --ranks and --halo-modes into the scaling options.
void parse_scaling_lists(Cli& c) {
  ScalingOptions& so = c.so;
  so.ranks.clear();
  std::stringstream list(c.ranks_list);
  for (std::string tok; std::getline(list, tok, ',');) {
    int r = 0;
    try {
      r = std::stoi(tok);
    } catch (const std::exception&) {
    }
    if (r < 1) throw InputError("--ranks: expected positive integers separated by commas, got '" + c.ranks_list + "'");
    so.ranks.push_back(r);
  }
  if (so.ranks.empty() || so.ranks.front() != 1) so.ranks.insert(so.ranks.begin(), 1);  // T(1) for the efficiency
  if (c.modes_list.empty()) return;
  so.modes.clear();
  std::stringstream ml(c.modes_list);
  for (std::string tok; std::getline(ml, tok, ',');) {
    const std::optional<HaloMode> mode = parse_enum<HaloMode>(tok);
    if (!mode) throw InputError("--halo-modes: expected input, layer or input,layer, got '" + c.modes_list + "'");
    so.modes.push_back(*mode);
  }
}

int scaling_command(Cli& c) {
  if (c.config.empty()) throw InputError("--scaling needs a pnp_recon configuration file (see --help)");
  parse_scaling_lists(c);
  const Config cfg = load_config(c.config, c.sets);
  const std::string output = c.output.empty() ? "pnp_scaling.h5" : c.output;
  io::check_output_path(output, c.force, {c.config});
  const auto rows = run_scaling(cfg, c.so, std::cout);
  write_scaling(output, cfg, c.so, rows, c.force);
  std::cout << "pnp_bench: wrote " << rows.size() << " scaling rows to " << output << "\n";
  return 0;
}

int ceilings_command(const Cli& c) {
  CeilingOptions co;
  co.device = !c.device.empty() ? c.device : at::hasCUDA() ? "cuda" : "cpu";
  co.quick = c.quick;
  const std::string output = c.output.empty() ? "pnp_ceilings.h5" : c.output;
  io::check_output_path(output, c.force, {c.config});
  const auto rows = measure_ceilings(co, std::cout);
  write_ceilings(output, rows, co.device, c.force);
  std::cout << "pnp_bench: wrote " << rows.size() << " ceilings to " << output << "\n";
  return 0;
}

int sweep_command(const Cli& cli) {
  if (!cli.device.empty()) throw InputError("--device goes with --ceilings; a sweep takes sweep.device from its CONFIG");
  if (cli.config.empty() && !cli.quick)
    throw InputError("no configuration file given (usage: pnp_bench CONFIG.toml [--quick]; see --help)");
  SweepConfig c = cli.config.empty() ? SweepConfig{} : load_sweep(cli.config);
  if (cli.quick) make_quick(c);
  if (!cli.output.empty()) c.output = cli.output;
  if (cli.force) c.force = true;
  io::check_output_path(c.output, c.force, {cli.config});  // before a long run (and not the configuration)
  // The file is rewritten (atomically) after every row, so an interrupted sweep keeps its rows.
  bool written = false;
  const auto rows = run_sweep(c, std::cout, [&](const std::vector<Row>& done) {
    write_results(c, done, written);
    written = true;
  });
  if (!written) write_results(c, rows, false);
  int failed = 0;
  for (const auto& r : rows) failed += r.failed;
  std::cout << "pnp_bench: wrote " << rows.size() << " rows to " << c.output << "\n";
  if (failed) {
    std::cerr << "error: " << failed << " configuration(s) failed (see their reason column)\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Cli cli;
    parse_cli(argc, argv, cli);
    if (cli.help) {
      print_help(cli);
      return 0;
    }
    if (cli.scaling) return scaling_command(cli);
    if (cli.ceilings) return ceilings_command(cli);
    return sweep_command(cli);
  } catch (...) {
    return report_error();
  }
}
