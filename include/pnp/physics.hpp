// Parallel-beam CT physics: the Joseph projector A, its exact adjoint A^T (a gather, no
// atomics), FBP and the distributed power method for ||A^T A||.
//
// Conventions (see docs/performance.md "## Physics" and DESIGN.md):
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

#include <torch/torch.h>

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
  torch::Tensor angles_tensor(torch::Device device) const;
  // Throws pnp::InputError when n, n_det or the angles are unusable.
  void validate() const;
  Box full_box() const { return Box{0, n, 0, n}; }

  // Internal: the per-device angle tensors (shared by copies, rebuilt when angles change).
  struct Cache {
    std::mutex mu;
    std::vector<double> key;
    std::map<std::string, torch::Tensor> by_device;
  };
  std::shared_ptr<Cache> cache_ = std::make_shared<Cache>();
};

// Partial sinogram of the pixels inside `box`. `tile` is [box.rows(), box.cols()], float32
// or float64, CPU or CUDA, with stride(1) == 1 (a row-strided view is fine). Returns [K, n_det].
torch::Tensor forward(const torch::Tensor& tile, const Geometry& g, const Box& box);
// Same into `out` ([K, n_det], same dtype/device, contiguous), overwritten; allocates
// nothing on CUDA, so it can be captured in a CUDA graph.
void forward_out(const torch::Tensor& tile, const Geometry& g, const Box& box, torch::Tensor& out);

// The box of A^T sino: returns [box.rows(), box.cols()].
torch::Tensor adjoint(const torch::Tensor& sino, const Geometry& g, const Box& box);
// Same into `out` ([box.rows(), box.cols()], stride(1) == 1, may be a row-strided view).
void adjoint_out(const torch::Tensor& sino, const Geometry& g, const Box& box, torch::Tensor& out);

enum class FbpFilter { ramp, shepp_logan, cosine };
FbpFilter parse_fbp_filter(const std::string& name);  // "ramp", "shepp_logan"/"shepp-logan", "cosine"
std::string to_string(FbpFilter f);

// The frequency response of the filter for a padded length P (a [P] float64 CPU tensor,
// the Kak-Slaney discrete ramp, optionally windowed).
torch::Tensor fbp_filter_response(int64_t padded_length, FbpFilter f);
// Filters each projection (zero-padded to the next power of two >= 2 n_det, torch::fft).
torch::Tensor fbp_filter(const torch::Tensor& sino, FbpFilter f = FbpFilter::ramp);
// Filtered backprojection restricted to `box`: A^T(filter(sino)) * pi / (2K).
torch::Tensor fbp(const torch::Tensor& sino, const Geometry& g, const Box& box, FbpFilter f = FbpFilter::ramp);

struct PowerOptions {
  int max_iterations = 100;
  double tol = 1e-6;  // stop when |lambda_k - lambda_{k-1}| <= tol * lambda_k
  uint64_t seed = 0;
};
struct PowerResult {
  double norm = 0;  // estimate of ||A^T A|| (largest eigenvalue)
  int iterations = 0;
  bool converged = false;
};

// The start vector of the power method on `box`: a function of the global pixel index and
// the seed only (uniform in [0, 1)), [box.rows(), box.cols()] float64 on the CPU.
torch::Tensor power_start(const Box& box, int64_t n, uint64_t seed);

// ||A^T A|| by power iteration over tiles: each rank holds only its box; `allreduce_sum`
// sums a [K, n_det] tensor in place across ranks (identity for 1 rank). Deterministic for a
// seed and independent of the decomposition up to rounding.
PowerResult operator_norm_detailed(const Geometry& g, const Box& box,
                                   const std::function<void(torch::Tensor&)>& allreduce_sum,
                                   const PowerOptions& opt, torch::Device device,
                                   torch::ScalarType dtype = torch::kFloat32);
double operator_norm(const Geometry& g, const Box& box, const std::function<void(torch::Tensor&)>& allreduce_sum,
                     const PowerOptions& opt, torch::Device device, torch::ScalarType dtype = torch::kFloat32);

// Exact cos/sin of an angle in degrees (exact at multiples of 45 degrees, where cos and
// sin of 45 are the same double). Shared by the CPU and CUDA kernels.
void cos_sin_deg(double deg, double& c, double& s);

// Work count of one A or A^T over a box: pixels x angles ("updates").
inline double updates(const Geometry& g, const Box& box) {
  return static_cast<double>(box.size()) * static_cast<double>(g.n_angles());
}

// The projector benchmark behind apps/pnp_radon_bench: times A and A^T (forward_out /
// adjoint_out, median of `reps` after `warmup`, device events on CUDA) on the box of rank 0
// of `slabs` row slabs, prints ms and GUPS (10^9 pixel-angle updates per second) and, with
// `check`, the adjointness and CUDA-vs-CPU errors. Returns 0 when the checks pass.
struct BenchOptions {
  int64_t n = 4096;
  int64_t angles = 100;
  int64_t n_det = 0;             // 0 -> ceil(sqrt(2) n)
  std::string device = "auto";   // auto, cpu, cuda
  std::string dtype = "float32"; // float32, float64
  int warmup = 3;
  int reps = 20;
  int slabs = 1;
  bool check = true;
  bool fbp = false;    // also time FBP
  int opnorm_iterations = 0;  // > 0: also run that many power iterations and print ||A^T A||
};
int run_bench(const BenchOptions& opt, std::ostream& os);

}  // namespace pnp::physics
