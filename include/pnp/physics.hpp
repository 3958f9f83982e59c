// Parallel-beam CT physics: the Joseph projector A, its exact adjoint A^T (a gather, no
// atomics), FBP and the distributed power method for ||A^T A||.
//
// Conventions (docs/design.md, "Physics"; measured: docs/performance.md#projector):
//   * The image is n x n unit pixels, centred on the rotation axis. Pixel (i, j) (row i,
//     column j, row-major) has its centre at x = j - (n-1)/2, y = (n-1)/2 - i.
//   * Detector bin d (unit width) sits at t = d - (n_det-1)/2. Angle theta_k (degrees).
//     The ray (k, d) is the line x cos(theta) + y sin(theta) = t_d.
//   * Joseph: with a = max(|cos|, |sin|), the ray steps along rows when |cos| >= |sin|
//     (else along columns) and interpolates linearly between the two nearest pixels of
//     each row (column), times the step length 1/a. Equivalently the matrix entry is
//         A[(k,d), (i,j)] = max(0, a - |t_d - t_ij|) / a^2,   t_ij = x_j cos + y_i sin,
//     which is what the adjoint gathers, so <Ax, y> = <x, A^T y> to rounding.
//   * Tiles: forward over a box is A restricted to the box's pixels (pixels outside are
//     zero); the partial sinograms of any partition sum to the full A x. Adjoint over a box
//     is exactly that box of the full A^T y.
//   * Sinogram layout [K, n_det]. float32 and float64 on CPU and CUDA.
#pragma once

#include <pnp/core.hpp>

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pnp::physics {

struct Geometry {
  int64_t n = 0;      // image is n x n unit pixels, centred
  int64_t n_det = 0;  // detector bins (unit width, centred)
  std::vector<double> angles_deg;

  // n_det = 0 -> ceil(sqrt(2) n); theta_k = k * 180 / K.
  static Geometry standard(int64_t n, int64_t n_angles, int64_t n_det = 0);
  int64_t n_angles() const { return static_cast<int64_t>(angles_deg.size()); }
  // The angles in degrees as a float64 [K] tensor on `device` (cached per device).
  at::Tensor angles_tensor(at::Device device) const;
  // Throws pnp::InputError when n, n_det or the angles are unusable.
  void validate() const;
  Box full_box() const { return Box{0, n, 0, n}; }

  // Internal: the per-device angle tensors (shared by copies, rebuilt when angles change).
  struct Cache {
    std::mutex mu;
    std::vector<double> key;
    std::map<std::string, at::Tensor> by_device;
  };
  std::shared_ptr<Cache> cache_ = std::make_shared<Cache>();
};

// Partial sinogram of the pixels inside `box`. `tile` is [box.rows(), box.cols()], float32
// or float64, CPU or CUDA, with stride(1) == 1 (a row-strided view is fine). Returns [K, n_det].
at::Tensor forward(const at::Tensor& tile, const Geometry& g, const Box& box);
// Same into `out` ([K, n_det], same dtype/device, contiguous), overwritten; allocates
// nothing on CUDA, so it can be captured in a CUDA graph.
void forward_out(const at::Tensor& tile, const Geometry& g, const Box& box, at::Tensor& out);

// The box of A^T sino: returns [box.rows(), box.cols()].
at::Tensor adjoint(const at::Tensor& sino, const Geometry& g, const Box& box);
// Same into `out` ([box.rows(), box.cols()], stride(1) == 1, may be a row-strided view).
void adjoint_out(const at::Tensor& sino, const Geometry& g, const Box& box, at::Tensor& out);

// A batch of slices of a volume, each its own parallel-beam problem with the same geometry (the
// slices do not interact): `slices` is [S, box.rows(), box.cols()], the sinograms [S, K, n_det],
// both contiguous with one dtype and device. Each slice is what forward_out / adjoint_out give
// it, so the batch's adjoint is exact as theirs is. The _out forms overwrite `out`.
at::Tensor forward_slices(const at::Tensor& slices, const Geometry& g, const Box& box);
void forward_slices_out(const at::Tensor& slices, const Geometry& g, const Box& box, at::Tensor& out);
at::Tensor adjoint_slices(const at::Tensor& sinos, const Geometry& g, const Box& box);
void adjoint_slices_out(const at::Tensor& sinos, const Geometry& g, const Box& box, at::Tensor& out);

enum class FbpFilter { ramp, shepp_logan, cosine };
FbpFilter parse_fbp_filter(const std::string& name);  // "ramp", "shepp_logan"/"shepp-logan", "cosine"
std::string to_string(FbpFilter f);

// The frequency response of the filter for a padded length P (a [P] float64 CPU tensor,
// the Kak-Slaney discrete ramp, optionally windowed).
at::Tensor fbp_filter_response(int64_t padded_length, FbpFilter f);
// Filters each projection (zero-padded to the next power of two >= 2 n_det, at::fft_rfft).
at::Tensor fbp_filter(const at::Tensor& sino, FbpFilter f = FbpFilter::ramp);
// Filtered backprojection restricted to `box`: A^T(filter(sino)) * pi / (2K).
at::Tensor fbp(const at::Tensor& sino, const Geometry& g, const Box& box, FbpFilter f = FbpFilter::ramp);

struct PowerOptions {
  int max_iterations = 100;
  double tol = 1e-6;  // stop when |lambda_k - lambda_{k-1}| <= tol * lambda_k
  uint64_t seed = 0;
};
struct PowerResult {
  double norm = 0;  // estimate of ||A^T A|| (largest eigenvalue)
  int iterations = 0;
  bool converged = false;
  // host wall times: the start vector made, on the device and normalised; the first iteration
  // (every iteration ends on the host, so each is its device time too)
  double start_seconds = 0, first_seconds = 0;
};

// The start vector of the power method on `box`: a function of the global pixel index and
// the seed only (uniform in [0, 1)), [box.rows(), box.cols()] in dtype (float32 or float64) on
// `device`. On a CUDA device it is made there by a kernel (no host loop, no upload) from the
// same float64 values, rounded alike: it equals the CPU's.
at::Tensor power_start(const Box& box, int64_t n, uint64_t seed, at::Device device = at::kCPU,
                       at::ScalarType dtype = at::kDouble);

// ||A^T A|| by power iteration over tiles: each rank holds only its box; `allreduce_sum`
// sums a [K, n_det] tensor in place across ranks (identity for 1 rank). Deterministic for a
// seed and independent of the decomposition up to rounding.
PowerResult operator_norm_detailed(const Geometry& g, const Box& box,
                                   const std::function<void(at::Tensor&)>& allreduce_sum,
                                   const PowerOptions& opt, at::Device device,
                                   at::ScalarType dtype = at::kFloat);
double operator_norm(const Geometry& g, const Box& box, const std::function<void(at::Tensor&)>& allreduce_sum,
                     const PowerOptions& opt, at::Device device, at::ScalarType dtype = at::kFloat);

// Exact cos/sin of an angle in degrees (exact at multiples of 45 degrees, where cos and
// sin of 45 are the same double). Shared by the CPU and CUDA kernels.
void cos_sin_deg(double deg, double& c, double& s);

// Work count of one A or A^T over a box: pixels x angles ("updates").
inline double updates(const Geometry& g, const Box& box) {
  return static_cast<double>(box.size()) * static_cast<double>(g.n_angles());
}

}  // namespace pnp::physics
