// Distributed power method for ||A^T A||.
#include <pnp/physics.hpp>

#include <cmath>

namespace pnp::physics {

at::Tensor power_start(const Box& box, int64_t n, uint64_t seed) {
  auto x = at::empty({std::max<int64_t>(box.rows(), 0), std::max<int64_t>(box.cols(), 0)}, at::kDouble);
  auto* p = x.data_ptr<double>();
  const uint64_t key = splitmix64(seed ^ 0x5DEECE66Dull);
  for (int64_t r = 0; r < box.rows(); ++r)
    for (int64_t c = 0; c < box.cols(); ++c) {
      const uint64_t idx = static_cast<uint64_t>((box.r0 + r) * n + (box.c0 + c));
      const uint64_t h = splitmix64(key + idx * 0xD1B54A32D192ED03ull);
      p[r * box.cols() + c] = static_cast<double>(h >> 11) * 0x1.0p-53;
    }
  return x;
}

PowerResult operator_norm_detailed(const Geometry& g, const Box& box,
                                   const std::function<void(at::Tensor&)>& allreduce_sum,
                                   const PowerOptions& opt, at::Device device, at::ScalarType dtype) {
  g.validate();
  if (opt.max_iterations < 1) throw InputError("operator_norm: max_iterations must be >= 1");
  if (!(opt.tol >= 0)) throw InputError("operator_norm: tol must be >= 0");
  if (dtype != at::kFloat && dtype != at::kDouble) throw Error("operator_norm: dtype must be float32 or float64");
  const auto opts = at::TensorOptions().dtype(dtype).device(device);
  const int64_t K = g.n_angles();
  // Global sums of a few scalars ride in a [K, n_det] buffer through the same allreduce.
  auto reduce2 = [&](double a, double b) {
    auto host = at::zeros({K, g.n_det}, at::TensorOptions().dtype(at::kDouble));
    host.view({-1})[0] = a;
    if (K * g.n_det > 1) host.view({-1})[1] = b;
    auto buf = host.to(opts);
    allreduce_sum(buf);
    auto back = buf.to(at::kCPU, at::kDouble).view({-1});
    return std::pair<double, double>{back[0].item<double>(), K * g.n_det > 1 ? back[1].item<double>() : 0.0};
  };

  at::Tensor x = power_start(box, g.n, opt.seed).to(opts);
  {
    const double local = box.empty() ? 0.0 : x.to(at::kDouble).square().sum().item<double>();
    const double total = reduce2(local, 0.0).first;
    if (!(total > 0)) throw Error("operator_norm: zero start vector (empty image?)");
    x.div_(std::sqrt(total));
  }
  at::Tensor p = at::empty({K, g.n_det}, opts);
  at::Tensor z = at::empty({box.rows(), box.cols()}, opts);
  PowerResult res;
  double prev = 0.0;
  for (int it = 1; it <= opt.max_iterations; ++it) {
    res.iterations = it;
    if (box.empty())
      p.zero_();
    else
      forward_out(x, g, box, p);
    allreduce_sum(p);  // p = A x (global), ||x|| = 1
    const double lambda = p.to(at::kDouble).square().sum().item<double>();  // x^T A^T A x
    res.norm = lambda;
    if (!box.empty()) adjoint_out(p, g, box, z);
    const double local_z = box.empty() ? 0.0 : z.to(at::kDouble).square().sum().item<double>();
    const double conv_local = (it > 1 && std::fabs(lambda - prev) <= opt.tol * lambda) ? 1.0 : 0.0;
    const auto [zz, conv] = reduce2(local_z, conv_local);
    if (conv > 0.5) {  // any rank converged -> all stop together (the flag sum is exact)
      res.converged = true;
      break;
    }
    if (!(zz > 0)) throw Error("operator_norm: A^T A x vanished");
    if (!box.empty()) x = z / std::sqrt(zz);
    prev = lambda;
  }
  return res;
}

double operator_norm(const Geometry& g, const Box& box, const std::function<void(at::Tensor&)>& allreduce_sum,
                     const PowerOptions& opt, at::Device device, at::ScalarType dtype) {
  return operator_norm_detailed(g, box, allreduce_sum, opt, device, dtype).norm;
}

}  // namespace pnp::physics
