// run_pnp: the step size, the initial image, the buffers, the two regions under their capture
// policy (regions.cpp), metrics and progress, and the record of one rank.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <utility>

#include "checkpoint.hpp"
#include "pnp/core.hpp"
#include "pnp/device.hpp"
#include "pnp/solver.hpp"
#include "pnp/timing.hpp"
#include "pnp/watchdog.hpp"
#include "quality.hpp"
#include "regions.hpp"
#include "stream.hpp"

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
  const physics::PowerResult r =
      physics::operator_norm_detailed(prob.geom, own, allreduce, po, device, solver_dtype(cfg.solver));
  rec.power_iterations = r.iterations;
  rec.power_converged = r.converged;
  rec.power_start_s = r.start_seconds, rec.power_first_s = r.first_seconds;
  return cfg.solver.step_scale / r.norm;
}

// The initial image of one sinogram y (on the device).
at::Tensor initial_slice(const Config& cfg, const Problem& prob, const Box& own, double step, const at::Tensor& y,
                         at::TensorOptions opts) {
  if (cfg.solver.init == "zeros") return at::zeros({own.rows(), own.cols()}, opts);
  if (cfg.solver.init == "backprojection") return physics::adjoint(y, prob.geom, own) * step;
  return physics::fbp(y, prob.geom, own, physics::parse_fbp_filter(cfg.solver.fbp_filter))
      .to(c10::typeMetaToScalarType(opts.dtype()));
}

// One image [rows, cols], or a volume's slab [slices, rows, cols] slice by slice, into `into`
// when given (a streamed slab's host store; its sinograms in host memory too).
at::Tensor initial_image(const Config& cfg, const Problem& prob, const Box& own, double step, at::TensorOptions opts,
                         at::Tensor into = {}) {
  if (!prob.volume()) return initial_slice(cfg, prob, own, step, prob.y, opts).contiguous();
  at::Tensor x = into.defined() ? into : at::empty({prob.y.size(0), own.rows(), own.cols()}, opts);
  for (int64_t s = 0; s < x.size(0); ++s) x[s].copy_(initial_slice(cfg, prob, own, step, prob.y[s].to(opts.device()), opts));
  return x;
}

// Whether every value of x is finite, a slice at a time (a streamed slab's, in host memory,
// without a slab-sized temporary).
bool all_finite(const at::Tensor& x) {
  if (x.dim() < 3) return at::isfinite(x).all().item<bool>();
  for (int64_t s = 0; s < x.size(0); ++s)
    if (!at::isfinite(x[s]).all().item<bool>()) return false;
  return true;
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

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A record of `iters` iterations, nothing measured yet (NaN metrics and regions, zero times).
PnpRecord empty_record(const DenoiserConfig& den, int64_t iters) {
  const size_t n_it = static_cast<size_t>(iters);
  PnpRecord rec;
  rec.psnr.assign(n_it, kNaN);
  rec.ssim.assign(n_it, kNaN);
  rec.residual.assign(n_it, kNaN);
  rec.bytes_per_iteration.assign(n_it, 0.0);
  for (int64_t it = 0; it < iters; ++it) rec.sigma.push_back(sigma_at(den, it, iters));
  rec.phase.assign(pnp_phases().size(), std::vector<double>(n_it, 0.0));
  rec.total.assign(n_it, 0.0);
  rec.wall.assign(n_it, 0.0);
  rec.region_gradient.assign(n_it, kNaN);
  rec.region_denoise.assign(n_it, kNaN);
  return rec;
}

// This rank's per-iteration series, in checkpoint_series() order.
std::vector<std::vector<double>*> checkpointed_series(PnpRecord& rec) {
  std::vector<std::vector<double>*> v;
  for (auto& ph : rec.phase) v.push_back(&ph);
  v.insert(v.end(), {&rec.wall, &rec.region_gradient, &rec.region_denoise, &rec.bytes_per_iteration});
  return v;
}

// solver.clamp's bounds into rec: the ground truth's range or the configured ones.
void set_clamp_bounds(const Config& cfg, const Problem& prob, PnpRecord& rec) {
  if (cfg.solver.clamp == "ground_truth") {
    if (!prob.has_truth())
      throw CollectiveError("solver.clamp = \"ground_truth\" needs a ground truth in the input; set solver.clamp = "
                            "\"fixed\" or \"none\"", /*input_error=*/true);  // every rank: the same input
    rec.clamp_lo = prob.truth_min, rec.clamp_hi = prob.truth_max;
  } else {
    rec.clamp_lo = cfg.solver.clamp_min, rec.clamp_hi = cfg.solver.clamp_max;
  }
}

// The checkpoint's iterations [0, c.done) into rec (this rank's columns of its series).
void restore_record(const Checkpoint& c, int rank, int ranks, const std::vector<std::vector<double>*>& series,
                    PnpRecord& rec) {
  for (int64_t it = 0; it < c.done; ++it) {
    const size_t i = static_cast<size_t>(it);
    rec.psnr[i] = c.psnr[i], rec.ssim[i] = c.ssim[i], rec.residual[i] = c.residual[i];
    for (size_t k = 0; k < series.size(); ++k) (*series[k])[i] = c.series[k][i * ranks + rank];
    rec.total[i] = rec.phase.back()[i];
  }
  rec.segments = c.segments;
}

// Buffers, allocated once: z (extended tile), partial and full sinograms, the gradient (a
// volume's with its slab's slices in front).
// A 3D denoiser's z_ext holds `z_ext` slices, the slab's own from `z_before` on.
void allocate_buffers(LoopState& s, const TilePlan& me, const Problem& prob, at::TensorOptions opts, int64_t z_before,
                      int64_t z_ext) {
  const Box& own = me.own;
  const std::vector<int64_t> lead = prob.volume() ? std::vector<int64_t>{prob.y.size(0)} : std::vector<int64_t>{};
  auto shape = [&](int64_t a, int64_t b) {
    std::vector<int64_t> v = lead;
    v.insert(v.end(), {a, b});
    return v;
  };
  std::vector<int64_t> ext = shape(me.ext.rows(), me.ext.cols());
  if (prob.volume()) ext[0] = z_ext;  // a 3D denoiser's z-halo slices around the slab's
  s.z_ext = at::empty(ext, opts);
  s.z_own = s.z_ext.narrow(-2, own.r0 - me.ext.r0, own.rows()).narrow(-1, own.c0 - me.ext.c0, own.cols());
  if (prob.volume()) s.z_own = s.z_own.narrow(0, z_before, prob.y.size(0));
  s.p = at::empty(shape(prob.geom.n_angles(), prob.geom.n_det), opts);
  s.g = at::empty(shape(own.rows(), own.cols()), opts);
}

// The timer's slots: the phases (without "total"), then the two regions.
std::vector<std::string> timer_slots() {
  std::vector<std::string> slots(pnp_phases().begin(), pnp_phases().end() - 1);
  slots.insert(slots.end(), {"region_gradient", "region_denoise"});
  return slots;
}

// Rank 0's lines before the loop: the memory plan, and where a resumed run starts.
void announce(const Config& cfg, const PnpRecord& rec, bool resumed, int64_t start, int64_t iters) {
  if (cfg.denoiser.memory_limit_gb > 0 || rec.memory.patched()) {
    std::printf("memory rank 0: %s\n", rec.memory.describe().c_str());
    std::fflush(stdout);
  }
  if (resumed) {
    std::printf("resuming after iteration %lld of %lld from %s\n", (long long)start, (long long)iters,
                cfg.output.checkpoint_path().c_str());
    std::fflush(stdout);
  }
}

DenoiseSettings denoise_settings(const Config& cfg, const PnpRecord& rec, int64_t start) {
  DenoiseSettings ds;
  ds.sigma = rec.sigma[static_cast<size_t>(start)];
  ds.patch_rows = rec.memory.patch_rows, ds.patch_cols = rec.memory.patch_cols;
  ds.batches = rec.memory.batches;
  ds.overlap = rec.memory.overlap;
  ds.alpha = cfg.solver.relaxation;
  ds.clamp = cfg.solver.clamp != "none";
  ds.lo = rec.clamp_lo, ds.hi = rec.clamp_hi;
  return ds;
}

// The iterations [start, iters) of one run over its set-up state, and their record.
class PnpLoop {
 public:
  struct Parts {
    const Config& cfg;
    const Decomposition& d;
    Communicator& comm;   // every rank's
    Communicator& plane;  // the ranks of this rank's plane (one image: comm)
    const Problem& prob;
    Denoiser& den;
    at::Device device;
    const Checkpoint* resume;
    PnpRecord& rec;
    const std::vector<std::vector<double>*>& series;
    LoopState& s;
    QualityMonitor& quality;
    PhaseTimer& timer;
    GradientRegion& gradient;
    DenoiseRegion& denoise;
    StepRunner& runner;
    SlabStream* stream;  // a streamed slab (its iterate in host memory), else null
  };
  PnpLoop(const Parts& p, Clock::time_point t_start, double setup_seconds)
      : p_(p), cfg_(p.cfg), rec_(p.rec), rank_(p.comm.rank()), ranks_(p.comm.size()),
        iters_(p.cfg.solver.iterations), start_(p.resume ? p.resume->done : 0), recorded_(start_),
        progress_(p.cfg.output.progress && rank_ == 0), t_start_(t_start), setup_seconds_(setup_seconds),
        segment_start_(iso8601_utc_now()) {}

  // Runs the iterations until the last or a stop (with its checkpoint), then completes rec.
  void run() {
    for (int64_t it = start_; it < iters_; ++it)
      if (!iterate(it)) break;
    finish();
  }

 private:
  const Parts& p_;
  const Config& cfg_;
  PnpRecord& rec_;
  const int rank_, ranks_;
  const int64_t iters_, start_;
  int64_t recorded_;  // rec holds the timer's iterations [start, recorded)
  const bool progress_;
  const Clock::time_point t_start_;
  const double setup_seconds_;
  const std::string segment_start_;

  // What the loop's communication has sent: the plane's (sinograms, halos) and, for a volume,
  // the world's (a 3D denoiser's z-halo).
  int64_t loop_bytes() const { return p_.plane.bytes_sent() + (&p_.plane != &p_.comm ? p_.comm.bytes_sent() : 0); }

  // Iteration `it`: the step, its metrics, progress and checkpoint; false when the loop ends.
  bool iterate(int64_t it) {
    const auto t_it = Clock::now();
    const int64_t bytes_it = loop_bytes();
    Watchdog::beat("an iteration");
    p_.denoise.set_sigma(rec_.sigma[static_cast<size_t>(it)]);
    p_.timer.begin_iteration(it);
    const int64_t k = it - start_;  // iterations of this run: the first one is the warm-up
    const bool replay = p_.runner.replays(k) && p_.runner.captured();
    const int64_t every = cfg_.solver.metrics_every;
    const bool metrics = every > 0 && ((it + 1) % every == 0 || it + 1 == iters_);
    QualityMonitor::Sums sums;  // a streamed slab's metrics, summed over its groups as they pass
    if (p_.stream)
      p_.stream->run(p_.s, p_.gradient, p_.denoise, &p_.timer, metrics ? &p_.quality : nullptr, &sums);
    else
      p_.runner.run(k);
    p_.timer.end_iteration();
    rec_.bytes_per_iteration[static_cast<size_t>(it)] =
        static_cast<double>(replay ? p_.runner.capture_bytes() : loop_bytes() - bytes_it);

    if (metrics) measure(it, sums);
    if (k == 0 && p_.runner.capturing() && iters_ - start_ > 1) p_.runner.capture();  // compile, part 2
    if (k == 0) {
      // The first iteration includes setup, the step-size estimate and compile: measured to its end.
      if (p_.device.is_cuda()) c10::impl::getDeviceGuardImpl(p_.device.type())->synchronizeDevice(p_.device.index());
      rec_.first_iteration = setup_seconds_ + since(t_start_);
      // Every shape has run (and been captured): a held run's convolutions have chosen within the
      // plan (hold_memory_to_plan); its allocator back to the budget (others: nothing to do).
      release_memory_hold(p_.device, cfg_.denoiser.memory_limit_gb * 1e9);
    }
    if (progress_)
      print_progress(it, iters_, since(t_it), since(t_start_), p_.device.is_cuda(), metrics, p_.prob.has_truth(), rec_);
    const int64_t done = it + 1;
    return done != iters_ && !stop_after(done);
  }

  // The iterate: the loop's, or a streamed slab's in host memory (complete).
  const at::Tensor& image() const {
    if (!p_.stream) return p_.s.x;
    p_.stream->sync();
    return p_.stream->x();
  }

  void measure(int64_t it, const QualityMonitor::Sums& streamed) {
    const size_t i = static_cast<size_t>(it);
    Watchdog::beat("metrics");
    const MemoryStage stage("metrics");
    // The metrics' own peak (between two phases: the phases' peaks are read already).
    reset_device_peak(p_.device);
    const bool finite = p_.stream ? p_.quality.finish(streamed, rec_.residual[i], rec_.psnr[i], rec_.ssim[i])
                                  : p_.quality.measure(p_.s.x, p_.s.p, rec_.residual[i], rec_.psnr[i], rec_.ssim[i]);
    rec_.metrics_peak_bytes = std::max(rec_.metrics_peak_bytes, device_peak_bytes(p_.device));
    if (!finite)
      throw CollectiveError("the iteration diverged: the residual or the image is not finite after iteration " +
                                std::to_string(it + 1) + " (lower solver.step_scale, or clamp with solver.clamp)",
                            /*input_error=*/true);  // every rank: measure() reduces over the ranks
  }

  // Checkpoint/restart: a signal on any rank or output.stop_after stops every rank at this
  // boundary, with a checkpoint (true); output.checkpoint_every writes one and goes on.
  bool stop_after(int64_t done) {
    // 1 for output.stop_after, 1 + the signal for a signal on any rank (so that rank 0 names it).
    int want = StopRequest::requested() ? 1 + std::max(StopRequest::signal(), 1) : cfg_.output.stop_after == done ? 1 : 0;
    if (ranks_ > 1) want = static_cast<int>(p_.comm.max(static_cast<double>(want)));
    const bool periodic = cfg_.output.checkpoint_every > 0 && done % cfg_.output.checkpoint_every == 0;
    if (want || periodic) checkpoint(done);
    if (!want) return false;
    rec_.stopped = true;
    rec_.done = done;
    rec_.stop_signal = want > 1 ? want - 1 : 0;
    if (progress_)
      std::printf("stopped after iteration %lld (%s), checkpoint %s; continue with --resume\n", (long long)done,
                  rec_.stop_signal ? ("signal " + std::to_string(rec_.stop_signal)).c_str() : "output.stop_after",
                  cfg_.output.checkpoint_path().c_str());
    return true;
  }

  // The record of iterations [start, upto) from the timer (resolved through upto - 1).
  void record_through(int64_t upto) {
    p_.timer.resolve_through(upto - 1);
    for (int64_t it = recorded_; it < upto; ++it) {
      const size_t i = static_cast<size_t>(it);
      const bool replayed = p_.runner.replays(it - start_) && p_.runner.captured();
      for (int ph = 0; ph < kPhaseCount; ++ph)
        rec_.phase[static_cast<size_t>(ph)][i] = replayed ? kNaN : p_.timer.seconds(it, ph);
      if (!replayed || p_.runner.regions_timed_when_replayed()) {
        rec_.region_gradient[i] = p_.timer.seconds(it, kGradientRegionSlot);
        rec_.region_denoise[i] = p_.timer.seconds(it, kDenoiseRegionSlot);
      }
      rec_.phase.back()[i] = rec_.total[i] = p_.timer.total(it);
      rec_.wall[i] = p_.timer.wall(it);
    }
    recorded_ = std::max(recorded_, upto);
  }

  std::string this_segment(int64_t done) const {
    const Provenance p = basic_provenance("pnp_recon");
    return "iterations " + std::to_string(start_ + 1) + "-" + std::to_string(done) + " on " + std::to_string(ranks_) +
           " rank(s), " + p.host + ", " + segment_start_ + ", commit " + p.git_commit;
  }

  double compile_seconds() const {
    return (p_.resume ? p_.resume->compile : 0.0) + p_.den.compile_seconds() + p_.runner.capture_seconds();
  }

  // The checkpoint after `done` iterations (every rank takes part; rank 0 writes it).
  void checkpoint(int64_t done) {
    Watchdog::beat("writing a checkpoint");
    record_through(done);
    Checkpoint c;
    c.done = done;
    c.step = rec_.step;
    c.first_iteration = p_.resume ? p_.resume->first_iteration : rec_.first_iteration;
    c.compile = compile_seconds();
    c.image = p_.comm.gather_tiles(image(), p_.d);
    auto head = [&](const std::vector<double>& v) { return std::vector<double>(v.begin(), v.begin() + done); };
    c.psnr = head(rec_.psnr), c.ssim = head(rec_.ssim), c.residual = head(rec_.residual), c.sigma = head(rec_.sigma);
    for (auto* v : p_.series) c.series.push_back(gather_columns(p_.comm, head(*v)));
    c.segments = rec_.segments;
    c.segments.push_back(this_segment(done));
    // Agreed: a failed write (a full disk) ends every rank with rank 0's one line, no abort.
    collectively(p_.comm.mpi_comm(), [&] {
      if (rank_ == 0) write_checkpoint(cfg_.output.checkpoint_path(), c, checkpoint_identity(cfg_, ranks_), ranks_);
    });
  }

  // After the loop: the remaining record, the image and the run's totals.
  void finish() {
    Watchdog::beat("the end of the loop");
    p_.timer.finish();
    record_through(rec_.stopped ? rec_.done : iters_);
    if (!rec_.stopped) {
      rec_.done = iters_;
      rec_.segments.push_back(this_segment(iters_));
      // An image that is not finite must not be written as a result (no metrics would say so
      // when solver.metrics_every = 0).
      const double bad = all_finite(image()) ? 0.0 : 1.0;
      if ((ranks_ > 1 ? p_.comm.max(bad) : bad) > 0)  // agreed: every rank throws, none aborts
        throw CollectiveError("the iteration diverged: the final image holds non-finite values (lower "
                              "solver.step_scale, or clamp with solver.clamp)", /*input_error=*/true);
    }
    if (p_.resume) rec_.first_iteration = p_.resume->first_iteration;
    rec_.x_own = image();
    rec_.compile_seconds = compile_seconds();
    rec_.graphs_captured = p_.runner.captured();
    // the phases', the set-up's, and what came after the last phase (the last metrics)
    rec_.peak_bytes = std::max({p_.timer.peak_bytes(), rec_.setup_peak_bytes, rec_.metrics_peak_bytes,
                                device_peak_bytes(p_.device)});
    // (the allocator's peaks are reset at each phase start: the timer keeps their max)
    const AllocatorActivity alloc = device_allocator_stats(p_.device);
    rec_.reserved_peak_bytes = std::max(p_.timer.reserved_peak_bytes(), alloc.reserved_peak_bytes);
    rec_.allocator_retries = alloc.retries;
    for (int ph = 0; ph < kPhaseCount; ++ph) rec_.phase_peak_bytes.push_back(p_.timer.phase_peak_bytes(ph));
    rec_.phase_peak_bytes.push_back(rec_.peak_bytes);
    for (double b : rec_.bytes_per_iteration) rec_.bytes_sent += static_cast<int64_t>(b);
  }
};

}  // namespace

PnpRecord run_pnp(const Config& cfg, const Decomposition& d, Communicator& comm, const Problem& data, Denoiser& den,
                  at::Device device, double setup_seconds, const Checkpoint* resume, Communicator* plane_comm,
                  const MemoryPlan* memory) {
  const auto t_start = Clock::now();
  // solver.precision = "fp64": the data in float64 too (the float32 values, widened once)
  const at::ScalarType dtype = solver_dtype(cfg.solver);
  Problem widened;
  if (dtype != at::kFloat) {
    widened = data;
    widened.y = data.y.to(dtype);
    if (data.has_truth()) widened.truth_own = data.truth_own.to(dtype);
  }
  const Problem& prob = dtype != at::kFloat ? widened : data;
  Communicator& plane = plane_comm ? *plane_comm : comm;
  const int rank = comm.rank(), ranks = comm.size();
  const TilePlan& me = d.tile(plane.rank());
  const Box& own = me.own;
  const int64_t iters = cfg.solver.iterations, start = resume ? resume->done : 0;
  const auto opts = at::TensorOptions().dtype(dtype).device(device);
  PnpRecord rec = empty_record(cfg.denoiser, iters);
  const auto series = checkpointed_series(rec);

  Watchdog::beat("the step size (power method)");
  const auto t_step = Clock::now();
  rec.step = resume ? resume->step : step_size(cfg, prob, own, plane, device, rec);
  rec.setup.emplace_back("step_size", since(t_step));
  set_clamp_bounds(cfg, prob, rec);

  // A 3D denoiser: the slab's z-halo (the slices of the neighbouring slabs it needs).
  const bool z3 = prob.volume() && den.graph.dim == 3;
  const auto [e0, e1] = z3 ? d.z.ext(rank) : std::pair<int64_t, int64_t>{prob.z0, prob.z0 + (prob.volume() ? prob.y.size(0) : 1)};
  // Patch size (and a volume's slices per call, or its streaming): the plan's, or as configured,
  // or chosen within denoiser.memory_limit_gb.
  if (memory) {
    rec.memory = *memory;
  } else {
    MemoryContext mctx;
    mctx.angles = prob.geom.n_angles(), mctx.detectors = prob.geom.n_det, mctx.truth = prob.has_truth();
    mctx.cuda = device.is_cuda();
    mctx.slices = prob.volume() ? prob.y.size(0) : 1;
    if (z3) mctx.depth = e1 - e0;
    rec.memory = plan_memory(cfg, den.graph, me, mctx);
  }
  const int64_t resident = rec.memory.stream;  // a streamed slab's group (0: the slab resident)

  const MemoryStage solver_stage("solver");  // the loop's own buffers; its parts name theirs
  LoopState s;
  std::unique_ptr<SlabStream> stream;
  const auto t_init = Clock::now();  // the initial image: from the checkpoint or solver.init
  at::Tensor x0;  // a streamed slab's iterate, in host memory
  if (resident > 0) x0 = host_store({prob.y.size(0), own.rows(), own.cols()}, device);
  if (resume) {
    at::Tensor img = resume->image;  // [n, n], or a volume's [slices, n, n]
    if (prob.volume()) img = img.narrow(0, prob.z0, prob.y.size(0));
    img = img.narrow(-2, own.r0, own.rows()).narrow(-1, own.c0, own.cols());
    if (resident > 0)
      x0.copy_(img);
    else
      s.x = img.contiguous().to(device);
    restore_record(*resume, rank, ranks, series, rec);
  } else {
    at::Tensor x = initial_image(cfg, prob, own, rec.step, opts, x0);
    if (resident == 0) s.x = x;
  }
  CallTimer(device).sync();  // the image is made on the device: its time, not its launch
  rec.setup.emplace_back("initial_image", since(t_init));
  if (resident > 0) {
    stream = std::make_unique<SlabStream>(prob, x0, resident, device);
    s.x = at::empty({resident, own.rows(), own.cols()}, opts);
  }
  const Problem& loop_prob = stream ? stream->group() : prob;  // the regions' problem
  allocate_buffers(s, me, loop_prob, opts, prob.z0 - e0, resident > 0 ? resident : e1 - e0);
  QualityMonitor quality = [&] {
    const MemoryStage stage("metrics");
    return QualityMonitor(prob, d, plane, comm, opts, resident);
  }();

  PhaseTimer timer(device, timer_slots(), iters);
  if (cfg.output.progress && rank == 0) announce(cfg, rec, resume != nullptr, start, iters);

  const std::vector<int64_t> lead = prob.volume() ? std::vector<int64_t>{loop_prob.y.size(0)} : std::vector<int64_t>{};
  HaloPlan halo(plane, d, opts, lead);
  GradientRegion gradient(loop_prob, own, plane, s, rec.step);
  std::unique_ptr<ZHaloPlan> zhalo;
  if (z3) zhalo = std::make_unique<ZHaloPlan>(comm, d.z, opts, std::vector<int64_t>{me.ext.rows(), me.ext.cols()});
  DenoiseRegion denoise(me, halo, den, s, denoise_settings(cfg, rec, start), zhalo.get(), prob.z0 - e0);
  StepRunner runner(stream ? CompileMode::pre : cfg.compile.mode, cfg.compile.cuda_graphs, device, plane, gradient,
                    denoise, timer, captures_allowed(rec.memory));
  rec.setup_peak_bytes = device_peak_bytes(device);  // the timer's first phase resets it
  const PnpLoop::Parts parts{cfg,    d,     comm,    plane,   prob,   den,    device,       resume,
                             rec,    series, s,      quality, timer,  gradient, denoise,   runner, stream.get()};
  PnpLoop(parts, t_start, setup_seconds).run();
  return rec;
}

}  // namespace pnp
