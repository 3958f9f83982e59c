#include "stream.hpp"

#include "pnp/core.hpp"

#ifdef PNP_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace pnp {

// The copy stream and the events that order it against the compute stream: up (a group's
// upload done), consumed (the staging input read), ready (out_x written), down (out_x read back).
struct SlabStream::Copies {
#ifdef PNP_HAVE_CUDA
  explicit Copies(at::Device d)
      : copy(c10::cuda::getStreamFromPool(false, d.index())), compute(c10::cuda::getCurrentCUDAStream(d.index())) {}
  c10::cuda::CUDAStream copy, compute;
  at::cuda::CUDAEvent up, consumed, ready, down;
  bool downloading = false;
#endif
};

SlabStream::SlabStream(const Problem& slab, at::Tensor x, int64_t resident, at::Device device)
    : slab_(slab), x_(std::move(x)), resident_(resident), device_(device) {
  const int64_t slices = x_.size(0);
  if (resident_ < 1 || resident_ > slices)
    throw Error("SlabStream: groups of " + std::to_string(resident_) + " slices for a slab of " + std::to_string(slices));
  // nearly equal groups; the last one ends at the slab's end
  for (int64_t a = 0; a < slices; a += resident_) starts_.push_back(std::min(a, slices - resident_));
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  group_ = slab;
  group_.y = at::empty({resident_, slab.y.size(1), slab.y.size(2)}, opts);
  if (slab.has_truth()) group_.truth_own = at::empty({resident_, x_.size(1), x_.size(2)}, opts);
  in_x_ = at::empty({resident_, x_.size(1), x_.size(2)}, opts);
  out_x_ = at::empty_like(in_x_);
  in_y_ = at::empty_like(group_.y);
  if (device.is_cuda()) {
#ifdef PNP_HAVE_CUDA
    copies_ = std::make_unique<Copies>(device);
#else
    throw Error("a streamed slab on a CUDA device needs a CUDA build of pnp");
#endif
  }
}

SlabStream::~SlabStream() {
  try {
    sync();
  } catch (...) {
  }
}

void SlabStream::upload(int64_t k) {
  const int64_t a = starts_[static_cast<size_t>(k)];
#ifdef PNP_HAVE_CUDA
  if (copies_) {
    c10::cuda::CUDAStreamGuard guard(copies_->copy);
    copies_->consumed.block(copies_->copy);  // the previous group's staging input has been read
    in_x_.copy_(x_.narrow(0, a, resident_), /*non_blocking=*/true);
    in_y_.copy_(slab_.y.narrow(0, a, resident_), /*non_blocking=*/true);
    copies_->up.record(copies_->copy);
    return;
  }
#endif
  in_x_.copy_(x_.narrow(0, a, resident_));
  in_y_.copy_(slab_.y.narrow(0, a, resident_));
}

void SlabStream::run(LoopState& s, GradientRegion& gradient, DenoiseRegion& denoise, PhaseTimer* timer,
                     QualityMonitor* quality, QualityMonitor::Sums* sums) {
  const int64_t n = groups();
  upload(0);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t a = starts_[static_cast<size_t>(k)];
    // the slices this group writes back: the last group's first ones are the previous group's
    const int64_t fresh = k > 0 ? starts_[static_cast<size_t>(k - 1)] + resident_ - a : 0;
    const int64_t count = resident_ - fresh;
#ifdef PNP_HAVE_CUDA
    if (copies_) copies_->up.block(copies_->compute);
#endif
    s.x.copy_(in_x_);
    group_.y.copy_(in_y_);
#ifdef PNP_HAVE_CUDA
    if (copies_) copies_->consumed.record(copies_->compute);
#endif
    if (k + 1 < n) upload(k + 1);  // overlaps this group's compute on a GPU
    if (timer) timer->start(kGradientRegionSlot);
    gradient.run(timer);
    if (timer) timer->stop(kGradientRegionSlot);
    if (timer) timer->start(kDenoiseRegionSlot);
    denoise.run(timer);
    if (timer) timer->stop(kDenoiseRegionSlot);
    if (quality) {
      if (slab_.has_truth()) group_.truth_own.copy_(slab_.truth_own.narrow(0, a, resident_), /*non_blocking=*/true);
      quality->add(s.x, s.p, group_.truth_own, fresh, count, *sums);
    }
#ifdef PNP_HAVE_CUDA
    if (copies_) {
      if (copies_->downloading) copies_->down.block(copies_->compute);  // out_x has been read back
      out_x_.copy_(s.x);
      copies_->ready.record(copies_->compute);
      c10::cuda::CUDAStreamGuard guard(copies_->copy);
      copies_->ready.block(copies_->copy);
      x_.narrow(0, a + fresh, count).copy_(out_x_.narrow(0, fresh, count), /*non_blocking=*/true);
      copies_->down.record(copies_->copy);
      copies_->downloading = true;
      continue;
    }
#endif
    out_x_.copy_(s.x);
    x_.narrow(0, a + fresh, count).copy_(out_x_.narrow(0, fresh, count));
  }
}

void SlabStream::sync() {
#ifdef PNP_HAVE_CUDA
  if (copies_ && copies_->downloading) copies_->down.synchronize();
#endif
}

}  // namespace pnp
