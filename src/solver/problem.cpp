#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "pnp/messages.hpp"
#include "pnp/solver.hpp"
#include "pnp/synthetic.hpp"

namespace pnp {

namespace {
at::Tensor from_vector(std::vector<float> v, std::vector<int64_t> shape) {
  return at::from_blob(v.data(), shape, at::kFloat).clone();
}
}  // namespace

at::Tensor noisy_projection(const at::Tensor& truth_own, const physics::Geometry& geom, const Box& own,
                            double noise_sigma, int64_t seed, Communicator* comm) {
  // A x in float64, the ranks' partial sinograms summed, then rounded once: the data do not
  // depend on the rank count (but for the rare sum that lands on the other side of a float32
  // rounding boundary), as a float32 sum of partial projections would, at float32 rounding.
  const auto device = truth_own.device();
  at::Tensor y64 = at::empty({geom.n_angles(), geom.n_det}, at::TensorOptions().dtype(at::kDouble).device(device));
  if (own.empty())
    y64.zero_();
  else
    physics::forward_out(truth_own.to(at::kDouble), geom, own, y64);
  if (comm) comm->allreduce_sum(y64);
  at::Tensor y = y64.to(at::kFloat);
  if (noise_sigma > 0) {  // the same noise on every rank (a host generator of the seed)
    at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed) * 2654435761ull + 17);
    const double scale = noise_sigma * y.abs().max().item<double>();
    y = y + scale * at::normal(0.0, 1.0, y.sizes(), gen, at::kFloat).to(device);
  }
  return y.contiguous();
}

Problem simulate_problem(const ProblemConfig& p, const Box& own, at::Device device, Communicator* comm) {
  auto geom = physics::Geometry::standard(p.size, p.angles, p.detector);
  auto global_max = [&](double v) { return comm ? comm->max(v) : v; };
  const bool ellipses = p.phantom == "ellipses";
  std::vector<float> img;
  auto raster = [&] {
    if (own.empty()) return;
    const Window w{own.r0, own.c0, own.rows(), own.cols()};
    img = rasterize_window(ellipses ? random_ellipses(12, static_cast<uint64_t>(p.seed)) : shepp_logan_ellipses(), p.size, w);
  };
  // the one step that can fail on some ranks only, agreed on before the collectives below
  if (comm) collectively(comm->mpi_comm(), raster);
  else raster();
  // the whole image's [min, max], from every rank's pixels
  auto range = [&] {
    const auto [lo, hi] = std::minmax_element(img.begin(), img.end());
    const float inf = std::numeric_limits<float>::infinity();
    return std::pair<float, float>{static_cast<float>(-global_max(img.empty() ? inf : -*lo)),
                                   static_cast<float>(global_max(img.empty() ? -inf : *hi))};
  };
  if (ellipses) {  // random_ellipse_image's normalisation to [0, 1], by the whole image's range
    const auto [a, b] = range();
    const float span = b - a;
    for (auto& v : img) v = span > 0 ? (v - a) / span : 0.0f;
  } else {  // shepp_logan's clamp to [0, 1]
    for (auto& v : img) v = std::clamp(v, 0.0f, 1.0f);
  }
  const auto [truth_min, truth_max] = range();

  Problem prob;
  prob.geom = geom;
  prob.truth_own = from_vector(std::move(img), {std::max<int64_t>(own.rows(), 0), std::max<int64_t>(own.cols(), 0)}).to(device);
  prob.truth_min = truth_min;
  prob.truth_max = truth_max;
  prob.y = noisy_projection(prob.truth_own, geom, own, p.noise_sigma, p.seed, comm);
  prob.angles_source = "simulated: " + std::to_string(p.angles) + " angles evenly spaced over [0, 180) degrees";
  return prob;
}

io::Sinogram simulate_sinogram(const ProblemConfig& p, at::Device device) {
  const Box all{0, p.size, 0, p.size};
  Problem prob = simulate_problem(p, all, device, nullptr);
  const at::Tensor y = prob.y.to(at::kCPU).contiguous(), gt = prob.truth_own.to(at::kCPU).contiguous();
  io::Sinogram s;
  s.data.shape = {y.size(0), y.size(1)};
  s.data.data.assign(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
  s.theta_deg = prob.geom.angles_deg;
  s.ground_truth = io::Array<float>{{p.size, p.size}, std::vector<float>(gt.data_ptr<float>(), gt.data_ptr<float>() + gt.numel())};
  return s;
}

namespace {
int64_t standard_detector(int64_t n) { return static_cast<int64_t>(std::ceil(std::sqrt(2.0) * static_cast<double>(n))); }
}  // namespace

void resolve_problem_sizes(Config& cfg) {
  ProblemConfig& p = cfg.problem;
  if (p.sinogram.empty()) return;  // generated: the configured sizes
  const io::DxchangeShapes sh = io::read_dxchange_shapes(p.sinogram, {p.data_path, p.theta_path, p.ground_truth_path});
  const int64_t k = sh.data[0], det = sh.data[1];
  const std::string file = "problem.sinogram " + p.sinogram;
  if (cfg.is_given("problem.angles") && p.angles != k)
    throw InputError("problem.angles = " + std::to_string(p.angles) + " but " + file + " has " + std::to_string(k) +
                     " angles (leave problem.angles out to take the file's)");
  p.angles = k;
  if (cfg.is_given("problem.detector") && p.detector != 0 && p.detector != det)
    throw InputError("problem.detector = " + std::to_string(p.detector) + " but the sinogram has " + std::to_string(det) +
                     " detector bins");
  int64_t n = 0;
  if (cfg.is_given("problem.size")) {
    n = p.size;
    if (sh.has_truth && sh.ground_truth[0] != n)
      throw InputError("problem.size = " + std::to_string(n) + " but the ground truth in " + file + " is " +
                       std::to_string(sh.ground_truth[0]) + " x " + std::to_string(sh.ground_truth[0]));
  } else if (sh.has_truth) {
    n = sh.ground_truth[0];
  } else {
    // The image size whose standard detector (ceil(sqrt(2) N) bins) is the file's: at most one.
    for (int64_t c = static_cast<int64_t>(std::floor(double(det) / std::sqrt(2.0))) - 2; c <= det; ++c)
      if (c >= 1 && standard_detector(c) == det) {
        n = c;
        break;
      }
    if (n == 0)
      throw InputError(file + " has " + std::to_string(det) + " detector bins, which is ceil(sqrt(2) N) for no image "
                       "size N, and no ground truth: set problem.size (and problem.detector = " +
                       std::to_string(det) + " for this detector)");
  }
  if (n < 8 || n > 65536)
    throw InputError("the image size " + std::to_string(n) + " from " + file + " is outside [8, 65536]");
  if (!(cfg.is_given("problem.detector") && p.detector == det) && standard_detector(n) != det)
    throw InputError(file + " has " + std::to_string(det) + " detector bins, but a " + std::to_string(n) + " x " +
                     std::to_string(n) + " image has ceil(sqrt(2) N) = " + std::to_string(standard_detector(n)) +
                     ": set problem.detector = " + std::to_string(det) + " if the detector really is that wide, or "
                     "the right problem.size");
  p.size = n;
  if (standard_detector(n) != det) p.detector = det;
}

Problem setup_problem(const Config& cfg, const Decomposition& d, int rank, at::Device device, Communicator* comm) {
  const ProblemConfig& p = cfg.problem;
  const Box& own = d.tile(rank).own;
  if (p.sinogram.empty()) {
    if (comm) return simulate_problem(p, own, device, comm);
    Problem prob = simulate_problem(p, Box{0, p.size, 0, p.size}, device, nullptr);
    prob.truth_own = prob.truth_own.narrow(0, own.r0, own.rows()).narrow(1, own.c0, own.cols()).contiguous();
    return prob;
  }
  io::Sinogram s;
  {
    io::DxchangeExpect e;
    e.angles = p.angles;
    e.detector = p.detector ? p.detector : standard_detector(p.size);
    e.size = p.size;
    e.max_bytes = host_memory_bytes();
    e.source = "the effective problem.size " + std::to_string(p.size) + " and problem.angles " + std::to_string(p.angles);
    s = io::read_dxchange(p.sinogram, {p.data_path, p.theta_path, p.ground_truth_path}, e);
  }
  Problem prob;
  int64_t k = s.data.shape[0], det = s.data.shape[1];
  if (s.theta_deg.empty()) {
    prob.geom = physics::Geometry::standard(p.size, k, det);
    prob.angles_assumed = true;
    prob.angles_source = "assumed: " + std::to_string(k) + " angles evenly spaced over [0, 180) degrees (" +
                         clip_value(p.sinogram) + " has no " + p.theta_path + ")";
  } else {
    prob.angles_source = "read from " + p.theta_path + " of " + p.sinogram;
    prob.angles_warning = s.theta_warning;
    prob.geom.n = p.size;
    prob.geom.n_det = det;
    prob.geom.angles_deg = s.theta_deg;
  }
  if (!p.sinogram.empty() && p.detector != 0 && p.detector != det)
    throw InputError("problem.detector = " + std::to_string(p.detector) + " but the sinogram has " +
                     std::to_string(det) + " detector bins");
  if (s.ground_truth && s.ground_truth->shape[0] != p.size)
    throw InputError("the ground truth is " + std::to_string(s.ground_truth->shape[0]) + " x " +
                     std::to_string(s.ground_truth->shape[1]) + " but problem.size = " + std::to_string(p.size));
  prob.geom.validate();
  prob.y = from_vector(std::move(s.data.data), {k, det}).to(device);
  if (s.ground_truth) {
    at::Tensor gt = from_vector(std::move(s.ground_truth->data), {p.size, p.size});
    prob.truth_min = gt.min().item<double>();
    prob.truth_max = gt.max().item<double>();
    prob.truth_own = gt.narrow(0, own.r0, own.rows()).narrow(1, own.c0, own.cols()).contiguous().to(device);
  }
  return prob;
}

}  // namespace pnp
