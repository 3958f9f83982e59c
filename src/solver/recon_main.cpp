// pnp_recon: command line, setup with collective error agreement, the PnP loop, the output
// file (rank 0, atomic) and the phase table.
#include <boost/program_options.hpp>
#include <torch/version.h>

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <sstream>

#include "pnp/cli.hpp"
#include "pnp/nn/inductor.hpp"
#include "pnp/solver.hpp"
#include "pnp/timing.hpp"

#ifdef PNP_HAVE_NCCL
#include <nccl.h>
#endif

namespace po = boost::program_options;

namespace pnp {
namespace {

struct Cli {
  std::string config;
  std::vector<std::string> sets;
  std::string output;
  bool force = false, dry_run = false, print_config = false, check_compile = false;
};

const char* kUsage =
    "usage: mpirun -n R pnp_recon CONFIG.toml [options]\n"
    "\n"
    "Distributed plug-and-play CT reconstruction: every MPI rank owns one tile of the image\n"
    "and runs  z = x - gamma A^T(Ax - y),  x = clamp(D(z, sigma))  with a neural denoiser D.\n"
    "Writes an HDF5 file with the reconstruction, per-phase timings [iterations x ranks],\n"
    "metrics, the decomposition and full provenance (docs/output_schema.md).\n";

int exit_code_for(bool input_error) { return input_error ? 2 : 1; }

// Prints "error: ..." once per rank; the caller returns the exit code.
int report(const std::string& msg, bool input_error) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  std::fflush(stderr);
  return exit_code_for(input_error);
}

Cli parse_cli(int argc, char** argv, bool& exit_now, int rank) {
  Cli cli;
  po::options_description opts("Options");
  opts.add_options()("help,h", "print this help and exit")(
      "help-config", "print every configuration key with its default, type, range and meaning")(
      "set,s", po::value<std::vector<std::string>>(&cli.sets)->composing(),
      "override a configuration key, e.g. --set compile.mode=pre --set problem.size=1024; "
      "validated like the file (repeatable)")("output,o", po::value<std::string>(&cli.output),
                                              "output HDF5 file (overrides output.file)")(
      "force,f", po::bool_switch(&cli.force), "overwrite an existing output file")(
      "dry-run,n", po::bool_switch(&cli.dry_run),
      "print the plan (problem size, ranks, tiles, halo, memory per rank, compile mode and backend) and exit")(
      "print-config", po::bool_switch(&cli.print_config), "print the effective configuration as TOML and exit")(
      "check-compile", po::bool_switch(&cli.check_compile),
      "try compile.backend on a small input of the configured denoiser (for inductor: Python, torch, "
      "the exporter and the cache), compare it with eager, print the result and exit (0 ok, 1 failed)")(
      "version", "print the version and exit");
  const po::variables_map vm = parse_config_command_line(argc, argv, opts, cli.config, "pnp_recon");
  exit_now = true;
  if (vm.count("help")) {
    if (rank == 0)
      std::cout << kUsage << "\n" << opts
                << "\nExit codes: 0 success, 2 bad configuration, command line or input file, 1 other failure.\n"
                   "Every rank prints one `error: ...` line on failure; no rank is left waiting.\n"
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
  exit_now = false;
  if (cli.config.empty()) throw InputError("no configuration file given (usage: pnp_recon CONFIG.toml; see --help)");
  return cli;
}

at::Device choose_device(const std::string& want, int local_rank) {
  int count = at::detail::getCUDAHooks().hasCUDA() ? at::detail::getCUDAHooks().deviceCount() : 0;
  if (want == "cpu" || (want == "auto" && count == 0)) return at::kCPU;
  if (count == 0) throw InputError("distributed.device = \"cuda\" but no CUDA device is available");
  at::Device dev(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
  c10::impl::getDeviceGuardImpl(at::kCUDA)->setDevice(dev);
  return dev;
}

int cuda_device_count() {
  return at::detail::getCUDAHooks().hasCUDA() ? at::detail::getCUDAHooks().deviceCount() : 0;
}

// Angles and detector bins of the configured geometry (a sinogram file may hold other angles).
std::pair<int64_t, int64_t> sinogram_dims(const Config& cfg) {
  const int64_t n = cfg.problem.size;
  return {cfg.problem.angles,
          cfg.problem.detector ? cfg.problem.detector : static_cast<int64_t>(std::ceil(std::sqrt(2.0) * double(n)))};
}

// The memory plan of every rank (plan_memory), computed identically on all ranks, so that a
// memory limit too small for some tile fails collectively before any work.
std::vector<MemoryPlan> memory_plans(const Config& cfg, const Decomposition& d, const nn::Graph& g) {
  const auto [k, det] = sinogram_dims(cfg);
  std::vector<MemoryPlan> plans;
  for (const auto& t : d.tiles) plans.push_back(plan_memory(cfg, g, t.ext, k, det));
  return plans;
}

std::string plan_text(const Config& cfg, const Decomposition& d, const nn::Graph& g, int ranks, at::Device dev,
                      const std::string& comm_kind) {
  std::ostringstream os;
  const int64_t n = cfg.problem.size;
  const auto [k, det] = sinogram_dims(cfg);
  os << "problem      " << n << " x " << n << " image, " << k << " angles, " << det << " detector bins, "
     << (cfg.problem.sinogram.empty() ? "phantom " + cfg.problem.phantom + " generated in memory"
                                      : "sinogram " + cfg.problem.sinogram)
     << "\n";
  os << "solver       " << cfg.solver.iterations << " iterations, init " << cfg.solver.init << ", clamp "
     << cfg.solver.clamp << ", relaxation " << cfg.solver.relaxation << "\n";
  os << "denoiser     " << g.architecture << " (" << g.dim << "D, " << g.parameter_count() << " parameters, receptive radius "
     << nn::receptive_radius(g) << " px, alignment " << g.alignment() << "), sigma " << cfg.denoiser.sigma << ", "
     << cfg.denoiser.precision << ", weights "
     << (cfg.denoiser.weights.empty() ? "seeded random init" : cfg.denoiser.weights) << "\n";
  os << "compile      mode " << cfg.compile.mode << ", backend " << cfg.compile.backend << "\n";
  os << "ranks        " << ranks << " on " << (dev.is_cuda() ? "CUDA" : "CPU") << ", communication " << comm_kind << "\n";
  os << "decomposition " << d.describe();
  const auto plans = memory_plans(cfg, d, g);
  if (cfg.denoiser.memory_limit_gb > 0)
    os << "memory limit " << cfg.denoiser.memory_limit_gb << " GB per rank (denoiser.memory_limit_gb)\n";
  for (size_t r = 0; r < plans.size(); ++r) os << "memory       rank " << r << ": " << plans[r].describe() << "\n";
  return os.str();
}

// Gathers [iterations] doubles of every rank into [iterations x ranks] on rank 0.
std::vector<double> gather_columns(const Communicator& comm, const std::vector<double>& mine) {
  int r = comm.rank(), s = comm.size();
  std::vector<double> all(r == 0 ? mine.size() * size_t(s) : 0);
  MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), static_cast<int>(mine.size()),
             MPI_DOUBLE, 0, comm.mpi_comm());
  if (r != 0) return {};
  std::vector<double> out(all.size());
  size_t it = mine.size();
  for (size_t q = 0; q < size_t(s); ++q)
    for (size_t i = 0; i < it; ++i) out[i * size_t(s) + q] = all[q * it + i];
  return out;
}

double stable_mean(const std::vector<double>& v, int64_t window) {
  size_t w = std::min<size_t>(v.size(), static_cast<size_t>(window));
  if (w == 0) return 0;
  return std::accumulate(v.end() - static_cast<long>(w), v.end(), 0.0) / double(w);
}

// Mean over the last `window` iterations of the finite values (NaN when there are none).
double stable_mean_finite(const std::vector<double>& v, int64_t window) {
  size_t w = std::min<size_t>(v.size(), static_cast<size_t>(window));
  double sum = 0;
  int n = 0;
  for (size_t i = v.size() - w; i < v.size(); ++i)
    if (std::isfinite(v[i])) sum += v[i], ++n;
  return n ? sum / n : std::nan("");
}

void print_phase_table(const Communicator& comm, const PnpRecord& rec, int64_t window) {
  // Per phase (and region), this rank's stable-window mean, then max/min/mean over ranks.
  std::vector<std::string> names = pnp_phases();
  std::vector<const std::vector<double>*> series;
  for (const auto& ph : rec.phase) series.push_back(&ph);
  names.insert(names.end() - 1, {"(region) gradient", "(region) denoise"});
  series.insert(series.end() - 1, {&rec.region_gradient, &rec.region_denoise});
  std::vector<double> mine;
  for (const auto* v : series) mine.push_back(stable_mean_finite(*v, window));
  std::vector<double> mx(mine.size()), mn(mine.size()), sm(mine.size());
  MPI_Reduce(mine.data(), mx.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_MAX, 0, comm.mpi_comm());
  MPI_Reduce(mine.data(), mn.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_MIN, 0, comm.mpi_comm());
  MPI_Reduce(mine.data(), sm.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_SUM, 0, comm.mpi_comm());
  if (comm.rank() != 0) return;
  double total = mx.back();
  std::printf("\nPhase times, mean of the last %lld iterations (seconds; max/min/mean over %d ranks):\n",
              (long long)std::min<int64_t>(window, static_cast<int64_t>(rec.total.size())), comm.size());
  std::printf("%-20s %12s %12s %12s %8s %8s\n", "phase", "max", "min", "mean", "max/min", "%total");
  for (size_t i = 0; i < mine.size(); ++i) {
    if (!std::isfinite(mx[i])) {
      std::printf("%-20s %12s   (inside a captured CUDA graph: not separable)\n", names[i].c_str(), "-");
      continue;
    }
    double mean = sm[i] / comm.size();
    std::printf("%-20s %12.4e %12.4e %12.4e %8.2f %7.1f%%\n", names[i].c_str(), mx[i], mn[i], mean,
                mn[i] > 0 ? mx[i] / mn[i] : 1.0, total > 0 ? 100.0 * mx[i] / total : 0.0);
  }
}

// What rank 0 writes besides the image: everything gathered over ranks.
struct Gathered {
  std::vector<std::vector<double>> phase;  // [phase] -> [iterations x ranks]
  std::vector<double> wall, peak, sent;    // [iterations x ranks], [ranks], [ranks]
  std::vector<double> bytes;               // [iterations x ranks]
  std::vector<double> patch, estimate;     // [ranks]: denoiser patch size used, memory estimate
  std::vector<double> region_gradient, region_denoise;  // [iterations x ranks]
  std::vector<std::vector<double>> phase_peak;  // [phase] -> [ranks]
  double first = 0, stable = 0, compile = 0;
  std::string gpu_names;
};

void write_output(const Config& cfg, const Decomposition& d, const Communicator& comm, const Problem& prob,
                  const PnpRecord& rec, const Gathered& g, const at::Tensor& image, at::Device dev) {
  io::AtomicOutput out(cfg.output.file, cfg.output.force);
  io::H5File& f = out.file();
  Provenance p = basic_provenance("pnp_recon");
  p.torch_version = TORCH_VERSION;
  if (at::detail::getCUDAHooks().hasCUDA()) {
    long v = at::detail::getCUDAHooks().versionCUDART();
    p.cuda_version = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  }
#ifdef PNP_HAVE_NCCL
  p.nccl_version = std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH);
#endif
  io::write_provenance(f, p);
  io::write_attr(f, "/", "ranks", int64_t{comm.size()});
  io::write_attr(f, "/", "gpu_names", g.gpu_names);
  io::write_attr(f, "/", "config", cfg.to_toml());
  io::write_attr(f, "/", "compile_mode", cfg.compile.mode);
  io::write_attr(f, "/", "compile_backend", cfg.compile.backend);
  io::write_attr(f, "/", "architecture", cfg.denoiser.architecture);
  io::write_attr(f, "/", "device", dev.is_cuda() ? std::string("cuda") : std::string("cpu"));
  io::write_attr(f, "/", "comm_backend", comm.backend());
  io::write_attr(f, "/", "step", rec.step);
  io::write_attr(f, "/", "tf32", int64_t{cfg.compile.tf32});
  at::Tensor img = image.contiguous();
  io::write(f, "/reconstruction", img.data_ptr<float>(), {d.n, d.n}, "attenuation per pixel",
            "final PnP iterate x, gathered from all tiles");
  if (prob.truth_full) {
    at::Tensor gt = prob.truth_full->contiguous();
    io::write(f, "/ground_truth", gt.data_ptr<float>(), {d.n, d.n}, "attenuation per pixel", "ground-truth image");
  }
  const int64_t iters = static_cast<int64_t>(rec.total.size()), ranks = comm.size();
  for (size_t i = 0; i < pnp_phases().size(); ++i)
    io::write(f, "/timings/" + pnp_phases()[i], g.phase[i].data(), {iters, ranks}, "s",
              pnp_phases()[i] == "total" ? "device time of each iteration, begin to end event, per rank"
                                         : "device-event time of the phase, per iteration and rank; NaN in "
                                           "iterations replayed as a captured graph (post, fused)");
  io::write(f, "/timings/wall", g.wall.data(), {iters, ranks}, "s", "host wall time of each iteration, per rank");
  io::write(f, "/timings/region_gradient", g.region_gradient.data(), {iters, ranks}, "s",
            "forward_projection + allreduce + backprojection + step as one region (the post-mode graph); NaN inside a fused graph");
  io::write(f, "/timings/region_denoise", g.region_denoise.data(), {iters, ranks}, "s",
            "halo_exchange + denoise + clamp as one region (the post-mode graph); NaN inside a fused graph");
  io::write_attr(f, "/", "graphs_captured", int64_t{rec.graphs_captured});
  io::write_scalar(f, "/timings/first_iteration", g.first, "s",
                   "wall time from program start to the end of iteration 1, incl. setup and compile (max over ranks)");
  io::write_scalar(f, "/timings/stable_iteration", g.stable, "s",
                   "mean device time of the last solver.stable_window iterations (max over ranks)");
  io::write_scalar(f, "/timings/compile", g.compile, "s", "compile cost alone (max over ranks)");
  std::vector<int64_t> peak(g.peak.begin(), g.peak.end());
  io::write(f, "/memory/peak_bytes", peak.data(), {ranks}, "B", "peak device memory allocated by each rank (0 on CPU)");
  std::vector<int64_t> est(g.estimate.begin(), g.estimate.end()), patch(g.patch.begin(), g.patch.end());
  io::write(f, "/memory/estimated_bytes", est.data(), {ranks}, "B",
            "device memory estimated before the run for each rank (solver state, weights, denoiser activations, "
            "workspace allowance; pnp::plan_memory)");
  io::write(f, "/memory/patch_size", patch.data(), {ranks}, "px",
            "denoiser patch size each rank ran with (0 = whole extended tile): denoiser.patch_size, or chosen "
            "within denoiser.memory_limit_gb");
  io::write_attr(f, "/memory", "limit_gb", cfg.denoiser.memory_limit_gb);
  for (size_t i = 0; i + 1 < pnp_phases().size(); ++i) {
    std::vector<int64_t> pp(g.phase_peak[i].begin(), g.phase_peak[i].end());
    io::write(f, "/memory/phase_peak_bytes/" + pnp_phases()[i], pp.data(), {ranks}, "B",
              "peak device memory allocated during the phase, over all iterations, per rank (0 on CPU)");
  }
  std::vector<double> per_it(g.sent.size());
  for (size_t q = 0; q < g.sent.size(); ++q) per_it[q] = g.sent[q] / double(iters);
  io::write(f, "/communication/bytes_per_iteration", per_it.data(), {ranks}, "B",
            "halo-exchange and allreduce payload sent by each rank per iteration (mean over iterations; a "
            "replayed CUDA graph counts what its capture recorded; metrics excluded)");
  io::write(f, "/communication/bytes", g.bytes.data(), {iters, ranks}, "B",
            "halo-exchange and allreduce payload sent by each rank in each iteration (metrics excluded)");
  io::write(f, "/metrics/psnr", rec.psnr.data(), {iters}, "dB",
            "PSNR of the iterate after each iteration against the ground truth (data range); NaN where not computed");
  io::write(f, "/metrics/ssim", rec.ssim.data(), {iters}, "1",
            "SSIM of the iterate after each iteration against the ground truth (Gaussian window 11, sigma 1.5, "
            "data range of the truth, as skimage.metrics.structural_similarity); NaN where not computed");
  {
    double fp = std::nan(""), fs = std::nan("");
    for (int64_t i = iters - 1; i >= 0; --i)
      if (!std::isnan(rec.psnr[size_t(i)])) {
        fp = rec.psnr[size_t(i)], fs = rec.ssim[size_t(i)];
        break;
      }
    io::write_attr(f, "/metrics", "final_psnr", fp);
    io::write_attr(f, "/metrics", "final_ssim", fs);
  }
  io::write(f, "/metrics/residual", rec.residual.data(), {iters}, "1",
            "||A x - y|| / ||y|| of the iterate entering each iteration; NaN where not computed");
  std::vector<int64_t> boxes;
  for (const auto& t : d.tiles) boxes.insert(boxes.end(), {t.own.r0, t.own.r1, t.own.c0, t.own.c1});
  io::write(f, "/decomposition/boxes", boxes.data(), {ranks, 4}, "px", "owned tile of each rank: r0, r1, c0, c1 (half-open)");
  io::write_scalar<int64_t>(f, "/decomposition/halo", d.halo, "px", "halo width used (halo = 0 resolved to the receptive radius)");
  io::write_attr(f, "/decomposition", "kind", d.kind);
  out.commit();
}

// --check-compile: the configured backend on a small input, against eager (all ranks take part,
// so a shared cache directory sees one compile and the other ranks waiting and loading).
bool check_compile(const Config& cfg, at::Device device, int rank) {
  Config c = cfg;
  if (c.compile.mode == "none") c.compile.mode = "pre";
  std::ostringstream o;
  o << "check-compile: backend " << c.compile.backend;
  if (c.compile.backend == "inductor") {
    nn::InductorOptions io_;
    io_.cache_dir = c.compile.cache_dir;
    o << " (" << c.compile.inductor_mode << ", cache " << c.compile.cache_dir << "), " << nn::probe_inductor(io_);
  }
  Denoiser d = make_denoiser(c, device);
  Config ce = cfg;
  ce.compile.mode = "none";
  Denoiser e = make_denoiser(ce, device);
  const int64_t a = d.graph.alignment(), s = (16 + a - 1) / a * a;
  std::vector<int64_t> shape{1, d.graph.in_channels};
  for (int i = 0; i < d.graph.dim; ++i) shape.push_back(s);
  at::Tensor x = at::rand(shape, at::TensorOptions().device(device));
  const double sigma = 0.05;
  at::Tensor yc = d.executor->forward(x, sigma).to(at::kFloat), ye = e.executor->forward(x, sigma).to(at::kFloat);
  const double err = (yc - ye).abs().max().item<double>(), scale = ye.abs().max().item<double>();
  // bf16: the two executors round differently (BN folding, fused epilogues): ~2^-8 per layer.
  const double tol = (d.dtype == at::kBFloat16 ? 5e-2 : device.is_cuda() ? 2e-2 : 1e-4) * std::max(1.0, scale);
  const bool ok = std::isfinite(err) && err <= tol;
  o << "\ncheck-compile: " << cfg.denoiser.architecture << " " << nn::shape_string(shape) << " on " << device.str()
    << ": compile " << d.compile_seconds() << " s, max |compiled - eager| = " << err << " (tolerance " << tol << "): "
    << (ok ? "ok" : "FAILED") << "\n";
  for (const auto& n : d.fusions()) o << "check-compile:   " << n << "\n";
  if (rank == 0) std::cout << o.str() << std::flush;
  return ok;
}

}  // namespace

int recon_main(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  MpiSession mpi(argc, argv);
  const int rank = mpi.rank();
  Cli cli;
  Config cfg;
  bool exit_now = false;
  try {
    collectively(MPI_COMM_WORLD, [&] {
      cli = parse_cli(argc, argv, exit_now, rank);
      if (exit_now) return;
      std::vector<std::string> sets = cli.sets;
      if (!cli.output.empty()) sets.push_back("output.file=\"" + cli.output + "\"");
      if (cli.force) sets.push_back("output.force=true");
      cfg = load_config(cli.config, sets);
    });
  } catch (const CollectiveError& e) {
    return report(e.what(), e.input_error);
  }
  if (exit_now) return 0;
  if (cli.print_config) {
    if (rank == 0) std::cout << cfg.to_toml();
    return 0;
  }

  at::Device device = at::kCPU;
  nn::Graph graph;
  Decomposition decomp;
  std::unique_ptr<Communicator> comm;
  try {
    collectively(MPI_COMM_WORLD, [&] {
      device = choose_device(cfg.distributed.device, mpi.local_rank());
      // compile.tf32 = true keeps PyTorch's defaults (TF32 in cuDNN convolutions); false makes
      // every convolution and matrix product strict fp32 (the inductor packages call ATen's).
      if (!cfg.compile.tf32) {
        at::globalContext().setAllowTF32CuDNN(false);
        at::globalContext().setAllowTF32CuBLAS(false);
      }
      graph = denoiser_graph(cfg.denoiser);
      int64_t halo = cfg.distributed.halo > 0 ? cfg.distributed.halo : nn::receptive_radius(graph);
      decomp = plan_decomposition(cfg.problem.size, mpi.size(), cfg.distributed.decomposition, cfg.distributed.grid,
                                  halo, graph.alignment());
      nn::infer_output_shape(graph, {1, cfg.denoiser.channels, decomp.tile(rank).ext.rows(), decomp.tile(rank).ext.cols()});
      memory_plans(cfg, decomp, graph);  // InputError on every rank when a memory limit cannot be met
      if (rank == 0 && !cli.dry_run && !cli.check_compile) io::check_output_path(cfg.output.file, cfg.output.force);
    });
    if (cli.check_compile) {
      bool ok = false;
      collectively(MPI_COMM_WORLD, [&] { ok = check_compile(cfg, device, rank); });
      return ok ? 0 : 1;
    }
    if (cli.dry_run) {
      std::string kind = cfg.distributed.comm == "auto"
                             ? (device.is_cuda() && mpi.local_size() <= cuda_device_count() ? "auto (nccl if built)" : "mpi")
                             : cfg.distributed.comm;
      if (rank == 0) std::cout << plan_text(cfg, decomp, graph, mpi.size(), device, kind);
      return 0;
    }
    collectively(MPI_COMM_WORLD, [&] {
      comm = make_communicator(cfg.distributed.comm, MPI_COMM_WORLD, device, mpi.local_size(), cuda_device_count());
    });
  } catch (const CollectiveError& e) {
    return report(e.what(), e.input_error);
  }

  Problem prob;
  Denoiser den;
  try {
    collectively(MPI_COMM_WORLD, [&] {
      prob = setup_problem(cfg, decomp, rank, device);
      den = make_denoiser(cfg, device);
    });
  } catch (const CollectiveError& e) {
    return report(e.what(), e.input_error);
  }
  if (rank == 0 && cfg.output.progress) {
    std::printf("pnp_recon: %lld x %lld, %lld angles, %s on %d %s rank(s) (%s), compile %s/%s, halo %lld px\n",
                (long long)decomp.n, (long long)decomp.n, (long long)prob.geom.n_angles(),
                cfg.denoiser.architecture.c_str(), comm->size(), device.is_cuda() ? "CUDA" : "CPU",
                comm->backend().c_str(), cfg.compile.mode.c_str(), cfg.compile.backend.c_str(), (long long)decomp.halo);
    std::fflush(stdout);
  }

  // From here on a failure on one rank may leave others inside a collective: abort the job.
  try {
    double setup = std::chrono::duration<double>(Clock::now() - t0).count();
    PnpRecord rec = run_pnp(cfg, decomp, *comm, prob, den, device, setup);
    at::Tensor image = comm->gather_tiles(rec.x_own, decomp);
    Gathered g;
    char buf[128] = {};
    std::snprintf(buf, sizeof buf, "%s", device_name(device).c_str());
    std::vector<char> names(rank == 0 ? 128 * size_t(comm->size()) : 0);
    MPI_Gather(buf, 128, MPI_CHAR, names.data(), 128, MPI_CHAR, 0, MPI_COMM_WORLD);
    for (int q = 0; rank == 0 && q < comm->size(); ++q) g.gpu_names += (q ? "," : "") + std::string(&names[size_t(q) * 128]);
    for (const auto& ph : rec.phase) g.phase.push_back(gather_columns(*comm, ph));
    g.wall = gather_columns(*comm, rec.wall);
    g.peak = gather_columns(*comm, {double(rec.peak_bytes)});
    g.sent = gather_columns(*comm, {double(rec.bytes_sent)});
    g.bytes = gather_columns(*comm, rec.bytes_per_iteration);
    g.patch = gather_columns(*comm, {double(rec.memory.patch)});
    g.estimate = gather_columns(*comm, {rec.memory.total()});
    for (int64_t b : rec.phase_peak_bytes) g.phase_peak.push_back(gather_columns(*comm, {double(b)}));
    g.first = comm->max(rec.first_iteration);
    g.stable = comm->max(stable_mean(rec.total, cfg.solver.stable_window));
    g.region_gradient = gather_columns(*comm, rec.region_gradient);
    g.region_denoise = gather_columns(*comm, rec.region_denoise);
    g.compile = comm->max(rec.compile_seconds);
    print_phase_table(*comm, rec, cfg.solver.stable_window);
    if (rank == 0) {
      int64_t last = -1;
      for (int64_t i = 0; i < static_cast<int64_t>(rec.psnr.size()); ++i)
        if (!std::isnan(rec.psnr[size_t(i)])) last = i;
      double peak = *std::max_element(g.peak.begin(), g.peak.end());
      std::printf("\nfirst iteration %.3f s, stable iteration %.4f s, compile %.3f s, step %.4e%s\n", g.first, g.stable,
                  g.compile, rec.step,
                  last >= 0 ? (", final PSNR " + std::to_string(rec.psnr[size_t(last)]) + " dB, SSIM " +
                               std::to_string(rec.ssim[size_t(last)]))
                                  .c_str()
                            : "");
      if (device.is_cuda()) std::printf("peak device memory %s (max over ranks)\n", human_bytes(peak).c_str());
      const double limit = cfg.denoiser.memory_limit_gb * 1e9;
      if (device.is_cuda() && limit > 0 && peak > limit)
        std::printf("warning: the peak %s exceeded denoiser.memory_limit_gb = %g GB: the estimate (%s) was short; "
                    "set a smaller denoiser.patch_size, and please report this case\n",
                    human_bytes(peak).c_str(), cfg.denoiser.memory_limit_gb,
                    human_bytes(*std::max_element(g.estimate.begin(), g.estimate.end())).c_str());
      write_output(cfg, decomp, *comm, prob, rec, g, image, device);
      std::printf("wrote %s\n", cfg.output.file.c_str());
    }
  } catch (const std::exception& e) {
    abort_job(e.what(), dynamic_cast<const InputError*>(&e) ? 2 : 1);
  }
  return 0;
}

}  // namespace pnp
