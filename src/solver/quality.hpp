// The reconstruction's quality during the loop, on metrics iterations only (never inside the
// timed phases): the residual ||A x - y|| / ||y|| of the iterate entering the iteration (the
// allreduced projection holds A x - y after the backprojection phase), and the PSNR and SSIM of
// the new iterate against the ground truth (data range = the truth's max - min). SSIM needs
// each tile's neighbourhood within the window radius: a narrow halo plan of its own fills it.
// A volume's slab is measured slice by slice (SSIM is the mean over every slice's windows) and
// summed over every rank. Not a public header.
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "pnp/halo.hpp"
#include "pnp/solver.hpp"

namespace pnp {

class QualityMonitor {
 public:
  // `plane`: the ranks sharing this rank's plane (its halos); `world`: every rank (the sums).
  // `resident` > 0: a streamed slab's group size; the monitor then measures a group at a time
  // (add), its boxes `resident` slices deep, the group's truth given with it.
  QualityMonitor(const Problem& prob, const Decomposition& d, Communicator& plane, Communicator& world,
                 at::TensorOptions opts, int64_t resident = 0);
  // residual from p (= A x - y, the same on every rank), PSNR and SSIM of x (this rank's tile).
  // False (the same on every rank) when the residual or the error is not finite: diverged.
  bool measure(const at::Tensor& x, const at::Tensor& p, double& residual, double& psnr, double& ssim);
  // This rank's sums, added up over a streamed slab's groups.
  struct Sums {
    double residual2 = 0, squared_error = 0, ssim = 0, ssim_count = 0;
  };
  // Adds the slices [first, first + count) of a group's x, p and truth ([group slices, ...]; one
  // image: the whole) to `sums`. Every rank of the plane calls it alike (the SSIM halo).
  void add(const at::Tensor& x, const at::Tensor& p, const at::Tensor& truth, int64_t first, int64_t count, Sums& sums);
  // The metrics of sums over every rank (measure's, for the whole slab).
  bool finish(const Sums& sums, double& residual, double& psnr, double& ssim);

 private:
  const Problem& prob_;
  const Decomposition& d_;
  Communicator &plane_, &world_;
  // The sum over the planes of a value every rank of a plane holds alike (one image: the value).
  double planes_sum(double v) const;
  Box own_;
  double pixels_ = 0;  // of the whole image or volume
  double y_norm_ = 0, range_ = 0;
  bool streamed_ = false;
  Decomposition window_;  // the same tiles, halo = the SSIM window radius
  std::unique_ptr<HaloPlan> halo_;
  at::Tensor x_box_, truth_box_;
};

}  // namespace pnp
