#include "pnp/roofline.hpp"

#include <algorithm>
#include <cctype>

namespace pnp::roofline {

namespace {
double numel(const std::vector<int64_t>& s) {
  double n = 1;
  for (auto v : s) n *= static_cast<double>(v);
  return n;
}
double spatial(const std::vector<int64_t>& s) {  // B * prod(spatial)
  double n = static_cast<double>(s[0]);
  for (size_t i = 2; i < s.size(); ++i) n *= static_cast<double>(s[i]);
  return n;
}
std::string lower(std::string_view s) {
  std::string o(s);
  std::transform(o.begin(), o.end(), o.begin(), [](unsigned char c) { return std::tolower(c); });
  return o;
}
}  // namespace

const std::vector<GpuPeak>& peak_table() {
  // NVIDIA data sheets, SXM parts, dense (no sparsity). TF32 and HBM are the study's values.
  static const std::vector<GpuPeak> t = {
      {"A100", 156.0, 19.5, 312.0, 2.039},
      {"H100", 494.0, 67.0, 989.0, 3.35},
      {"H200", 494.0, 67.0, 989.0, 4.8},
  };
  return t;
}

const GpuPeak& peak_for(std::string_view gpu) {
  const std::string g = lower(gpu);
  for (const auto& p : peak_table())
    if (g.find(lower(p.name)) != std::string::npos) return p;
  std::string known;
  for (const auto& p : peak_table()) known += (known.empty() ? "" : ", ") + p.name;
  throw InputError("no roofline peak for GPU '" + std::string(gpu) + "' (known: " + known + ")");
}

double attainable_tflops(const GpuPeak& p, double intensity) {
  return std::min(p.tf32_tflops, intensity * p.hbm_tbps);
}

double roofline_seconds(const GpuPeak& p, double flops, double bytes) {
  return std::max(flops / (p.tf32_tflops * 1e12), bytes / (p.hbm_tbps * 1e12));
}

Counts count(const nn::Graph& g, const std::vector<int64_t>& input_shape, int64_t element_bytes) {
  using nn::OpKind;
  const auto shapes = nn::infer_shapes(g, input_shape);
  Counts c;
  c.input_shape = input_shape;
  c.pixels = spatial(input_shape);
  const double eb = static_cast<double>(element_bytes);
  for (const auto& n : g.nodes) {
    OpCount o;
    o.node = n.id;
    o.name = n.name;
    o.op = std::string(nn::to_string(n.op));
    o.output_shape = shapes[n.id];
    const double out = numel(shapes[n.id]);
    double in = 0;
    for (int i : n.inputs) in += numel(shapes[i]);
    double weight = 0, all_params = 0;
    for (const auto& p : n.params) {
      all_params += static_cast<double>(p.numel());
      if (p.role == "weight") weight += static_cast<double>(p.numel());
    }
    const auto& a = n.attrs;
    double taps = 1;
    for (auto k : a.kernel) taps *= static_cast<double>(k);
    switch (n.op) {
      case OpKind::conv:
        o.flops_study = 2.0 * a.out_channels * (static_cast<double>(a.in_channels) / a.groups * taps) *
                        spatial(shapes[n.id]);
        o.flops = o.flops_study;
        break;
      case OpKind::conv_transpose:
        o.flops_study = 2.0 * a.out_channels * (static_cast<double>(a.in_channels) / a.groups * taps) *
                        spatial(shapes[n.id]);
        o.flops = 2.0 * a.in_channels * (static_cast<double>(a.out_channels) / a.groups * taps) *
                  spatial(shapes[n.inputs[0]]);
        break;
      default:
        break;
    }
    switch (n.op) {
      case OpKind::conv:
      case OpKind::conv_transpose:
      case OpKind::batch_norm:
      case OpKind::relu:
        o.bytes_study = 4.0 * (in + out + weight);
        o.bytes = eb * (in + out + all_params);
        break;
      case OpKind::add:
      case OpKind::concat:
      case OpKind::max_pool:
      case OpKind::upsample_nearest:
        o.bytes = eb * (in + out);
        break;
      case OpKind::pad:
        o.bytes = out == numel(shapes[n.inputs[0]]) ? 0 : eb * (in + out);  // a no-op pad is skipped
        break;
      case OpKind::sigma_channel:
        o.bytes = eb * out;
        break;
      default:  // input, crop (a view)
        break;
    }
    c.flops_study += o.flops_study;
    c.flops += o.flops;
    c.bytes_study += o.bytes_study;
    c.bytes += o.bytes;
    c.ops.push_back(std::move(o));
  }
  return c;
}

}  // namespace pnp::roofline
