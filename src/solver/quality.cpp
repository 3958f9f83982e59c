#include "quality.hpp"

#include <cmath>
#include <limits>

#include "pnp/metrics.hpp"

namespace pnp {

namespace {
at::Tensor own_part(at::Tensor& box_tensor, const Box& box, const Box& own) {
  return box_tensor.narrow(0, own.r0 - box.r0, own.rows()).narrow(1, own.c0 - box.c0, own.cols());
}
}  // namespace

QualityMonitor::QualityMonitor(const Problem& prob, const Decomposition& d, Communicator& comm, at::TensorOptions opts)
    : prob_(prob), d_(d), comm_(comm), own_(d.tile(comm.rank()).own) {
  y_norm_ = std::sqrt(prob.y.square().sum().item<double>());
  range_ = prob.truth_max - prob.truth_min;
  if (!prob.has_truth()) return;
  // The same owned tiles as d (on the denoiser's grid with the layer halo), grown by the window.
  window_ = plan_decomposition(d.n, comm.size(), d.kind, {d.grid_rows, d.grid_cols}, metrics::SsimOptions{}.radius(),
                               d.align_owned ? d.align : 1, d.align_owned);
  const Box& box = window_.tile(comm.rank()).ext;
  x_box_ = at::empty({box.rows(), box.cols()}, opts);
  truth_box_ = at::empty({box.rows(), box.cols()}, opts);
  halo_ = std::make_unique<HaloPlan>(comm, window_, opts);
  own_part(truth_box_, box, own_).copy_(prob.truth_own);
  halo_->exchange(truth_box_);
}

bool QualityMonitor::measure(const at::Tensor& x, const at::Tensor& p, double& residual, double& psnr, double& ssim) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double res2 = p.square().sum().item<double>();  // the same on every rank (allreduced p)
  residual = y_norm_ > 0 ? std::sqrt(res2) / y_norm_ : nan;
  if (!std::isfinite(res2)) return false;
  if (!prob_.has_truth()) return true;
  const double se = comm_.sum(metrics::squared_error_sum(x, prob_.truth_own));  // in strips: bounded memory
  const double mse = se / static_cast<double>(d_.n * d_.n);
  if (!std::isfinite(mse)) return false;
  psnr = mse > 0 ? 10.0 * std::log10(range_ * range_ / mse) : INFINITY;
  const Box& box = window_.tile(comm_.rank()).ext;
  own_part(x_box_, box, own_).copy_(x);
  halo_->exchange(x_box_);
  const auto part = metrics::ssim_sum(x_box_, truth_box_, box, own_, d_.n, d_.n, range_);
  const double count = comm_.sum(static_cast<double>(part.count));
  ssim = count > 0 ? comm_.sum(part.sum) / count : nan;
  return true;
}

}  // namespace pnp
