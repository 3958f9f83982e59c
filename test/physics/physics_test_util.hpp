// Helpers shared by the physics tests.
#pragma once

#include <pnp/physics.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

namespace pnp::physics::test {

inline double dot64(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kCPU, at::kDouble) * b.to(at::kCPU, at::kDouble)).sum().item<double>();
}
inline double norm64(const at::Tensor& a) { return a.to(at::kCPU, at::kDouble).norm().item<double>(); }
inline double rel_err(const at::Tensor& a, const at::Tensor& ref) {
  return norm64(a.to(at::kCPU, at::kDouble) - ref.to(at::kCPU, at::kDouble)) / std::max(norm64(ref), 1e-300);
}
inline double max_rel(const at::Tensor& a, const at::Tensor& ref) {
  auto A = a.to(at::kCPU, at::kDouble), R = ref.to(at::kCPU, at::kDouble);
  return (A - R).abs().max().item<double>() / std::max(R.abs().max().item<double>(), 1e-300);
}

// |<Ax, y> - <x, A^T y>| / (|Ax| |y|) over the box.
inline double adjointness(const at::Tensor& x, const at::Tensor& y, const Geometry& g, const Box& box) {
  auto Ax = forward(x, g, box);
  auto Aty = adjoint(y, g, box);
  return std::fabs(dot64(Ax, y) - dot64(x, Aty)) / (norm64(Ax) * norm64(y));
}

inline Geometry make_geometry(int64_t n, int64_t n_det, std::vector<double> angles) {
  Geometry g;
  g.n = n;
  g.n_det = n_det;
  g.angles_deg = std::move(angles);
  return g;
}

// Row slabs (uneven split) and 2-D grids of an n x n image.
inline std::vector<Box> grid_boxes(int64_t n, int pr, int pc) {
  std::vector<Box> boxes;
  for (int a = 0; a < pr; ++a)
    for (int b = 0; b < pc; ++b)
      boxes.push_back(Box{n * a / pr, n * (a + 1) / pr, n * b / pc, n * (b + 1) / pc});
  return boxes;
}

inline at::Tensor slice_box(const at::Tensor& img, const Box& b) {
  return img.slice(0, b.r0, b.r1).slice(1, b.c0, b.c1);
}

// Power-method options for a norm to ~1e-9: tolerance 1e-11, at most 400 iterations.
inline PowerOptions tight_power_options(uint64_t seed) {
  PowerOptions po;
  po.tol = 1e-11;
  po.max_iterations = 400;
  po.seed = seed;
  return po;
}

// ||A^T A|| of g on one rank (the whole image, no reduction), in double precision.
inline double single_rank_norm(const Geometry& g, const PowerOptions& po) {
  return operator_norm(g, g.full_box(), [](at::Tensor&) {}, po, at::kCPU, at::kDouble);
}

}  // namespace pnp::physics::test
