// Patch-wise denoising: cropped patches reproduce the whole-image result when the overlap
// covers the receptive radius.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include "pnp_test.hpp"

#include "pnp/nn/models.hpp"
#include "pnp/nn/patch.hpp"

using namespace pnp;
using namespace pnp::nn;

namespace {
Graph make(std::string arch, int dim, std::vector<int64_t> f, int blocks = -1) {
  DenoiserSpec s;
  s.architecture = std::move(arch);
  s.dim = dim;
  s.features = std::move(f);
  s.blocks = blocks;
  return build(s);
}
at::Tensor rnd(std::vector<int64_t> s, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::empty(s, at::kDouble).uniform_(-1.0, 1.0, gen);
}
Weights weights64(const Graph& g) {
  Weights w = init_weights(g, 21);
  for (auto& [k, v] : w) v = v.to(at::kDouble);
  return w;
}
double max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }
}  // namespace

TEST_CASE("patch ranges tile every axis once, aligned") {
  for (int64_t size : {1, 7, 64, 100, 257})
    for (int64_t align : {1, 8})
      for (int64_t patch : {0, 40, 56, 300}) {
        const int64_t overlap = 9;
        if (patch > 0 && patch < size && (patch - 2 * ((overlap + align - 1) / align * align)) < align) continue;
        auto r = patch_ranges(size, patch, overlap, align);
        int64_t next = 0;
        for (const auto& p : r) {
          CHECK(p.out0 == next);
          CHECK(p.in0 <= p.out0);
          CHECK(p.in1 >= p.out1);
          CHECK(p.in0 % align == 0);
          CHECK((p.in0 == 0 || p.out0 - p.in0 >= overlap));
          CHECK((p.in1 == size || p.in1 - p.out1 >= overlap));
          CHECK((patch <= 0 || p.in1 - p.in0 <= std::max(patch, size < patch ? size : patch)));
          next = p.out1;
        }
        CHECK(next == size);
        // Aligned sizes: one input extent for every patch (one compiled shape).
        if (size % align == 0 && r.size() > 1)
          for (const auto& p : r) CHECK(p.in1 - p.in0 == r.front().in1 - r.front().in0);
      }
  CHECK_THROWS_WITH_AS(patch_ranges(100, 20, 9, 8), doctest::Contains("too small for an overlap"), InputError);
}

TEST_CASE("patched equals un-patched when overlap >= receptive radius") {
  struct Case {
    Graph g;
    std::vector<int64_t> shape;
    int64_t patch;
  };
  std::vector<Case> cases = {
      {make("dncnn", 2, {4}, 6), {1, 1, 40, 37}, 20},
      {make("drunet", 2, {2, 2, 3, 3}, 1), {1, 1, 150, 101}, 0},
      {make("unet", 2, {2, 3, 4}), {2, 1, 45, 52}, 0},
      {make("unet", 3, {2, 3}), {1, 1, 20, 22, 19}, 0},
      {make("dncnn", 3, {3}, 4), {1, 1, 13, 14, 15}, 10},
  };
  for (auto& c : cases) {
    const int64_t r = receptive_radius(c.g);
    const int64_t a = c.g.alignment();
    const int64_t ov = (r + a - 1) / a * a;
    const int64_t patch = c.patch > 0 ? c.patch : 2 * ov + 2 * a;  // several patches per axis
    INFO(c.g.architecture << " " << c.g.dim << "D radius " << r << " patch " << patch);
    auto ex = make_eager(c.g, weights64(c.g), at::kCPU, at::kDouble);
    CHECK(ex->receptive_radius() == r);
    at::Tensor x = rnd(c.shape, 22);
    at::Tensor whole = ex->forward(x, 0.1);
    at::Tensor patched = denoise_patched(*ex, x, 0.1, patch, r);
    REQUIRE(patched.sizes() == whole.sizes());
    CHECK(max_abs_diff(patched, whole) < 1e-11);
    CHECK(max_abs_diff(denoise_patched(*ex, x, 0.1, patch, -1), whole) < 1e-11);  // -1 = radius
    CHECK(max_abs_diff(denoise_patched(*ex, x, 0.1, 0, 0), whole) == 0.0);      // 0 = whole input
    // Too little overlap changes pixels: the test has teeth.
    if (a == 1) CHECK(max_abs_diff(denoise_patched(*ex, x, 0.1, patch, r / 2), whole) > 1e-8);
  }
}

TEST_CASE("the receptive radius is where an input change stops reaching the output") {
  // Perturb one input column and find the farthest output column that changes, for every
  // position modulo the alignment; it never exceeds the radius and reaches it for DnCNN.
  for (auto g : {make("dncnn", 2, {3}, 5), make("drunet", 2, {2, 2, 2, 2}, 1), make("unet", 2, {4, 4, 4})}) {
    auto ex = make_eager(g, weights64(g), at::kCPU, at::kDouble);
    const int64_t r = receptive_radius(g), a = g.alignment();
    at::Tensor x = rnd({1, 1, 8, 4 * r + 8 * a}, 23);
    at::Tensor y = ex->forward(x, 0.1);
    int64_t reach = 0;
    for (int64_t c = 2 * r; c < 2 * r + a; ++c) {
      at::Tensor xp = x.clone();
      xp.select(3, c).add_(1.0);
      at::Tensor changed = ((ex->forward(xp, 0.1) - y).abs().amax({0, 1, 2}) > 0).nonzero();
      const int64_t lo = changed.min().item<int64_t>(), hi = changed.max().item<int64_t>();
      reach = std::max({reach, c - lo, hi - c});
    }
    INFO(g.architecture << " radius " << r << " measured reach " << reach);
    CHECK(reach <= r);
    if (a == 1) CHECK(reach == r);
    CHECK(reach >= r - 2 * a);
  }
}
