// pnp_recon: the MPI-launched solver. The command line (cli.cpp), a pnp::Reconstruction (set-up,
// run, gather: the library), the output file (output.cpp) and the terminal report (report.cpp).
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli.hpp"
#include "output.hpp"
#include "pnp/device.hpp"
#include "pnp/messages.hpp"
#include "pnp/solver.hpp"
#include "pnp/validate.hpp"
#include "pnp/watchdog.hpp"
#include "report.hpp"

using namespace pnp;

namespace {
// Prints the job's "error: ..." line once (rank 0; every rank holds the same error); returns the
// exit code.
int report(const CollectiveError& e) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    std::fprintf(stderr, "error: %s\n", error_line(e.what()).c_str());
    std::fflush(stderr);
  }
  return e.input_error ? 2 : 1;
}

// Rank 0, after the run: the output file, then the removal of the checkpoint when it is the one
// this run wrote or resumed from. A failure here (a full disk) is this rank's alone, after the
// last collective: reported as one line, with no abort of the job.
int finish(const Config& cfg, Reconstruction& run, const PnpRecord& rec, const GatheredRecord& g) {
  try {
    recon::print_phase_table(g, run.comm().size(), cfg.solver.stable_window, static_cast<int64_t>(rec.total.size()));
    recon::print_summary(cfg, rec, g, run.device());
    const Problem& prob = run.problem();
    if (prob.angles_assumed) std::printf("angles       %s\n", prob.angles_source.c_str());
    const std::vector<std::string> notes = run.denoiser().report();
    if (!notes.empty() && cfg.output.progress) {
      std::printf("denoiser compile (rank 0; kept as /provenance/denoiser_compile):\n");
      for (const std::string& n : notes) std::printf("  %s\n", n.c_str());
    }
    recon::write_output(cfg, run.decomposition(), run.comm(), rec, g, run.device(), prob, notes);
    std::printf("wrote %s\n", cfg.output.file.c_str());
    // The run is complete: a checkpoint left from an interrupted segment is stale now.
    const std::string ckpt = cfg.output.checkpoint_path();
    const std::string kept = remove_own_checkpoint(ckpt);
    if (kept.empty()) std::printf("removed the checkpoint %s (the run is complete)\n", ckpt.c_str());
    else if (kept != "absent") std::printf("kept %s: %s\n", ckpt.c_str(), kept.c_str());
    return 0;
  } catch (...) {
    return report_error();
  }
}

// Rank 0's warnings about the data, after the set-up: angles that look like radians, and what
// normalising a volume's raw counts clipped.
void warn_about_data(const Config& cfg, const Problem& prob) {
  if (!prob.angles_warning.empty()) std::fprintf(stderr, "warning: %s\n", error_line(prob.angles_warning).c_str());
  if (prob.clipped > 0 || prob.dead_bins > 0)
    std::fprintf(stderr,
                 "warning: %s: %lld transmission(s) below 1e-6 clipped there (line integrals capped at 13.8) and %lld "
                 "dead detector bin(s) (flat <= dark) set to 0 while normalising the counts\n",
                 cfg.problem.sinogram.c_str(), (long long)prob.clipped, (long long)prob.dead_bins);
}

// Whether the configuration named on the command line asks for a GPU, read quietly before MPI
// starts (any error is reported later, collectively, when the configuration is read for real).
bool wants_gpu(int argc, char** argv) {
  try {
    const recon::Cli cli = recon::parse_cli(argc, argv, /*rank=*/-1);  // -1: prints nothing
    return !cli.exit_now && !cli.print_config && !cli.dry_run && load_config(cli.config, cli.sets).distributed.device != "cpu";
  } catch (...) {
    return false;
  }
}

// On a device out-of-memory failure, the CUDA allocator's pools as the failed step left them.
void report_out_of_memory(const std::exception& e, c10::Device device, int rank) {
  if (std::string_view(e.what()).find("out of memory") == std::string_view::npos) return;
  // As the allocator ran out (before the failure unwound what held the memory), else now.
  const std::string at_failure = device_memory_at_failure();
  const std::string mem = at_failure.empty() ? device_memory_summary(device) : at_failure;
  if (!mem.empty())
    std::fprintf(stderr, "rank %d: device memory %s: %s\n", rank,
                 at_failure.empty() ? "after the failure (what the failed step held is freed)" : "as the allocator ran out",
                 mem.c_str());
  if (memory_hold_active())
    std::fprintf(stderr,
                 "rank %d: the allocator was held to the memory plan's estimate (float32 without TF32, until the first "
                 "iteration has run): denoiser.memory_hold = false lets cuDNN choose unbounded, compile.tf32 = true "
                 "uses tensor-core engines; please report this case\n",
                 rank);
}

}  // namespace

int main(int argc, char** argv) {
  const auto t0 = std::chrono::steady_clock::now();
  // The CUDA context (and cuDNN) made while MPI starts; joined before the plan.
  DeviceWarmup warmup(wants_gpu(argc, argv));
  MpiSession mpi(argc, argv);
  const auto t_mpi = std::chrono::steady_clock::now();
  const int rank = mpi.rank();
  // From the start: a rank that never reaches the first collective ends the job too.
  Watchdog::arm(Config{}.distributed.timeout_s, rank);
  StopRequest::install();
  recon::Cli cli;
  Config cfg;
  try {
    collectively(MPI_COMM_WORLD, [&] {
      cli = recon::parse_cli(argc, argv, rank);
      if (!cli.exit_now) cfg = load_config(cli.config, cli.sets);
      if (!cli.exit_now) recon::require_configured(cli, cfg);
      // Every HDF5 input read once in a probe process (rank 0; the files are shared): a
      // damaged file that crashes or hangs libhdf5 is an input error, not a dead rank.
      if (!cli.exit_now && rank == 0) {
        std::vector<std::filesystem::path> files{cfg.problem.sinogram};
        try {  // an unknown model name is reported by the plan, on every rank
          if (!cfg.denoiser.weights.empty()) files.emplace_back(resolve_weights(cfg.denoiser.weights));
        } catch (const InputError&) {
        }
        if (cfg.output.resume) files.emplace_back(cfg.output.checkpoint_path());
        // A probe that hangs is no progress: it gets the watchdog's time (at most 120 s).
        const double t = cfg.distributed.timeout_s;
        io::probe_hdf5(files, t > 0 && t < 120 ? t : 120);
      }
    });
  } catch (const CollectiveError& e) {
    return report(e);
  }
  if (cli.exit_now) return 0;
  const auto t_config = std::chrono::steady_clock::now();
  Watchdog::arm(cfg.distributed.timeout_s, rank);
  if (cli.print_config) {
    if (rank == 0) std::cout << cfg.to_toml();
    return 0;
  }

  ReconstructionPlan plan;
  warmup.join();
  try {
    plan = Reconstruction::plan(cfg, MPI_COMM_WORLD, mpi.local_rank(), mpi.local_size());
    collectively(MPI_COMM_WORLD, [&] {
      if (rank != 0 || cli.dry_run || cli.check_compile) return;
      // Before any work: where the result and the checkpoint go must be writable, and neither
      // may be an input, not even with --force.
      const std::string weights = cfg.denoiser.weights.empty() ? "" : resolve_weights(cfg.denoiser.weights);
      std::vector<std::filesystem::path> inputs{cli.config};
      if (!cfg.problem.sinogram.empty()) inputs.emplace_back(cfg.problem.sinogram);
      if (!weights.empty()) inputs.emplace_back(weights);
      // No file the run writes or removes may be another (the checkpoint, removed at the end,
      // must not be the result), whether it exists yet or not.
      validate::require_distinct({{"output.file", cfg.output.file}, {"output.checkpoint", cfg.output.checkpoint_path()}},
                                 {{"the configuration", cli.config},
                                  {"problem.sinogram", cfg.problem.sinogram},
                                  {"denoiser.weights", weights}});
      io::check_output_path(cfg.output.file, cfg.output.force, inputs);
      inputs.emplace_back(cfg.output.file);
      io::check_output_path(cfg.output.checkpoint_path(), /*overwrite=*/true, inputs);
    });
    if (cli.check_compile) {
      bool ok = false;
      collectively(MPI_COMM_WORLD, [&] { ok = recon::check_compile(cfg, plan.device, rank); });
      return ok ? 0 : 1;
    }
    if (cli.dry_run) {
      const std::string kind = cfg.distributed.comm == "auto"
                                   ? (plan.device.is_cuda() && mpi.local_size() <= cuda_device_count()
                                          ? "auto (nccl if built)"
                                          : "mpi")
                                   : cfg.distributed.comm;
      if (rank == 0) std::cout << recon::plan_text(plan, mpi.size(), kind);
      return 0;
    }
  } catch (const CollectiveError& e) {
    return report(e);
  }

  std::optional<Reconstruction> run;
  try {
    run.emplace(Reconstruction::setup(std::move(plan), MPI_COMM_WORLD, mpi.local_size(), {t0, t_mpi, t_config}));
  } catch (const CollectiveError& e) {
    return report(e);
  }
  const Decomposition& decomp = run->decomposition();
  if (rank == 0) warn_about_data(cfg, run->problem());
  if (rank == 0 && cfg.output.progress) {
    const std::string slices = decomp.z.volume() ? std::to_string(decomp.z.slices) + " slices of " : "";
    std::printf("pnp_recon: %s%lld x %lld, %lld angles, %s on %d %s rank(s) (%s), compile %s/%s, halo %lld px\n",
                slices.c_str(), (long long)decomp.n, (long long)decomp.n, (long long)run->problem().geom.n_angles(),
                cfg.denoiser.architecture.c_str(), run->comm().size(), run->device().is_cuda() ? "CUDA" : "CPU",
                run->plane().choice().c_str(), to_string(cfg.compile.mode).c_str(),
                to_string(cfg.compile.backend).c_str(),
                (long long)decomp.halo);
    if (warmup.device() >= 0)
      std::printf("(the CUDA context of cuda:%d and cuDNN were made while MPI started: %.3f s)\n", warmup.device(),
                  warmup.seconds());
    if (const std::string note = recon::hold_note(cfg, run->device()); !note.empty()) std::printf("(%s)\n", note.c_str());
    std::fflush(stdout);
  }

  // From here on a failure on one rank may leave others inside a collective: abort the job.
  try {
    const PnpRecord rec = run->run();
    if (rec.stopped) return kExitCheckpointed;
    const GatheredRecord g = run->gather(rec);
    if (rank == 0) return finish(cfg, *run, rec, g);
  } catch (const CollectiveError& e) {  // every rank threw it together (a diverged run): no abort
    return report(e);
  } catch (const std::exception& e) {
    report_out_of_memory(e, run->device(), rank);
    abort_job(e.what(), dynamic_cast<const InputError*>(&e) ? 2 : 1);
  }
  return 0;
}
