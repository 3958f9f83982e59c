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
      {"H100", 494.0, 67.0, 989.0, 3.35, 1979.0},
      {"H200", 494.0, 67.0, 989.0, 4.8, 1979.0},
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
      case OpKind::halo:  // the grown copy the eager executor makes (the native one is copy-free where
                          // plan.hpp allows; the exchange itself: nn::layer_halo_traffic)
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

ActivationMemory activation_memory(const nn::Graph& g, const std::vector<int64_t>& input_shape,
                                   int64_t element_bytes, ExecutorStyle style) {
  using nn::OpKind;
  const auto shapes = nn::infer_shapes(g, input_shape);
  const int n = static_cast<int>(g.nodes.size());
  const double eb = static_cast<double>(element_bytes);
  std::vector<std::vector<int>> readers(n);
  for (const auto& nd : g.nodes)
    for (int i : nd.inputs) readers[i].push_back(nd.id);
  ActivationMemory m;
  for (const auto& nd : g.nodes)
    for (const auto& p : nd.params) m.weights_bytes += eb * numel(p.shape);

  // buffer[v]: the value whose allocation v lives in.
  std::vector<int> buffer(n);
  const bool native = style == ExecutorStyle::native;
  // Native fusion groups (pnp/nn/native.hpp): conv [-> BN] -> ReLU, or conv [-> BN] -> add
  // (the conv on either side) [-> ReLU], each link on a single-reader value. stage[v]: 1 conv,
  // 2 folded BN, 3 fused add, 4 fused ReLU (the group ends), 0 not in a group.
  std::vector<int> stage(n, 0);
  auto open_group = [&](int v, int max_stage) {
    return v > 0 && v != g.output() && readers[v].size() == 1 && stage[v] >= 1 && stage[v] <= max_stage;
  };
  for (const auto& nd : g.nodes) {
    const int id = nd.id;
    buffer[id] = id;
    if (id == 0) continue;
    const int in = nd.inputs.empty() ? -1 : nd.inputs[0];
    bool alias = false;
    switch (nd.op) {
      case OpKind::crop:
        alias = true;
        break;
      case OpKind::pad: {
        bool any = false;
        for (int d = 0; d < g.dim; ++d) any = any || shapes[id][2 + d] != shapes[in][2 + d];
        alias = !any;
        break;
      }
      case OpKind::sigma_channel:
        alias = native;  // eager: a full [B, 1, ...] map; native: an expanded one-element buffer
        break;
      case OpKind::conv:
        stage[id] = 1;
        break;
      case OpKind::relu: {
        const OpKind p = g.nodes[in].op;
        const bool last = readers[in].size() == 1 || readers[in].back() == id;
        if (native && open_group(in, 3)) stage[id] = 4;
        alias = stage[id] == 4 ||
                (nd.attrs.inplace && last && p != OpKind::input && p != OpKind::pad && p != OpKind::crop);
        break;
      }
      case OpKind::batch_norm:
        if (native && open_group(in, 1)) stage[id] = 2;
        alias = stage[id] == 2;
        break;
      case OpKind::add:
        for (int k = 0; native && k < 2 && stage[id] == 0; ++k)
          if (nd.inputs.size() == 2 && nd.inputs[0] != nd.inputs[1] && open_group(nd.inputs[k], 2)) {
            stage[id] = 3;
            buffer[id] = buffer[nd.inputs[k]];
          }
        break;
      default:
        break;
    }
    if (alias) buffer[id] = buffer[in];
  }
  // A buffer lives until the last reader of any value in it; the output lives to the end.
  std::vector<int> end(n, -1);
  for (int v = 0; v < n; ++v) {
    int last = v;
    for (int r : readers[v]) last = std::max(last, r);
    if (v == g.output()) last = n;
    end[buffer[v]] = std::max(end[buffer[v]], last);
  }
  std::vector<std::vector<int>> freed_after(n + 1);
  for (int b = 0; b < n; ++b)
    if (buffer[b] == b) freed_after[end[b]].push_back(b);
  double live = 0;
  for (int v = 0; v < n; ++v) {
    m.largest_bytes = std::max(m.largest_bytes, eb * numel(shapes[v]));
    if (buffer[v] == v) live += eb * numel(shapes[v]);
    if (live > m.peak_bytes) {
      m.peak_bytes = live;
      m.peak_node = g.nodes[v].name;
    }
    const OpKind op = g.nodes[v].op;
    if (op == OpKind::conv || op == OpKind::conv_transpose)
      m.conv_temp_peak_bytes = std::max(
          m.conv_temp_peak_bytes, live + 4.0 * std::max(numel(shapes[v]), numel(shapes[g.nodes[v].inputs[0]])));
    for (int b : freed_after[v]) live -= eb * numel(shapes[b]);
  }
  m.conv_temp_peak_bytes = std::max(m.conv_temp_peak_bytes, m.peak_bytes);
  return m;
}

std::string report(const nn::Graph& g, const std::vector<int64_t>& shape, int64_t element_bytes) {
  const Counts c = count(g, shape, element_bytes);
  const auto me = activation_memory(g, shape, element_bytes, ExecutorStyle::eager);
  const auto mn = activation_memory(g, shape, element_bytes, ExecutorStyle::native);
  char b[512];
  std::string o;
  auto line = [&](const char* fmt, auto... v) {
    std::snprintf(b, sizeof b, fmt, v...);
    o += b;
  };
  line("%s %dD, input %s, %lld-byte elements, %lld parameters\n", g.architecture.c_str(), g.dim,
       nn::shape_string(shape).c_str(), static_cast<long long>(element_bytes),
       static_cast<long long>(g.parameter_count()));
  line("  FLOPs        %.4g TFLOP (study convention %.4g), %.0f MAC/pixel\n", c.flops / 1e12, c.flops_study / 1e12,
       c.macs_per_pixel());
  line("  bytes        %.4g GB moved by the ops (study convention %.4g)\n", c.bytes / 1e9, c.bytes_study / 1e9);
  line("  intensity    %.1f FLOP/B (study %.1f)\n", c.intensity(), c.intensity_study());
  for (const auto& p : peak_table()) {
    const double roof = element_bytes == 2 ? p.bf16_tflops : p.tf32_tflops;
    const double t = std::max(c.flops / (roof * 1e12), c.bytes / (p.hbm_tbps * 1e12));
    line("  floor %-5s  %.4g ms (%s roof %.0f TF/s, HBM %.2f TB/s: %s-bound)\n", p.name.c_str(), t * 1e3,
         element_bytes == 2 ? "BF16" : "TF32", roof, p.hbm_tbps,
         c.flops / (roof * 1e12) >= c.bytes / (p.hbm_tbps * 1e12) ? "compute" : "memory");
  }
  line("  weights      %.4g GB\n", me.weights_bytes / 1e9);
  line("  activations  eager %.4g GB peak (at %s), native %.4g GB peak (at %s); workspaces not included\n",
       me.peak_bytes / 1e9, me.peak_node.c_str(), mn.peak_bytes / 1e9, mn.peak_node.c_str());
  return o;
}

}  // namespace pnp::roofline

