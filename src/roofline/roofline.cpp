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

std::vector<std::vector<int>> readers_of(const nn::Graph& g) {
  std::vector<std::vector<int>> r(g.nodes.size());
  for (const auto& nd : g.nodes)
    for (int i : nd.inputs) r[i].push_back(nd.id);
  return r;
}

// Whether pad node id pads anything (a pad to the same shape is skipped: its input).
bool pads(const nn::Graph& g, const std::vector<std::vector<int64_t>>& shapes, int id) {
  const int in = g.nodes[id].inputs[0];
  for (int d = 0; d < g.dim; ++d)
    if (shapes[id][2 + d] != shapes[in][2 + d]) return true;
  return false;
}

// The native executor's fusion groups (pnp/nn/native.hpp): conv [-> BN] -> ReLU, or conv [-> BN]
// -> add (the conv on either side) [-> ReLU], each link on a single-reader value. stage[v]: 1 conv,
// 2 folded BN, 3 fused add, 4 fused ReLU (the group ends), 0 not in a group; fused[v]: the value a
// group member v continues (its input in the group: the conv's side of a fused add), -1 for none.
struct Groups {
  std::vector<int> stage, fused;
};
Groups native_groups(const nn::Graph& g, const std::vector<std::vector<int>>& readers) {
  using nn::OpKind;
  const int n = static_cast<int>(g.nodes.size());
  Groups fg{std::vector<int>(n, 0), std::vector<int>(n, -1)};
  auto open_group = [&](int v, int max_stage) {
    return v > 0 && v != g.output() && readers[v].size() == 1 && fg.stage[v] >= 1 && fg.stage[v] <= max_stage;
  };
  auto join = [&](int id, int v, int stage) {
    fg.stage[id] = stage;
    fg.fused[id] = v;
  };
  for (const auto& nd : g.nodes) {
    const int id = nd.id;
    if (id == 0) continue;
    const int in = nd.inputs.empty() ? -1 : nd.inputs[0];
    switch (nd.op) {
      case OpKind::conv:
        fg.stage[id] = 1;
        break;
      case OpKind::relu:
        if (open_group(in, 3)) join(id, in, 4);
        break;
      case OpKind::batch_norm:
        if (open_group(in, 1)) join(id, in, 2);
        break;
      case OpKind::add:
        for (int k = 0; k < 2 && fg.stage[id] == 0; ++k)
          if (nd.inputs.size() == 2 && nd.inputs[0] != nd.inputs[1] && open_group(nd.inputs[k], 2))
            join(id, nd.inputs[k], 3);
        break;
      default:
        break;
    }
  }
  return fg;
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
  const auto readers = readers_of(g);
  ActivationMemory m;
  for (const auto& nd : g.nodes)
    for (const auto& p : nd.params) m.weights_bytes += eb * numel(p.shape);

  // buffer[v]: the value whose allocation v lives in.
  std::vector<int> buffer(n);
  const bool native = style == ExecutorStyle::native;
  const Groups fg = native ? native_groups(g, readers) : Groups{std::vector<int>(n, 0), std::vector<int>(n, -1)};
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
      case OpKind::pad:
        alias = !pads(g, shapes, id);
        break;
      case OpKind::sigma_channel:
        alias = native;  // eager: a full [B, 1, ...] map; native: an expanded one-element buffer
        break;
      case OpKind::relu: {
        const OpKind p = g.nodes[in].op;
        const bool last = readers[in].size() == 1 || readers[in].back() == id;
        alias = fg.stage[id] == 4 ||
                (nd.attrs.inplace && last && p != OpKind::input && p != OpKind::pad && p != OpKind::crop);
        break;
      }
      case OpKind::batch_norm:
        alias = fg.stage[id] == 2;
        break;
      case OpKind::add:
        if (fg.stage[id] == 3) buffer[id] = buffer[fg.fused[id]];
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

NativeFloor native_floor(const nn::Graph& g, const std::vector<int64_t>& input_shape, int64_t element_bytes,
                         const std::set<int>& fp8_convs, const GpuPeak& peak) {
  using nn::OpKind;
  const int n = static_cast<int>(g.nodes.size());
  if (element_bytes != 2 && element_bytes != 4)
    throw InputError("native floor: the native executor runs 2- or 4-byte elements (bf16, float32), not " +
                     std::to_string(element_bytes));
  for (int v : fp8_convs)
    if (v < 0 || v >= n || g.nodes[v].op != OpKind::conv)
      throw InputError("native floor: FP8 node " + std::to_string(v) + " is not a convolution");
  if (!fp8_convs.empty() && element_bytes != 2) throw InputError("native floor: FP8 convolutions run beside bf16 ones");
  if (!fp8_convs.empty() && peak.fp8_tflops <= 0) throw InputError("native floor: " + peak.name + " has no FP8 tensor cores");
  const auto shapes = nn::infer_shapes(g, input_shape);  // InputError for an impossible shape
  const Counts counts = count(g, input_shape, element_bytes);
  const auto readers = readers_of(g);
  const Groups fg = native_groups(g, readers);
  const double eb = static_cast<double>(element_bytes);

  // origin[v]: the stored value that view v shows (crop, a pad that pads nothing); -1 for the
  // sigma map, a broadcast of one number
  std::vector<int> origin(n);
  std::vector<bool> view(n, false), continued(n, false);
  for (const auto& nd : g.nodes) {
    const int id = nd.id;
    origin[id] = id;
    if (id == 0) continue;
    const int in = nd.inputs[0];
    if (nd.op == OpKind::crop || (nd.op == OpKind::pad && !pads(g, shapes, id))) origin[id] = origin[in], view[id] = true;
    if (nd.op == OpKind::sigma_channel) origin[id] = -1, view[id] = true;
    if (fg.fused[id] >= 0) continued[fg.fused[id]] = true;
  }
  // an add no conv took as its epilogue, whose one reader is a conv reading it as its input:
  // folded into that conv, which reads the two summands (the native plan's PlanStep::x2; pnp's
  // tail kernel sums DRUNet's last skip add as it loads them); such a conv runs in bf16
  std::vector<int> folded(n, -1);  // conv -> its folded add
  std::set<int> fp8 = fp8_convs;
  for (const auto& nd : g.nodes) {
    if (nd.op != OpKind::add || fg.stage[nd.id] != 0 || nd.inputs.size() != 2 || nd.inputs[0] == nd.inputs[1] ||
        readers[nd.id].size() != 1 || nd.id == g.output())
      continue;
    const auto& c = g.nodes[readers[nd.id][0]];
    if (c.op == OpKind::conv && c.inputs.size() == 1) folded[c.id] = nd.id, fp8.erase(c.id);
  }
  auto fp8_read = [&](const nn::Node& m, int k) { return k == 0 && fp8.count(m.id) > 0; };
  // how each stored value is kept: in the element type for any reader but an FP8 conv's input,
  // in e4m3 for an FP8 conv's input
  std::vector<bool> plain(n, false), e4m3(n, false);
  for (const auto& m : g.nodes) {
    if (view[m.id]) continue;
    for (size_t k = 0; k < m.inputs.size(); ++k) {
      const int u = m.inputs[k], o = origin[u];
      if (o < 0 || u == fg.fused[m.id]) continue;
      (fp8_read(m, static_cast<int>(k)) ? e4m3 : plain)[o] = true;
    }
  }
  if (origin[g.output()] >= 0) plain[origin[g.output()]] = true;

  NativeFloor f;
  f.gpu = peak.name;
  std::vector<int> kernel_of(n, -1);  // the index in f.kernels of the kernel node v belongs to
  for (const auto& nd : g.nodes) {
    const int id = nd.id;
    if (id == 0 || view[id] || std::find(folded.begin(), folded.end(), id) != folded.end()) continue;
    if (fg.fused[id] >= 0) {
      kernel_of[id] = kernel_of[fg.fused[id]];
    } else {
      KernelFloor k;
      k.node = id;
      k.name = nd.name;
      k.op = std::string(nn::to_string(nd.op));
      const bool products = nd.op == OpKind::conv || nd.op == OpKind::conv_transpose;
      k.precision = fp8.count(id) ? "fp8" : element_bytes == 2 ? "bf16" : products ? "tf32" : "fp32";
      if (folded[id] >= 0) k.fused = "its input's add";
      kernel_of[id] = static_cast<int>(f.kernels.size());
      f.kernels.push_back(k);
    }
    KernelFloor& k = f.kernels[kernel_of[id]];
    k.last = id;
    if (id != k.node) k.fused += (k.fused.empty() ? "" : " ") + std::string(nn::to_string(nd.op));
    k.flops += counts.ops[id].flops;
    for (size_t i = 0; i < nd.inputs.size(); ++i) {
      const int u = nd.inputs[i];
      if (u == folded[id]) {  // the two summands instead of their sum
        for (int v : g.nodes[u].inputs)
          if (origin[v] >= 0) k.bytes += numel(shapes[v]) * eb;
        continue;
      }
      if (origin[u] < 0 || u == fg.fused[id]) continue;
      k.bytes += numel(shapes[u]) * (fp8_read(nd, static_cast<int>(i)) ? 1.0 : eb);
    }
    for (const auto& p : nd.params)
      k.bytes += static_cast<double>(p.numel()) * (fp8.count(id) && p.role == "weight" ? 1.0 : eb);
    if (!continued[id]) k.bytes += numel(shapes[id]) * ((plain[id] || !e4m3[id] ? eb : 0.0) + (e4m3[id] ? 1.0 : 0.0));
  }
  for (auto& k : f.kernels) {
    const double roof = k.precision == "fp8" ? peak.fp8_tflops : k.precision == "bf16" ? peak.bf16_tflops : peak.tf32_tflops;
    k.compute_s = k.flops / (roof * 1e12);
    k.memory_s = k.bytes / (peak.hbm_tbps * 1e12);
    f.seconds += k.seconds();
    f.compute_s += k.compute_s;
    f.memory_s += k.memory_s;
    f.flops += k.flops;
    f.bytes += k.bytes;
    f.fp8_kernels += k.precision == "fp8";
  }
  return f;
}

std::string report(const nn::Graph& g, const std::vector<int64_t>& shape, int64_t element_bytes,
                   const ReportOptions& options) {
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
  const std::vector<GpuPeak>& peaks = options.peaks.empty() ? peak_table() : options.peaks;
  for (const auto& p : peaks) {
    const double roof = element_bytes == 2 ? p.bf16_tflops : p.tf32_tflops;
    const double t = std::max(c.flops / (roof * 1e12), c.bytes / (p.hbm_tbps * 1e12));
    line("  floor %-5s  %.4g ms (%s roof %.0f TF/s, HBM %.2f TB/s: %s-bound)\n", p.name.c_str(), t * 1e3,
         element_bytes == 2 ? "BF16" : "TF32", roof, p.hbm_tbps,
         c.flops / (roof * 1e12) >= c.bytes / (p.hbm_tbps * 1e12) ? "compute" : "memory");
  }
  const bool native = element_bytes == 2 || element_bytes == 4;
  NativeFloor last;
  for (const auto& p : peaks) {
    if (!native) continue;
    if (!options.fp8_convs.empty() && p.fp8_tflops <= 0) {
      line("  native floor %-5s none: no FP8 tensor cores\n", p.name.c_str());
      continue;
    }
    last = native_floor(g, shape, element_bytes, options.fp8_convs, p);
    const std::string fp8 =
        options.fp8_convs.empty() ? "" : ", " + std::to_string(last.fp8_kernels) + " convolutions in FP8";
    line("  native floor %-5s %.4g ms, kernel by kernel (%zu kernels%s; their compute %.4g ms, memory %.4g ms; "
         "%.4g GB moved)\n",
         p.name.c_str(), last.seconds * 1e3, last.kernels.size(), fp8.c_str(), last.compute_s * 1e3,
         last.memory_s * 1e3, last.bytes / 1e9);
  }
  if (options.per_kernel && !last.kernels.empty()) {
    // one line per kind of kernel, in the order each kind first runs
    const auto shapes = nn::infer_shapes(g, shape);
    struct Kind {
      std::string key;
      int count = 0;
      double floor = 0, compute = 0, memory = 0;
    };
    std::vector<Kind> kinds;
    for (const auto& k : last.kernels) {
      const auto& nd = g.nodes[k.node];
      const auto& in = shapes[nd.inputs.empty() ? k.node : nd.inputs[0]];
      const auto& out = shapes[k.last];
      std::vector<int64_t> spatial_out(out.begin() + 2, out.end());
      const std::string key = k.op + (k.fused.empty() ? "" : " + " + k.fused) + " " + std::to_string(in[1]) + "->" +
                              std::to_string(out[1]) + " ch at " + nn::shape_string(spatial_out) + ", " + k.precision;
      auto it = std::find_if(kinds.begin(), kinds.end(), [&](const Kind& q) { return q.key == key; });
      if (it == kinds.end()) it = kinds.insert(kinds.end(), Kind{key});
      it->count += 1, it->floor += k.seconds(), it->compute += k.compute_s, it->memory += k.memory_s;
    }
    line("  native floor %s, per kind of kernel: calls, floor, compute, memory (ms)\n", last.gpu.c_str());
    for (const auto& q : kinds)
      line("    %-60s %3d  %8.4g  %8.4g  %8.4g\n", q.key.c_str(), q.count, q.floor * 1e3, q.compute * 1e3,
           q.memory * 1e3);
  }
  line("  weights      %.4g GB\n", me.weights_bytes / 1e9);
  line("  activations  eager %.4g GB peak (at %s), native %.4g GB peak (at %s); workspaces not included\n",
       me.peak_bytes / 1e9, me.peak_node.c_str(), mn.peak_bytes / 1e9, mn.peak_node.c_str());
  return o;
}

}  // namespace pnp::roofline

