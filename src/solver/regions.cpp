#include "regions.hpp"

#include "pnp/core.hpp"

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
  const MemoryStage stage("physics");
  const bool slab = prob_.volume();  // the slab's slices, each its own 2D problem
  timed(timer, slot(Phase::forward_projection), [&] {
    if (slab)
      physics::forward_slices_out(s_.x, prob_.geom, own_, s_.p);
    else
      physics::forward_out(s_.x, prob_.geom, own_, s_.p);
  });
  timed(timer, slot(Phase::allreduce), [&] { comm_.allreduce_sum(s_.p); });
  timed(timer, slot(Phase::backprojection), [&] {
    s_.p.sub_(prob_.y);
    if (slab)
      physics::adjoint_slices_out(s_.p, prob_.geom, own_, s_.g);
    else
      physics::adjoint_out(s_.p, prob_.geom, own_, s_.g);
  });
  timed(timer, slot(Phase::step), [&] { at::add_out(s_.z_own, s_.x, s_.g, -step_); });
}

DenoiseRegion::DenoiseRegion(const TilePlan& tile, HaloPlan& halo, Denoiser& den, LoopState& s, DenoiseSettings set,
                             ZHaloPlan* zhalo, int64_t z_before)
    : tile_(tile), halo_(halo), den_(den), s_(s), set_(set), zhalo_(zhalo), z_before_(z_before) {
  const int64_t slices = s_.z_ext.dim() == 3 ? s_.z_ext.size(0) : 1;
  if (zhalo_) {  // one 3D call on the z-extended slab
    z4_ = s_.z_ext.view({1, 1, slices, tile_.ext.rows(), tile_.ext.cols()});
    batches_.emplace_back(0, s_.x.size(0));
    return;
  }
  z4_ = s_.z_ext.view({slices, 1, tile_.ext.rows(), tile_.ext.cols()});
  for (const auto& [z0, z1] : split_range(z4_.size(0), static_cast<int>(std::max<int64_t>(set_.batches, 1))))
    batches_.emplace_back(z0, z1 - z0);
}

void DenoiseRegion::set_sigma(double sigma) {
  set_.sigma = sigma;
  den_.executor->set_sigma(sigma);
}

void DenoiseRegion::run(PhaseTimer* timer) {
  const MemoryStage stage("patching");  // the gathered output, each patch's copies; the executor names its own
  const Box &own = tile_.own, &ext = tile_.ext;
  timed(timer, slot(Phase::halo_exchange), [&] {
    if (zhalo_) {  // the own slices' in-plane halos, then the z-halo's slices (their halos with them)
      at::Tensor own = s_.z_ext.narrow(0, z_before_, s_.x.size(0));
      halo_.exchange(own);
      zhalo_->exchange(s_.z_ext);
    } else {
      halo_.exchange(s_.z_ext);
    }
  });
  // x (or a batch's slices of it) from the denoised extended tile: relaxed with z, its owned part.
  auto combine = [&](const at::Tensor& dz, int64_t z0, int64_t count) {
    const at::Tensor d_own = dz.view({count, ext.rows(), ext.cols()})
                                 .narrow(-2, own.r0 - ext.r0, own.rows())
                                 .narrow(-1, own.c0 - ext.c0, own.cols())
                                 .view(s_.x.sizes().size() == 3 ? std::vector<int64_t>{count, own.rows(), own.cols()}
                                                                : std::vector<int64_t>{own.rows(), own.cols()});
    at::Tensor x = s_.x.dim() == 3 ? s_.x.narrow(0, z0, count) : s_.x;
    if (set_.alpha < 1.0) {
      const at::Tensor z = s_.z_own.dim() == 3 ? s_.z_own.narrow(0, z0, count) : s_.z_own;
      x.copy_(z).mul_(1.0 - set_.alpha).add_(d_own, set_.alpha);
    } else {
      x.copy_(d_own);
    }
  };
  auto denoise = [&](int64_t z0, int64_t count) {
    if (zhalo_)  // the whole extended slab, its own slices kept
      return nn::denoise_patched(*den_.executor, z4_, set_.sigma, std::vector<int64_t>{0, set_.patch_rows, set_.patch_cols},
                                 set_.overlap)
          .view({z4_.size(2), ext.rows(), ext.cols()})
          .narrow(0, z_before_, count);
    return nn::denoise_patched(*den_.executor, z4_.narrow(0, z0, count), set_.sigma, {set_.patch_rows, set_.patch_cols},
                               set_.overlap);
  };
  if (batches_.size() == 1) {  // one call (one image): x is written in the clamp phase
    at::Tensor dz;
    timed(timer, slot(Phase::denoise), [&] { dz = denoise(0, batches_[0].second); });
    timed(timer, slot(Phase::clamp), [&] {
      combine(dz, 0, batches_[0].second);
      if (set_.clamp) s_.x.clamp_(set_.lo, set_.hi);
    });
    return;
  }
  // A slab in batches: each batch's result goes to x before the next call reuses the buffers.
  timed(timer, slot(Phase::denoise), [&] {
    for (const auto& [z0, count] : batches_) combine(denoise(z0, count), z0, count);
  });
  timed(timer, slot(Phase::clamp), [&] {
    if (set_.clamp) s_.x.clamp_(set_.lo, set_.hi);
  });
}

StepRunner::StepRunner(CompileMode mode, bool cuda_graphs, at::Device device, Communicator& comm,
                       GradientRegion& grad, DenoiseRegion& den, PhaseTimer& timer, bool allowed)
    : mode_(mode), device_(device), comm_(comm), grad_(grad), den_(den), timer_(timer) {
  capture_ = allowed && solver_captures(mode, cuda_graphs, device);
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
