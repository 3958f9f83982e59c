#include "regions.hpp"

#include <chrono>

namespace pnp {

namespace {
// Brackets fn with the phase's events when timed (never inside a captured graph, where the
// phases cannot be separated).
template <class F>
void timed(PhaseTimer* timer, int slot, F&& fn) {
  if (timer) timer->start(slot);
  fn();
  if (timer) timer->stop(slot);
}
int slot(Phase p) { return static_cast<int>(p); }
}  // namespace

void GradientRegion::run(PhaseTimer* timer) {
  timed(timer, slot(Phase::forward_projection), [&] { physics::forward_out(s_.x, prob_.geom, own_, s_.p); });
  timed(timer, slot(Phase::allreduce), [&] { comm_.allreduce_sum(s_.p); });
  timed(timer, slot(Phase::backprojection), [&] {
    s_.p.sub_(prob_.y);
    physics::adjoint_out(s_.p, prob_.geom, own_, s_.g);
  });
  timed(timer, slot(Phase::step), [&] { at::add_out(s_.z_own, s_.x, s_.g, -step_); });
}

DenoiseRegion::DenoiseRegion(const TilePlan& tile, HaloPlan& halo, Denoiser& den, LoopState& s, DenoiseSettings set)
    : tile_(tile), halo_(halo), den_(den), s_(s), set_(set) {
  z4_ = s_.z_ext.view({1, 1, tile_.ext.rows(), tile_.ext.cols()});
}

void DenoiseRegion::set_sigma(double sigma) {
  set_.sigma = sigma;
  den_.executor->set_sigma(sigma);
}

void DenoiseRegion::run(PhaseTimer* timer) {
  const Box &own = tile_.own, &ext = tile_.ext;
  timed(timer, slot(Phase::halo_exchange), [&] { halo_.exchange(s_.z_ext); });
  at::Tensor d_own;
  timed(timer, slot(Phase::denoise), [&] {
    at::Tensor dz = nn::denoise_patched(*den_.executor, z4_, set_.sigma, {set_.patch_rows, set_.patch_cols}, set_.overlap);
    d_own = dz.view({ext.rows(), ext.cols()}).narrow(0, own.r0 - ext.r0, own.rows()).narrow(1, own.c0 - ext.c0, own.cols());
  });
  timed(timer, slot(Phase::clamp), [&] {
    if (set_.alpha < 1.0) {
      s_.x.copy_(s_.z_own).mul_(1.0 - set_.alpha).add_(d_own, set_.alpha);
    } else {
      s_.x.copy_(d_own);
    }
    if (set_.clamp) s_.x.clamp_(set_.lo, set_.hi);
  });
}

StepRunner::StepRunner(CompileMode mode, bool cuda_graphs, at::Device device, Communicator& comm,
                       GradientRegion& grad, DenoiseRegion& den, PhaseTimer& timer)
    : mode_(mode), device_(device), comm_(comm), grad_(grad), den_(den), timer_(timer) {
  capture_ = solver_captures(mode, cuda_graphs, device);
  if (capture_ && comm.size() > 1 && comm.backend() != "nccl")
    throw InputError("compile.mode = \"" + to_string(mode) +
                     "\" captures the communication in a CUDA graph, which needs "
                     "distributed.comm = \"nccl\" (one GPU per rank); set compile.cuda_graphs = false to run it uncaptured");
}

void StepRunner::run(int64_t it) {
  if (!replays(it) || !captured()) {
    timer_.start(kGradientRegionSlot);
    grad_.run(&timer_);
    timer_.stop(kGradientRegionSlot);
    timer_.start(kDenoiseRegionSlot);
    den_.run(&timer_);
    timer_.stop(kDenoiseRegionSlot);
  } else if (gradient_) {
    timer_.start(kGradientRegionSlot);
    gradient_->replay();
    timer_.stop(kGradientRegionSlot);
    timer_.start(kDenoiseRegionSlot);
    denoise_->replay();
    timer_.stop(kDenoiseRegionSlot);
  } else {
    step_->replay();
  }
}

void StepRunner::capture() {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t before = comm_.bytes_sent();
  if (mode_ == CompileMode::post) {
    gradient_ = capture_region([&] { grad_.run(nullptr); }, device_);
    denoise_ = capture_region([&] { den_.run(nullptr); }, device_);
  } else {
    step_ = capture_region([&] {
      grad_.run(nullptr);
      den_.run(nullptr);
    }, device_);
  }
  capture_bytes_ = comm_.bytes_sent() - before;
  capture_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace pnp
