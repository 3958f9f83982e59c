// The eager executor against hand-written ATen calls, float64 against float32, CPU against CUDA.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include "pnp_test.hpp"

#include "pnp/nn/executor.hpp"
#include "pnp/nn/models.hpp"
#include "nn_test_util.hpp"

using namespace pnp;
using namespace pnp::nn;

namespace {
using nn::test::make;

// Seeded weights with non-trivial batch-norm statistics, in float64.
Weights random_weights(const Graph& g, uint64_t seed) {
  Weights w = test::random_weights(g, seed);
  for (auto& [k, v] : w) v = v.to(at::kDouble);
  return w;
}
using test::rnd;

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kCPU, at::kDouble) - b.to(at::kCPU, at::kDouble)).abs().max().item<double>();
}
double max_abs(const at::Tensor& a) { return a.abs().max().item<double>(); }

const at::Tensor& W(const Weights& w, const std::string& k) { return w.at(k); }
}  // namespace

TEST_CASE("eager DnCNN equals hand-written ATen calls") {
  Graph g = make("dncnn", 2, 2, 2, {5}, 4);
  Weights w = random_weights(g, 1);
  at::Tensor x = rnd({2, 2, 11, 9}, 2);
  at::Tensor h = at::relu(at::conv2d(x, W(w, "in_conv.weight"), W(w, "in_conv.bias"), 1, 1));
  for (int i = 0; i < 2; ++i) {
    const std::string k = "conv_list." + std::to_string(i);
    h = at::relu(at::conv2d(h, W(w, k + ".weight"), W(w, k + ".bias"), 1, 1));
  }
  at::Tensor ref = at::conv2d(h, W(w, "out_conv.weight"), W(w, "out_conv.bias"), 1, 1) + x;
  auto ex = make_eager(g, w, at::kCPU, at::kDouble);
  CHECK(ex->name() == "eager");
  at::Tensor y = ex->forward(x, 0.1);
  CHECK((y.scalar_type() == at::kDouble));
  CHECK(y.sizes() == x.sizes());
  CHECK(max_abs_diff(y, ref) < 1e-12);
  CHECK(max_abs_diff(y, x) > 1e-3);  // the net does something
  CHECK(max_abs_diff(ex->forward(x, 0.7), y) == 0.0);  // sigma is ignored
  CHECK(max_abs(x) > 0.5);  // the input was not modified in place
  CHECK(max_abs_diff(x, rnd({2, 2, 11, 9}, 2)) == 0.0);
}

TEST_CASE("eager DRUNet equals hand-written ATen calls, with padding") {
  const int nb = 1;
  Graph g = make("drunet", 2, 1, 1, {2, 3, 4, 5}, nb);
  Weights w = random_weights(g, 3);
  at::Tensor x = rnd({1, 1, 13, 10}, 4);
  const double sigma = 0.25;
  auto res = [&](const at::Tensor& t, const std::string& m) {
    at::Tensor r = at::conv2d(t, W(w, m + ".res.0.weight"), at::Tensor(), {1, 1}, {1, 1});
    r = at::conv2d(at::relu(r), W(w, m + ".res.2.weight"), at::Tensor(), {1, 1}, {1, 1});
    return t + r;
  };
  at::Tensor x0 = at::cat({x, at::full({1, 1, 13, 10}, sigma, x.options())}, 1);
  x0 = at::replication_pad2d(x0, {0, 6, 0, 3});  // to 16 x 16
  at::Tensor x1 = at::conv2d(x0, W(w, "m_head.weight"), at::Tensor(), {1, 1}, {1, 1});
  at::Tensor x2 = at::conv2d(res(x1, "m_down1.0"), W(w, "m_down1.1.weight"), at::Tensor(), std::vector<int64_t>{2, 2}, std::vector<int64_t>{0, 0});
  at::Tensor x3 = at::conv2d(res(x2, "m_down2.0"), W(w, "m_down2.1.weight"), at::Tensor(), std::vector<int64_t>{2, 2}, std::vector<int64_t>{0, 0});
  at::Tensor x4 = at::conv2d(res(x3, "m_down3.0"), W(w, "m_down3.1.weight"), at::Tensor(), std::vector<int64_t>{2, 2}, std::vector<int64_t>{0, 0});
  at::Tensor t = res(x4, "m_body");  // deepinv's name of a lone body block (nb = 1)
  t = res(at::conv_transpose2d(t + x4, W(w, "m_up3.0.weight"), at::Tensor(), {2, 2}), "m_up3.1");
  t = res(at::conv_transpose2d(t + x3, W(w, "m_up2.0.weight"), at::Tensor(), {2, 2}), "m_up2.1");
  t = res(at::conv_transpose2d(t + x2, W(w, "m_up1.0.weight"), at::Tensor(), {2, 2}), "m_up1.1");
  t = at::conv2d(t + x1, W(w, "m_tail.weight"), at::Tensor(), {1, 1}, {1, 1});
  at::Tensor ref = t.narrow(2, 0, 13).narrow(3, 0, 10);
  auto ex = make_eager(g, w, at::kCPU, at::kDouble);
  at::Tensor y = ex->forward(x, sigma);
  CHECK(y.sizes() == x.sizes());
  CHECK(max_abs_diff(y, ref) < 1e-12);
  CHECK(max_abs(ref) > 1e-3);
  CHECK(max_abs_diff(ex->forward(x, 0.5), y) > 1e-6);  // sigma matters
  CHECK(ex->alignment() == 8);
}

TEST_CASE("eager UNet equals hand-written ATen calls, with batch norm and padding") {
  Graph g = make("unet", 2, 1, 1, {3, 4});
  Weights w = random_weights(g, 5);
  at::Tensor x = rnd({2, 1, 7, 9}, 6);
  auto bn = [&](const at::Tensor& t, const std::string& m) {
    return at::batch_norm(t, W(w, m + ".weight"), W(w, m + ".bias"), W(w, m + ".running_mean"),
                          W(w, m + ".running_var"), false, 0.1, 1e-5, false);
  };
  auto block = [&](const at::Tensor& t, const std::string& m) {
    at::Tensor h = at::relu(bn(at::conv2d(t, W(w, m + ".0.weight"), W(w, m + ".0.bias"), 1, 1), m + ".1"));
    return at::relu(bn(at::conv2d(h, W(w, m + ".3.weight"), W(w, m + ".3.bias"), 1, 1), m + ".4"));
  };
  at::Tensor xp = at::replication_pad2d(x, {0, 1, 0, 1});  // to 8 x 10
  at::Tensor e1 = block(xp, "Conv1");
  at::Tensor e2 = block(at::max_pool2d(e1, 2, 2), "Conv2");
  at::Tensor u = at::upsample_nearest2d(e2, {8, 10});
  u = at::relu(bn(at::conv2d(u, W(w, "Up2.1.weight"), W(w, "Up2.1.bias"), 1, 1), "Up2.2"));
  u = block(at::cat({e1, u}, 1), "Up_conv2");
  at::Tensor ref = (at::conv2d(u, W(w, "Conv_1x1.weight"), W(w, "Conv_1x1.bias")) + xp).narrow(2, 0, 7).narrow(3, 0, 9);
  auto ex = make_eager(g, w, at::kCPU, at::kDouble);
  at::Tensor y = ex->forward(x, 0.1);
  CHECK(y.sizes() == x.sizes());
  CHECK(max_abs_diff(y, ref) < 1e-12);
  CHECK(max_abs_diff(y, x) > 1e-3);
}

TEST_CASE("eager float32 agrees with float64 in 2D and 3D for every architecture") {
  struct Case {
    Graph g;
    std::vector<int64_t> shape;
  };
  std::vector<Case> cases = {
      {make("dncnn", 2, 3, 3, {8}, 6), {2, 3, 21, 18}},
      {make("drunet", 2, 3, 3, {4, 6, 8, 8}, 2), {1, 3, 27, 33}},
      {make("unet", 2, 1, 1, {4, 6, 8}), {1, 1, 30, 17}},
      {make("dncnn", 3, 1, 1, {4}, 4), {1, 1, 9, 10, 11}},
      {make("drunet", 3, 1, 1, {2, 3, 4, 4}, 1), {1, 1, 9, 17, 12}},
      {make("unet", 3, 2, 2, {3, 4}), {1, 2, 7, 6, 5}},
      {make("identity", 3, 2, 2), {1, 2, 3, 4, 5}},
  };
  for (auto& c : cases) {
    INFO(c.g.architecture << " " << c.g.dim << "D");
    Weights w = random_weights(c.g, 7);
    at::Tensor x = rnd(c.shape, 8);
    at::Tensor y64 = make_eager(c.g, w, at::kCPU, at::kDouble)->forward(x, 0.1);
    at::Tensor y32 = make_eager(c.g, w, at::kCPU, at::kFloat)->forward(x.to(at::kFloat), 0.1);
    CHECK((y32.scalar_type() == at::kFloat));
    CHECK(y32.sizes().vec() == infer_output_shape(c.g, c.shape));
    CHECK(max_abs_diff(y32, y64) < 1e-5 * std::max(1.0, max_abs(y64)));
    CHECK(bool(at::isfinite(y64).all().item<bool>()));
    if (c.g.architecture == "identity") {
      CHECK(max_abs_diff(y64, x) == 0.0);
      CHECK_FALSE(y64.is_same(x));
    }
  }
}

TEST_CASE("eager rejects bad inputs and weights") {
  Graph g = make("dncnn", 2, 1, 1, {4}, 3);
  Weights w = random_weights(g, 9);
  auto ex = make_eager(g, w, at::kCPU, at::kFloat);
  CHECK_THROWS_AS(ex->forward(at::ones({1, 3, 8, 8}), 0.1), InputError);
  CHECK_THROWS_AS(ex->forward(at::ones({8, 8}), 0.1), InputError);
  Weights bad = w;
  bad.erase("out_conv.bias");
  CHECK_THROWS_WITH_AS(make_eager(g, bad, at::kCPU, at::kFloat), doctest::Contains("missing keys (1): out_conv.bias"),
                       InputError);
  CHECK_THROWS_AS(make_eager(g, w, at::kCPU, at::kHalf), InputError);
}

TEST_CASE("eager on CUDA agrees with CPU" * doctest::skip(!at::hasCUDA())) {
  struct Case {
    Graph g;
    std::vector<int64_t> shape;
  };
  std::vector<Case> cases = {
      {make("dncnn", 2, 3, 3), {1, 3, 96, 80}},
      {make("drunet", 2, 1, 1), {1, 1, 77, 64}},
      {make("unet", 2, 1, 1), {2, 1, 64, 50}},
      {make("drunet", 3, 1, 1, {8, 16, 32, 64}, 2), {1, 1, 16, 20, 17}},
      {make("unet", 3, 1, 1, {8, 16, 32}), {1, 1, 12, 16, 9}},
  };
  for (auto& c : cases) {
    INFO(c.g.architecture << " " << c.g.dim << "D");
    Weights w = random_weights(c.g, 11);
    at::Tensor x = rnd(c.shape, 12);
    at::Tensor ref = make_eager(c.g, w, at::kCPU, at::kDouble)->forward(x, 0.1);
    at::Tensor y64 = make_eager(c.g, w, at::Device(at::kCUDA, 0), at::kDouble)->forward(x, 0.1);
    at::Tensor y32 = make_eager(c.g, w, at::Device(at::kCUDA, 0), at::kFloat)->forward(x.to(at::kFloat), 0.1);
    CHECK(y64.is_cuda());
    const double scale = std::max(1.0, max_abs(ref));
    CHECK(max_abs_diff(y64, ref) < 1e-9 * scale);
    // cuDNN may use TF32 for float32 convolutions (PyTorch's default), hence the looser bound.
    CHECK(max_abs_diff(y32, ref) < 2e-2 * scale);
    MESSAGE(c.g.architecture << " " << c.g.dim << "D CUDA fp64 vs CPU fp64: " << max_abs_diff(y64, ref)
                             << ", CUDA fp32 vs CPU fp64: " << max_abs_diff(y32, ref) << " (scale " << scale << ")");
  }
}
