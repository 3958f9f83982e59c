#include <cmath>

#include "pnp/synthetic.hpp"
#include "pnp/solver.hpp"

namespace pnp {

namespace {
at::Tensor from_vector(std::vector<float> v, std::vector<int64_t> shape) {
  return at::from_blob(v.data(), shape, at::kFloat).clone();
}
}  // namespace

io::Sinogram simulate_sinogram(const ProblemConfig& p, at::Device device) {
  auto img = p.phantom == "ellipses" ? random_ellipse_image(p.size, 12, static_cast<uint64_t>(p.seed)) : shepp_logan(p.size);
  auto geom = physics::Geometry::standard(p.size, p.angles, p.detector);
  at::Tensor x = from_vector(img, {p.size, p.size});
  at::Tensor y = physics::forward(x.to(device), geom, geom.full_box()).to(at::kCPU);
  if (p.noise_sigma > 0) {
    at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(p.seed) * 2654435761ull + 17);
    double scale = p.noise_sigma * y.abs().max().item<double>();
    y = y + scale * at::normal(0.0, 1.0, y.sizes(), gen, at::kFloat);
  }
  y = y.contiguous();
  io::Sinogram s;
  s.data.shape = {y.size(0), y.size(1)};
  s.data.data.assign(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
  s.theta_deg = geom.angles_deg;
  s.ground_truth = io::Array<float>{{p.size, p.size}, std::move(img)};
  return s;
}

Problem setup_problem(const Config& cfg, const Decomposition& d, int rank, at::Device device) {
  const ProblemConfig& p = cfg.problem;
  io::Sinogram s;
  if (p.sinogram.empty()) {
    s = simulate_sinogram(p, device);
  } else {
    s = io::read_dxchange(p.sinogram, {p.data_path, p.theta_path, p.ground_truth_path});
  }
  Problem prob;
  int64_t k = s.data.shape[0], det = s.data.shape[1];
  if (s.theta_deg.empty()) {
    prob.geom = physics::Geometry::standard(p.size, k, det);
  } else {
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
    const Box& own = d.tile(rank).own;
    prob.truth_own = gt.narrow(0, own.r0, own.rows()).narrow(1, own.c0, own.cols()).contiguous().to(device);
    if (rank == 0) prob.truth_full = gt;
  }
  return prob;
}

}  // namespace pnp
