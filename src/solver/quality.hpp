// The reconstruction's quality during the loop, on metrics iterations only (never inside the
// timed phases): the residual ||A x - y|| / ||y|| of the iterate entering the iteration (the
// allreduced projection holds A x - y after the backprojection phase), and the PSNR and SSIM of
// the new iterate against the ground truth (data range = the truth's max - min). SSIM needs
// each tile's neighbourhood within the window radius: a narrow halo plan of its own fills it.
// Not a public header.
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "pnp/halo.hpp"
#include "pnp/solver.hpp"

namespace pnp {

class QualityMonitor {
 public:
  QualityMonitor(const Problem& prob, const Decomposition& d, Communicator& comm, at::TensorOptions opts);
  // residual from p (= A x - y, the same on every rank), PSNR and SSIM of x (this rank's tile).
  // False (the same on every rank) when the residual or the error is not finite: diverged.
  bool measure(const at::Tensor& x, const at::Tensor& p, double& residual, double& psnr, double& ssim);

 private:
  const Problem& prob_;
  const Decomposition& d_;
  Communicator& comm_;
  Box own_;
  double y_norm_ = 0, range_ = 0;
  Decomposition window_;  // the same tiles, halo = the SSIM window radius
  std::unique_ptr<HaloPlan> halo_;
  at::Tensor x_box_, truth_box_;
};

}  // namespace pnp
