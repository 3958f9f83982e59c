#include "quality.hpp"

#include <cmath>
#include <limits>

#include "pnp/metrics.hpp"

namespace pnp {

namespace {
at::Tensor own_part(at::Tensor& box_tensor, const Box& box, const Box& own) {
  return box_tensor.narrow(-2, own.r0 - box.r0, own.rows()).narrow(-1, own.c0 - box.c0, own.cols());
}
}  // namespace

QualityMonitor::QualityMonitor(const Problem& prob, const Decomposition& d, Communicator& plane, Communicator& world,
                               at::TensorOptions opts, int64_t resident)
    : prob_(prob), d_(d), plane_(plane), world_(world), own_(d.tile(plane.rank()).own), streamed_(resident > 0) {
  // ||y|| of the whole data: each plane's ranks hold the same sinograms (counted once per plane);
  // a streamed slab's (in host memory) slice by slice
  double y2 = 0;
  if (streamed_)
    for (int64_t s = 0; s < prob.y.size(0); ++s) y2 += prob.y[s].square().sum().item<double>();
  else
    y2 = prob.y.square().sum().item<double>();
  y_norm_ = std::sqrt(planes_sum(y2));
  range_ = prob.truth_max - prob.truth_min;
  pixels_ = static_cast<double>(d.n * d.n) * static_cast<double>(prob.volume() ? prob.slices : 1);
  if (!prob.has_truth()) return;
  // The same owned tiles as d (on the denoiser's grid with the layer halo), grown by the window.
  window_ = plan_decomposition(d.n, plane.size(), d.kind, {d.grid_rows, d.grid_cols}, metrics::SsimOptions{}.radius(),
                               d.align_owned ? d.align : 1, d.align_owned);
  const Box& box = window_.tile(plane.rank()).ext;
  std::vector<int64_t> lead, shape{box.rows(), box.cols()};
  if (prob.volume()) {
    const int64_t slices = streamed_ ? resident : prob.y.size(0);
    lead = {slices}, shape.insert(shape.begin(), slices);
  }
  x_box_ = at::empty(shape, opts);
  truth_box_ = at::empty(shape, opts);
  halo_ = std::make_unique<HaloPlan>(plane, window_, opts, lead);
  if (streamed_) return;  // each group's truth comes with it
  own_part(truth_box_, box, own_).copy_(prob.truth_own);
  halo_->exchange(truth_box_);
}

double QualityMonitor::planes_sum(double v) const {
  return &plane_ == &world_ ? v : world_.sum(v) / plane_.size();
}

bool QualityMonitor::measure(const at::Tensor& x, const at::Tensor& p, double& residual, double& psnr, double& ssim) {
  Sums sums;
  add(x, p, prob_.truth_own, 0, prob_.volume() ? x.size(0) : 1, sums);
  return finish(sums, residual, psnr, ssim);
}

void QualityMonitor::add(const at::Tensor& x, const at::Tensor& p, const at::Tensor& truth, int64_t first, int64_t count,
                         Sums& sums) {
  // a volume slice by slice (the memory of one slice's sums, in the slices' order whatever the
  // groups); one image whole
  auto slice = [&](const at::Tensor& t, int64_t s) { return prob_.volume() ? t[s] : t; };
  for (int64_t s = first; s < first + count; ++s) sums.residual2 += slice(p, s).square().sum().item<double>();
  if (!prob_.has_truth()) return;
  for (int64_t s = first; s < first + count; ++s)  // in strips: bounded memory
    sums.squared_error += metrics::squared_error_sum(slice(x, s), slice(truth, s));
  const Box& box = window_.tile(plane_.rank()).ext;
  if (streamed_) {
    own_part(truth_box_, box, own_).copy_(truth);
    halo_->exchange(truth_box_);
  }
  own_part(x_box_, box, own_).copy_(x);
  halo_->exchange(x_box_);
  if (x_box_.dim() == 2) {
    const auto one = metrics::ssim_sum(x_box_, truth_box_, box, own_, d_.n, d_.n, range_);
    sums.ssim += one.sum, sums.ssim_count += static_cast<double>(one.count);
    return;
  }
  for (int64_t s = first; s < first + count; ++s) {
    const auto one = metrics::ssim_sum(x_box_[s], truth_box_[s], box, own_, d_.n, d_.n, range_);
    sums.ssim += one.sum, sums.ssim_count += static_cast<double>(one.count);
  }
}

bool QualityMonitor::finish(const Sums& sums, double& residual, double& psnr, double& ssim) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // p is allreduced over the plane: its ranks hold the same, counted once per plane
  const double res2 = planes_sum(sums.residual2);
  residual = y_norm_ > 0 ? std::sqrt(res2) / y_norm_ : nan;
  if (!std::isfinite(res2)) return false;
  if (!prob_.has_truth()) return true;
  const double se = world_.sum(sums.squared_error);
  const double mse = se / pixels_;
  if (!std::isfinite(mse)) return false;
  psnr = mse > 0 ? 10.0 * std::log10(range_ * range_ / mse) : INFINITY;
  const double count = world_.sum(sums.ssim_count);
  ssim = count > 0 ? world_.sum(sums.ssim) / count : nan;
  return true;
}

}  // namespace pnp
