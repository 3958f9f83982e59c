// run_pnp: the step size, the initial image, the buffers, the two regions under their capture
// policy (regions.cpp), metrics and progress, and the record of one rank.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "checkpoint.hpp"
#include "pnp/solver.hpp"
#include "pnp/timing.hpp"
#include "pnp/watchdog.hpp"
#include "quality.hpp"
#include "regions.hpp"

namespace pnp {

const char* phase_name(Phase p) {
  static constexpr std::array<const char*, kPhaseCount> names = {
      "forward_projection", "allreduce", "backprojection", "step", "halo_exchange", "denoise", "clamp"};
  return names[static_cast<size_t>(p)];
}

const std::vector<std::string>& pnp_phases() {
  static const std::vector<std::string> p = [] {
    std::vector<std::string> v;
    for (int i = 0; i < kPhaseCount; ++i) v.emplace_back(phase_name(static_cast<Phase>(i)));
    v.emplace_back("total");
    return v;
  }();
  return p;
}

double sigma_at(const DenoiserConfig& c, int64_t it, int64_t iterations) {
  if (c.sigma_start <= 0 || iterations < 2) return c.sigma;
  const double t = static_cast<double>(it) / static_cast<double>(iterations - 1);
  return c.sigma_start * std::pow(c.sigma / c.sigma_start, t);
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// gamma = step_scale / ||A^T A|| (distributed power method, its iterations into rec), or as
// configured.
double step_size(const Config& cfg, const Problem& prob, const Box& own, Communicator& comm, at::Device device,
                 PnpRecord& rec) {
  if (cfg.solver.step > 0) return cfg.solver.step;
  physics::PowerOptions po;
  po.max_iterations = static_cast<int>(cfg.solver.power_iterations);
  po.tol = cfg.solver.power_tol;
  po.seed = static_cast<uint64_t>(cfg.problem.seed);
  auto allreduce = [&](at::Tensor& t) { comm.allreduce_sum(t); };
  const physics::PowerResult r = physics::operator_norm_detailed(prob.geom, own, allreduce, po, device, at::kFloat);
  rec.power_iterations = r.iterations;
  rec.power_converged = r.converged;
  rec.power_start_s = r.start_seconds, rec.power_first_s = r.first_seconds;
  return cfg.solver.step_scale / r.norm;
}

at::Tensor initial_image(const Config& cfg, const Problem& prob, const Box& own, double step, at::TensorOptions opts) {
  at::Tensor x;
  if (cfg.solver.init == "zeros") {
    x = at::zeros({own.rows(), own.cols()}, opts);
  } else if (cfg.solver.init == "backprojection") {
    x = physics::adjoint(prob.y, prob.geom, own) * step;
  } else {
    x = physics::fbp(prob.y, prob.geom, own, physics::parse_fbp_filter(cfg.solver.fbp_filter)).to(at::kFloat);
  }
  return x.contiguous();
}

// Rank 0's progress line. On a GPU the loop only queues work, so the per-iteration figure is
// the host's time to queue it; elapsed and ETA catch up at the next synchronisation.
void print_progress(int64_t it, int64_t iters, double iteration_s, double elapsed_s, bool cuda, bool metrics,
                    bool truth, const PnpRecord& rec) {
  const double eta = elapsed_s / double(it + 1) * double(iters - it - 1);
  if (it == 0 && cuda)
    std::printf("(progress uses the host clock; GPU work is queued asynchronously, phase times come from events)\n");
  std::printf("iteration %4lld/%lld  %10s  elapsed %10s  ETA %10s", (long long)(it + 1), (long long)iters,
              human_seconds(iteration_s).c_str(), human_seconds(elapsed_s).c_str(), human_seconds(eta).c_str());
  if (metrics) {
    const size_t i = static_cast<size_t>(it);
    if (truth) std::printf("  PSNR %6.2f dB  SSIM %.4f", rec.psnr[i], rec.ssim[i]);
    std::printf("  residual %.3e", rec.residual[i]);
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

PnpRecord run_pnp(const Config& cfg, const Decomposition& d, Communicator& comm, const Problem& prob, Denoiser& den,
                  at::Device device, double setup_seconds, const Checkpoint* resume) {
  const auto t_start = Clock::now();
  const int rank = comm.rank(), ranks = comm.size();
  const TilePlan& me = d.tile(rank);
  const Box& own = me.own;
  const int64_t iters = cfg.solver.iterations, start = resume ? resume->done : 0;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  const size_t n_it = static_cast<size_t>(iters);
  PnpRecord rec;
  rec.psnr.assign(n_it, nan);
  rec.ssim.assign(n_it, nan);
  rec.residual.assign(n_it, nan);
  rec.bytes_per_iteration.assign(n_it, 0.0);
  for (int64_t it = 0; it < iters; ++it) rec.sigma.push_back(sigma_at(cfg.denoiser, it, iters));
  rec.phase.assign(pnp_phases().size(), std::vector<double>(n_it, 0.0));
  rec.total.assign(n_it, 0.0);
  rec.wall.assign(n_it, 0.0);
  rec.region_gradient.assign(n_it, nan);
  rec.region_denoise.assign(n_it, nan);
  // This rank's per-iteration series, in checkpoint_series() order.
  const auto series = [&] {
    std::vector<std::vector<double>*> v;
    for (auto& ph : rec.phase) v.push_back(&ph);
    v.insert(v.end(), {&rec.wall, &rec.region_gradient, &rec.region_denoise, &rec.bytes_per_iteration});
    return v;
  }();

  Watchdog::beat("the step size (power method)");
  const auto t_step = Clock::now();
  rec.step = resume ? resume->step : step_size(cfg, prob, own, comm, device, rec);
  rec.setup.emplace_back("step_size", since(t_step));
  const bool clamp = cfg.solver.clamp != "none";
  if (cfg.solver.clamp == "ground_truth") {
    if (!prob.has_truth())
      throw CollectiveError("solver.clamp = \"ground_truth\" needs a ground truth in the input; set solver.clamp = "
                       "\"fixed\" or \"none\"", /*input_error=*/true);  // every rank: the same input
    rec.clamp_lo = prob.truth_min, rec.clamp_hi = prob.truth_max;
  } else {
    rec.clamp_lo = cfg.solver.clamp_min, rec.clamp_hi = cfg.solver.clamp_max;
  }

  // Buffers, allocated once: x (owned), z (extended tile), partial and full sinograms.
  LoopState s;
  const auto t_init = Clock::now();  // the initial image: from the checkpoint or solver.init
  if (resume) {
    s.x = resume->image.narrow(0, own.r0, own.rows()).narrow(1, own.c0, own.cols()).contiguous().to(device);
    for (int64_t it = 0; it < start; ++it) {
      const size_t i = static_cast<size_t>(it);
      rec.psnr[i] = resume->psnr[i], rec.ssim[i] = resume->ssim[i], rec.residual[i] = resume->residual[i];
      for (size_t k = 0; k < series.size(); ++k) (*series[k])[i] = resume->series[k][i * ranks + rank];
      rec.total[i] = rec.phase.back()[i];
    }
    rec.segments = resume->segments;
  } else {
    s.x = initial_image(cfg, prob, own, rec.step, opts);
  }
  CallTimer(device).sync();  // the image is made on the device: its time, not its launch
  rec.setup.emplace_back("initial_image", since(t_init));
  s.z_ext = at::empty({me.ext.rows(), me.ext.cols()}, opts);
  s.z_own = s.z_ext.narrow(0, own.r0 - me.ext.r0, own.rows()).narrow(1, own.c0 - me.ext.c0, own.cols());
  s.p = at::empty({prob.geom.n_angles(), prob.geom.n_det}, opts);
  s.g = at::empty({own.rows(), own.cols()}, opts);
  QualityMonitor quality(prob, d, comm, opts);

  std::vector<std::string> timer_slots(pnp_phases().begin(), pnp_phases().end() - 1);
  timer_slots.insert(timer_slots.end(), {"region_gradient", "region_denoise"});
  PhaseTimer timer(device, timer_slots, iters);
  const bool progress = cfg.output.progress && rank == 0;
  // Patch size: as configured, or chosen within denoiser.memory_limit_gb.
  rec.memory = plan_memory(cfg, den.graph, me.ext, prob.geom.n_angles(), prob.geom.n_det);
  if (progress && (cfg.denoiser.memory_limit_gb > 0 || rec.memory.patch > 0)) {
    std::printf("memory rank 0: %s\n", rec.memory.describe().c_str());
    std::fflush(stdout);
  }
  if (progress && resume) {
    std::printf("resuming after iteration %lld of %lld from %s\n", (long long)start, (long long)iters,
                cfg.output.checkpoint_path().c_str());
    std::fflush(stdout);
  }

  HaloPlan halo(comm, d, opts);
  DenoiseSettings ds;
  ds.sigma = rec.sigma[static_cast<size_t>(start)];
  ds.patch = rec.memory.patch;
  ds.overlap = rec.memory.overlap;
  ds.alpha = cfg.solver.relaxation;
  ds.clamp = clamp;
  ds.lo = rec.clamp_lo, ds.hi = rec.clamp_hi;
  GradientRegion gradient(prob, own, comm, s, rec.step);
  DenoiseRegion denoise(me, halo, den, s, ds);
  StepRunner runner(cfg.compile.mode, cfg.compile.cuda_graphs, device, comm, gradient, denoise, timer);

  // The record of iterations [start, upto) from the timer (resolved through upto - 1).
  int64_t recorded = start;
  auto record_through = [&](int64_t upto) {
    timer.resolve_through(upto - 1);
    for (int64_t it = recorded; it < upto; ++it) {
      const size_t i = static_cast<size_t>(it);
      const bool replayed = runner.replays(it - start) && runner.captured();
      for (int ph = 0; ph < kPhaseCount; ++ph) rec.phase[static_cast<size_t>(ph)][i] = replayed ? nan : timer.seconds(it, ph);
      if (!replayed || runner.regions_timed_when_replayed()) {
        rec.region_gradient[i] = timer.seconds(it, kGradientRegionSlot);
        rec.region_denoise[i] = timer.seconds(it, kDenoiseRegionSlot);
      }
      rec.phase.back()[i] = rec.total[i] = timer.total(it);
      rec.wall[i] = timer.wall(it);
    }
    recorded = std::max(recorded, upto);
  };
  const std::string segment_start = iso8601_utc_now();
  auto this_segment = [&](int64_t done) {
    const Provenance p = basic_provenance("pnp_recon");
    return "iterations " + std::to_string(start + 1) + "-" + std::to_string(done) + " on " + std::to_string(ranks) +
           " rank(s), " + p.host + ", " + segment_start + ", commit " + p.git_commit;
  };
  // The checkpoint after `done` iterations (every rank takes part; rank 0 writes it).
  auto checkpoint = [&](int64_t done) {
    Watchdog::beat("writing a checkpoint");
    record_through(done);
    Checkpoint c;
    c.done = done;
    c.step = rec.step;
    c.first_iteration = resume ? resume->first_iteration : rec.first_iteration;
    c.compile = (resume ? resume->compile : 0.0) + den.compile_seconds() + runner.capture_seconds();
    c.image = comm.gather_tiles(s.x, d);
    auto head = [&](const std::vector<double>& v) { return std::vector<double>(v.begin(), v.begin() + done); };
    c.psnr = head(rec.psnr), c.ssim = head(rec.ssim), c.residual = head(rec.residual), c.sigma = head(rec.sigma);
    for (auto* v : series) c.series.push_back(gather_columns(comm, head(*v)));
    c.segments = rec.segments;
    c.segments.push_back(this_segment(done));
    // Agreed: a failed write (a full disk) ends every rank with rank 0's one line, no abort.
    collectively(comm.mpi_comm(), [&] {
      if (rank == 0) write_checkpoint(cfg.output.checkpoint_path(), c, checkpoint_identity(cfg, ranks), ranks);
    });
  };

  for (int64_t it = start; it < iters; ++it) {
    const auto t_it = Clock::now();
    const int64_t bytes_it = comm.bytes_sent();
    Watchdog::beat("an iteration");
    denoise.set_sigma(rec.sigma[static_cast<size_t>(it)]);
    timer.begin_iteration(it);
    const int64_t k = it - start;  // iterations of this run: the first one is the warm-up
    const bool replay = runner.replays(k) && runner.captured();
    runner.run(k);
    timer.end_iteration();
    rec.bytes_per_iteration[static_cast<size_t>(it)] =
        static_cast<double>(replay ? runner.capture_bytes() : comm.bytes_sent() - bytes_it);

    const int64_t every = cfg.solver.metrics_every;
    const bool metrics = every > 0 && ((it + 1) % every == 0 || it + 1 == iters);
    if (metrics) {
      const size_t i = static_cast<size_t>(it);
      Watchdog::beat("metrics");
      if (!quality.measure(s.x, s.p, rec.residual[i], rec.psnr[i], rec.ssim[i]))
        throw CollectiveError("the iteration diverged: the residual or the image is not finite after iteration " +
                                  std::to_string(it + 1) + " (lower solver.step_scale, or clamp with solver.clamp)",
                              /*input_error=*/true);  // every rank: measure() reduces over the ranks
    }
    if (k == 0 && runner.capturing() && iters - start > 1) runner.capture();  // compile, part 2
    if (k == 0) {
      // The first iteration includes setup, the step-size estimate and compile: measured to its end.
      if (device.is_cuda()) c10::impl::getDeviceGuardImpl(device.type())->synchronizeDevice(device.index());
      rec.first_iteration = setup_seconds + since(t_start);
    }
    if (progress) print_progress(it, iters, since(t_it), since(t_start), device.is_cuda(), metrics, prob.has_truth(), rec);

    // Checkpoint/restart: a signal on any rank or output.stop_after stops every rank at this
    // boundary, with a checkpoint; output.checkpoint_every writes one and goes on.
    const int64_t done = it + 1;
    if (done == iters) break;
    // 1 for output.stop_after, 1 + the signal for a signal on any rank (so that rank 0 names it).
    int want = StopRequest::requested() ? 1 + std::max(StopRequest::signal(), 1) : cfg.output.stop_after == done ? 1 : 0;
    if (ranks > 1) want = static_cast<int>(comm.max(static_cast<double>(want)));
    const bool periodic = cfg.output.checkpoint_every > 0 && done % cfg.output.checkpoint_every == 0;
    if (want || periodic) checkpoint(done);
    if (want) {
      rec.stopped = true;
      rec.done = done;
      rec.stop_signal = want > 1 ? want - 1 : 0;
      if (progress)
        std::printf("stopped after iteration %lld (%s), checkpoint %s; continue with --resume\n", (long long)done,
                    rec.stop_signal ? ("signal " + std::to_string(rec.stop_signal)).c_str() : "output.stop_after",
                    cfg.output.checkpoint_path().c_str());
      break;
    }
  }
  Watchdog::beat("the end of the loop");
  timer.finish();
  record_through(rec.stopped ? rec.done : iters);
  if (!rec.stopped) {
    rec.done = iters;
    rec.segments.push_back(this_segment(iters));
    // An image that is not finite must not be written as a result (no metrics would say so
    // when solver.metrics_every = 0).
    const double bad = at::isfinite(s.x).all().item<bool>() ? 0.0 : 1.0;
    if ((ranks > 1 ? comm.max(bad) : bad) > 0)  // agreed: every rank throws, none aborts
      throw CollectiveError("the iteration diverged: the final image holds non-finite values (lower solver.step_scale, "
                            "or clamp with solver.clamp)", /*input_error=*/true);
  }
  if (resume) rec.first_iteration = resume->first_iteration;
  rec.x_own = s.x;
  rec.compile_seconds = (resume ? resume->compile : 0.0) + den.compile_seconds() + runner.capture_seconds();
  rec.graphs_captured = runner.captured();
  rec.peak_bytes = timer.peak_bytes();
  for (int ph = 0; ph < kPhaseCount; ++ph) rec.phase_peak_bytes.push_back(timer.phase_peak_bytes(ph));
  rec.phase_peak_bytes.push_back(rec.peak_bytes);
  for (double b : rec.bytes_per_iteration) rec.bytes_sent += static_cast<int64_t>(b);
  return rec;
}

}  // namespace pnp
