// The FP8 (e4m3) emulation against its float64 reference, and the emulated executor.
#include "pnp_test.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "nn_test_util.hpp"
#include "pnp/nn/fp8.hpp"
#include "pnp/nn/native.hpp"

using namespace pnp;
using namespace pnp::nn;
using pnp::nn::test::make;

TEST_CASE("e4m3: the float64 reference's fixed points") {
  CHECK(e4m3_reference(0.0) == 0.0);
  CHECK(e4m3_reference(448.0) == 448.0);
  CHECK(e4m3_reference(1e6) == 448.0);            // saturates
  CHECK(e4m3_reference(-1e6) == -448.0);
  CHECK(e4m3_reference(std::ldexp(1.0, -9)) == std::ldexp(1.0, -9));  // the smallest subnormal
  CHECK(e4m3_reference(std::ldexp(1.0, -10)) == 0.0);                 // a tie: to even (0)
  CHECK(e4m3_reference(std::ldexp(3.0, -10)) == std::ldexp(2.0, -9));  // 1.5 steps: to even (2 steps)
  CHECK(e4m3_reference(1.0625) == 1.0);            // 1 + 1/16: a tie between 1 and 1.125, to even
  CHECK(e4m3_reference(1.1) == 1.125);
  CHECK(e4m3_reference(0.3) == 0.3125);
  CHECK(std::isnan(e4m3_reference(std::nan(""))));
  // every e4m3 value is its own rounding, and 1 + 2^-3 is the step above 1
  for (int e = -6; e <= 8; ++e)
    for (int m = 0; m < 8; ++m) {
      const double v = std::ldexp(1.0 + m / 8.0, e);
      if (v > 448.0) continue;
      CHECK(e4m3_reference(v) == v);
      CHECK(e4m3_reference(-v) == -v);
    }
}

TEST_CASE("e4m3: ATen's float8_e4m3fn rounds as the reference, over every binade and the ties") {
  std::vector<double> xs;
  for (int i = -13000; i <= 13000; ++i) xs.push_back(std::copysign(std::exp2(std::fabs(i) / 1000.0 - 12.0), double(i)));
  for (int e = -9; e <= 8; ++e)  // the midpoints between neighbours, where ties-to-even decides
    for (int m = 0; m < 16; ++m) xs.push_back(std::ldexp(1.0 + (m + 0.5) / 16.0, e));
  xs.insert(xs.end(), {0.0, 447.9, 448.0, 463.9, 464.0, 500.0, 1e30, -1e30});
  const at::Tensor x = at::tensor(xs, at::kDouble);
  const at::Tensor got = e4m3_round(x);
  const at::Tensor got32 = e4m3_round(x.to(at::kFloat)).to(at::kDouble);
  int64_t bad = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = e4m3_reference(xs[i]);
    const double a = got[static_cast<int64_t>(i)].item<double>();
    const double b = got32[static_cast<int64_t>(i)].item<double>();
    // float32 input: the value was rounded to float32 first (no e4m3 tie moves by that)
    if (a != want || b != e4m3_reference(double(float(xs[i])))) {
      if (++bad <= 5) MESSAGE("x = " << xs[i] << ": reference " << want << ", ATen " << a << " / " << b);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("e4m3: weights per output channel, conv and transposed") {
  at::Tensor w = at::randn({4, 3, 3, 3}, at::TensorOptions().dtype(at::kDouble).device(at::kCPU));
  w[2] *= 1e-3;  // a small channel keeps its own scale: its relative error stays as small
  const at::Tensor q = quantize_weight_per_channel(w, false);
  for (int64_t c = 0; c < 4; ++c) {
    const double amax = w[c].abs().max().item<double>();
    const double err = (q[c] - w[c]).abs().max().item<double>();
    // e4m3's relative step is 2^-3: the rounding error is at most half a step of the largest binade
    CHECK(err <= amax * std::ldexp(1.0, -4) + 1e-300);
    CHECK(q[c].abs().max().item<double>() == doctest::Approx(amax).epsilon(1.0 / 16));
  }
  const at::Tensor t = at::randn({3, 5, 2, 2}, at::kDouble);  // conv_transpose: [Cin, Cout, ...]
  const at::Tensor qt = quantize_weight_per_channel(t, true);
  for (int64_t c = 0; c < 5; ++c) {
    const double amax = t.select(1, c).abs().max().item<double>();
    CHECK((qt.select(1, c) - t.select(1, c)).abs().max().item<double>() <= amax * std::ldexp(1.0, -4));
  }
}

TEST_CASE("e4m3: what an FP8 kernel reads (quantised values and scales) is what the emulation computes with") {
  // an activation: one scale (amax / 448), its e4m3 values those of the float64 reference
  at::Tensor x = at::randn({2, 3, 7, 5}, at::kDouble) * 3.0;
  x[1][2][3][4] = -11.5;
  const double s = e4m3_activation_scale(x);
  CHECK(s == doctest::Approx(x.abs().max().item<double>() / kE4m3Max).epsilon(1e-15));
  const at::Tensor q = e4m3_quantize(x, s);
  CHECK((q.scalar_type() == at::kFloat8_e4m3fn));
  CHECK(q.to(at::kDouble).abs().max().item<double>() == kE4m3Max);  // the amax maps to 448 exactly
  const at::Tensor flat = x.flatten(), qf = q.to(at::kDouble).flatten();
  int bad = 0;
  for (int64_t i = 0; i < flat.numel(); ++i) bad += qf[i].item<double>() != e4m3_reference(flat[i].item<double>() / s);
  CHECK(bad == 0);
  CHECK(at::equal(q.to(at::kDouble) * s, e4m3_fake_quant(x, s)));
  CHECK(e4m3_activation_scale(at::zeros({4})) == 1.0);  // no range to calibrate: no scaling
  // a weight: e4m3 values and a scale per output channel whose product is the emulation's weight
  for (bool transposed : {false, true}) {
    CAPTURE(transposed);
    at::Tensor w = at::randn({4, 6, 3, 3}, at::kFloat);
    w.select(transposed ? 1 : 0, 2).zero_();  // an all-zero channel keeps scale 1
    const E4m3Weight wq = quantize_weight_e4m3(w, transposed);
    const int64_t k = transposed ? 6 : 4;
    CHECK((wq.q.scalar_type() == at::kFloat8_e4m3fn));
    CHECK(wq.scale.dim() == 1);
    CHECK(wq.scale.numel() == k);
    CHECK(wq.scale[2].item<float>() == 1.0f);
    std::vector<int64_t> view(4, 1);
    view[transposed ? 1 : 0] = k;
    CHECK(at::equal(wq.q.to(at::kFloat) * wq.scale.view(view), quantize_weight_per_channel(w, transposed)));
  }
}

TEST_CASE("fp8-emulated executor: kept layers, calibration, error against float32") {
  const Graph g = make("dncnn", 2, 1, 1, {16}, 3);
  const Weights w = init_weights(g, 5);
  const at::Tensor x = at::rand({1, 1, 24, 20}, at::kFloat);
  const at::Tensor ref = make_eager(g, w, at::kCPU)->forward(x, 0.05);
  CHECK(fp8_kept_convs(g, "none").empty());
  CHECK(fp8_kept_convs(g, "head_tail").size() == 2);
  CHECK_THROWS_AS(fp8_kept_convs(g, "middle"), InputError);
  // "native": all but the FP8 kernel's layers; at 16 features this DnCNN has none, so every
  // convolution is kept; at 64, its middle ones run in FP8
  CHECK(fp8_kept_convs(g, "native").size() == 3);
  const Graph g64 = make("dncnn", 2, 1, 1, {64}, 5);
  const std::set<int> kept64 = fp8_kept_convs(g64, "native");
  CHECK(kept64.size() == 2);  // the first (1 in) and the last (1 out)
  for (int id : fp8_conv_candidates(g64)) CHECK(kept64.count(id) == 0);
  // "native_wide": native's, and the candidates of fewer than 128 channels: at 64 features every
  // DnCNN convolution is kept; of DRUNet's 56 candidates its first level's 16 (64 channels), so
  // FP8 runs on the 40 of levels 1-3 (128-512 channels, each at least 128 in and out)
  CHECK(fp8_kept_convs(g64, "native_wide").size() == 5);
  const Graph dr = test::same_channels::make("drunet", 2, 1, {64, 128, 256, 512}, 4);
  const std::vector<int> cand = fp8_conv_candidates(dr);
  REQUIRE(cand.size() == 56);
  const std::set<int> kept_native = fp8_kept_convs(dr, "native"), kept_wide = fp8_kept_convs(dr, "native_wide");
  CHECK(kept_wide.size() == kept_native.size() + 16);
  int wide = 0;
  for (const auto& n : dr.nodes) {
    if (n.op != OpKind::conv && n.op != OpKind::conv_transpose) continue;
    if (kept_native.count(n.id)) CHECK(kept_wide.count(n.id) == 1);  // native's kept stay kept
    if (!kept_wide.count(n.id)) {
      ++wide;
      CHECK(std::min(n.attrs.in_channels, n.attrs.out_channels) >= 128);
    }
  }
  CHECK(wide == 40);
  // what "fp8" runs in FP8: the candidates not kept, in their order (denoiser.cpp, nn_time)
  CHECK(fp8_run_convs(dr, "native") == cand);
  const std::vector<int> run_wide = fp8_run_convs(dr, "native_wide");
  CHECK(run_wide.size() == 40);
  for (int id : run_wide) CHECK(kept_wide.count(id) == 0);
  size_t next = 0;  // in the candidates' order
  for (int id : run_wide) {
    const auto it = std::find(cand.begin() + static_cast<std::ptrdiff_t>(next), cand.end(), id);
    CHECK(it != cand.end());
    next = static_cast<size_t>(it - cand.begin()) + 1;
  }
  CHECK(fp8_run_convs(g64, "native_wide").empty());
  // "native_deep": also the candidates below 256 channels in or out kept: FP8 on levels 2 and 3,
  // 16 + 8 of DRUNet's convolutions, a subset of native_wide's, in the candidates' order
  const std::vector<int> run_deep = fp8_run_convs(dr, "native_deep");
  CHECK(run_deep.size() == 24);
  for (int id : run_deep) {
    CHECK(std::find(run_wide.begin(), run_wide.end(), id) != run_wide.end());
    CHECK(std::min(dr.nodes[static_cast<size_t>(id)].attrs.in_channels, dr.nodes[static_cast<size_t>(id)].attrs.out_channels) >= 256);
  }
  CHECK(std::is_sorted(run_deep.begin(), run_deep.end(), [&](int a, int b) {
    return std::find(cand.begin(), cand.end(), a) < std::find(cand.begin(), cand.end(), b);
  }));
  CHECK(fp8_kept_convs(dr, "native_deep").size() == kept_native.size() + 32);
  CHECK_THROWS_AS(fp8_run_convs(dr, "middle"), InputError);
  CHECK(at::equal(make_fp8_emulated(g, w, at::kCPU, "native")->forward(x, 0.05), ref));  // nothing quantised
  double prev = 1e9;
  for (const char* keep : {"none", "head_tail"}) {
    auto ex = make_fp8_emulated(g, w, at::kCPU, keep);
    const at::Tensor a = ex->forward(x, 0.05);
    const at::Tensor b = ex->forward(x, 0.05);  // calibrated once: the same again
    CHECK(at::equal(a, b));
    const double rel = ((a - ref).norm() / ref.norm()).item<double>();
    MESSAGE(std::string(keep) << ": relative L2 error against float32 " << rel);
    CHECK(rel > 0);      // the quantisation is applied
    CHECK(rel < 0.2);    // and FP8's few bits are not lost
    CHECK(rel <= prev);  // keeping layers in float32 does not make it worse here
    prev = rel;
  }
}
