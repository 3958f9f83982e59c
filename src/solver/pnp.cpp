#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "pnp/metrics.hpp"
#include "pnp/solver.hpp"
#include "pnp/timing.hpp"
#include "capture.hpp"

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace pnp {

const std::vector<std::string>& pnp_phases() {
  static const std::vector<std::string> p = {"forward_projection", "allreduce", "backprojection", "step",
                                             "halo_exchange",      "denoise",   "clamp",          "total"};
  return p;
}

namespace {
enum Phase { FP, ALLREDUCE, BP, STEP, HALO, DENOISE, CLAMP, GRAD_REGION, DEN_REGION };
}  // namespace

PnpRecord run_pnp(const Config& cfg, const Decomposition& d, Communicator& comm, const Problem& prob, Denoiser& den,
                  at::Device device, double setup_seconds) {
  using Clock = std::chrono::steady_clock;
  auto t_start = Clock::now();
  const int rank = comm.rank();
  const TilePlan& me = d.tile(rank);
  const Box& own = me.own;
  const int64_t iters = cfg.solver.iterations;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  PnpRecord rec;
  rec.psnr.assign(static_cast<size_t>(iters), nan);
  rec.ssim.assign(static_cast<size_t>(iters), nan);
  rec.residual.assign(static_cast<size_t>(iters), nan);
  rec.bytes_per_iteration.assign(static_cast<size_t>(iters), 0.0);

  // Step size: gamma = step_scale / ||A^T A|| (distributed power method), or as configured.
  auto allreduce = [&](at::Tensor& t) { comm.allreduce_sum(t); };
  if (cfg.solver.step > 0) {
    rec.step = cfg.solver.step;
  } else {
    physics::PowerOptions po;
    po.max_iterations = static_cast<int>(cfg.solver.power_iterations);
    po.tol = cfg.solver.power_tol;
    po.seed = static_cast<uint64_t>(cfg.problem.seed);
    rec.step = cfg.solver.step_scale / physics::operator_norm(prob.geom, own, allreduce, po, device, at::kFloat);
  }
  // Clamp bounds.
  bool clamp = cfg.solver.clamp != "none";
  if (cfg.solver.clamp == "ground_truth") {
    if (!prob.has_truth())
      throw InputError("solver.clamp = \"ground_truth\" needs a ground truth in the input; set solver.clamp = "
                       "\"fixed\" or \"none\"");
    rec.clamp_lo = prob.truth_min, rec.clamp_hi = prob.truth_max;
  } else {
    rec.clamp_lo = cfg.solver.clamp_min, rec.clamp_hi = cfg.solver.clamp_max;
  }

  // Buffers, allocated once: x (owned), z (extended tile), partial and full sinograms.
  at::Tensor x;
  if (cfg.solver.init == "zeros") {
    x = at::zeros({own.rows(), own.cols()}, opts);
  } else if (cfg.solver.init == "backprojection") {
    x = physics::adjoint(prob.y, prob.geom, own) * (rec.step);
  } else {
    x = physics::fbp(prob.y, prob.geom, own, physics::parse_fbp_filter(cfg.solver.fbp_filter)).to(at::kFloat);
  }
  x = x.contiguous();
  at::Tensor z_ext = at::empty({me.ext.rows(), me.ext.cols()}, opts);
  at::Tensor z_own = z_ext.narrow(0, own.r0 - me.ext.r0, own.rows()).narrow(1, own.c0 - me.ext.c0, own.cols());
  at::Tensor p = at::empty({prob.geom.n_angles(), prob.geom.n_det}, opts);
  at::Tensor g = at::empty({own.rows(), own.cols()}, opts);
  const double y_norm = std::sqrt(prob.y.square().sum().item<double>());
  // SSIM needs each tile's pixels within the window radius: a second, narrow halo plan (same
  // tiles) fills x's and the truth's neighbourhoods, for metrics iterations only.
  const int64_t ssim_r = metrics::SsimOptions{}.radius();
  const Decomposition sd = plan_decomposition(d.n, comm.size(), d.kind, {d.grid_rows, d.grid_cols}, ssim_r, 1);
  const Box& sbox = sd.tile(rank).ext;
  at::Tensor x_sbox, truth_sbox;
  auto sbox_own = [&](at::Tensor& t) {
    return t.narrow(0, own.r0 - sbox.r0, own.rows()).narrow(1, own.c0 - sbox.c0, own.cols());
  };
  if (prob.has_truth()) {
    x_sbox = at::empty({sbox.rows(), sbox.cols()}, opts);
    truth_sbox = at::empty({sbox.rows(), sbox.cols()}, opts);
    sbox_own(truth_sbox).copy_(prob.truth_own);
    comm.halo_exchange(truth_sbox, sd);
  }
  const double alpha = cfg.solver.relaxation;
  const double range = prob.truth_max - prob.truth_min;

  // Timer phases: the seven of pnp_phases() (all but "total"), then the two regions.
  std::vector<std::string> timer_phases(pnp_phases().begin(), pnp_phases().end() - 1);
  timer_phases.insert(timer_phases.end(), {"region_gradient", "region_denoise"});
  PhaseTimer timer(device, timer_phases, iters);
  const bool progress = cfg.output.progress && rank == 0;
  // Patch size: as configured, or chosen within denoiser.memory_limit_gb.
  rec.memory = plan_memory(cfg, den.graph, me.ext, prob.geom.n_angles(), prob.geom.n_det);
  const int64_t patch = rec.memory.patch, overlap = rec.memory.overlap;
  if (progress && (cfg.denoiser.memory_limit_gb > 0 || patch > 0)) {
    std::printf("memory rank 0: %s\n", rec.memory.describe().c_str());
    std::fflush(stdout);
  }
  at::Tensor z4 = z_ext.view({1, 1, me.ext.rows(), me.ext.cols()});

  // The two regions of one step. `timed` brackets each phase with events (not inside a
  // captured graph, where phases cannot be separated).
  auto phase_runner = [&](bool timed) {
    return [&timer, timed](int phase, auto&& fn) {
      if (timed) timer.start(phase);
      fn();
      if (timed) timer.stop(phase);
    };
  };
  auto gradient_region = [&](bool timed) {
    auto ph = phase_runner(timed);
    ph(FP, [&] { physics::forward_out(x, prob.geom, own, p); });
    ph(ALLREDUCE, [&] { comm.allreduce_sum(p); });
    ph(BP, [&] {
      p.sub_(prob.y);
      physics::adjoint_out(p, prob.geom, own, g);
    });
    ph(STEP, [&] { at::add_out(z_own, x, g, -rec.step); });
  };
  auto denoise_region = [&](bool timed) {
    auto ph = phase_runner(timed);
    ph(HALO, [&] { comm.halo_exchange(z_ext, d); });
    at::Tensor d_own;
    ph(DENOISE, [&] {
      at::Tensor dz = nn::denoise_patched(*den.executor, z4, cfg.denoiser.sigma, patch, overlap);
      d_own = dz.view({me.ext.rows(), me.ext.cols()})
                  .narrow(0, own.r0 - me.ext.r0, own.rows())
                  .narrow(1, own.c0 - me.ext.c0, own.cols());
    });
    ph(CLAMP, [&] {
      if (alpha < 1.0) {
        x.copy_(z_own).mul_(1.0 - alpha).add_(d_own, alpha);
      } else {
        x.copy_(d_own);
      }
      if (clamp) x.clamp_(rec.clamp_lo, rec.clamp_hi);
    });
  };

  // Placement: post captures each region as one CUDA graph (NCCL calls included), fused the
  // whole step. Iteration 1 runs eagerly (it is the warm-up: autotuning, handle creation),
  // then the graphs are captured and replayed from iteration 2 on. On CPUs, or with
  // compile.cuda_graphs = false, post and fused run the same code as pre.
  const std::string& mode = cfg.compile.mode;
  const bool capture = device.is_cuda() && cfg.compile.cuda_graphs && (mode == "post" || mode == "fused");
  if (capture && comm.size() > 1 && comm.backend() != "nccl")
    throw InputError("compile.mode = \"" + mode + "\" captures the communication in a CUDA graph, which needs "
                     "distributed.comm = \"nccl\" (one GPU per rank); set compile.cuda_graphs = false to run it uncaptured");
  std::unique_ptr<CapturedRegion> graph_gradient, graph_denoise, graph_step;
  double capture_seconds = 0;

  int64_t capture_bytes = 0;  // what the captured graph(s) send per replay (counted while capturing)
  for (int64_t it = 0; it < iters; ++it) {
    auto t_it = Clock::now();
    const int64_t bytes_it = comm.bytes_sent();
    timer.begin_iteration(it);
    const bool replay = capture && it > 0;
    if (!replay) {
      timer.start(GRAD_REGION);
      gradient_region(true);
      timer.stop(GRAD_REGION);
      timer.start(DEN_REGION);
      denoise_region(true);
      timer.stop(DEN_REGION);
    } else if (mode == "post") {
      timer.start(GRAD_REGION);
      graph_gradient->replay();
      timer.stop(GRAD_REGION);
      timer.start(DEN_REGION);
      graph_denoise->replay();
      timer.stop(DEN_REGION);
    } else {
      graph_step->replay();
    }
    timer.end_iteration();
    rec.bytes_per_iteration[static_cast<size_t>(it)] =
        static_cast<double>(replay ? capture_bytes : comm.bytes_sent() - bytes_it);

    // Metrics, outside the timed phases: residual of the iterate entering this iteration
    // (p holds A x - y) and PSNR of the new iterate.
    const int64_t every = cfg.solver.metrics_every;
    bool metrics = every > 0 && ((it + 1) % every == 0 || it + 1 == iters);
    if (metrics) {
      double res2 = p.square().sum().item<double>();  // the same on every rank (allreduced p)
      rec.residual[static_cast<size_t>(it)] = y_norm > 0 ? std::sqrt(res2) / y_norm : nan;
      if (prob.has_truth()) {
        double se = comm.sum((x - prob.truth_own).square().sum().item<double>());
        double mse = se / static_cast<double>(d.n * d.n);
        rec.psnr[static_cast<size_t>(it)] = mse > 0 ? 10.0 * std::log10(range * range / mse) : INFINITY;
        sbox_own(x_sbox).copy_(x);
        comm.halo_exchange(x_sbox, sd);
        const auto part = metrics::ssim_sum(x_sbox, truth_sbox, sbox, own, d.n, d.n, range);
        const double count = comm.sum(static_cast<double>(part.count));
        rec.ssim[static_cast<size_t>(it)] = count > 0 ? comm.sum(part.sum) / count : nan;
      }
    }
    if (it == 0 && capture && iters > 1) {
      // Compile, part 2: capture the regions now that everything has run once.
      auto tc = Clock::now();
      const int64_t bytes_before_capture = comm.bytes_sent();
      if (mode == "post") {
        graph_gradient = capture_region([&] { gradient_region(false); }, device);
        graph_denoise = capture_region([&] { denoise_region(false); }, device);
      } else {
        graph_step = capture_region([&] {
          gradient_region(false);
          denoise_region(false);
        }, device);
      }
      capture_bytes = comm.bytes_sent() - bytes_before_capture;
      capture_seconds = std::chrono::duration<double>(Clock::now() - tc).count();
    }
    if (it == 0) {
      // The first iteration includes setup, the step-size estimate and compile: measured to its end.
      if (device.is_cuda()) c10::impl::getDeviceGuardImpl(device.type())->synchronizeDevice(device.index());
      rec.first_iteration = setup_seconds + std::chrono::duration<double>(Clock::now() - t_start).count();
    }
    if (progress) {
      // Host clock. On a GPU the loop only queues work, so the per-iteration figure is the
      // time to queue it, and elapsed/ETA catch up at the next synchronisation.
      double elapsed = std::chrono::duration<double>(Clock::now() - t_it).count();
      double since = std::chrono::duration<double>(Clock::now() - t_start).count();
      double eta = since / double(it + 1) * double(iters - it - 1);
      if (it == 0 && device.is_cuda())
        std::printf("(progress uses the host clock; GPU work is queued asynchronously, phase times come from events)\n");
      std::printf("iteration %4lld/%lld  %10s  elapsed %10s  ETA %10s", (long long)(it + 1), (long long)iters,
                  human_seconds(elapsed).c_str(), human_seconds(since).c_str(), human_seconds(eta).c_str());
      if (metrics) {
        if (prob.has_truth())
          std::printf("  PSNR %6.2f dB  SSIM %.4f", rec.psnr[static_cast<size_t>(it)], rec.ssim[static_cast<size_t>(it)]);
        std::printf("  residual %.3e", rec.residual[static_cast<size_t>(it)]);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  timer.finish();
  rec.x_own = x;
  rec.phase.assign(pnp_phases().size(), std::vector<double>(static_cast<size_t>(iters), 0.0));
  rec.region_gradient.assign(static_cast<size_t>(iters), nan);
  rec.region_denoise.assign(static_cast<size_t>(iters), nan);
  for (int64_t it = 0; it < iters; ++it) {
    const bool replayed = capture && it > 0;
    for (size_t ph = 0; ph + 1 < pnp_phases().size(); ++ph)
      rec.phase[ph][static_cast<size_t>(it)] = replayed ? nan : timer.seconds(it, static_cast<int>(ph));
    if (!replayed || mode == "post") {
      rec.region_gradient[static_cast<size_t>(it)] = timer.seconds(it, GRAD_REGION);
      rec.region_denoise[static_cast<size_t>(it)] = timer.seconds(it, DEN_REGION);
    }
    rec.phase.back()[static_cast<size_t>(it)] = timer.total(it);
    rec.total.push_back(timer.total(it));
    rec.wall.push_back(timer.wall(it));
  }
  rec.compile_seconds = den.compile_seconds() + capture_seconds;
  rec.graphs_captured = capture && iters > 1;
  rec.peak_bytes = timer.peak_bytes();
  for (size_t ph = 0; ph + 1 < pnp_phases().size(); ++ph)
    rec.phase_peak_bytes.push_back(timer.phase_peak_bytes(static_cast<int>(ph)));
  rec.phase_peak_bytes.push_back(rec.peak_bytes);
  rec.bytes_sent = 0;
  for (double b : rec.bytes_per_iteration) rec.bytes_sent += static_cast<int64_t>(b);
  return rec;
}

}  // namespace pnp
