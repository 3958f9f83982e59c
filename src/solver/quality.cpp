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
                               at::TensorOptions opts)
    : prob_(prob), d_(d), plane_(plane), world_(world), own_(d.tile(plane.rank()).own) {
  // ||y|| of the whole data: each plane's ranks hold the same sinograms (counted once per plane)
  y_norm_ = std::sqrt(planes_sum(prob.y.square().sum().item<double>()));
  range_ = prob.truth_max - prob.truth_min;
  pixels_ = static_cast<double>(d.n * d.n) * static_cast<double>(prob.volume() ? prob.slices : 1);
  if (!prob.has_truth()) return;
  // The same owned tiles as d (on the denoiser's grid with the layer halo), grown by the window.
  window_ = plan_decomposition(d.n, plane.size(), d.kind, {d.grid_rows, d.grid_cols}, metrics::SsimOptions{}.radius(),
                               d.align_owned ? d.align : 1, d.align_owned);
  const Box& box = window_.tile(plane.rank()).ext;
  std::vector<int64_t> lead, shape{box.rows(), box.cols()};
  if (prob.volume()) lead = {prob.y.size(0)}, shape.insert(shape.begin(), prob.y.size(0));
  x_box_ = at::empty(shape, opts);
  truth_box_ = at::empty(shape, opts);
  halo_ = std::make_unique<HaloPlan>(plane, window_, opts, lead);
  own_part(truth_box_, box, own_).copy_(prob.truth_own);
  halo_->exchange(truth_box_);
}

double QualityMonitor::planes_sum(double v) const {
  return &plane_ == &world_ ? v : world_.sum(v) / plane_.size();
}

bool QualityMonitor::measure(const at::Tensor& x, const at::Tensor& p, double& residual, double& psnr, double& ssim) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // p is allreduced over the plane: its ranks hold the same, counted once per plane
  const double res2 = planes_sum(p.square().sum().item<double>());
  residual = y_norm_ > 0 ? std::sqrt(res2) / y_norm_ : nan;
  if (!std::isfinite(res2)) return false;
  if (!prob_.has_truth()) return true;
  const double se = world_.sum(metrics::squared_error_sum(x, prob_.truth_own));  // in strips: bounded memory
  const double mse = se / pixels_;
  if (!std::isfinite(mse)) return false;
  psnr = mse > 0 ? 10.0 * std::log10(range_ * range_ / mse) : INFINITY;
  const Box& box = window_.tile(plane_.rank()).ext;
  own_part(x_box_, box, own_).copy_(x);
  halo_->exchange(x_box_);
  metrics::SsimSum part;
  if (x_box_.dim() == 2) {
    part = metrics::ssim_sum(x_box_, truth_box_, box, own_, d_.n, d_.n, range_);
  } else {
    for (int64_t s = 0; s < x_box_.size(0); ++s) {
      const auto one = metrics::ssim_sum(x_box_[s], truth_box_[s], box, own_, d_.n, d_.n, range_);
      part.sum += one.sum, part.count += one.count;
    }
  }
  const double count = world_.sum(static_cast<double>(part.count));
  ssim = count > 0 ? world_.sum(part.sum) / count : nan;
  return true;
}

}  // namespace pnp
