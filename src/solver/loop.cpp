// run_pnp: the step size, the initial image, the buffers, the two regions under their capture
// policy (regions.cpp), metrics and progress, and the record of one rank.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "pnp/solver.hpp"
#include "pnp/timing.hpp"
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

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// gamma = step_scale / ||A^T A|| (distributed power method), or as configured.
double step_size(const Config& cfg, const Problem& prob, const Box& own, Communicator& comm, at::Device device) {
  if (cfg.solver.step > 0) return cfg.solver.step;
  physics::PowerOptions po;
  po.max_iterations = static_cast<int>(cfg.solver.power_iterations);
  po.tol = cfg.solver.power_tol;
  po.seed = static_cast<uint64_t>(cfg.problem.seed);
  auto allreduce = [&](at::Tensor& t) { comm.allreduce_sum(t); };
  return cfg.solver.step_scale / physics::operator_norm(prob.geom, own, allreduce, po, device, at::kFloat);
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
                  at::Device device, double setup_seconds) {
  const auto t_start = Clock::now();
  const int rank = comm.rank();
  const TilePlan& me = d.tile(rank);
  const Box& own = me.own;
  const int64_t iters = cfg.solver.iterations;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  PnpRecord rec;
  rec.psnr.assign(static_cast<size_t>(iters), nan);
  rec.ssim.assign(static_cast<size_t>(iters), nan);
  rec.residual.assign(static_cast<size_t>(iters), nan);
  rec.bytes_per_iteration.assign(static_cast<size_t>(iters), 0.0);

  rec.step = step_size(cfg, prob, own, comm, device);
  const bool clamp = cfg.solver.clamp != "none";
  if (cfg.solver.clamp == "ground_truth") {
    if (!prob.has_truth())
      throw InputError("solver.clamp = \"ground_truth\" needs a ground truth in the input; set solver.clamp = "
                       "\"fixed\" or \"none\"");
    rec.clamp_lo = prob.truth_min, rec.clamp_hi = prob.truth_max;
  } else {
    rec.clamp_lo = cfg.solver.clamp_min, rec.clamp_hi = cfg.solver.clamp_max;
  }

  // Buffers, allocated once: x (owned), z (extended tile), partial and full sinograms.
  LoopState s;
  s.x = initial_image(cfg, prob, own, rec.step, opts);
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

  HaloPlan halo(comm, d, opts);
  DenoiseSettings ds;
  ds.sigma = cfg.denoiser.sigma;
  ds.patch = rec.memory.patch;
  ds.overlap = rec.memory.overlap;
  ds.alpha = cfg.solver.relaxation;
  ds.clamp = clamp;
  ds.lo = rec.clamp_lo, ds.hi = rec.clamp_hi;
  GradientRegion gradient(prob, own, comm, s, rec.step);
  DenoiseRegion denoise(me, halo, den, s, ds);
  StepRunner runner(cfg.compile.mode, cfg.compile.cuda_graphs, device, comm, gradient, denoise, timer);

  for (int64_t it = 0; it < iters; ++it) {
    const auto t_it = Clock::now();
    const int64_t bytes_it = comm.bytes_sent();
    timer.begin_iteration(it);
    const bool replay = runner.replays(it) && runner.captured();
    runner.run(it);
    timer.end_iteration();
    rec.bytes_per_iteration[static_cast<size_t>(it)] =
        static_cast<double>(replay ? runner.capture_bytes() : comm.bytes_sent() - bytes_it);

    const int64_t every = cfg.solver.metrics_every;
    const bool metrics = every > 0 && ((it + 1) % every == 0 || it + 1 == iters);
    if (metrics) {
      const size_t i = static_cast<size_t>(it);
      quality.measure(s.x, s.p, rec.residual[i], rec.psnr[i], rec.ssim[i]);
    }
    if (it == 0 && runner.capturing() && iters > 1) runner.capture();  // compile, part 2
    if (it == 0) {
      // The first iteration includes setup, the step-size estimate and compile: measured to its end.
      if (device.is_cuda()) c10::impl::getDeviceGuardImpl(device.type())->synchronizeDevice(device.index());
      rec.first_iteration = setup_seconds + since(t_start);
    }
    if (progress) print_progress(it, iters, since(t_it), since(t_start), device.is_cuda(), metrics, prob.has_truth(), rec);
  }
  timer.finish();

  rec.x_own = s.x;
  rec.phase.assign(pnp_phases().size(), std::vector<double>(static_cast<size_t>(iters), 0.0));
  rec.region_gradient.assign(static_cast<size_t>(iters), nan);
  rec.region_denoise.assign(static_cast<size_t>(iters), nan);
  for (int64_t it = 0; it < iters; ++it) {
    const size_t i = static_cast<size_t>(it);
    const bool replayed = runner.replays(it) && runner.captured();
    for (int ph = 0; ph < kPhaseCount; ++ph) rec.phase[static_cast<size_t>(ph)][i] = replayed ? nan : timer.seconds(it, ph);
    if (!replayed || runner.regions_timed_when_replayed()) {
      rec.region_gradient[i] = timer.seconds(it, kGradientRegionSlot);
      rec.region_denoise[i] = timer.seconds(it, kDenoiseRegionSlot);
    }
    rec.phase.back()[i] = timer.total(it);
    rec.total.push_back(timer.total(it));
    rec.wall.push_back(timer.wall(it));
  }
  rec.compile_seconds = den.compile_seconds() + runner.capture_seconds();
  rec.graphs_captured = runner.captured();
  rec.peak_bytes = timer.peak_bytes();
  for (int ph = 0; ph < kPhaseCount; ++ph) rec.phase_peak_bytes.push_back(timer.phase_peak_bytes(ph));
  rec.phase_peak_bytes.push_back(rec.peak_bytes);
  for (double b : rec.bytes_per_iteration) rec.bytes_sent += static_cast<int64_t>(b);
  return rec;
}

}  // namespace pnp
