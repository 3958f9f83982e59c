// The native backend against the eager executor: every architecture, 2D and 3D, float64 and
// float32, with the expected fusions; shape checks; buffer reuse across calls; sigma at run
// time; options off; a hand-made conv+add+relu graph. CUDA cases run when a GPU is present.
#include <cstdlib>
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include "pnp_test.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <unistd.h>

#include "pnp/nn/executor.hpp"
#include "pnp/nn/models.hpp"
#include "nn_test_util.hpp"
#include "ir_graphs.hpp"
#include "pnp/nn/native.hpp"
#include "native/upsample_conv.hpp"
#ifdef PNP_HAVE_CUDA
#include "native/narrow_conv.hpp"
#include "native/cuda/narrow_conv_kernels.hpp"
#include "native/nhwc_ops.hpp"
#include "native/capture.hpp"
#include "native/transposed_gemm.hpp"
#ifdef PNP_HAVE_CUDNN_FE
#include <ATen/cuda/CUDAContext.h>

#include "native/cudnn_epilogue.hpp"
#include "pnp/nn/fp8.hpp"
#endif
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#ifdef PNP_HAVE_WGMMA_CONV
#include <ATen/cuda/CUDAContext.h>

#include "native/wgmma_conv.hpp"
#include "pnp/nn/fp8.hpp"
#endif
#endif

using namespace pnp;
using namespace pnp::nn;
namespace fs = std::filesystem;

namespace {
using namespace test::names;  // make (same channels), random_weights, rnd

// Whether a CUDA device is present; without one, the message that the case's CUDA checks are skipped.
bool has_cuda() {
  if (at::hasCUDA()) return true;
  MESSAGE("no CUDA device: CUDA cases skipped");
  return false;
}

// Each case of a convolution kernel's test: float32 and bf16, each K of ks, each variant (0:
// plain; 1: + bias, ReLU; 2: + bias + residual); the body captures its K's fields.
template <class K, class F>
void for_conv_cases(const std::vector<K>& ks, F&& body) {
  for (auto dtype : {at::kFloat, at::kBFloat16})
    for (const K& k : ks)
      for (int variant = 0; variant < 3; ++variant) {
        CAPTURE(c10::toString(dtype));
        CAPTURE(variant);
        body(dtype, k, variant);
      }
}

double rel_err(const at::Tensor& a, const at::Tensor& ref) {
  at::Tensor x = a.to(at::kCPU, at::kDouble), r = ref.to(at::kCPU, at::kDouble);
  return (x - r).norm().item<double>() / std::max(r.norm().item<double>(), 1e-300);
}

std::map<std::string, int> count_patterns(const std::vector<std::string>& fusions) {
  std::map<std::string, int> m;
  for (const auto& f : fusions) ++m[f.substr(0, f.find(':'))];
  return m;
}

// The phase convolution's output p ([n, 4c, h + 1, w + 1], upsample_conv_phase_weight) to the
// ×2 upsample convolution's [n, c, 2h, 2w], with ATen's slicing: the reference for pnp's shuffle.
at::Tensor phase_shuffle_ref(const at::Tensor& p) {
  const int64_t c = p.size(1) / 4, h = p.size(2) - 1, w = p.size(3) - 1;
  at::Tensor y = at::empty({p.size(0), c, 2 * h, 2 * w}, p.options().memory_format(at::MemoryFormat::Contiguous));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 2; ++b)
      y.slice(2, a, at::nullopt, 2).slice(3, b, at::nullopt, 2).copy_(p.narrow(1, (2 * a + b) * c, c).narrow(2, a, h).narrow(3, b, w));
  return y;
}

struct Case {
  std::string arch;
  int dim;
  int channels;
  std::vector<int64_t> features;
  int blocks;
  std::vector<int64_t> shape;
  std::map<std::string, int> expected;  // pattern -> count
};

std::vector<Case> cases() {
  // DnCNN depth 4: three conv+bias+relu, out_conv + residual -> conv+bias+add.
  // DRUNet nb = 1: 7 ResBlocks, each conv+relu (res.0) and conv+add (res.2 + x); no ReLU after
  //   any add, so never conv+add+relu; the skip adds read multi-use convs (no fusion into them);
  //   the last (x + x1) folds into the tail conv, its only reader (add+conv).
  // UNet 2 scales: 3 blocks x 2 convs = 6 conv+bn+relu, the up conv with the ×2 upsample
  //   before it as one transposed conv and the concat after it (upsample+conv+bn+relu+concat),
  //   Conv_1x1 + residual.
  return {
      {"dncnn", 2, 3, {6}, 4, {2, 3, 13, 10}, {{"conv+bias+relu", 3}, {"conv+bias+add", 1}}},
      {"dncnn", 3, 1, {4}, 4, {1, 1, 7, 6, 5}, {{"conv+bias+relu", 3}, {"conv+bias+add", 1}}},
      {"drunet", 2, 3, {2, 3, 4, 5}, 1, {1, 3, 13, 10}, {{"conv+relu", 7}, {"conv+add", 7}, {"add+conv", 1}}},
      {"drunet", 3, 1, {2, 3, 3, 4}, 1, {1, 1, 9, 8, 10}, {{"conv+relu", 7}, {"conv+add", 7}, {"add+conv", 1}}},
      {"unet", 2, 3, {3, 4}, -1, {2, 3, 7, 9}, {{"conv+bn+relu", 6}, {"upsample+conv+bn+relu+concat", 1}, {"conv+bias+add", 1}}},
      {"unet", 3, 1, {2, 3}, -1, {1, 1, 5, 6, 4}, {{"conv+bn+relu", 6}, {"upsample+conv+bn+relu+concat", 1}, {"conv+bias+add", 1}}},
  };
}

// A case's graph, random weights (seed), input (seed + 1) and the float64 CPU eager output at
// sigma, the reference every comparison below is made against.
struct Prepared {
  Graph g;
  Weights w;
  at::Tensor x, ref64;
};
Prepared prepare(const Case& c, uint64_t seed, double sigma) {
  Prepared p{make(c.arch, c.dim, c.channels, c.features, c.blocks), {}, {}, {}};
  p.w = random_weights(p.g, seed);
  p.x = rnd(c.shape, seed + 1);
  p.ref64 = make_eager(p.g, p.w, at::kCPU, at::kDouble)->forward(p.x, sigma);
  return p;
}
#ifdef PNP_HAVE_CUDA
// One case of pnp's own CUDA convolutions (the narrow and Hopper kernels): n images of ci
// channels, h x w, a k x k kernel to co channels, padding pad; variant 0 plain, 1 + bias and
// ReLU, 2 + bias + residual. The inputs are rounded to the dtype first, so the float64
// reference (ref, on the CPU) sees the same values; x, w and z channels-last on the GPU.
struct ConvCase {
  at::Tensor x, w, b, z, ref;
  bool relu = false;
  int variant = 0;
  const at::Tensor* bias() const { return variant > 0 ? &b : nullptr; }
  const at::Tensor* residual() const { return variant == 2 ? &z : nullptr; }
};
ConvCase conv_case(at::ScalarType dtype, int64_t n, int64_t ci, int64_t co, int64_t k, int64_t pad, int64_t h, int64_t w,
                   int variant, uint64_t& seed) {
  const at::Device dev(at::kCUDA, 0);
  const int64_t oh = h + 2 * pad - k + 1, ow = w + 2 * pad - k + 1;
  auto dev_t = [&](const std::vector<int64_t>& sz, bool nhwc) {
    at::Tensor t = rnd(sz, ++seed).to(dtype);
    return nhwc ? t.to(dev).contiguous(at::MemoryFormat::ChannelsLast) : t.to(dev).contiguous();
  };
  ConvCase c;
  c.x = dev_t({n, ci, h, w}, true), c.w = dev_t({co, ci, k, k}, true);
  c.b = dev_t({co}, false), c.z = dev_t({n, co, oh, ow}, true);
  c.relu = variant == 1, c.variant = variant;
  auto d = [](const at::Tensor& t) { return t.to(at::kCPU, at::kDouble).contiguous(); };
  c.ref = at::conv2d(d(c.x), d(c.w), variant > 0 ? d(c.b) : at::Tensor(), 1, pad);
  if (variant == 2) c.ref = c.ref + d(c.z);
  if (c.relu) c.ref = at::relu(c.ref);
  return c;
}
// A network with pnp's own kernels (nat) against the float64 reference and against the same
// network without them (other, cuDNN), on xin; then nat replayed in its CUDA graph on another
// input (seed) against float64. Tolerances: TF32 in float32, bf16's rounding.
void check_net_kernels(NativeExecutor& nat, NativeExecutor& other, const Graph& g, const Weights& wts,
                       const std::vector<int64_t>& shape, const at::Tensor& xin, const at::Tensor& ref64,
                       at::ScalarType dtype, uint64_t seed) {
  const at::Tensor y = nat.forward(xin, 0.2), yo = other.forward(xin, 0.2);
  const double tol = dtype == at::kFloat ? 5e-3 : 2e-2;
  MESSAGE("  rel err to float64: pnp's kernels " << rel_err(y, ref64) << ", cuDNN " << rel_err(yo, ref64));
  CHECK(rel_err(y, ref64) < tol);
  CHECK(rel_err(y, yo) < tol);
  CHECK(ref64.abs().max().item<double>() > 1e-3);  // content (random DRUNet outputs are small)
  CHECK(y.abs().max().item<double>() > 0.5 * ref64.abs().max().item<double>());
  const at::Tensor x2 = rnd(shape, seed);
  CHECK(rel_err(nat.forward(x2.to(at::Device(at::kCUDA, 0)), 0.05),
                make_eager(g, wts, at::kCPU, at::kDouble)->forward(x2, 0.05)) < tol);
}
#endif
}  // namespace

TEST_CASE("native equals eager on CPU (float64, float32), with the expected fusions") {
  for (const auto& c : cases()) {
    CAPTURE(c.arch);
    CAPTURE(c.dim);
    Graph g = make(c.arch, c.dim, c.channels, c.features, c.blocks);
    Weights w = random_weights(g, 11);
    at::Tensor x = rnd(c.shape, 12);
    for (auto dtype : {at::kDouble, at::kFloat}) {
      CAPTURE(c10::toString(dtype));
      auto eager = make_eager(g, w, at::kCPU, dtype);
      auto nat = make_native(g, w, at::kCPU, dtype, c.shape);
      CHECK(nat->name() == "native");
      CHECK(nat->compile_seconds() >= 0.0);
      CHECK_FALSE(nat->graph_captured());
      CHECK(count_patterns(nat->fusions()) == c.expected);
      CHECK(nat->alignment() == eager->alignment());
      CHECK(nat->receptive_radius() == eager->receptive_radius());
      const double tol = dtype == at::kDouble ? 1e-12 : 2e-5;
      at::Tensor ref = eager->forward(x, 0.2);
      at::Tensor y = nat->forward(x, 0.2);
      CHECK(y.sizes() == x.sizes());
      CHECK((y.scalar_type() == dtype));
      CHECK(y.is_contiguous());
      CHECK(rel_err(y, ref) < tol);
      // A second input through the same (reused) buffers; the first result is untouched.
      at::Tensor x2 = rnd(c.shape, 13);
      at::Tensor y_copy = y.clone();
      at::Tensor y2 = nat->forward(x2, 0.05);
      CHECK(rel_err(y2, eager->forward(x2, 0.05)) < tol);
      CHECK(rel_err(y, y_copy) == 0.0);
      CHECK(rel_err(y2, y) > 1e-3);
    }
  }
}

TEST_CASE("bf16: eager and native agree with the float64 reference to bf16 rounding (CPU)") {
  // bf16 keeps 8 significand bits (unit roundoff 2^-9 ~ 2e-3 per rounding); activations and
  // weights are rounded at every layer, accumulation is fp32. The relative L2 error of these
  // 4-7-layer-deep random networks measures 2.4e-3 to 4.0e-3 (CPU, oneDNN); the two executors
  // round differently (BN folding, in-place epilogues), so they agree with each other to the
  // same order, not bitwise.
  for (const auto& c : cases()) {
    CAPTURE(c.arch);
    CAPTURE(c.dim);
    const auto [g, w, x, ref] = prepare(c, 31, 0.2);
    auto eager = make_eager(g, w, at::kCPU, at::kBFloat16);
    auto nat = make_native(g, w, at::kCPU, at::kBFloat16, c.shape);
    CHECK(count_patterns(nat->fusions()) == c.expected);
    at::Tensor ye = eager->forward(x, 0.2), yn = nat->forward(x, 0.2);
    CHECK((ye.scalar_type() == at::kBFloat16));
    CHECK((yn.scalar_type() == at::kBFloat16));
    const double ee = rel_err(ye, ref), en = rel_err(yn, ref);
    MESSAGE(c.arch << " " << c.dim << "D bf16: rel err eager " << ee << ", native " << en);
    CHECK(ee < 1e-2);
    CHECK(en < 1e-2);
    CHECK(ee > 0.0);  // really computed in bf16, not silently in float32
    CHECK(rel_err(yn, ye) < 1.5e-2);
  }
}

TEST_CASE("native: sigma is a runtime value (DRUNet)") {
  Graph g = make("drunet", 2, 1, {2, 3, 4, 5}, 1);
  Weights w = random_weights(g, 3);
  at::Tensor x = rnd({1, 1, 16, 16}, 4);
  auto eager = make_eager(g, w, at::kCPU, at::kDouble);
  auto nat = make_native(g, w, at::kCPU, at::kDouble, {1, 1, 16, 16});
  at::Tensor a = nat->forward(x, 0.1), b = nat->forward(x, 0.7);
  CHECK(rel_err(a, b) > 1e-6);
  CHECK(rel_err(b, eager->forward(x, 0.7)) < 1e-12);
  CHECK(rel_err(nat->forward(x, 0.1), a) == 0.0);
}

TEST_CASE("native: the FP8 candidates are the stride-1 convolutions of 64-multiple channels (fp8_conv_candidates)") {
  // DRUNet at its study widths: the 56 residual-block convolutions (28 blocks x 2); not the head
  // (2 inputs), the tail (1 output), the three strided downs or the three transposed ups
  const Graph d = make("drunet", 2, 1, {64, 128, 256, 512}, 4);
  const std::vector<int> c = fp8_conv_candidates(d);
  CHECK(c.size() == 56);
  int convs = 0;
  for (const Node& n : d.nodes) {
    if (n.op != OpKind::conv && n.op != OpKind::conv_transpose) continue;
    ++convs;
    const bool in = std::find(c.begin(), c.end(), n.id) != c.end();
    const bool wide = n.attrs.in_channels % 64 == 0 && n.attrs.out_channels % 64 == 0;
    const bool plain = n.op == OpKind::conv && n.attrs.stride == std::vector<int64_t>{1, 1};
    INFO(n.name);
    CHECK(in == (wide && plain));
  }
  CHECK(convs == 56 + 2 + 3 + 3);
  // DnCNN at 64 features: the middle layers (64 -> 64), not the first (1 in) or the last (1 out)
  CHECK(fp8_conv_candidates(make("dncnn", 2, 1, {64}, 6)).size() == 4);
  // narrower networks, and 3D ones, have none
  CHECK(fp8_conv_candidates(make("drunet", 2, 1, {2, 3, 4, 5}, 1)).empty());
  CHECK(fp8_conv_candidates(make("dncnn", 3, 1, {64}, 4)).empty());
  // and without a Hopper GPU there is no FP8 to run
  CHECK_FALSE(native_has_fp8(at::kCPU, NativeOptions{}));
}

TEST_CASE("native rejects another input shape and bad arguments") {
  Graph g = make("dncnn", 2, 1, {4}, 3);
  Weights w = random_weights(g, 1);
  auto nat = make_native(g, w, at::kCPU, at::kFloat, {1, 1, 8, 8});
  CHECK(nat->input_shape() == std::vector<int64_t>{1, 1, 8, 8});
  CHECK_THROWS_AS(nat->forward(rnd({1, 1, 8, 9}, 1), 0.1), InputError);
  CHECK_THROWS_WITH_AS(nat->forward(rnd({2, 1, 8, 8}, 1), 0.1),
                       doctest::Contains("compiled for input shape [1, 1, 8, 8], got [2, 1, 8, 8]"), InputError);
  CHECK_THROWS_AS(make_native(g, w, at::kCPU, at::kFloat, {1, 2, 8, 8}), InputError);   // channels
  CHECK_THROWS_AS(make_native(g, w, at::kCPU, at::kFloat, {1, 1, 8}), InputError);      // rank
  CHECK_THROWS_AS(make_native(g, w, at::kCPU, at::kHalf, {1, 1, 8, 8}), InputError);    // dtype
  Weights bad = w;
  bad.erase("in_conv.weight");
  CHECK_THROWS_AS(make_native(g, bad, at::kCPU, at::kFloat, {1, 1, 8, 8}), InputError);
  // A float32 CPU input to a float64 executor is converted, like the eager executor does.
  auto nat64 = make_native(g, w, at::kCPU, at::kDouble, {1, 1, 8, 8});
  CHECK((nat64->forward(rnd({1, 1, 8, 8}, 2).to(at::kFloat), 0.1).scalar_type() == at::kDouble));
}

TEST_CASE("native: options off still equal eager; BN is always folded") {
  Graph g = make("unet", 2, 1, {3, 4});
  Weights w = random_weights(g, 5);
  at::Tensor x = rnd({1, 1, 12, 8}, 6);
  at::Tensor ref = make_eager(g, w, at::kCPU, at::kDouble)->forward(x, 0.1);
  for (bool cl : {false, true})
    for (int fuse : {0, 1, 2}) {  // 2: fuse without the upsample folded into its conv
      CAPTURE(cl);
      CAPTURE(fuse);
      NativeOptions o;
      o.channels_last = cl;
      o.fuse = fuse > 0;
      o.upsample_conv = fuse == 1;
      auto nat = make_native(g, w, at::kCPU, at::kDouble, {1, 1, 12, 8}, o);
      CHECK(rel_err(nat->forward(x, 0.1), ref) < 1e-12);
      auto m = count_patterns(nat->fusions());
      if (fuse == 1)
        CHECK(m == std::map<std::string, int>{{"conv+bn+relu", 6}, {"upsample+conv+bn+relu+concat", 1}, {"conv+bias+add", 1}});
      else if (fuse == 2)
        CHECK(m == std::map<std::string, int>{{"conv+bn+relu", 7}, {"conv+bias+add", 1}});
      else
        CHECK(m == std::map<std::string, int>{{"conv+bn", 7}});
    }
}

TEST_CASE("native: a ×2 nearest upsample and its 3×3 conv as one transposed conv (float64)") {
  // The derived weight against the pair it replaces, directly: 2D and 3D, C_in != C_out, odd
  // sizes (the border rows), with a bias. (The whole UNet through the executor: the cases above.)
  for (int dim : {2, 3}) {
    CAPTURE(dim);
    const std::vector<int64_t> ws = dim == 2 ? std::vector<int64_t>{5, 3, 3, 3} : std::vector<int64_t>{4, 3, 3, 3, 3};
    const std::vector<int64_t> xs = dim == 2 ? std::vector<int64_t>{2, 3, 5, 7} : std::vector<int64_t>{1, 3, 3, 4, 5};
    at::Tensor w = rnd(ws, 21 + dim), b = rnd({ws[0]}, 22), x = rnd(xs, 23);
    const std::vector<int64_t> two(static_cast<size_t>(dim), 2), one(static_cast<size_t>(dim), 1);
    at::Tensor up = dim == 2 ? at::upsample_nearest2d(x, {xs[2] * 2, xs[3] * 2})
                             : at::upsample_nearest3d(x, {xs[2] * 2, xs[3] * 2, xs[4] * 2});
    at::Tensor ref = at::convolution(up, w, b, one, one, one, false, std::vector<int64_t>(dim, 0), 1);
    at::Tensor t = native::upsample_conv_weight(w);
    CHECK(t.sizes().vec() == (dim == 2 ? std::vector<int64_t>{3, 5, 4, 4} : std::vector<int64_t>{3, 4, 4, 4, 4}));
    at::Tensor y = at::convolution(x, t, b, two, one, one, true, std::vector<int64_t>(dim, 0), 1);
    CHECK(y.sizes() == ref.sizes());
    CHECK(rel_err(y, ref) < 1e-13);
    CHECK(y.abs().max().item<double>() > 0.1);  // content, not zeros on both sides
    // float32 weights come back in float32, derived in float64
    CHECK((native::upsample_conv_weight(w.to(at::kFloat)).scalar_type() == at::kFloat));
  }
  CHECK_THROWS_AS(native::upsample_conv_weight(rnd({2, 2, 5, 5}, 1)), Error);
}

TEST_CASE("native: a ×2 nearest upsample and its 3×3 conv as one convolution of the four output phases (float64)") {
  // The phase weight against the pair it replaces: C_in != C_out, odd sizes (every border), one
  // row and one column, two images; the phases put in place by ATen's slicing (phase_shuffle_ref)
  for (const auto& xs : std::vector<std::vector<int64_t>>{{2, 3, 5, 7}, {1, 3, 1, 4}, {1, 3, 6, 1}}) {
    CAPTURE(xs[2]);
    CAPTURE(xs[3]);
    const at::Tensor w = rnd({5, 3, 3, 3}, 31), x = rnd(xs, 32);
    const at::Tensor ref = at::conv2d(at::upsample_nearest2d(x, {2 * xs[2], 2 * xs[3]}), w, {}, 1, 1);
    const at::Tensor ph = native::upsample_conv_phase_weight(w);
    CHECK(ph.sizes().vec() == std::vector<int64_t>{20, 3, 2, 2});
    const at::Tensor p = at::conv2d(x, ph, {}, 1, 1);
    CHECK(p.sizes().vec() == std::vector<int64_t>{xs[0], 20, xs[2] + 1, xs[3] + 1});
    const at::Tensor y = phase_shuffle_ref(p);
    CHECK(y.sizes() == ref.sizes());
    CHECK(rel_err(y, ref) < 1e-13);
    CHECK(ref.abs().max().item<double>() > 0.1);  // content
  }
  CHECK((native::upsample_conv_phase_weight(rnd({4, 2, 3, 3}, 33).to(at::kFloat)).scalar_type() == at::kFloat));
  CHECK_THROWS_AS(native::upsample_conv_phase_weight(rnd({2, 2, 5, 5}, 1)), Error);     // 5×5
  CHECK_THROWS_AS(native::upsample_conv_phase_weight(rnd({2, 2, 3, 3, 3}, 1)), Error);  // 3D
}

TEST_CASE("native: liveness-based slots are reused") {
  Graph g = make("unet", 2, 1, {3, 4, 5});
  Weights w = random_weights(g, 7);
  auto nat = make_native(g, w, at::kCPU, at::kFloat, {1, 1, 16, 16});
  // Slot-written values: pad, 2 upsamples, 2 concats (ReLUs and adds are fused or in place).
  CHECK(nat->slot_count() >= 1);
  CHECK(nat->slot_count() < 5);
  CHECK(nat->slot_bytes() > 0);
}

TEST_CASE("native: conv+add+relu where the IR has an add followed by a ReLU") {
  // x -> conv(bias) -> add(., x) -> relu -> conv -> relu: y = relu(conv2(relu(conv1(x) + x)))
  Graph g = test::input_graph(2);
  Attrs a = test::conv3x3(2);
  a.bias = true;
  g.add("c1", OpKind::conv, {0}, a, {{"weight", "c1.weight", {2, 2, 3, 3}, true}, {"bias", "c1.bias", {2}, true}});
  g.add("sum", OpKind::add, {0, 1});
  g.add("r1", OpKind::relu, {2});
  a.bias = false;
  g.add("c2", OpKind::conv, {3}, a, {{"weight", "c2.weight", {2, 2, 3, 3}, true}});
  g.add("r2", OpKind::relu, {4});
  Weights w;
  w["c1.weight"] = rnd({2, 2, 3, 3}, 1);
  w["c1.bias"] = rnd({2}, 2);
  w["c2.weight"] = rnd({2, 2, 3, 3}, 3);
  at::Tensor x = rnd({1, 2, 6, 5}, 4);
  auto nat = make_native(g, w, at::kCPU, at::kDouble, {1, 2, 6, 5});
  CHECK(nat->fusions() == std::vector<std::string>{"conv+bias+add+relu:c1", "conv+relu:c2"});
  at::Tensor ref = at::relu(at::conv2d(at::relu(at::conv2d(x, w["c1.weight"], w["c1.bias"], 1, 1) + x),
                                       w["c2.weight"], {}, 1, 1));
  CHECK(rel_err(nat->forward(x, 0), ref) < 1e-12);
  CHECK(rel_err(nat->forward(x, 0), make_eager(g, w, at::kCPU, at::kDouble)->forward(x, 0)) < 1e-12);
}

TEST_CASE("native: the warm-up in the first call (warm_up_on_first_call) returns that call's output") {
  std::vector<at::Device> devices{at::kCPU};
  if (at::hasCUDA()) devices.emplace_back(at::kCUDA, 0);
  for (const auto& c : cases()) {
    if (c.dim != 2) continue;
    CAPTURE(c.arch);
    Graph g = make(c.arch, c.dim, c.channels, c.features, c.blocks);
    Weights w = random_weights(g, 31);
    const at::Tensor x = rnd(c.shape, 32), x2 = rnd(c.shape, 33);
    const at::Tensor ref = make_eager(g, w, at::kCPU, at::kDouble)->forward(x, 0.2);
    const at::Tensor ref2 = make_eager(g, w, at::kCPU, at::kDouble)->forward(x2, 0.07);
    for (const at::Device dev : devices) {
      CAPTURE(dev.str());
      NativeOptions first;
      first.warm_up_on_first_call = true;
      auto lazy = make_native(g, w, dev, at::kDouble, c.shape, first);
      auto eager_warm = make_native(g, w, dev, at::kDouble, c.shape);
      CHECK(!lazy->graph_captured());  // nothing run yet
      const at::Tensor y = lazy->forward(x.to(dev), 0.2);
      CHECK(lazy->graph_captured() == dev.is_cuda());
      CHECK(y.abs().max().item<double>() > 0);
      CHECK(rel_err(y, ref) < 1e-12);
      CHECK(rel_err(y, eager_warm->forward(x.to(dev), 0.2)) < 1e-13);
      // the next calls: another input and sigma (the replay on CUDA), then the first again
      CHECK(rel_err(lazy->forward(x2.to(dev), 0.07), ref2) < 1e-12);
      CHECK(rel_err(lazy->forward(x.to(dev), 0.2), y) < 1e-14);
    }
  }
}

TEST_CASE("native equals eager on CUDA (float32, float64, bf16), graph captured, sigma replayed") {
  if (!has_cuda()) return;
  const at::Device dev(at::kCUDA, 0);
  for (const auto& c : cases()) {
    CAPTURE(c.arch);
    CAPTURE(c.dim);
    const auto [g, w, x, ref64] = prepare(c, 21, 0.3);
    for (auto dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
      CAPTURE(c10::toString(dtype));
      auto eager = make_eager(g, w, dev, dtype);
      auto nat = make_native(g, w, dev, dtype, c.shape);
      CHECK(nat->graph_captured());
      CHECK(count_patterns(nat->fusions()) == c.expected);
      std::string notes;
      for (const auto& n : nat->notes()) notes += n + "; ";
      MESSAGE(c.arch << " " << c.dim << "D " << std::string(c10::toString(dtype)) << ": compile " << nat->compile_seconds()
                     << " s, " << nat->fusions().size() << " fusions, notes: " << notes);
      at::Tensor y = nat->forward(x, 0.3);
      CHECK(y.device() == dev);
      // float32: cuDNN TF32 (PyTorch default); bf16: see the CPU bf16 case.
      const double tol = dtype == at::kDouble ? 1e-12 : dtype == at::kFloat ? 5e-3 : 2e-2;
      CHECK(rel_err(y, ref64) < tol);
      CHECK(rel_err(y, eager->forward(x, 0.3)) < (dtype == at::kBFloat16 ? 3e-2 : tol));
      // A replay with a new input and a new sigma.
      at::Tensor x2 = rnd(c.shape, 23);
      at::Tensor y2 = nat->forward(x2.to(dev), 0.05);
      CHECK(rel_err(y2, make_eager(g, w, at::kCPU, at::kDouble)->forward(x2, 0.05)) < tol);
      CHECK(rel_err(nat->forward(x, 0.3), y) < (dtype == at::kDouble ? 1e-14 : 1e-5));
      if (dtype == at::kBFloat16) {
        // bf16 uses cuDNN's fused conv+ReLU by default; the generic ops (the option off) agree.
        NativeOptions o;
        o.cudnn_fused_bf16 = false;
        auto generic = make_native(g, w, dev, dtype, c.shape, o);
        std::string gnotes;
        for (const auto& n : generic->notes()) gnotes += n + "; ";
        at::Tensor yg = generic->forward(x, 0.3);
        const double eg = rel_err(yg, ref64);
        MESSAGE(c.arch << " " << c.dim << "D bf16 with generic ops: rel err " << eg << " (cuDNN fused "
                       << rel_err(y, ref64) << "), notes: " << gnotes);
        CHECK(eg < tol);
        CHECK(rel_err(generic->forward(x2.to(dev), 0.05), make_eager(g, w, at::kCPU, at::kDouble)->forward(x2, 0.05)) < tol);
      }
    }
  }
}

std::string notes_of(const NativeExecutor& e) {
  std::string r;
  for (const auto& n : e.notes()) r += n + "; ";
  return r;
}

#ifdef PNP_HAVE_CUDA
// Each network of nets in float32 and bf16 on the GPU, compiled with `on` and with `off` (a kernel
// of pnp's off: cuDNN), checked by check_net_kernels (inputs from prepare at seed, the replay's
// at seed + 2); `what_ran` checks the two executors' notes.
void check_nets_on_off(const std::vector<Case>& nets, uint64_t seed, const NativeOptions& on, const NativeOptions& off,
                       const std::function<void(const Case&, const std::string& on_notes, const std::string& off_notes)>& what_ran) {
  const at::Device dev(at::kCUDA, 0);
  for (const auto& c : nets)
    for (auto dtype : {at::kFloat, at::kBFloat16}) {
      CAPTURE(c.arch);
      CAPTURE(c10::toString(dtype));
      const auto [g, wts, xin, ref64] = prepare(c, seed, 0.2);
      auto nat = make_native(g, wts, dev, dtype, c.shape, on);
      auto cudnn = make_native(g, wts, dev, dtype, c.shape, off);
      const std::string notes = notes_of(*nat);
      MESSAGE(c.arch << " " << std::string(c10::toString(dtype)) << ": " << notes);
      what_ran(c, notes, notes_of(*cudnn));
      check_net_kernels(*nat, *cudnn, g, wts, c.shape, xin, ref64, dtype, seed + 2);
    }
}
#endif

TEST_CASE("native: conv + residual add as one cuDNN graph (CUDA), against float64 and the generic ops") {
  if (!has_cuda()) return;
  if (!native_has_cudnn_epilogues()) {
    MESSAGE("built without the cuDNN frontend's headers: no cuDNN graph epilogues to test");
    return;
  }
  const at::Device dev(at::kCUDA, 0);
  auto& ctx = at::globalContext();
  const bool tf32 = ctx.allowTF32CuDNN();
  // DRUNet 2D and 3D (7 conv+add each), DnCNN (out_conv + bias + residual: conv+bias+add), with
  // channel counts that are multiples of 4, as cuDNN's fused engines want (the cases above,
  // with 2-5 channels, check whatever path runs against float64 too).
  const std::vector<Case> eps{{"drunet", 2, 1, {8, 16, 24, 32}, 1, {1, 1, 24, 20}, {{"conv+add", 7}}},
                              {"drunet", 3, 1, {8, 8, 16, 16}, 1, {1, 1, 8, 12, 8}, {{"conv+add", 7}}},
                              {"dncnn", 2, 4, {16}, 4, {2, 4, 16, 12}, {{"conv+bias+add", 1}}}};
  for (const auto& c : eps) {
    const int adds = c.expected.begin()->second;
    CAPTURE(c.arch);
    CAPTURE(c.dim);
    const auto [g, w, x, ref64] = prepare(c, 31, 0.2);
    for (bool strict : {true, false}) {
      ctx.setAllowTF32CuDNN(!strict);
      for (auto dtype : {at::kFloat, at::kBFloat16}) {
        if (strict && dtype == at::kBFloat16) continue;
        CAPTURE(strict);
        CAPTURE(c10::toString(dtype));
        // forced: cuDNN's first plan wherever it has one; measured (autotune): by timing
        for (bool forced : {true, false}) {
          NativeOptions o;
          o.narrow_convs = false;  // the cuDNN graphs here (pnp's narrow and Hopper kernels: their own cases)
          o.wgmma_convs = false;
          o.autotune = !forced;
          o.cudnn_epilogues_forced = forced;
          auto nat = make_native(g, w, dev, dtype, c.shape, o);
          std::string notes;
          for (const auto& n : nat->notes()) notes += n + "; ";
          MESSAGE(c.arch << " " << c.dim << "D " << std::string(c10::toString(dtype)) << (strict ? " TF32 off" : "")
                         << (forced ? " forced" : " measured") << ": " << notes);
          const std::string all = std::to_string(adds) + " of " + std::to_string(adds) + " convolutions with a residual add";
          const std::string some = " of " + std::to_string(adds) + " convolutions with a residual add";
          // 2D: cuDNN has engines for these layouts in every precision (H200, cuDNN 9.19); 3D
          // in strict float32 it had none (the generic ops ran, checked below all the same)
          if (forced && c.dim == 2)
            CHECK(notes.find(all) != std::string::npos);
          else
            CHECK(notes.find(some) != std::string::npos);
          // every convolution a graph candidate (cudnn_graph_convs, the default): forced in 2D,
          // more of them run as graphs than the residual ones (the ReLU and strided ones too)
          {
            std::smatch m;
            static const std::regex re("([0-9]+) of ([0-9]+) convolutions run as cuDNN graphs \\(conv");
            REQUIRE(std::regex_search(notes, m, re));
            const int graphs = std::stoi(m[1]), candidates = std::stoi(m[2]);
            CHECK(candidates > adds);
            if (forced && c.dim == 2) CHECK(graphs > adds);
          }
          at::Tensor y = nat->forward(x, 0.2);
          CHECK(y.abs().max().item<double>() > 0);  // content, not zeros
          o.cudnn_epilogues = false;
          at::Tensor yg = make_native(g, w, dev, dtype, c.shape, o)->forward(x, 0.2);
          const double e = rel_err(y, ref64), eg = rel_err(yg, ref64);
          MESSAGE("  rel err to float64: cuDNN graphs " << e << ", generic ops " << eg);
          // strict float32 to float32 rounding; TF32 and bf16 as the generic ops, with margin. With
          // TF32 allowed the generic ops can be as exact as float32 (DRUNet here once its
          // transposed convolutions ran as cuBLAS products: 1.8e-7 against the graphs' 1.9e-6,
          // 2026-12-03f call 1), so the margin there is a fraction of one TF32 rounding (2^-11)
          // rather than of a float32 one
          CHECK(e < (strict ? 1e-5 : dtype == at::kFloat ? 5e-3 : 2e-2));
          CHECK(e < 2 * eg + (dtype == at::kFloat && !strict ? 1e-4 : 1e-6));
          // replayed in the graph with a new input
          at::Tensor x2 = rnd(c.shape, 33);
          CHECK(rel_err(nat->forward(x2.to(dev), 0.05), make_eager(g, w, at::kCPU, at::kDouble)->forward(x2, 0.05)) <
                (strict ? 1e-5 : dtype == at::kFloat ? 5e-3 : 2e-2));
          if (forced) continue;
          // measured with the candidates built in parallel (the default: the notes give their
          // build times) and with them built one after the other: both accurate
          if (c.dim == 2) CHECK(notes.find(" in parallel, waited ") != std::string::npos);
          NativeOptions os;
          os.narrow_convs = false;
          os.wgmma_convs = false;
          os.parallel_plan_builds = false;
          auto serial = make_native(g, w, dev, dtype, c.shape, os);
          std::string serial_notes;
          for (const auto& n : serial->notes()) serial_notes += n + "; ";
          MESSAGE("  serial plan builds: " << serial_notes);
          CHECK(serial_notes.find(some) != std::string::npos);
          CHECK(serial_notes.find(" in parallel") == std::string::npos);
          CHECK(rel_err(serial->forward(x, 0.2), ref64) < (strict ? 1e-5 : dtype == at::kFloat ? 5e-3 : 2e-2));
          // the persistent plan cache: a first executor chooses and stores every layout, a
          // second loads them all (nothing built or timed) and computes the same output
          const fs::path dir = fs::temp_directory_path() / ("pnp_native_plan_cache_" + std::to_string(::getpid()));
          test::remove_tree(dir);
          NativeOptions oc;
          oc.narrow_convs = false;
          oc.wgmma_convs = false;
          oc.plan_cache_dir = (dir / "native").string();
          oc.cudnn_benchmark = true;  // first with ATen's benchmark (no list of the network then)
          auto cold = make_native(g, w, dev, dtype, c.shape, oc);
          auto warm = make_native(g, w, dev, dtype, c.shape, oc);
          std::string cold_notes, warm_notes;
          for (const auto& n : cold->notes()) cold_notes += n + "; ";
          for (const auto& n : warm->notes()) warm_notes += n + "; ";
          MESSAGE("  plan cache, cold: " << cold_notes << "\n  plan cache, warm: " << warm_notes);
          // "plan cache DIR: L of N layouts loaded, S stored"
          auto counts = [](const std::string& notes) {
            std::smatch m;
            static const std::regex re("plan cache [^:]*: ([0-9]+) of ([0-9]+) layouts loaded, ([0-9]+) stored");
            return std::regex_search(notes, m, re) ? std::array<int, 3>{std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3])}
                                                   : std::array<int, 3>{-1, -1, -1};
          };
          const auto cc = counts(cold_notes), wc = counts(warm_notes);
          CHECK(cc[1] > 0);
          CHECK(cc[0] == 0);      // nothing to load cold
          CHECK(cc[2] == cc[1]);  // every layout stored
          CHECK(wc[1] == cc[1]);
          CHECK(wc[0] == wc[1]);  // every layout loaded warm
          CHECK(wc[2] == 0);      // none chosen again
          const at::Tensor yc = cold->forward(x, 0.2), yw = warm->forward(x, 0.2);
          CHECK(yw.abs().max().item<double>() > 0);
          CHECK(rel_err(yw, yc) < (dtype == at::kFloat ? 1e-6 : 1e-3));  // the same plans, the same sums
          CHECK(rel_err(yw, ref64) < (strict ? 1e-5 : dtype == at::kFloat ? 5e-3 : 2e-2));
          CHECK(warm_notes.find("compiled from the plan cache") == std::string::npos);  // ATen's benchmark wants a warm-up
          // without ATen's benchmark: the first compile also stores the network's list of
          // layouts, and a second captures from it with no warm-up run, to the same output
          test::remove_tree(dir);
          oc.cudnn_benchmark = false;
          auto first = make_native(g, w, dev, dtype, c.shape, oc);
          auto listed = make_native(g, w, dev, dtype, c.shape, oc);
          const std::string listed_notes = notes_of(*listed);
          MESSAGE("  from the network's list: " << listed_notes);
          CHECK(notes_of(*first).find("compiled from the plan cache") == std::string::npos);
          CHECK(listed_notes.find("compiled from the plan cache") != std::string::npos);
          CHECK(listed->graph_captured());
          const at::Tensor y1 = first->forward(x, 0.2), yl = listed->forward(x, 0.2);
          CHECK(yl.abs().max().item<double>() > 0);
          CHECK(rel_err(yl, y1) < (dtype == at::kFloat ? 1e-6 : 1e-3));
          CHECK(rel_err(yl, ref64) < (strict ? 1e-5 : dtype == at::kFloat ? 5e-3 : 2e-2));
          // and its first call with the warm-up in it (pnp_recon's way) returns that call's output
          NativeOptions of = oc;
          of.warm_up_on_first_call = true;
          auto on_first = make_native(g, w, dev, dtype, c.shape, of);
          CHECK(rel_err(on_first->forward(x2.to(dev), 0.05), listed->forward(x2.to(dev), 0.05)) <
                (dtype == at::kFloat ? 1e-6 : 1e-3));
          CHECK(notes_of(*on_first).find("compiled from the plan cache") != std::string::npos);
          // a layout's entry gone: the list is not used, the compile warms up (and stores it again)
          int removed = 0;
          for (const auto& f : fs::directory_iterator(dir / "native"))
            if (f.path().extension() == ".plan" && removed == 0) fs::remove(f.path()), ++removed;
          REQUIRE(removed == 1);
          auto stale = make_native(g, w, dev, dtype, c.shape, oc);
          const std::string stale_notes = notes_of(*stale);
          MESSAGE("  one layout removed: " << stale_notes);
          CHECK(stale_notes.find("compiled from the plan cache") == std::string::npos);
          CHECK(stale_notes.find("not used (layout") != std::string::npos);
          CHECK(rel_err(stale->forward(x, 0.2), ref64) < (strict ? 1e-5 : dtype == at::kFloat ? 5e-3 : 2e-2));
          CHECK(notes_of(*make_native(g, w, dev, dtype, c.shape, oc)).find("compiled from the plan cache") !=
                std::string::npos);
          test::remove_tree(dir);
        }
      }
    }
  }
  ctx.setAllowTF32CuDNN(tf32);
}

#ifdef PNP_HAVE_CUDA
TEST_CASE("native: convolutions with one output channel as pnp's narrow kernel, against float64 (CUDA)") {
  if (!has_cuda()) return;
  const at::Device dev(at::kCUDA, 0);
  const auto cl = at::MemoryFormat::ChannelsLast;
  struct K {
    int64_t ci, co, k, pad;
  };
  // 1 to 32 lanes per tile, several pieces per lane (192 channels: 48 pieces over 16 lanes); odd
  // sizes leave partial tiles at the image's edge; padding 0 shrinks the output
  const std::vector<K> ks{{64, 1, 3, 1}, {64, 1, 1, 0}, {16, 1, 3, 1}, {128, 1, 3, 1}, {192, 1, 3, 1},
                          {8, 1, 3, 1},  {4, 1, 3, 1},  {64, 1, 3, 0}, {24, 1, 1, 0}};
  uint64_t seed = 100;
  for_conv_cases(ks, [&](at::ScalarType dtype, const K& k, int variant) {
    INFO("ci " << k.ci << ", co " << k.co << ", k " << k.k);
    if (dtype == at::kBFloat16 && k.ci % 8) return;  // a 16-byte piece is 8 channels
    const int64_t n = 2, h = 13, w = 21, oh = h + 2 * k.pad - k.k + 1, ow = w + 2 * k.pad - k.k + 1;
    const ConvCase cc = conv_case(dtype, n, k.ci, k.co, k.k, k.pad, h, w, variant, seed);
    const at::Tensor &x = cc.x, &wt = cc.w, &ref = cc.ref;
    const bool relu = cc.relu;
    const at::Tensor *bp = cc.bias(), *zp = cc.residual();
    REQUIRE(native::narrow_conv_applies(x, wt, {1, 1}, {k.pad, k.pad}, 1, zp));
    // poison: the caching allocator hands the output a block just filled with NaN
    { at::Tensor p = at::full({n * k.co * oh * ow * 4 + 4096}, std::nan(""), x.options()); }
    const at::Tensor y = native::narrow_conv(x, wt, bp, zp, relu, {k.pad, k.pad});
    CHECK(y.sizes().vec() == std::vector<int64_t>{n, k.co, oh, ow});
    CHECK(y.is_contiguous(cl));
    CHECK(ref.abs().max().item<double>() > 0.1);  // content
    // float32: FMA sums of up to 9 x 192 products; bf16: the output's rounding (2^-9)
    CHECK(rel_err(y, ref) < (dtype == at::kFloat ? 1e-5 : 5e-3));
  });
  // what it does not take: CPU, stride 2, groups 2, float64, 5 x 5, 2 outputs, 2 or 6 inputs,
  // NCHW, a residual of another shape
  auto f32 = [&](const at::Tensor& t) { return t.to(dev, at::kFloat).contiguous(cl); };
  const at::Tensor x = f32(rnd({1, 64, 8, 8}, 1)), w1 = f32(rnd({1, 64, 3, 3}, 2));
  CHECK(native::narrow_conv_applies(x, w1, {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::narrow_conv_applies(x.cpu(), w1.cpu(), {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::narrow_conv_applies(x, w1, {2, 2}, {1, 1}, 1));
  CHECK_FALSE(native::narrow_conv_applies(x, w1, {1, 1}, {1, 1}, 2));
  CHECK_FALSE(native::narrow_conv_applies(x.to(at::kDouble), w1.to(at::kDouble), {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::narrow_conv_applies(x, f32(rnd({1, 64, 5, 5}, 3)), {1, 1}, {2, 2}, 1));
  CHECK_FALSE(native::narrow_conv_applies(x, f32(rnd({2, 64, 3, 3}, 4)), {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::narrow_conv_applies(f32(rnd({1, 2, 8, 8}, 4)), f32(rnd({1, 2, 3, 3}, 5)), {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::narrow_conv_applies(f32(rnd({1, 6, 8, 8}, 4)), f32(rnd({1, 6, 3, 3}, 5)), {1, 1}, {1, 1}, 1));
  const at::Tensor zbad = f32(rnd({1, 1, 8, 7}, 6));  // a residual of another shape
  CHECK_FALSE(native::narrow_conv_applies(x, w1, {1, 1}, {1, 1}, 1, &zbad));
  CHECK_FALSE(native::narrow_conv_applies(x.contiguous(), w1, {1, 1}, {1, 1}, 1));
  CHECK_THROWS_AS(native::narrow_conv(x, w1, nullptr, nullptr, false, {3, 3}), Error);  // padding >= kernel

  // In the executor: gray DnCNN (64 -> 1 + bias + residual) and DRUNet (8 -> 1) run their last
  // convolution as the narrow kernel, to float64 accuracy as with cuDNN (TF32 in the other
  // layers), and equal to the option off.
  NativeOptions off;
  off.narrow_convs = false;
  check_nets_on_off({{"dncnn", 2, 1, {64}, 4, {1, 1, 24, 20}, {}}, {"drunet", 2, 1, {8, 16, 24, 32}, 1, {1, 1, 24, 20}, {}}},
                    41, NativeOptions{}, off, [](const Case&, const std::string& on, const std::string& cudnn) {
                      CHECK(on.find("CUDA: 1 convolution(s) with one output channel run as pnp's narrow kernel") !=
                            std::string::npos);
                      CHECK(cudnn.find("narrow kernel") == std::string::npos);
                    });
}
TEST_CASE("native: convolutions with few input or output channels as pnp's head and tail kernels, against float64 (CUDA)") {
  if (!has_cuda()) return;
  const at::Device dev(at::kCUDA, 0);
  const auto cl = at::MemoryFormat::ChannelsLast;
  struct K {
    int64_t ci, co, pad, h, w;
  };
  // 1 to 4 inputs; 64, 128 and 192 outputs (one to three output blocks); widths below, at, across
  // and far from the 128-pixel tile (partial tiles, the last pixel group cut); one row; padding 0
  // (a smaller output) and 2 (a border of zeros wider than the kernel's reach on one side)
  const std::vector<K> ks{{3, 64, 1, 13, 21},  {1, 64, 1, 9, 128}, {2, 64, 1, 7, 130},  {4, 128, 1, 5, 300},
                          {3, 192, 1, 6, 17},  {3, 64, 0, 11, 140}, {2, 64, 2, 4, 9},   {3, 64, 1, 1, 257}};
  uint64_t seed = 300;
  for_conv_cases(ks, [&](at::ScalarType dtype, const K& k, int variant) {
    INFO("ci " << k.ci << ", co " << k.co << ", pad " << k.pad << ", w " << k.w);
    const int64_t n = 2, oh = k.h + 2 * k.pad - 2, ow = k.w + 2 * k.pad - 2;
    const ConvCase cc = conv_case(dtype, n, k.ci, k.co, 3, k.pad, k.h, k.w, variant, seed);
    REQUIRE(native::few_in_conv_applies(cc.x, cc.w, {1, 1}, {k.pad, k.pad}, 1, cc.residual()));
    // poison: the output filled with NaN first, written in place (out=)
    at::Tensor y = at::full({n, k.co, oh, ow}, std::nan(""), cc.x.options()).contiguous(cl);
    const at::Tensor r = native::few_in_conv(cc.x, cc.w, cc.bias(), cc.residual(), cc.relu, {k.pad, k.pad}, &y);
    CHECK(r.data_ptr() == y.data_ptr());
    CHECK(cc.ref.abs().max().item<double>() > 0.1);  // content
    CHECK_FALSE(at::isnan(y).any().item<bool>());
    // float32: FMA sums of up to 36 products; bf16: the output's rounding (2^-9)
    CHECK(rel_err(y, cc.ref) < (dtype == at::kFloat ? 1e-5 : 5e-3));
    // and a new output tensor
    CHECK(rel_err(native::few_in_conv(cc.x, cc.w, cc.bias(), cc.residual(), cc.relu, {k.pad, k.pad}), cc.ref) <
          (dtype == at::kFloat ? 1e-5 : 5e-3));
    // the longer bands of rows a block (the kernel's choice at 4096², few_in_band): these
    // images end inside a band or are shorter than one
    for (int band : {16, 32, 5}) {
      CAPTURE(band);
      at::Tensor yb = at::full({n, k.co, oh, ow}, std::nan(""), cc.x.options()).contiguous(cl);
      native::few_in_conv(cc.x, cc.w, cc.bias(), cc.residual(), cc.relu, {k.pad, k.pad}, &yb, band);
      CHECK_FALSE(at::isnan(yb).any().item<bool>());
      CHECK(rel_err(yb, cc.ref) < (dtype == at::kFloat ? 1e-5 : 5e-3));
    }
  });
  {  // bands of 40 and 17 rows over 70 rows (the last band cut short each time), against float64
    uint64_t band_seed = 377;
    const ConvCase cc = conv_case(at::kFloat, 1, 2, 64, 3, 1, 70, 150, 2, band_seed);
    for (int band : {40, 17, 0}) {
      CAPTURE(band);
      at::Tensor yb = at::full({1, 64, 70, 150}, std::nan(""), cc.x.options()).contiguous(cl);
      native::few_in_conv(cc.x, cc.w, cc.bias(), cc.residual(), cc.relu, {1, 1}, &yb, band);
      CHECK_FALSE(at::isnan(yb).any().item<bool>());
      CHECK(rel_err(yb, cc.ref) < 1e-5);
    }
    CHECK_THROWS_AS(native::few_in_conv(cc.x, cc.w, nullptr, nullptr, false, {1, 1}, nullptr, -1), Error);
  }
  // the band rule: 32 rows where that still leaves 8 waves of 2 blocks a multiprocessor (DRUNet
  // 1 ch 4096² on 132: 4096 blocks), 16, else 8 (DnCNN 3 ch 2048²: 16 rows would leave 7.8)
  CHECK(native::kernels::few_in_band(1, 4096, 4096, 64, 132) == 32);
  CHECK(native::kernels::few_in_band(1, 2048, 2048, 64, 132) == 8);
  CHECK(native::kernels::few_in_band(2, 2048, 2048, 64, 132) == 16);
  CHECK(native::kernels::few_in_band(1, 2048, 2048, 128, 132) == 16);
  CHECK(native::kernels::few_in_band(1, 8, 8, 64, 132) == 8);
  // The tail kernel (few_out_conv: 64 inputs, 1 to 4 outputs, 3x3, padding 1): strips of 8 (1-2
  // outputs) or 4 pixels, 16 of them a block (128 or 64 pixels wide), bands of 32 rows: one row,
  // a band cut by the image's end, three bands; widths cutting a strip and a block
  struct T {
    int64_t co, h, w;
  };
  const std::vector<T> ts{{3, 13, 21}, {1, 70, 130}, {2, 33, 9}, {4, 1, 67}, {3, 64, 200}, {3, 5, 64}};
  for_conv_cases(ts, [&](at::ScalarType dtype, const T& k, int variant) {
    INFO("co " << k.co << ", h " << k.h << ", w " << k.w);
    const int64_t n = 2;
    const ConvCase cc = conv_case(dtype, n, 64, k.co, 3, 1, k.h, k.w, variant, seed);
    REQUIRE(native::few_out_conv_applies(cc.x, cc.w, {1, 1}, {1, 1}, 1, cc.residual()));
    at::Tensor y = at::full({n, k.co, k.h, k.w}, std::nan(""), cc.x.options()).contiguous(cl);
    const at::Tensor r = native::few_out_conv(cc.x, cc.w, cc.bias(), cc.residual(), cc.relu, {1, 1}, &y);
    CHECK(r.data_ptr() == y.data_ptr());
    CHECK(cc.ref.abs().max().item<double>() > 0.1);  // content
    CHECK_FALSE(at::isnan(y).any().item<bool>());
    // float32: FMA sums of 576 products; bf16: the output's rounding (2^-9)
    CHECK(rel_err(y, cc.ref) < (dtype == at::kFloat ? 1e-5 : 5e-3));
    if (k.co == 1) {  // narrow_conv runs it too
      CHECK(rel_err(native::narrow_conv(cc.x, cc.w, cc.bias(), cc.residual(), cc.relu, {1, 1}), cc.ref) <
            (dtype == at::kFloat ? 1e-5 : 5e-3));
      // ... and with a second input summed as it is loaded (a folded add, PlanStep::x2),
      // against the float64 convolution of the sum
      const at::Tensor x2 = rnd({n, 64, k.h, k.w}, ++seed).to(dtype).to(dev).contiguous(cl);
      REQUIRE(native::narrow_conv_applies(cc.x, cc.w, {1, 1}, {1, 1}, 1, cc.residual(), &x2));
      auto d = [](const at::Tensor& t) { return t.to(at::kCPU, at::kDouble).contiguous(); };
      at::Tensor ref2 = at::conv2d(d(cc.x) + d(x2), d(cc.w), variant > 0 ? d(cc.b) : at::Tensor(), 1, 1);
      if (variant == 2) ref2 = ref2 + d(cc.z);
      if (cc.relu) ref2 = at::relu(ref2);
      const at::Tensor y2 = native::narrow_conv(cc.x, cc.w, cc.bias(), cc.residual(), cc.relu, {1, 1}, &x2);
      CHECK_FALSE(at::isnan(y2).any().item<bool>());
      CHECK(rel_err(y2, ref2) < (dtype == at::kFloat ? 1e-5 : 5e-3));
      CHECK(rel_err(y2, cc.ref) > 1e-2);  // (x2 counted: not the convolution of x alone)
    }
  });
  {
    auto f = [&](const at::Tensor& t) { return t.to(dev, at::kFloat).contiguous(cl); };
    const at::Tensor x64 = f(rnd({1, 64, 8, 8}, 11));
    CHECK(native::few_out_conv_applies(x64, f(rnd({3, 64, 3, 3}, 12)), {1, 1}, {1, 1}, 1));
    CHECK_FALSE(native::few_out_conv_applies(x64, f(rnd({5, 64, 3, 3}, 13)), {1, 1}, {1, 1}, 1));  // 5 outputs
    CHECK_FALSE(native::few_out_conv_applies(x64, f(rnd({3, 64, 3, 3}, 14)), {1, 1}, {0, 0}, 1));  // padding 0
    CHECK_FALSE(native::few_out_conv_applies(x64, f(rnd({3, 64, 1, 1}, 15)), {1, 1}, {0, 0}, 1));  // 1x1
    // a second input: of x's shape, dtype and layout, and only where the kernel down rows runs
    const at::Tensor w1 = f(rnd({1, 64, 3, 3}, 16)), x2 = f(rnd({1, 64, 8, 8}, 17));
    CHECK(native::narrow_conv_applies(x64, w1, {1, 1}, {1, 1}, 1, nullptr, &x2));
    const at::Tensor x2_nchw = x2.contiguous();
    CHECK_FALSE(native::narrow_conv_applies(x64, w1, {1, 1}, {1, 1}, 1, nullptr, &x2_nchw));
    const at::Tensor x2_small = f(rnd({1, 64, 8, 7}, 18)), x2_bf16 = x2.to(at::kBFloat16);
    CHECK_FALSE(native::narrow_conv_applies(x64, w1, {1, 1}, {1, 1}, 1, nullptr, &x2_small));
    CHECK_FALSE(native::narrow_conv_applies(x64, w1, {1, 1}, {1, 1}, 1, nullptr, &x2_bf16));
    const at::Tensor x32 = f(rnd({1, 32, 8, 8}, 19)), w32 = f(rnd({1, 32, 3, 3}, 20)), x2_32 = f(rnd({1, 32, 8, 8}, 21));
    CHECK(native::narrow_conv_applies(x32, w32, {1, 1}, {1, 1}, 1));
    CHECK_FALSE(native::narrow_conv_applies(x32, w32, {1, 1}, {1, 1}, 1, nullptr, &x2_32));  // 32 inputs: another kernel
    CHECK_THROWS_AS(native::narrow_conv(x32, w32, nullptr, nullptr, false, {1, 1}, &x2_32), Error);
    CHECK_FALSE(native::few_out_conv_applies(f(rnd({1, 32, 8, 8}, 16)), f(rnd({3, 32, 3, 3}, 17)), {1, 1}, {1, 1}, 1));
    CHECK_FALSE(native::few_out_conv_applies(x64, f(rnd({3, 64, 3, 3}, 18)), {2, 2}, {1, 1}, 1));
  }

  // what it does not take: 5 inputs, 32 or 96 outputs, 1x1 or 5x5, stride 2, NCHW, CPU, float64,
  // a residual of another shape; an output of another shape or layout
  auto f32 = [&](const at::Tensor& t) { return t.to(dev, at::kFloat).contiguous(cl); };
  const at::Tensor x = f32(rnd({1, 3, 8, 8}, 1)), w3 = f32(rnd({64, 3, 3, 3}, 2));
  CHECK(native::few_in_conv_applies(x, w3, {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::few_in_conv_applies(f32(rnd({1, 5, 8, 8}, 3)), f32(rnd({64, 5, 3, 3}, 4)), {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::few_in_conv_applies(x, f32(rnd({32, 3, 3, 3}, 5)), {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::few_in_conv_applies(x, f32(rnd({96, 3, 3, 3}, 6)), {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::few_in_conv_applies(x, f32(rnd({64, 3, 1, 1}, 7)), {1, 1}, {0, 0}, 1));
  CHECK_FALSE(native::few_in_conv_applies(x, f32(rnd({64, 3, 5, 5}, 8)), {1, 1}, {2, 2}, 1));
  CHECK_FALSE(native::few_in_conv_applies(x, w3, {2, 2}, {1, 1}, 1));
  CHECK_FALSE(native::few_in_conv_applies(x.contiguous(), w3, {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::few_in_conv_applies(x.cpu(), w3.cpu(), {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::few_in_conv_applies(x.to(at::kDouble), w3.to(at::kDouble), {1, 1}, {1, 1}, 1));
  const at::Tensor zbad = f32(rnd({1, 64, 8, 7}, 9));
  CHECK_FALSE(native::few_in_conv_applies(x, w3, {1, 1}, {1, 1}, 1, &zbad));
  CHECK_THROWS_AS(native::few_in_conv(x, w3, nullptr, nullptr, false, {3, 3}), Error);  // padding >= kernel
  at::Tensor small = at::empty({1, 64, 8, 7}, x.options()).contiguous(cl), nchw = at::empty({1, 64, 8, 8}, x.options());
  CHECK_THROWS_AS(native::few_in_conv(x, w3, nullptr, nullptr, false, {1, 1}, &small), Error);
  CHECK_THROWS_AS(native::few_in_conv(x, w3, nullptr, nullptr, false, {1, 1}, &nchw), Error);

  // In the executor with autotune (the default) and the cuDNN graphs: the head of DnCNN (3 -> 64,
  // ReLU) and of DRUNet (2 -> 64, the noise map with the image) is timed as the head kernel
  // against cuDNN's choice, and DnCNN's tail (64 -> 3 + residual) as the tail kernel (the notes
  // give their times); whichever runs, the result is within float64's tolerance and equals the
  // option off. (Which is faster at 40 x 200 is the GPU's call, so this checks the times are
  // there, not who won.)
  if (!native_has_cudnn_epilogues()) return;
  NativeOptions off;
  off.narrow_convs = false;
  check_nets_on_off({{"dncnn", 2, 3, {64}, 3, {1, 3, 40, 200}, {}}, {"drunet", 2, 1, {64, 128, 256, 512}, 1, {1, 1, 64, 136}, {}}},
                    61, NativeOptions{}, off, [](const Case& c, const std::string& on, const std::string& cudnn) {
                      CHECK(on.find("pnp's head kernel ") != std::string::npos);
                      if (c.arch == "dncnn") CHECK(on.find("pnp's tail kernel ") != std::string::npos);
                      CHECK(cudnn.find("head kernel") == std::string::npos);
                      // DRUNet's last skip add (x + x1, folded into its 64 -> 1 tail: add+conv)
                      // summed in the tail kernel's loads; with the option off, added first
                      if (c.arch == "drunet") CHECK(on.find("summed as pnp's tail kernel loads") != std::string::npos);
                      CHECK(cudnn.find("summed as pnp's tail kernel") == std::string::npos);
                    });
}
#ifdef PNP_HAVE_CUDA
TEST_CASE("native: pnp's NHWC kernels, the phase shuffle and the 2×2 max pool, against float64 (CUDA)") {
  if (!has_cuda()) return;
  const at::Device dev(at::kCUDA, 0);
  const auto cl = at::MemoryFormat::ChannelsLast;
  auto d64 = [](const at::Tensor& t) { return t.to(at::kCPU, at::kDouble).contiguous(); };
  // The shuffle: c phase channels, c2 of the other part before or after them (none: c2 = 0),
  // bias or not, ReLU or not; one pixel, one row, odd sizes, two images; c = 8 and 16 are one and
  // two bf16 pieces
  struct S {
    int64_t n, c, c2, h, w;
    bool other_first, relu, bias;
  };
  const std::vector<S> ss{{2, 64, 64, 5, 7, true, true, true},  {1, 64, 0, 3, 9, false, true, false},
                          {1, 128, 128, 4, 4, false, false, true}, {2, 8, 16, 1, 1, true, true, true},
                          {1, 256, 64, 1, 6, true, true, true},   {1, 16, 8, 6, 3, false, true, true}};
  uint64_t seed = 700;
  for (auto dtype : {at::kFloat, at::kBFloat16})
    for (const S& k : ss) {
      CAPTURE(c10::toString(dtype));
      CAPTURE(k.c);
      CAPTURE(k.c2);
      CAPTURE(k.h);
      CAPTURE(k.w);
      CAPTURE(k.other_first);
      auto dev_t = [&](const std::vector<int64_t>& sz, bool nhwc) {
        const at::Tensor t = rnd(sz, ++seed).to(dtype).to(dev);
        return nhwc ? t.contiguous(cl) : t.contiguous();
      };
      const at::Tensor p = dev_t({k.n, 4 * k.c, k.h + 1, k.w + 1}, true), b = dev_t({k.c}, false);
      const at::Tensor other = k.c2 > 0 ? dev_t({k.n, k.c2, 2 * k.h, 2 * k.w}, true) : at::Tensor();
      at::Tensor ref = phase_shuffle_ref(d64(p));
      if (k.bias) ref = ref + d64(b).view({1, k.c, 1, 1});
      if (k.relu) ref = at::relu(ref);
      if (k.c2 > 0) ref = k.other_first ? at::cat({d64(other), ref}, 1) : at::cat({ref, d64(other)}, 1);
      // poison: NaN first, every value written by the kernel
      at::Tensor y = at::full({k.n, k.c + k.c2, 2 * k.h, 2 * k.w}, std::nan(""), p.options()).contiguous(cl);
      const at::Tensor* ob = k.c2 > 0 ? &other : nullptr;
      REQUIRE(native::phase_shuffle_applies(at::empty({k.n, 3, k.h, k.w}, p.options()), k.c, k.bias ? &b : nullptr, ob, y));
      native::phase_shuffle(p, k.bias ? &b : nullptr, k.relu, ob, k.other_first, y);
      CHECK_FALSE(at::isnan(y).any().item<bool>());
      CHECK(ref.abs().max().item<double>() > 0.1);  // content
      // float32: one rounding of p + b; bf16: the output's rounding (2^-9)
      CHECK(rel_err(y, ref) < (dtype == at::kFloat ? 1e-6 : 5e-3));
      if (k.c2 > 0)  // the other part is copied, bit for bit
        CHECK(at::equal(y.narrow(1, k.other_first ? 0 : k.c, k.c2).contiguous(), other.contiguous()));
    }
  {  // what the shuffle does not take: a piece that is not 16 bytes of channels, NCHW, another
     // shape, float64, a bias of another length; phase_shuffle then throws
    const auto o = at::TensorOptions().dtype(at::kFloat).device(dev);
    const at::Tensor x = at::empty({1, 3, 4, 5}, o), other = at::empty({1, 8, 8, 10}, o).contiguous(cl);
    const at::Tensor b = at::zeros({8}, o), b6 = at::zeros({6}, o);
    at::Tensor y = at::empty({1, 16, 8, 10}, o).contiguous(cl);
    CHECK(native::phase_shuffle_applies(x, 8, &b, &other, y));
    at::Tensor y14 = at::empty({1, 14, 8, 10}, o).contiguous(cl), y_nchw = at::empty({1, 16, 8, 10}, o);
    CHECK_FALSE(native::phase_shuffle_applies(x, 6, &b6, &other, y14));  // 6 channels: not a float4 multiple
    CHECK_FALSE(native::phase_shuffle_applies(x, 8, &b, &other, y_nchw));
    CHECK_FALSE(native::phase_shuffle_applies(x, 8, &b6, &other, y));
    CHECK_FALSE(native::phase_shuffle_applies(x, 8, &b, nullptr, y));  // 16 channels for 8
    CHECK_FALSE(native::phase_shuffle_applies(x.to(at::kDouble), 8, nullptr, nullptr, y.to(at::kDouble).contiguous(cl)));
    const at::Tensor p = at::zeros({1, 32, 5, 6}, o).contiguous(cl);
    CHECK_THROWS_AS(native::phase_shuffle(p, &b, true, &other, true, y_nchw), Error);
    CHECK_THROWS_AS(native::phase_shuffle(p.contiguous(), &b, true, &other, true, y), Error);
    native::phase_shuffle(p, &b, true, &other, true, y);  // (the same tensors, right: no throw)
  }
  // The max pool: exactly ATen's (a max rounds nothing), NaN propagated; odd sizes (the last row
  // and column dropped), one output pixel, two images, one bf16 piece
  struct M {
    int64_t n, c, h, w;
  };
  for (auto dtype : {at::kFloat, at::kBFloat16})
    for (const M& k : std::vector<M>{{2, 64, 8, 10}, {1, 8, 7, 9}, {1, 16, 2, 2}, {1, 256, 5, 33}}) {
      CAPTURE(c10::toString(dtype));
      CAPTURE(k.c);
      CAPTURE(k.h);
      CAPTURE(k.w);
      at::Tensor x = rnd({k.n, k.c, k.h, k.w}, ++seed).to(dtype).to(dev).contiguous(cl);
      x.index_put_({0, 1, 0, 1}, std::nan(""));  // one NaN: its output is NaN, as in ATen
      REQUIRE(native::max_pool2_applies(x, {2, 2}, {2, 2}, {0, 0}));
      const at::Tensor y = native::max_pool2(x), ref = at::max_pool2d(d64(x), {2, 2}, {2, 2});
      CHECK(y.is_contiguous(cl));
      CHECK(y.sizes() == ref.sizes());
      CHECK(at::isnan(y.select(0, 0).select(0, 1)).to(at::kCPU)[0][0].item<bool>());
      CHECK(at::equal(at::isnan(d64(y)), at::isnan(ref)));
      CHECK(at::equal(at::nan_to_num(d64(y), 0), at::nan_to_num(ref, 0)));
      CHECK(at::nan_to_num(ref, 0).abs().max().item<double>() > 0.1);  // content (beside the NaN)
    }
  {
    const at::Tensor x = rnd({1, 8, 6, 6}, 1).to(at::kFloat).to(dev).contiguous(cl);
    CHECK_FALSE(native::max_pool2_applies(x, {3, 3}, {2, 2}, {0, 0}));
    CHECK_FALSE(native::max_pool2_applies(x, {2, 2}, {1, 1}, {0, 0}));
    CHECK_FALSE(native::max_pool2_applies(x, {2, 2}, {2, 2}, {1, 1}));
    CHECK_FALSE(native::max_pool2_applies(x.contiguous(), {2, 2}, {2, 2}, {0, 0}));  // NCHW
    CHECK_FALSE(native::max_pool2_applies(x.narrow(1, 0, 6).contiguous(cl), {2, 2}, {2, 2}, {0, 0}));  // 6 channels
    CHECK_FALSE(native::max_pool2_applies(x.cpu(), {2, 2}, {2, 2}, {0, 0}));
    CHECK_THROWS_AS(native::max_pool2(x.contiguous()), Error);
  }

  // In the executor: UNet with the kernels (its Up steps as phase convolutions + the shuffle with
  // the skip concat, its max pools) against float64 and against the option off (cuDNN's
  // transposed convolution, ATen's concat and max pool), and replayed in the graph
  NativeOptions off;
  off.nhwc_kernels = false;
  check_nets_on_off({{"unet", 2, 3, {16, 32, 64}, -1, {2, 3, 24, 40}, {}}, {"unet", 2, 1, {64, 128}, -1, {1, 1, 32, 48}, {}}},
                    71, NativeOptions{}, off, [](const Case&, const std::string& on, const std::string& other) {
                      CHECK(on.find("four phases") != std::string::npos);
                      CHECK(on.find("max pools as pnp's kernel") != std::string::npos);
                      CHECK(other.find("four phases") == std::string::npos);
                      CHECK(other.find("max pools as pnp's kernel") == std::string::npos);
                    });
}

TEST_CASE("native: the 2×2, stride-2 transposed convolution as two cuBLAS products, against float64 (CUDA)") {
  if (!has_cuda()) return;
  const at::Device dev(at::kCUDA, 0);
  const auto cl = at::MemoryFormat::ChannelsLast;
  auto& ctx = at::globalContext();
  const bool tf32 = ctx.allowTF32CuDNN();
  // DRUNet's three (512 -> 256, 256 -> 128, 128 -> 64, here on small images), two images, one
  // pixel, one row, a width that is no multiple of anything, the smallest aligned channel counts
  struct S {
    int64_t n, ci, co, h, w;
  };
  const std::vector<S> ss{{1, 512, 256, 6, 3}, {1, 256, 128, 5, 8}, {2, 128, 64, 7, 9},
                          {1, 8, 4, 1, 1},     {3, 16, 8, 1, 33},   {1, 64, 32, 4, 4}};
  uint64_t seed = 900;
  // (float32 strict: TF32 off; float32 with TF32, cuDNN's default; bf16)
  for (int mode = 0; mode < 3; ++mode)
    for (const S& k : ss) {
      const auto dtype = mode == 2 ? at::kBFloat16 : at::kFloat;
      ctx.setAllowTF32CuDNN(mode == 1);
      CAPTURE(mode);
      CAPTURE(k.ci);
      CAPTURE(k.co);
      CAPTURE(k.h);
      CAPTURE(k.w);
      const at::Tensor x = rnd({k.n, k.ci, k.h, k.w}, ++seed).to(dtype).to(dev).contiguous(cl);
      const at::Tensor w = rnd({k.ci, k.co, 2, 2}, ++seed).to(dtype).to(dev);
      const at::Tensor ref = at::conv_transpose2d(x.to(at::kCPU, at::kDouble), w.to(at::kCPU, at::kDouble), {}, 2);
      at::Tensor y = at::full({k.n, k.co, 2 * k.h, 2 * k.w}, std::nan(""), x.options()).contiguous(cl);  // poison
      REQUIRE(native::stride2_transposed_applies(x, w, {2, 2}, {0, 0}, {0, 0}, 1, y));
      native::stride2_transposed(x, native::stride2_transposed_weight(w), y);
      CHECK_FALSE(at::isnan(y).any().item<bool>());
      CHECK(ref.abs().max().item<double>() > 0.1);  // content
      // strict float32: float32 products and sums; TF32: inputs rounded to 10 mantissa bits
      // (cuDNN's TF32 convolutions are held to 5e-3 above); bf16: the output's rounding (2^-9)
      CHECK(rel_err(y, ref) < (mode == 0 ? 1e-6 : mode == 1 ? 2e-3 : 5e-3));
    }
  ctx.setAllowTF32CuDNN(tf32);
  {  // what the products do not take; stride2_transposed then throws
    const auto o = at::TensorOptions().dtype(at::kFloat).device(dev);
    const at::Tensor x = at::ones({1, 16, 4, 5}, o).contiguous(cl), w = at::ones({16, 8, 2, 2}, o);
    at::Tensor y = at::empty({1, 8, 8, 10}, o).contiguous(cl);
    CHECK(native::stride2_transposed_applies(x, w, {2, 2}, {0, 0}, {0, 0}, 1, y));
    CHECK_FALSE(native::stride2_transposed_applies(x, w, {1, 1}, {0, 0}, {0, 0}, 1, y));  // stride 1
    CHECK_FALSE(native::stride2_transposed_applies(x, w, {2, 2}, {1, 1}, {0, 0}, 1, y));  // padding
    CHECK_FALSE(native::stride2_transposed_applies(x, w, {2, 2}, {0, 0}, {1, 1}, 1, y));  // output padding
    CHECK_FALSE(native::stride2_transposed_applies(x, w, {2, 2}, {0, 0}, {0, 0}, 2, y));  // groups
    CHECK_FALSE(native::stride2_transposed_applies(x.contiguous(), w, {2, 2}, {0, 0}, {0, 0}, 1, y));  // NCHW
    CHECK_FALSE(native::stride2_transposed_applies(x, w, {2, 2}, {0, 0}, {0, 0}, 1, y.contiguous()));
    CHECK_FALSE(native::stride2_transposed_applies(x.cpu(), w.cpu(), {2, 2}, {0, 0}, {0, 0}, 1, y.cpu()));
    CHECK_FALSE(native::stride2_transposed_applies(x.to(at::kDouble), w.to(at::kDouble), {2, 2}, {0, 0}, {0, 0}, 1,
                                                   y.to(at::kDouble)));
    const at::Tensor w3 = at::ones({16, 8, 3, 3}, o), w5 = at::ones({16, 5, 2, 2}, o);
    CHECK_FALSE(native::stride2_transposed_applies(x, w3, {2, 2}, {0, 0}, {0, 0}, 1, y));  // 3×3 taps
    at::Tensor y5 = at::empty({1, 5, 8, 10}, o).contiguous(cl), y9 = at::empty({1, 8, 9, 10}, o).contiguous(cl);
    CHECK_FALSE(native::stride2_transposed_applies(x, w5, {2, 2}, {0, 0}, {0, 0}, 1, y5));  // 2 C_out = 10 floats: no 16-byte rows
    CHECK_FALSE(native::stride2_transposed_applies(x, w, {2, 2}, {0, 0}, {0, 0}, 1, y9));   // another output shape
    CHECK_THROWS_AS(native::stride2_transposed(x, w, y), Error);  // the weight not rearranged
    CHECK_THROWS_AS(native::stride2_transposed(x, native::stride2_transposed_weight(w), y9), Error);
    CHECK_THROWS_AS(native::stride2_transposed_weight(w3), Error);
  }
  // In the executor: DRUNet's three upsamplings as the products against float64 and against
  // the option off (cuDNN's transposed convolution), and replayed in the graph
  NativeOptions off;
  off.nhwc_kernels = false;
  check_nets_on_off({{"drunet", 2, 1, {16, 32, 64, 128}, 1, {1, 1, 32, 48}, {}}, {"drunet", 2, 3, {8, 16, 32, 64}, 2, {2, 3, 16, 24}, {}}},
                    91, NativeOptions{}, off, [](const Case&, const std::string& on, const std::string& other) {
                      CHECK(on.find("transposed convolutions as two cuBLAS products") != std::string::npos);
                      CHECK(other.find("cuBLAS products") == std::string::npos);
                    });
}

#ifdef PNP_HAVE_CUDNN_FE
TEST_CASE("native: a layout's rivals timed interleaved, each round from the next rival (time_on_stream_ms, CUDA)") {
  if (!has_cuda()) return;
  // three rivals of different lengths (1, 4 and 16 additions of a 4 Mi-element tensor); the order
  // they ran in is recorded
  const at::Tensor a = at::rand({1 << 22}, at::TensorOptions().device(at::kCUDA));
  std::vector<int> order;
  std::vector<std::function<void()>> rivals;
  for (int i = 0; i < 3; ++i)
    rivals.push_back([&, i] {
      order.push_back(i);
      at::Tensor b = a.clone();
      for (int k = 0; k < (1 << (2 * i)); ++k) b.add_(a);
    });
  const std::vector<double> ms = native::time_on_stream_ms(rivals, 3);
  // one untimed run each, then rounds 0 1 2, 1 2 0, 2 0 1
  CHECK(order == std::vector<int>{0, 1, 2, 0, 1, 2, 1, 2, 0, 2, 0, 1});
  REQUIRE(ms.size() == 3);
  for (double m : ms) CHECK((std::isfinite(m) && m > 0));
  CHECK(ms[0] < ms[1]);  // each time is its own rival's: more work, longer
  CHECK(ms[1] < ms[2]);
  // and one rival alone: its untimed run and the reps
  order.clear();
  CHECK(native::time_on_stream_ms(rivals[1], 2) > 0);
  CHECK(order == std::vector<int>{1, 1, 1});
}

TEST_CASE("native: a cuDNN graph's plans within its workspace cap; conv + residual + zero bias against float64 (CUDA)") {
  // the cap: a 16th of the output's bytes, at least kMinWorkspaceCap (layouts only: meta tensors)
  native::EpilogueSpec m;
  m.y = at::empty({1, 128, 2048, 2048}, at::TensorOptions().dtype(at::kFloat).device(at::kMeta));
  CHECK(native::workspace_cap(m) == (int64_t(1) << 27));
  m.y = at::empty({1, 64, 32, 40}, at::TensorOptions().dtype(at::kFloat).device(at::kMeta));
  CHECK(native::workspace_cap(m) == native::kMinWorkspaceCap);
  m.max_workspace = 0;
  CHECK(native::workspace_cap(m) == 0);
  if (!has_cuda()) return;
  // DRUNet's residual layer in small: conv(x, w) + z, 64 channels, channels-last, and the same
  // with the zero bias the executor gives such a graph (Bound::zero_b): both against float64
  const at::Tensor x64 = test::rnd({1, 64, 32, 40}, 41), w64 = test::rnd({64, 64, 3, 3}, 42) / 24.0,
                   z64 = test::rnd({1, 64, 32, 40}, 43);
  const at::Tensor ref = at::conv2d(x64, w64, {}, 1, 1) + z64;
  auto& ctx = at::globalContext();
  const bool tf32 = ctx.allowTF32CuDNN();
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    CAPTURE(c10::toString(dtype));
    ctx.setAllowTF32CuDNN(dtype != at::kFloat);  // float32 exact to its rounding
    auto dev = [&](const at::Tensor& t) {
      return t.to(at::TensorOptions().dtype(dtype).device(at::kCUDA)).contiguous(at::MemoryFormat::ChannelsLast);
    };
    const at::Tensor x = dev(x64), w = dev(w64), z = dev(z64);
    for (bool zero_bias : {false, true})
      for (int64_t cap : {int64_t(-1), int64_t(0)}) {
        CAPTURE(zero_bias);
        CAPTURE(cap);
        native::EpilogueSpec s;
        s.x = x, s.w = w, s.z = z;
        if (zero_bias) s.b = at::zeros({64}, x.options());
        s.y = at::full_like(x, std::numeric_limits<double>::quiet_NaN());  // poisoned
        s.stride = {1, 1}, s.padding = {1, 1};
        s.tf32 = dtype != at::kFloat;
        s.candidates = 3, s.precompiled = 2, s.max_workspace = cap;
        std::unique_ptr<native::EpilogueConv> conv;
        try {
          conv = native::make_epilogue_conv(s);
        } catch (const std::exception& e) {
          // no plan within a zero cap: said so, never one over it
          MESSAGE("no plan: " << e.what());
          CHECK(cap == 0);
          continue;
        }
        MESSAGE(std::string(c10::toString(dtype)) << (zero_bias ? " zero bias" : "") << " cap " << cap << ": "
                                                  << conv->engine() << ", workspace " << conv->workspace_bytes());
        CHECK(conv->workspace_bytes() <= native::workspace_cap(s));
        at::Tensor ws = at::empty({std::max<int64_t>(1, conv->workspace_bytes())}, x.options().dtype(at::kByte));
        at::Tensor y = at::full_like(x, std::numeric_limits<double>::quiet_NaN());
        conv->run(x, w, z, zero_bias ? &s.b : nullptr, y, ws.data_ptr());
        CHECK(y.abs().max().item<double>() > 0);
        CHECK(rel_err(y, ref) < (dtype == at::kFloat ? 1e-5 : 2e-2));
      }
  }
  ctx.setAllowTF32CuDNN(tf32);
}

TEST_CASE("native: pnp's kernel keeps a layout unless cuDNN's is faster by more than the margin (pnp_kernel_wins)") {
  CHECK(native::kPnpKernelMargin > 0);
  CHECK(native::kPnpKernelMargin < 0.05);  // a tie-break, not a handicap
  CHECK(native::pnp_kernel_wins(5.0, 6.0));  // faster
  CHECK(native::pnp_kernel_wins(6.0, 6.0));  // a tie
  // the timings that chose cuDNN's graph for DRUNet's fp32 64-channel residual layer (ms)
  CHECK(native::pnp_kernel_wins(6.137, 6.088));
  CHECK(native::pnp_kernel_wins(6.246, 6.120));
  CHECK(native::pnp_kernel_wins(6.178, 6.029));
  // cuDNN by more than the margin: cuDNN's (DRUNet's 512-channel residual layer, 2026-12-04 call 5)
  CHECK_FALSE(native::pnp_kernel_wins(3.686, 3.464));
  CHECK_FALSE(native::pnp_kernel_wins(6.0 * (1 + native::kPnpKernelMargin) + 1e-9, 6.0));
  CHECK_FALSE(native::pnp_kernel_wins(std::numeric_limits<double>::quiet_NaN(), 6.0));  // not timed
  // the rows kernel's wider margin: 2026-12-04b call 4's timing (cuDNN's graph 7 % ahead), kept
  CHECK(native::kRowsKernelMargin > native::kPnpKernelMargin);
  CHECK(native::kRowsKernelMargin < 0.10);
  CHECK_FALSE(native::pnp_kernel_wins(6.283, 5.872));
  CHECK(native::pnp_kernel_wins(6.283, 5.872, native::kRowsKernelMargin));
  CHECK_FALSE(native::pnp_kernel_wins(6.0 * (1 + native::kRowsKernelMargin) + 1e-9, 6.0, native::kRowsKernelMargin));
}

TEST_CASE("native: a convolution in FP8 as one cuDNN graph (e4m3 input and weights, a descale per output channel), against float64 (CUDA, compute capability 8.9)") {
  if (!has_cuda()) return;
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  if (prop->major * 10 + prop->minor < 89) {
    MESSAGE(prop->name << ": no FP8 tensor cores (compute capability below 8.9), the FP8 cases skipped");
    return;
  }
  const at::Device dev(at::kCUDA, 0);
  const auto cl = at::MemoryFormat::ChannelsLast;
  struct K {
    int64_t ci, co, k, stride, pad, h, w;
  };
  // DRUNet's residual layer (64 channels, 3×3), a wider one (128 -> 256), its 2×2 stride-2
  // downsampling (64 -> 128); two images
  const std::vector<K> ks{{64, 64, 3, 1, 1, 24, 40}, {128, 256, 3, 1, 1, 12, 20}, {64, 128, 2, 2, 0, 24, 40}};
  // The bound: every product of two e4m3 values is exact in float32 and their sum is float32's,
  // but the tensor cores' FP8 accumulation may keep fewer bits than float32's (an H200 gave at most
  // 1.1e-4, 2026-12-06), so float32 out to 2e-3; bf16 out adds its own rounding (2^-9 relative):
  // 8e-3 (at most 1.9e-3 measured).
  for (const K& k : ks)
    for (int variant = 0; variant < 3; ++variant)  // 0: the conv alone; 1: + bias, ReLU; 2: + residual + bias
      for (auto out : {at::kFloat, at::kBFloat16}) {
        CAPTURE(k.ci);
        CAPTURE(k.co);
        CAPTURE(k.k);
        CAPTURE(variant);
        CAPTURE(c10::toString(out));
        const int64_t ho = (k.h + 2 * k.pad - k.k) / k.stride + 1, wo = (k.w + 2 * k.pad - k.k) / k.stride + 1;
        const uint64_t seed = 480 + 7 * static_cast<uint64_t>(k.co + k.k) + static_cast<uint64_t>(variant);
        const at::Tensor x64 = test::rnd({2, k.ci, k.h, k.w}, seed) * 2.0;
        const at::Tensor w64 = test::rnd({k.co, k.ci, k.k, k.k}, seed + 1) / std::sqrt(double(k.ci * k.k * k.k));
        const at::Tensor z64 = test::rnd({2, k.co, ho, wo}, seed + 2), b64 = test::rnd({k.co}, seed + 3) * 0.1;
        // the quantised operands, made on the GPU from float32 as the FP8 path makes them
        const at::Tensor x32 = x64.to(dev, at::kFloat);
        const double sx = e4m3_activation_scale(x32);
        const at::Tensor xq = e4m3_quantize(x32, sx).contiguous(cl);
        const E4m3Weight wq = quantize_weight_e4m3(w64.to(dev, at::kFloat), /*transposed=*/false);
        // float64 on exactly those values
        at::Tensor ref = at::conv2d(xq.to(at::kCPU, at::kDouble) * sx,
                                    wq.q.to(at::kCPU, at::kDouble) * wq.scale.to(at::kCPU, at::kDouble).view({k.co, 1, 1, 1}),
                                    {}, k.stride, k.pad);
        if (variant == 2) ref = ref + z64;
        if (variant >= 1) ref = ref + b64.view({1, k.co, 1, 1});
        if (variant == 1) ref = ref.relu();
        auto on = [&](const at::Tensor& t) { return t.to(dev, out).contiguous(t.dim() == 4 ? cl : at::MemoryFormat::Contiguous); };
        native::EpilogueSpec s;
        s.x = xq, s.w = wq.q.contiguous(cl), s.descale = (wq.scale * sx).to(at::kFloat).contiguous();
        if (variant == 2) s.z = on(z64);
        if (variant >= 1) s.b = on(b64);
        s.relu = variant == 1;
        s.y = at::full({2, k.co, ho, wo}, std::numeric_limits<double>::quiet_NaN(), at::TensorOptions().dtype(out).device(dev))
                  .contiguous(cl);  // poisoned
        s.stride = {k.stride, k.stride}, s.padding = {k.pad, k.pad};
        s.candidates = 3, s.precompiled = 2;
        const auto conv = native::make_epilogue_conv(s);
        at::Tensor ws = at::empty({std::max<int64_t>(1, conv->workspace_bytes())}, s.y.options().dtype(at::kByte));
        at::Tensor y = at::full_like(s.y, std::numeric_limits<double>::quiet_NaN());
        conv->run(s.x, s.w, s.z, s.b.defined() ? &s.b : nullptr, y, ws.data_ptr(), &s.descale);
        CHECK(y.isfinite().all().item<bool>());
        CHECK(y.abs().max().item<double>() > 0.1);
        const double err = rel_err(y, ref);
        MESSAGE("FP8 " << k.ci << "->" << k.co << " " << k.k << "x" << k.k << " variant " << variant << ", "
                       << c10::toString(out) << " out: " << conv->engine() << ", rel. L2 to float64 " << err);
        CHECK(err < (out == at::kFloat ? 2e-3 : 8e-3));
        // the same graph without its descale, or with a bf16 input: refused, not run wrongly
        if (variant == 0 && out == at::kFloat) {
          CHECK_THROWS_AS(conv->run(s.x, s.w, s.z, nullptr, y, ws.data_ptr()), Error);
          native::EpilogueSpec bad = s;
          bad.x = x32.to(at::kBFloat16).contiguous(cl);
          CHECK_THROWS_WITH_AS(native::make_epilogue_conv(bad), doctest::Contains("float8_e4m3fn"), Error);
        }
      }
}
#endif

TEST_CASE("native: a CUDA graph capture that failed leaves the device's random numbers usable (abandon_capture)") {
  if (!has_cuda()) return;
  const auto o = at::TensorOptions().device(at::Device(at::kCUDA, 0));
  CHECK(at::rand({4}, o).defined());
  auto side = c10::cuda::getStreamFromPool(false, 0);
  for (int round = 0; round < 2; ++round) {  // twice: the second capture begins where the first was abandoned
    CAPTURE(round);
    {
      const c10::cuda::CUDAStreamGuard guard(side);
      at::cuda::CUDAGraph g;
      g.capture_begin();
      void* p = nullptr;
      CHECK(cudaMalloc(&p, 256) != cudaSuccess);  // forbidden in a global-mode capture: the capture is invalidated
      native::abandon_capture(side);
      cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
      CHECK(cudaStreamIsCapturing(side.stream(), &st) == cudaSuccess);
      CHECK(st == cudaStreamCaptureStatusNone);
    }
    // the generator out of capture mode: without abandon_capture's empty capture this throws
    // "Offset increment outside graph capture encountered unexpectedly"
    at::Tensor r;
    CHECK_NOTHROW(r = at::rand({1024}, o));
    CHECK(r.defined());
    CHECK(r.max().item<float>() > 0.5f);  // content
  }
  {  // and a capture after it works and replays
    const c10::cuda::CUDAStreamGuard guard(side);
    at::Tensor a = at::ones({64}, o);
    at::cuda::CUDAGraph g;
    g.capture_begin();
    a.mul_(2);
    g.capture_end();
    g.replay();
    side.synchronize();
    CHECK(a.sum().item<float>() == 128.f);
  }
}
#endif
#ifdef PNP_HAVE_WGMMA_CONV
namespace {
// Whether pnp's Hopper kernels run here (a GPU of compute capability 9.0, PNP_KERNELS not
// portable); else the calling case says that its `what` is skipped.
bool hopper_kernels_here(const char* what) {
  if (at::hasCUDA() && at::cuda::getCurrentDeviceProperties()->major == 9 && pnp::nn::hopper_kernels_default())
    return true;
  MESSAGE("no Hopper GPU, or PNP_KERNELS=portable: " << what << " skipped");
  return false;
}
// One convolution case of the Hopper kernels: channels in and out, a k x k kernel, padding, the
// input's height and width.
struct HopperConv {
  int64_t ci, co, k, pad, h, w;
};
}  // namespace

TEST_CASE("native: pnp's Hopper implicit-GEMM convolution, against float64 and cuDNN (CUDA, compute capability 9.0)") {
  if (!hopper_kernels_here("the wgmma cases")) return;
  auto& ctx = at::globalContext();
  const bool tf32 = ctx.allowTF32CuDNN();
  ctx.setAllowTF32CuDNN(true);
  const at::Device dev(at::kCUDA, 0);
  const auto cl = at::MemoryFormat::ChannelsLast;
  using K = HopperConv;
  // The tile kernel: one image row of 256 pixels per tile (w >= 129: the row reused for every
  // kernel column, partial tiles at the row's end) and several rows per tile (w <= 128); 1x1;
  // padding 0; two and eight 64-channel blocks; C_in 32 in float32 only (a 128-byte block is 64
  // bf16). The rows kernel, where it applies (3x3, padding 1, C_in one or two blocks, C_out 64
  // or 128, width a multiple of 128): a width of one half-column (the other half outside), of
  // one and a half and of several columns, 128 outputs, runs of one row, and (100 x 512, two
  // images: 400 rows over the multiprocessors) runs of several rows that cross columns and images.
  const std::vector<K> ks{{64, 64, 3, 1, 13, 300}, {64, 64, 3, 1, 9, 37},   {128, 128, 3, 1, 7, 260},
                          {64, 128, 1, 0, 11, 40}, {256, 64, 3, 1, 5, 520},  {64, 64, 3, 0, 10, 270},
                          {32, 64, 3, 1, 6, 140},  {64, 512, 3, 1, 4, 17},   {128, 64, 5, 2, 6, 258},
                          {64, 64, 3, 1, 13, 384}, {32, 64, 3, 1, 6, 128},   {64, 128, 3, 1, 5, 512},
                          {128, 64, 3, 1, 6, 640}, {128, 128, 3, 1, 7, 256}, {64, 64, 3, 1, 100, 512},
                          {64, 64, 3, 1, 1, 256}};
  uint64_t seed = 200;
  for_conv_cases(ks, [&](at::ScalarType dtype, const K& k, int variant) {
    INFO("ci " << k.ci << ", co " << k.co << ", k " << k.k << ", w " << k.w);
    if (dtype == at::kBFloat16 && k.ci % 64) return;
    const int64_t n = 2, oh = k.h + 2 * k.pad - k.k + 1, ow = k.w + 2 * k.pad - k.k + 1;
    const ConvCase cc = conv_case(dtype, n, k.ci, k.co, k.k, k.pad, k.h, k.w, variant, seed);
    const at::Tensor &x = cc.x, &wt = cc.w, &b = cc.b, &z = cc.z, &ref = cc.ref;
    const bool relu = cc.relu;
    const at::Tensor *bp = cc.bias(), *zp = cc.residual();
    REQUIRE(native::wgmma_conv_applies(x, wt, {1, 1}, {k.pad, k.pad}, 1, zp));
    CHECK(ref.abs().max().item<double>() > 0.1);  // content
    at::Tensor yc = at::conv2d(x, wt, variant > 0 ? b : at::Tensor(), 1, k.pad);  // cuDNN, same precision
    if (zp) yc = yc + z;
    if (relu) yc = at::relu(yc);
    const double ec = rel_err(yc, ref);
    // TF32 products (10-bit mantissas) summed in float32; bf16: the output's rounding too
    const double tol = dtype == at::kFloat ? 5e-3 : 1e-2;
    const bool rows = native::wgmma_rows_applies(x, wt, {k.pad, k.pad});
    // 0: the tile kernel; 1: one load per tap; 2: TF32 truncated; 3: the rows kernel; 4: the
    // rows kernel's float32 residual on two consumer warpgroups (WgmmaVariant::two_consumers)
    for (int variant_k = 0; variant_k < 5; ++variant_k) {
      if (variant_k == 2 && dtype != at::kFloat) continue;
      if (variant_k == 3 && !rows) continue;
      if (variant_k == 4 && !(rows && zp && dtype == at::kFloat)) continue;
      native::WgmmaVariant v;
      v.row_reuse = variant_k != 1, v.round_tf32 = variant_k != 2;
      v.kernel = variant_k >= 3 ? native::WgmmaKernel::rows : native::WgmmaKernel::tiles;
      v.two_consumers = variant_k == 4;
      // poison: the caching allocator hands the output a block just filled with NaN
      { at::Tensor p = at::full({n * k.co * oh * ow + 4096}, std::nan(""), x.options()); }
      const at::Tensor y = native::wgmma_conv(x, wt, bp, zp, relu, {k.pad, k.pad}, v);
      REQUIRE(y.sizes().vec() == std::vector<int64_t>{n, k.co, oh, ow});
      CHECK(y.is_contiguous(cl));
      const double e = rel_err(y, ref);
      MESSAGE(std::string(c10::toString(dtype)) << " " << k.ci << "->" << k.co << " k" << k.k << " " << k.h << "x"
                                                << k.w << " variant " << variant << " kernel " << variant_k
                                                << ": rel err " << e << " (cuDNN " << ec << ")");
      if (variant_k == 2) continue;  // truncated operands: reported, not required
      CHECK(e < tol);
      CHECK(e < 2 * ec + 1e-4);
    }
  });
  // what it does not take: strict float32, stride 2, groups 2, C_out 32, C_in 16, NCHW, float64
  auto f32 = [&](const at::Tensor& t) { return t.to(dev, at::kFloat).contiguous(cl); };
  const at::Tensor x = f32(rnd({1, 64, 8, 8}, 1)), w64 = f32(rnd({64, 64, 3, 3}, 2));
  CHECK(native::wgmma_conv_applies(x, w64, {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::wgmma_conv_applies(x, w64, {2, 2}, {1, 1}, 1));
  CHECK_FALSE(native::wgmma_conv_applies(x, f32(rnd({64, 32, 3, 3}, 3)), {1, 1}, {1, 1}, 2));
  CHECK_FALSE(native::wgmma_conv_applies(x, f32(rnd({32, 64, 3, 3}, 4)), {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::wgmma_conv_applies(f32(rnd({1, 16, 8, 8}, 5)), f32(rnd({64, 16, 3, 3}, 6)), {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::wgmma_conv_applies(x.contiguous(), w64, {1, 1}, {1, 1}, 1));
  CHECK_FALSE(native::wgmma_conv_applies(x.to(at::kDouble), w64.to(at::kDouble), {1, 1}, {1, 1}, 1));
  ctx.setAllowTF32CuDNN(false);
  CHECK_FALSE(native::wgmma_conv_applies(x, w64, {1, 1}, {1, 1}, 1));
  CHECK(native::wgmma_conv_applies(x.to(at::kBFloat16), w64.to(at::kBFloat16), {1, 1}, {1, 1}, 1));
  ctx.setAllowTF32CuDNN(true);
  // the rows kernel: 3x3, padding 1, C_in 32 or 64 float32 (64 or 128 bf16), C_out 64 or 128,
  // width a multiple of 128
  CHECK_FALSE(native::wgmma_rows_applies(x, w64, {1, 1}));  // 8 wide
  const at::Tensor x128 = f32(rnd({1, 64, 4, 128}, 11));
  CHECK(native::wgmma_rows_applies(x128, w64, {1, 1}));
  CHECK(native::wgmma_rows_applies(x128.to(at::kBFloat16), w64.to(at::kBFloat16), {1, 1}));
  CHECK_FALSE(native::wgmma_rows_applies(x128, w64, {0, 0}));
  CHECK_FALSE(native::wgmma_rows_applies(x128, f32(rnd({64, 64, 5, 5}, 7)), {2, 2}));
  CHECK_FALSE(native::wgmma_rows_applies(f32(rnd({1, 128, 8, 128}, 8)), f32(rnd({64, 128, 3, 3}, 9)), {1, 1}));
  CHECK_FALSE(native::wgmma_rows_applies(x128, f32(rnd({256, 64, 3, 3}, 10)), {1, 1}));
  CHECK_THROWS_AS(native::wgmma_conv(x, w64, nullptr, nullptr, false, {1, 1}, {true, true, native::WgmmaKernel::rows}),
                  Error);
  // into a given output: written there; one of another shape or layout is refused
  at::Tensor out = at::full({1, 64, 8, 8}, std::nan(""), x.options()).contiguous(cl);
  const at::Tensor yo = native::wgmma_conv(x, w64, nullptr, nullptr, false, {1, 1}, {}, &out);
  CHECK(yo.data_ptr() == out.data_ptr());
  CHECK(rel_err(out, at::conv2d(x.to(at::kDouble), w64.to(at::kDouble), {}, 1, 1)) < 5e-3);
  at::Tensor small = at::empty({1, 64, 8, 7}, x.options()).contiguous(cl), nchw = at::empty({1, 64, 8, 8}, x.options());
  CHECK_THROWS_AS(native::wgmma_conv(x, w64, nullptr, nullptr, false, {1, 1}, {}, &small), Error);
  CHECK_THROWS_AS(native::wgmma_conv(x, w64, nullptr, nullptr, false, {1, 1}, {}, &nchw), Error);

  // In the executor (the option on): DnCNN and DRUNet run their wide convolutions as the kernels, to
  // float64 accuracy as with cuDNN, and equal to the option off; replayed in the CUDA graph. Without
  // autotune the kernels run on the 64-channel layers (kUntimedHopperMaxChannels); with it each
  // layout times them against cuDNN's choice (the notes give both) and the faster runs.
  // (widths: 384 and 256 take the rows kernel at full resolution, 300 only the tile kernel)
  const std::vector<Case> nets{{"dncnn", 2, 3, {64}, 4, {1, 3, 40, 384}, {}},
                               {"dncnn", 2, 3, {64}, 4, {1, 3, 40, 300}, {}},
                               {"drunet", 2, 1, {64, 128, 256, 512}, 1, {1, 1, 64, 256}, {}}};
  NativeOptions off;
  off.wgmma_convs = false;
  for (bool timed : {false, true}) {
    CAPTURE(timed);
    NativeOptions on;
    on.wgmma_convs = true;
    on.autotune = timed;
    check_nets_on_off(nets, 51, on, off, [&](const Case&, const std::string& notes, const std::string& cudnn) {
      if (timed && native_has_cudnn_epilogues())
        CHECK(notes.find("pnp's Hopper kernel ") != std::string::npos);  // a layout's time
      else
        CHECK(notes.find("run as pnp's Hopper kernel") != std::string::npos);
      CHECK(cudnn.find("Hopper kernel") == std::string::npos);
    });
  }
  ctx.setAllowTF32CuDNN(tf32);
}

TEST_CASE("native: pnp's Hopper convolution in FP8 (e4m3 operands, bf16 or e4m3 out), against float64 (CUDA, compute capability 9.0)") {
  if (!hopper_kernels_here("the FP8 wgmma cases")) return;
  const at::Device dev(at::kCUDA, 0);
  const auto cl = at::MemoryFormat::ChannelsLast;
  using K = HopperConv;
  // DRUNet's residual layers at levels 1-3 (128, 256, 512 channels, 3x3), one image row of 256
  // pixels per tile with partial tiles at the row's end (w 260, 300) and several rows per tile
  // (w 17, 40); C_out 64; a 1x1; two images. C_in 64 and 192: 64-byte blocks (the 64-byte
  // swizzle), level 0's 64 channels among them. With a residual, one-row tiles start their
  // accumulators from it (WgmmaVariant::z_start), and each case runs again with it in the epilogue.
  const std::vector<K> ks{{128, 128, 3, 1, 7, 260}, {256, 64, 3, 1, 5, 300}, {512, 512, 3, 1, 4, 17},
                          {128, 256, 1, 0, 6, 40},  {64, 64, 3, 1, 9, 300},  {64, 128, 3, 1, 5, 40},
                          {192, 64, 3, 1, 4, 270}};
  for (const K& k : ks)
    for (int variant = 0; variant < 3; ++variant) {  // 0: the conv alone; 1: + bias, ReLU; 2: + residual + bias
      at::Tensor y_bf16;  // the bf16 output (the first pass): the e4m3 one's bracket
      for (bool e4m3_out : {false, true}) {
        INFO("ci " << k.ci << ", co " << k.co << ", k " << k.k << ", w " << k.w << ", variant " << variant
                   << (e4m3_out ? ", e4m3 out" : ", bf16 out"));
        const int64_t n = 2, oh = k.h + 2 * k.pad - k.k + 1, ow = k.w + 2 * k.pad - k.k + 1;
        const uint64_t seed = 4800 + 13 * static_cast<uint64_t>(k.ci + k.co + k.w) + static_cast<uint64_t>(variant);
        const at::Tensor x64 = rnd({n, k.ci, k.h, k.w}, seed) * 2.0;
        const at::Tensor w64 = rnd({k.co, k.ci, k.k, k.k}, seed + 1) / std::sqrt(double(k.ci * k.k * k.k));
        const at::Tensor z64 = rnd({n, k.co, oh, ow}, seed + 2), b64 = rnd({k.co}, seed + 3) * 0.1;
        // the operands quantised on the GPU as the FP8 path quantises them (pnp/nn/fp8.hpp)
        const at::Tensor x32 = x64.to(dev, at::kFloat);
        const double sx = e4m3_activation_scale(x32);
        const at::Tensor xq = e4m3_quantize(x32, sx).contiguous(cl);
        const E4m3Weight wq = quantize_weight_e4m3(w64.to(dev, at::kFloat), /*transposed=*/false);
        // bias and residual in bf16, as the kernel reads them
        const at::Tensor zb = z64.to(dev, at::kBFloat16).contiguous(cl), bb = b64.to(dev, at::kBFloat16);
        // float64 on exactly those values
        at::Tensor ref = at::conv2d(xq.to(at::kCPU, at::kDouble) * sx,
                                    wq.q.to(at::kCPU, at::kDouble) * wq.scale.to(at::kCPU, at::kDouble).view({k.co, 1, 1, 1}),
                                    {}, 1, k.pad);
        if (variant == 2) ref = ref + zb.to(at::kCPU, at::kDouble);
        if (variant >= 1) ref = ref + bb.to(at::kCPU, at::kDouble).view({1, k.co, 1, 1});
        if (variant == 1) ref = ref.relu();
        CHECK(ref.abs().max().item<double>() > 0.1);  // content
        const at::Tensor descale = (wq.scale * sx).to(at::kFloat).contiguous();
        const at::Tensor wqc = wq.q.contiguous(cl);
        REQUIRE(native::wgmma_conv_fp8_applies(xq, wqc, {k.pad, k.pad}, variant == 2 ? &zb : nullptr));
        const double so = e4m3_out ? e4m3_activation_scale(ref.to(at::kFloat)) : 1.0;
        // into an output poisoned with NaN (in e4m3 too)
        const auto odt = e4m3_out ? at::kFloat8_e4m3fn : at::kBFloat16;
        at::Tensor y = at::full({n, k.co, oh, ow}, std::nan(""), x32.options().dtype(odt)).contiguous(cl);
        const at::Tensor yr = native::wgmma_conv_fp8(xq, wqc, descale, variant >= 1 ? &bb : nullptr,
                                                     variant == 2 ? &zb : nullptr, variant == 1, {k.pad, k.pad}, odt, so, &y);
        CHECK(yr.data_ptr() == y.data_ptr());
        const at::Tensor yd = y.to(at::kCPU, at::kDouble) * so;
        CHECK(yd.isfinite().all().item<bool>());
        const double e = rel_err(yd, ref);
        if (!e4m3_out) {
          // the tensor cores' sums of exact e4m3 products (Hopper's FP8 MMA keeps fewer bits than
          // float32: cuDNN's FP8 graphs gave 1.1e-4, H200) and bf16's rounding of the output (2^-9)
          MESSAGE("FP8 wgmma " << k.ci << "->" << k.co << " k" << k.k << " w" << k.w << " variant " << variant
                               << ", bf16 out: rel. L2 to float64 " << e);
          CHECK(e < 8e-3);
          y_bf16 = y.to(at::kCPU, at::kDouble);
          {  // bf16 and its e4m3 copy in one epilogue: y bit for bit, the copy bit for bit the
             // quantising pass of y (both poisoned first)
            const double sq = e4m3_activation_scale(ref.to(at::kFloat));
            at::Tensor y2 = at::full({n, k.co, oh, ow}, std::nan(""), x32.options().dtype(odt)).contiguous(cl);
            at::Tensor q = at::full({n, k.co, oh, ow}, std::nan(""), x32.options()).to(at::kFloat8_e4m3fn).contiguous(cl);
            native::wgmma_conv_fp8(xq, wqc, descale, variant >= 1 ? &bb : nullptr, variant == 2 ? &zb : nullptr,
                                   variant == 1, {k.pad, k.pad}, odt, sq, &y2, {}, &q);
            CHECK(at::equal(y2.view(at::kShort), y.view(at::kShort)));
            const at::Tensor qr = native::e4m3_quantize_nhwc(y, sq);
            CHECK(at::equal(q.view(at::kByte), qr.view(at::kByte)));
            CHECK(q.to(at::kFloat).abs().max().item<double>() > 1.0);  // content, in e4m3's range
          }
          if (variant == 2) {  // the residual in the epilogue instead of the accumulators' start
            native::WgmmaVariant v;
            v.z_start = false;
            at::Tensor ye = at::full({n, k.co, oh, ow}, std::nan(""), x32.options().dtype(odt)).contiguous(cl);
            native::wgmma_conv_fp8(xq, wqc, descale, &bb, &zb, false, {k.pad, k.pad}, odt, 1.0, &ye, v);
            const double ee = rel_err(ye.to(at::kCPU, at::kDouble), ref);
            MESSAGE("FP8 wgmma " << k.ci << "->" << k.co << " k" << k.k << " w" << k.w
                                 << ", the residual in the epilogue: rel. L2 to float64 " << ee);
            CHECK(ee < 8e-3);
          }
        } else {
          // e4m3 out: the same sums (the same kernel, the same order) through the e4m3 epilogue.
          // Each sum v lies within bf16's rounding of the bf16 output b (|v - b| <= 2^-8 |b|), and
          // rounding is monotonic, so v's e4m3 lies between those of b's bracket. Against
          // float64 itself the per-element check cannot hold: the FP8 sums' error, small against
          // the sum of the products' magnitudes, is more than an e4m3 step of an output that
          // cancels (H100: 0.2-2.4 % of the elements off the rounded float64, some by two steps).
          const at::Tensor slack = y_bf16.abs() * (std::ldexp(1.0, -8) + 1e-6) + 1e-30;
          const at::Tensor lo = e4m3_quantize((y_bf16 - slack).to(at::kFloat), so).to(at::kDouble) * so;
          const at::Tensor hi = e4m3_quantize((y_bf16 + slack).to(at::kFloat), so).to(at::kDouble) * so;
          const at::Tensor outside = (yd < lo) | (yd > hi);
          const at::Tensor nearest = e4m3_quantize(y_bf16.to(at::kFloat), so).to(at::kDouble) * so;
          const double differ = (yd != nearest).to(at::kDouble).mean().item<double>();
          MESSAGE("FP8 wgmma " << k.ci << "->" << k.co << " k" << k.k << " w" << k.w << " variant " << variant
                               << ", e4m3 out: rel. L2 to float64 " << e << ", elements outside the bf16 output's e4m3 "
                               << "bracket " << outside.sum().item<int64_t>() << ", off its e4m3 rounding " << differ);
          CHECK(e < 0.05);  // e4m3's own rounding: at most 2^-4 relative
          CHECK(outside.sum().item<int64_t>() == 0);
          // the double rounding's ties: b on an e4m3 midpoint (1 in 16 of bf16's values a binade),
          // rounded to even where v was not: about 1 in 32
          CHECK(differ < 0.06);
        }
      }
    }
  // what it does not take: bf16 operands, C_in 32 (half a 64-byte block), a float32 residual;
  // a bias not bf16 and an e4m3 output without a scale are refused
  const at::Tensor x8 = e4m3_quantize(rnd({1, 128, 8, 8}, 1).to(dev, at::kFloat), 0.01).contiguous(cl);
  const at::Tensor w8 = quantize_weight_e4m3(rnd({64, 128, 3, 3}, 2).to(dev, at::kFloat), false).q.contiguous(cl);
  CHECK(native::wgmma_conv_fp8_applies(x8, w8, {1, 1}));
  CHECK_FALSE(native::wgmma_conv_fp8_applies(x8.to(at::kBFloat16), w8.to(at::kBFloat16), {1, 1}));
  CHECK(native::wgmma_conv_fp8_applies(x8.narrow(1, 0, 64).contiguous(cl), w8.narrow(1, 0, 64).contiguous(cl), {1, 1}));
  CHECK_FALSE(native::wgmma_conv_fp8_applies(x8.narrow(1, 0, 32).contiguous(cl), w8.narrow(1, 0, 32).contiguous(cl), {1, 1}));
  const at::Tensor z32 = at::zeros({1, 64, 8, 8}, x8.options().dtype(at::kFloat)).contiguous(cl);
  CHECK_FALSE(native::wgmma_conv_fp8_applies(x8, w8, {1, 1}, &z32));
  const at::Tensor ds = at::ones({64}, x8.options().dtype(at::kFloat)), b32 = at::zeros({64}, ds.options());
  CHECK_THROWS_AS(native::wgmma_conv_fp8(x8, w8, ds, &b32, nullptr, false, {1, 1}), Error);
  CHECK_THROWS_AS(native::wgmma_conv_fp8(x8, w8, ds, nullptr, nullptr, false, {1, 1}, at::kFloat8_e4m3fn, 0.0), Error);
  // an e4m3 copy: of a bf16 output only, with a scale, of the output's shape
  at::Tensor q8, q_bad = at::empty({1, 64, 8, 7}, x8.options()).contiguous(cl);
  CHECK_THROWS_AS(native::wgmma_conv_fp8(x8, w8, ds, nullptr, nullptr, false, {1, 1}, at::kFloat8_e4m3fn, 1.0, nullptr, {}, &q8), Error);
  CHECK_THROWS_AS(native::wgmma_conv_fp8(x8, w8, ds, nullptr, nullptr, false, {1, 1}, at::kBFloat16, 0.0, nullptr, {}, &q8), Error);
  CHECK_THROWS_AS(native::wgmma_conv_fp8(x8, w8, ds, nullptr, nullptr, false, {1, 1}, at::kBFloat16, 1.0, nullptr, {}, &q_bad), Error);
  native::wgmma_conv_fp8(x8, w8, ds, nullptr, nullptr, false, {1, 1}, at::kBFloat16, 1.0, nullptr, {}, &q8);
  CHECK((q8.defined() && q8.scalar_type() == at::kFloat8_e4m3fn && q8.sizes() == x8.narrow(1, 0, 64).sizes()));
}

TEST_CASE("native: an activation into e4m3 in one pass (e4m3_quantize_nhwc), against float64 (CUDA)") {
  if (!has_cuda()) return;
  const at::Device dev(at::kCUDA, 0);
  const auto cl = at::MemoryFormat::ChannelsLast;
  // bf16 values over many binades, a scale that puts some beyond 448 (saturated) and some in
  // e4m3's subnormals
  const at::Tensor x = (rnd({2, 64, 37, 29}, 4950) * at::exp(rnd({2, 64, 37, 29}, 4951) * 3.0))
                           .to(dev, at::kBFloat16).contiguous(cl);
  const double scale = x.abs().max().item<double>() / 448.0 / 4.0;
  REQUIRE(native::e4m3_quantize_nhwc_applies(x));
  const at::Tensor q = native::e4m3_quantize_nhwc(x, scale);
  CHECK((q.scalar_type() == at::kFloat8_e4m3fn));
  CHECK(q.is_contiguous(cl));
  CHECK((q.sizes() == x.sizes()));
  // the float64 reference of x / scale, element by element (pnp/nn/fp8.hpp's e4m3_reference)
  const at::Tensor xd = x.to(at::kCPU, at::kDouble).contiguous().flatten();
  const at::Tensor got = q.to(at::kCPU, at::kFloat).to(at::kDouble).contiguous().flatten();
  const auto xa = xd.accessor<double, 1>();
  const auto ga = got.accessor<double, 1>();
  int64_t off = 0, saturated = 0, beyond_step = 0;
  for (int64_t i = 0; i < xd.numel(); ++i) {
    // the kernel multiplies by 1 / scale in float32: a value a float32 rounding from a tie may
    // round the other way, one e4m3 step off
    const double want = e4m3_reference(xa[i] / scale);
    saturated += std::fabs(want) == 448.0;
    if (ga[i] != want) {
      ++off;
      if (std::fabs(ga[i] - want) > std::fabs(want) * 0.125 + std::ldexp(1.0, -9)) ++beyond_step;
    }
  }
  MESSAGE("e4m3_quantize_nhwc: " << off << " of " << xd.numel() << " elements off the float64 rounding, " << saturated
                                 << " saturated");
  CHECK(saturated > 0);
  CHECK(beyond_step == 0);
  CHECK(static_cast<double>(off) < 1e-3 * static_cast<double>(xd.numel()));
  // what it does not take
  CHECK_FALSE(native::e4m3_quantize_nhwc_applies(x.to(at::kFloat)));
  CHECK_FALSE(native::e4m3_quantize_nhwc_applies(x.contiguous()));
  CHECK_THROWS_AS(native::e4m3_quantize_nhwc(x, 0.0), Error);
}

TEST_CASE("native: the executor in FP8 (NativeOptions::fp8_convs) against its emulation and float64 (CUDA, compute capability 9.0)") {
  if (!hopper_kernels_here("the FP8 executor")) return;
  const at::Device dev(at::kCUDA, 0);
  // DRUNet at its own widths (64 to 512 channels), one block a level: every residual
  // convolution (7 blocks x 2, 3x3, stride 1) an FP8 candidate; head, tail, the strided and the
  // transposed ones not
  const Graph g = make("drunet", 2, 1, {64, 128, 256, 512}, 1);
  const std::vector<int> cand = fp8_conv_candidates(g);
  CHECK(cand.size() == 14);
  // Seeded weights whose body carries the output: at init_weights' scale each strided and
  // transposed convolution passes a third of its input's power, and the head's features reach
  // the tail almost alone (the FP8 layers' error 5.8e-5 of the output, bf16's 3.4e-3: H100).
  // Those convolutions x4 and the residual ones x5: the FP8 error 5.19e-2, bf16's 7.5e-3 (H100).
  Weights wts = random_weights(g, 4960);
  for (const Node& n : g.nodes) {
    const bool resampling = n.op == OpKind::conv_transpose || (n.op == OpKind::conv && n.attrs.stride[0] == 2);
    const double gain = std::count(cand.begin(), cand.end(), n.id) ? 5.0 : resampling ? 4.0 : 1.0;
    if (gain != 1.0) wts[n.name + ".weight"] = wts[n.name + ".weight"] * gain;
  }
  const std::vector<int64_t> shape{1, 1, 64, 136};
  const at::Tensor x = rnd(shape, 4961) + 0.5, xd = x.to(dev);
  const double sigma = 0.1;
  const at::Tensor ref64 = make_eager(g, wts, at::kCPU, at::kDouble)->forward(x, sigma);
  CHECK(ref64.abs().max().item<double>() > 1e-3);  // content
  // the reference of the FP8 path: the same convolutions quantised alike, in float32
  const std::set<int> q(cand.begin(), cand.end());
  auto emulated = make_fp8_emulated(g, wts, at::kCPU, q, "reference");
  const at::Tensor emu = emulated->forward(x, sigma);
  NativeOptions o;
  o.warm_up_on_first_call = true;  // calibrated on this input, as the emulation is
  o.wgmma_convs = true;
  const at::Tensor yb = make_native(g, wts, dev, at::kBFloat16, shape, o)->forward(xd, sigma);
  o.fp8_convs = cand;
  auto nat = make_native(g, wts, dev, at::kBFloat16, shape, o);
  const at::Tensor y1 = nat->forward(xd, sigma);  // the warm-up: calibrated, then run with the scales fixed
  const at::Tensor y2 = nat->forward(xd, sigma);  // the captured graph
  std::string notes;
  for (const auto& n : nat->notes()) notes += n + "\n";
  INFO(notes);
  CHECK(nat->graph_captured());
  CHECK(notes.find("FP8: 14 of 14 candidate convolution(s) run in e4m3") != std::string::npos);
  CHECK(notes.find("; 7 write e4m3 for their one reader, 0 bf16 and an e4m3 copy") != std::string::npos);  // each block's first conv
  CHECK(y1.isfinite().all().item<bool>());
  CHECK(at::equal(y1, y2));  // the warm-up's output is what later calls compute
  const double e_q = rel_err(emu, ref64), e_b = rel_err(yb, ref64), e_n = rel_err(y1, emu), e_f = rel_err(y1, ref64);
  MESSAGE("FP8 executor, DRUNet 64-512 ch 64 x 136: rel. L2 of the emulation to float64 "
          << e_q << ", native bf16 to float64 " << e_b << ", native FP8 to the emulation " << e_n << ", to float64 " << e_f);
  // The quantisation shows well above bf16's rounding, so that the checks below see it. The
  // executor's result cannot follow the emulation element by element: bf16 between its layers
  // tips e4m3 roundings one step over (an element in 20 or so a layer, each a step of 6-12 %),
  // and from there on the two quantise different values, as independent as two draws of the
  // same noise. So: FP8 changed the output as much as the quantisation does (not bf16 under
  // another name), and no more than it does (scales, descales, hand-offs right: a wrong scale
  // saturates or flushes, a wrong channel's descale costs the whole channel).
  CHECK(e_q > 3 * e_b);
  CHECK(rel_err(y1, yb) > 0.5 * e_q);
  CHECK(e_f < 1.5 * e_q);
  CHECK(e_n < 1.5 * e_q);
  // a second input through the first call's scales, in both
  const at::Tensor x2 = rnd(shape, 4962) * 0.8 + 0.4;
  const at::Tensor r2 = make_eager(g, wts, at::kCPU, at::kDouble)->forward(x2, 0.05);
  const at::Tensor m2 = emulated->forward(x2, 0.05), n2 = nat->forward(x2.to(dev), 0.05);
  MESSAGE("  a second input: the emulation to float64 " << rel_err(m2, r2) << ", native FP8 to the emulation "
                                                         << rel_err(n2, m2));
  CHECK(rel_err(n2, r2) < 1.5 * rel_err(m2, r2));
  CHECK(rel_err(n2, m2) < 1.5 * rel_err(m2, r2));

  // Two blocks a level: each level's second block reads the first's output as its first
  // convolution's input and its residual. That output is written in bf16 and, in the same
  // epilogue, in e4m3 for the FP8 reader (fp8_dual_out): bit for bit what the reader's own
  // quantising pass made of it, so the result equals the executor's without the copies.
  const Graph g2 = make("drunet", 2, 1, {64, 128, 256, 512}, 2);
  const std::vector<int> cand2 = fp8_conv_candidates(g2);
  CHECK(cand2.size() == 28);
  const Weights w2 = random_weights(g2, 4963);
  NativeOptions od = o;
  od.fp8_convs = cand2;
  auto dual = make_native(g2, w2, dev, at::kBFloat16, shape, od);
  od.fp8_dual_out = false;
  auto single = make_native(g2, w2, dev, at::kBFloat16, shape, od);
  const at::Tensor d1 = dual->forward(xd, sigma), s1 = single->forward(xd, sigma);
  const at::Tensor d2 = dual->forward(x2.to(dev), 0.05), s2 = single->forward(x2.to(dev), 0.05);
  std::string dn, sn;
  for (const auto& n : dual->notes()) dn += n + "\n";
  for (const auto& n : single->notes()) sn += n + "\n";
  INFO(dn);
  CHECK(dual->graph_captured());
  CHECK(dn.find("FP8: 28 of 28 candidate") != std::string::npos);
  CHECK(dn.find("; 14 write e4m3 for their one reader, 7 bf16 and an e4m3 copy for their FP8 reader") != std::string::npos);
  CHECK(sn.find("; 14 write e4m3 for their one reader, 0 bf16 and an e4m3 copy") != std::string::npos);
  CHECK(d1.abs().max().item<double>() > 1e-3);  // content
  CHECK(at::equal(d1, s1));
  CHECK(at::equal(d2, s2));
  CHECK_FALSE(at::equal(d1, d2));
}
#endif
#endif

TEST_CASE("PNP_KERNELS=portable turns the sm_90-only kernels off by default (the A100 path on any GPU)") {
  const char* before = std::getenv("PNP_KERNELS");
  const std::string saved = before ? before : "";
  ::unsetenv("PNP_KERNELS");
  CHECK(pnp::nn::NativeOptions{}.wgmma_convs);
  ::setenv("PNP_KERNELS", "portable", 1);
  CHECK_FALSE(pnp::nn::NativeOptions{}.wgmma_convs);
  CHECK(pnp::nn::NativeOptions{}.narrow_convs);  // the portable kernels stay
  ::setenv("PNP_KERNELS", "hopper", 1);
  CHECK(pnp::nn::NativeOptions{}.wgmma_convs);
  ::setenv("PNP_KERNELS", "sm80", 1);
  CHECK_THROWS_WITH_AS(pnp::nn::hopper_kernels_default(), doctest::Contains("expected \"portable\""), pnp::InputError);
  if (before) ::setenv("PNP_KERNELS", saved.c_str(), 1); else ::unsetenv("PNP_KERNELS");
}
