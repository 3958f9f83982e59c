// pnp_bench: the denoiser sweep (architecture x shape x backend, timed, with roofline counts) or,
// with --ceilings, the machine's measured ceilings. The work is in src/bench (pnp/benchmark.hpp).
#include <ATen/Context.h>

#include <boost/program_options.hpp>

#include <iostream>
#include <sstream>

#include "pnp/benchmark.hpp"
#include "pnp/config.hpp"
#include "pnp/config/cli.hpp"
#include "pnp/io.hpp"

using namespace pnp;
using namespace pnp::benchmark;

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  try {
    std::string config, output, device;
    bool quick = false, force = false, ceilings = false, scaling = false;
    std::string ranks_list = "1,2,4,8,16,32,64", modes_list;
    std::vector<std::string> sets;
    ScalingOptions so;
    po::options_description opts("Options");
    opts.add_options()("help,h", "print this help and exit")(
        "quick", po::bool_switch(&quick), "run a tiny grid on the CPU (CI; seconds) instead of the configured one")(
        "output,o", po::value<std::string>(&output), "output HDF5 file (overrides output.file)")(
        "force,f", po::bool_switch(&force), "overwrite an existing output file")(
        "ceilings", po::bool_switch(&ceilings),
        "instead of a sweep, measure the device's ceilings: copy bandwidth, TF32/FP32/BF16 matrix products "
        "and the DRUNet 3x3 convolution (TF32, BF16); writes /ceilings to --output (default pnp_ceilings.h5)")(
        "device", po::value<std::string>(&device), "with --ceilings: cpu, cuda or cuda:N (default: cuda if present)")(
        "scaling", po::bool_switch(&scaling),
        "instead of a sweep, the scaling model of a pnp_recon CONFIG: predicted iteration time and efficiency "
        "for --ranks, slabs and grids, halo modes input and layer (measured compute of the busiest rank's "
        "workload on this device, communication from the exact plans through an alpha-beta model); writes "
        "/scaling to --output (default pnp_scaling.h5)")(
        "ranks", po::value<std::string>(&ranks_list), "with --scaling: rank counts, comma-separated")(
        "halo-modes", po::value<std::string>(&modes_list), "with --scaling: input, layer or input,layer (default)")(
        "set", po::value<std::vector<std::string>>(&sets), "with --scaling: override a configuration key (section.key=value)")(
        "timed", po::value<int>(&so.timed), "with --scaling: timed calls per measured workload (median)")(
        "gpus-per-node", po::value<int>(&so.link.gpus_per_node), "with --scaling: GPUs per node (8)")(
        "intra-gbps", po::value<double>(&so.link.intra_gb_per_s), "with --scaling: intra-node GB/s each way (450: NVLink 4)")(
        "intra-latency-us", po::value<double>(&so.link.intra_latency_us), "with --scaling: intra-node latency per message, us (5, assumed)")(
        "inter-gbps", po::value<double>(&so.link.inter_gb_per_s), "with --scaling: inter-node GB/s per GPU (50: one NDR 400 Gb/s HCA)")(
        "inter-latency-us", po::value<double>(&so.link.inter_latency_us), "with --scaling: inter-node latency per message, us (8, assumed)");
    const po::variables_map vm = parse_config_command_line(argc, argv, opts, config, "pnp_bench");
    if (vm.count("help")) {
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
                << opts;
      return 0;
    }
    if (scaling) {
      if (config.empty()) throw InputError("--scaling needs a pnp_recon configuration file (see --help)");
      so.ranks.clear();
      std::stringstream list(ranks_list);
      for (std::string tok; std::getline(list, tok, ',');) {
        int r = 0;
        try {
          r = std::stoi(tok);
        } catch (const std::exception&) {
        }
        if (r < 1) throw InputError("--ranks: expected positive integers separated by commas, got '" + ranks_list + "'");
        so.ranks.push_back(r);
      }
      if (so.ranks.empty() || so.ranks.front() != 1) so.ranks.insert(so.ranks.begin(), 1);  // T(1) for the efficiency
      if (!modes_list.empty()) {
        so.modes.clear();
        std::stringstream ml(modes_list);
        for (std::string tok; std::getline(ml, tok, ',');) {
          if (tok != "input" && tok != "layer")
            throw InputError("--halo-modes: expected input, layer or input,layer, got '" + modes_list + "'");
          so.modes.push_back(tok);
        }
      }
      const Config cfg = load_config(config, sets);
      if (output.empty()) output = "pnp_scaling.h5";
      io::check_output_path(output, force, {config});
      const auto rows = run_scaling(cfg, so, std::cout);
      write_scaling(output, cfg, so, rows, force);
      std::cout << "pnp_bench: wrote " << rows.size() << " scaling rows to " << output << "\n";
      return 0;
    }
    if (ceilings) {
      CeilingOptions co;
      co.device = !device.empty() ? device : at::hasCUDA() ? "cuda" : "cpu";
      co.quick = quick;
      if (output.empty()) output = "pnp_ceilings.h5";
      io::check_output_path(output, force, {config});
      const auto rows = measure_ceilings(co, std::cout);
      write_ceilings(output, rows, co.device, force);
      std::cout << "pnp_bench: wrote " << rows.size() << " ceilings to " << output << "\n";
      return 0;
    }
    if (!device.empty()) throw InputError("--device goes with --ceilings; a sweep takes sweep.device from its CONFIG");
    if (config.empty() && !quick)
      throw InputError("no configuration file given (usage: pnp_bench CONFIG.toml [--quick]; see --help)");
    SweepConfig c = config.empty() ? SweepConfig{} : load_sweep(config);
    if (quick) make_quick(c);
    if (!output.empty()) c.output = output;
    if (force) c.force = true;
    io::check_output_path(c.output, c.force, {config});  // before a long run (and not the configuration)
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
  } catch (...) {
    return report_error();
  }
}

