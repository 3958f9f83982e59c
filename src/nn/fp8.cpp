// FP8 (e4m3) emulation of the denoiser (include/pnp/nn/fp8.hpp).
#include "pnp/nn/fp8.hpp"
#include "pnp/nn/native.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

namespace pnp::nn {

double e4m3_reference(double v) {
  if (std::isnan(v)) return v;
  const double a = std::fabs(v);
  if (a >= kE4m3Max) return std::copysign(kE4m3Max, v);
  int e = 0;
  std::frexp(a, &e);                          // a = m 2^e, m in [0.5, 1): its leading bit is 2^(e-1)
  const int exponent = std::max(e - 1, -6);   // subnormals share the smallest normal's exponent
  const double step = std::ldexp(1.0, exponent - 3);  // 3 mantissa bits
  const double q = std::nearbyint(a / step) * step;   // ties to even (the default rounding mode)
  return std::copysign(std::min(q, kE4m3Max), v);
}

namespace {
// v in float8_e4m3fn, saturated at +-448 first (as a static FP8 kernel saturates)
at::Tensor to_e4m3(const at::Tensor& v) { return v.clamp(-kE4m3Max, kE4m3Max).to(at::kFloat8_e4m3fn); }
}  // namespace

at::Tensor e4m3_round(const at::Tensor& x) { return to_e4m3(x).to(x.scalar_type()); }

double e4m3_activation_scale(const at::Tensor& x) {
  const double amax = x.abs().max().item<double>();
  return amax > 0 && std::isfinite(amax) ? amax / kE4m3Max : 1.0;
}

at::Tensor e4m3_quantize(const at::Tensor& x, double scale) { return to_e4m3(x / scale); }

at::Tensor e4m3_fake_quant(const at::Tensor& x, double scale) { return e4m3_round(x / scale) * scale; }

namespace {
// The weight's output-channel axis and the per-channel scale, broadcastable against w.
at::Tensor channel_scale(const at::Tensor& w, bool transposed) {
  const int64_t out_dim = transposed ? 1 : 0;
  std::vector<int64_t> reduce;
  for (int64_t d = 0; d < w.dim(); ++d)
    if (d != out_dim) reduce.push_back(d);
  at::Tensor amax = w.abs().amax(reduce, /*keepdim=*/true);
  return at::where(amax > 0, amax / kE4m3Max, at::ones_like(amax));
}
}  // namespace

E4m3Weight quantize_weight_e4m3(const at::Tensor& w, bool transposed) {
  const at::Tensor scale = channel_scale(w, transposed);
  return {to_e4m3(w / scale), scale.flatten()};
}

at::Tensor quantize_weight_per_channel(const at::Tensor& w, bool transposed) {
  const at::Tensor scale = channel_scale(w, transposed);
  return e4m3_round(w / scale) * scale;
}

std::set<int> fp8_kept_convs(const Graph& g, const std::string& keep) {
  std::vector<int> convs;
  for (const auto& n : g.nodes)
    if (n.op == OpKind::conv || n.op == OpKind::conv_transpose) convs.push_back(n.id);
  if (keep == "none" || convs.empty()) return {};
  if (keep == "head") return {convs.front()};
  if (keep == "tail") return {convs.back()};
  if (keep == "head_tail") return {convs.front(), convs.back()};
  if (keep == "native" || keep == "native_wide" || keep == "native_deep") {  // what "fp8" runs outside FP8
    const std::vector<int> fp8 = fp8_conv_candidates(g);
    // native_wide, native_deep: the candidates of fewer than 128 or 256 channels in or out kept too
    const int64_t least = keep == "native_wide" ? 128 : keep == "native_deep" ? 256 : 0;
    std::set<int> kept;
    for (const auto& n : g.nodes) {
      if (n.op != OpKind::conv && n.op != OpKind::conv_transpose) continue;
      const bool candidate = std::find(fp8.begin(), fp8.end(), n.id) != fp8.end();
      if (!candidate || std::min(n.attrs.in_channels, n.attrs.out_channels) < least) kept.insert(n.id);
    }
    return kept;
  }
  throw InputError("fp8 kept layers: expected \"none\", \"head\", \"tail\", \"head_tail\", \"native\", "
                   "\"native_wide\" or \"native_deep\", got \"" + keep + "\"");
}

std::vector<int> fp8_run_convs(const Graph& g, const std::string& keep) {
  const std::set<int> kept = fp8_kept_convs(g, keep);
  std::vector<int> run;
  for (int id : fp8_conv_candidates(g))
    if (!kept.count(id)) run.push_back(id);
  return run;
}

std::unique_ptr<Executor> make_fp8_emulated(const Graph& g, const Weights& weights, at::Device device,
                                            const std::string& keep) {
  const std::set<int> kept = fp8_kept_convs(g, keep);
  std::set<int> quantised;
  for (const auto& n : g.nodes)
    if ((n.op == OpKind::conv || n.op == OpKind::conv_transpose) && !kept.count(n.id)) quantised.insert(n.id);
  return make_fp8_emulated(g, weights, device, quantised, "fp8-emulated (" + keep + " kept in fp32)");
}

std::unique_ptr<Executor> make_fp8_emulated(const Graph& g, const Weights& weights, at::Device device,
                                            const std::set<int>& quantised, const std::string& name) {
  Weights q = weights;
  for (const auto& n : g.nodes) {
    if ((n.op != OpKind::conv && n.op != OpKind::conv_transpose) || !quantised.count(n.id)) continue;
    const std::string& key = n.params.at(0).key;  // the weight (the bias stays: FP8 kernels add it in fp32)
    q[key] = quantize_weight_per_channel(weights.at(key).to(at::kFloat), n.op == OpKind::conv_transpose);
  }
  // Per-tensor activation scales, calibrated on the first call (one per quantised convolution).
  struct Calibration {
    std::mutex mu;
    std::map<int, double> scale;
  };
  auto cal = std::make_shared<Calibration>();
  auto hook = [quantised, cal](const Node& n, const at::Tensor& x) -> at::Tensor {
    if (!quantised.count(n.id)) return x;
    double s = 0;
    {
      std::lock_guard<std::mutex> lock(cal->mu);
      auto it = cal->scale.find(n.id);
      if (it == cal->scale.end()) it = cal->scale.emplace(n.id, e4m3_activation_scale(x)).first;
      s = it->second;
    }
    return e4m3_fake_quant(x, s);
  };
  return make_eager(g, q, device, at::kFloat, nullptr, hook, name);
}

}  // namespace pnp::nn
