#include "pnp/nn/ir.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <numeric>
#include <sstream>

namespace pnp::nn {

namespace {
constexpr std::pair<OpKind, std::string_view> kOpNames[] = {
    {OpKind::input, "input"},
    {OpKind::sigma_channel, "sigma_channel"},
    {OpKind::conv, "conv"},
    {OpKind::conv_transpose, "conv_transpose"},
    {OpKind::batch_norm, "batch_norm"},
    {OpKind::relu, "relu"},
    {OpKind::add, "add"},
    {OpKind::concat, "concat"},
    {OpKind::max_pool, "max_pool"},
    {OpKind::upsample_nearest, "upsample_nearest"},
    {OpKind::pad, "pad"},
    {OpKind::crop, "crop"},
};

std::string json_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += c;
    }
  }
  return o;
}

std::string json_ints(const std::vector<int64_t>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) o += ",";
    o += std::to_string(v[i]);
  }
  return o + "]";
}

std::string json_double(double d) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", d);
  return b;
}

std::string graph_json(const Graph& g, bool with_hash) {
  std::ostringstream o;
  o << "{\n  \"format\": \"pnp-ir/1\",\n  \"architecture\": \"" << json_escape(g.architecture)
    << "\",\n  \"dim\": " << g.dim << ",\n  \"in_channels\": " << g.in_channels
    << ",\n  \"out_channels\": " << g.out_channels << ",\n  \"uses_sigma\": "
    << (g.uses_sigma ? "true" : "false") << ",\n  \"alignment\": " << g.alignment()
    << ",\n  \"output\": " << g.output() << ",\n  \"nodes\": [";
  for (const auto& n : g.nodes) {
    const auto& a = n.attrs;
    o << (n.id ? "," : "") << "\n    {\"id\": " << n.id << ", \"name\": \"" << json_escape(n.name)
      << "\", \"op\": \"" << to_string(n.op) << "\", \"inputs\": [";
    for (size_t i = 0; i < n.inputs.size(); ++i) o << (i ? "," : "") << n.inputs[i];
    o << "], \"attrs\": {";
    std::vector<std::string> f;
    switch (n.op) {
      case OpKind::conv:
      case OpKind::conv_transpose:
        f.push_back("\"in_channels\": " + std::to_string(a.in_channels));
        f.push_back("\"out_channels\": " + std::to_string(a.out_channels));
        f.push_back("\"kernel\": " + json_ints(a.kernel));
        f.push_back("\"stride\": " + json_ints(a.stride));
        f.push_back("\"padding\": " + json_ints(a.padding));
        if (n.op == OpKind::conv_transpose) f.push_back("\"output_padding\": " + json_ints(a.output_padding));
        f.push_back("\"groups\": " + std::to_string(a.groups));
        f.push_back(std::string("\"bias\": ") + (a.bias ? "true" : "false"));
        break;
      case OpKind::batch_norm:
        f.push_back("\"channels\": " + std::to_string(a.out_channels));
        f.push_back("\"eps\": " + json_double(a.eps));
        f.push_back("\"momentum\": " + json_double(a.momentum));
        break;
      case OpKind::relu:
        f.push_back(std::string("\"inplace\": ") + (a.inplace ? "true" : "false"));
        break;
      case OpKind::max_pool:
        f.push_back("\"kernel\": " + json_ints(a.kernel));
        f.push_back("\"stride\": " + json_ints(a.stride));
        f.push_back("\"padding\": " + json_ints(a.padding));
        break;
      case OpKind::upsample_nearest:
        f.push_back("\"scale\": " + json_ints(a.scale));
        break;
      case OpKind::pad:
        f.push_back("\"multiple\": " + std::to_string(a.multiple));
        f.push_back("\"mode\": \"" + json_escape(a.mode) + "\"");
        break;
      case OpKind::concat:
        f.push_back("\"axis\": 1");
        break;
      default:
        break;
    }
    for (size_t i = 0; i < f.size(); ++i) o << (i ? ", " : "") << f[i];
    o << "}, \"params\": [";
    for (size_t i = 0; i < n.params.size(); ++i) {
      const auto& p = n.params[i];
      o << (i ? ", " : "") << "{\"role\": \"" << p.role << "\", \"key\": \"" << json_escape(p.key)
        << "\", \"shape\": " << json_ints(p.shape)
        << ", \"trainable\": " << (p.trainable ? "true" : "false") << "}";
    }
    o << "]}";
  }
  o << "\n  ]";
  if (with_hash) o << ",\n  \"hash\": \"" << g.hash() << "\"";
  o << "\n}\n";
  return o.str();
}

int64_t ceil_to(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

[[noreturn]] void shape_error(const Graph& g, const Node& n, const std::string& what) {
  throw InputError(g.architecture + " denoiser: node '" + n.name + "' (" + std::string(to_string(n.op)) +
                   "): " + what);
}
}  // namespace

std::string_view to_string(OpKind k) {
  for (const auto& [op, s] : kOpNames)
    if (op == k) return s;
  return "unknown";
}

OpKind op_from_string(std::string_view s) {
  for (const auto& [op, name] : kOpNames)
    if (name == s) return op;
  throw InputError("unknown IR op '" + std::string(s) + "'");
}

int64_t Param::numel() const {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

const Param* Node::param(std::string_view role) const {
  for (const auto& p : params)
    if (p.role == role) return &p;
  return nullptr;
}

const Node& Graph::node(std::string_view name) const {
  for (const auto& n : nodes)
    if (n.name == name) return n;
  throw Error(architecture + " IR has no node '" + std::string(name) + "'");
}

std::vector<const Param*> Graph::params() const {
  std::vector<const Param*> out;
  for (const auto& n : nodes)
    for (const auto& p : n.params) out.push_back(&p);
  return out;
}

int64_t Graph::parameter_count() const {
  int64_t c = 0;
  for (const auto* p : params())
    if (p->trainable) c += p->numel();
  return c;
}

bool Graph::pads_input() const {
  return std::any_of(nodes.begin(), nodes.end(), [](const Node& n) { return n.op == OpKind::pad; });
}

int64_t Graph::alignment() const {
  // "Jump" of each node: input pixels per node pixel along an axis (isotropic graphs; the
  // largest axis value is used). Kept as a rational num/den to survive up/down sampling.
  std::vector<std::pair<int64_t, int64_t>> jump(nodes.size(), {1, 1});
  int64_t align = 1;
  for (const auto& n : nodes) {
    auto [num, den] = n.inputs.empty() ? std::pair<int64_t, int64_t>{1, 1} : jump[n.inputs[0]];
    int64_t s = 1;
    switch (n.op) {
      case OpKind::conv:
      case OpKind::max_pool:
        s = n.attrs.stride.empty() ? 1 : *std::max_element(n.attrs.stride.begin(), n.attrs.stride.end());
        num *= s;
        break;
      case OpKind::conv_transpose:
        s = n.attrs.stride.empty() ? 1 : *std::max_element(n.attrs.stride.begin(), n.attrs.stride.end());
        den *= s;
        break;
      case OpKind::upsample_nearest:
        s = n.attrs.scale.empty() ? 1 : *std::max_element(n.attrs.scale.begin(), n.attrs.scale.end());
        den *= s;
        break;
      default:
        break;
    }
    int64_t gcd = std::gcd(num, den);
    jump[n.id] = {num / gcd, den / gcd};
    if (jump[n.id].second == 1) align = std::lcm(align, jump[n.id].first);
  }
  return align;
}

std::string Graph::to_json() const { return graph_json(*this, true); }

std::string Graph::hash() const { return fnv1a_hex(graph_json(*this, false)); }

Node& Graph::add(std::string name, OpKind op, std::vector<int> inputs, Attrs attrs, std::vector<Param> params) {
  const int id = static_cast<int>(nodes.size());
  for (int i : inputs)
    if (i < 0 || i >= id) throw Error("IR builder: node '" + name + "' reads node " + std::to_string(i) + " not yet defined");
  for (const auto& n : nodes)
    if (n.name == name) throw Error("IR builder: duplicate node name '" + name + "'");
  nodes.push_back(Node{id, std::move(name), op, std::move(inputs), std::move(attrs), std::move(params)});
  if (op == OpKind::sigma_channel) uses_sigma = true;
  return nodes.back();
}

std::string shape_string(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) o += ", ";
    o += std::to_string(s[i]);
  }
  return o + "]";
}

std::vector<std::vector<int64_t>> infer_shapes(const Graph& g, const std::vector<int64_t>& in) {
  const size_t rank = static_cast<size_t>(g.dim) + 2;
  const std::string arch = g.architecture + " denoiser (" + std::to_string(g.dim) + "D)";
  if (in.size() != rank)
    throw InputError(arch + " needs a " + std::to_string(rank) + "-d input [B, C, " +
                     (g.dim == 2 ? "H, W" : "D, H, W") + "], got " + shape_string(in));
  if (in[1] != g.in_channels)
    throw InputError(arch + " needs " + std::to_string(g.in_channels) + " input channel(s), got " +
                     std::to_string(in[1]) + " in " + shape_string(in));
  for (auto s : in)
    if (s < 1) throw InputError(arch + ": empty input shape " + shape_string(in));
  const int64_t align = g.alignment();
  if (!g.pads_input() && align > 1)
    for (size_t a = 2; a < rank; ++a)
      if (in[a] % align != 0)
        throw InputError(arch + " was built without padding and needs spatial sizes that are multiples of " +
                         std::to_string(align) + ", got " + shape_string(in) +
                         " (build with padding, or pad the input to a multiple of " + std::to_string(align) + ")");

  std::vector<std::vector<int64_t>> shapes(g.nodes.size());
  for (const auto& n : g.nodes) {
    const auto& a = n.attrs;
    if (n.op == OpKind::input) {
      shapes[n.id] = in;
      continue;
    }
    const auto& x = shapes.at(n.inputs.at(0));
    std::vector<int64_t> y = x;
    switch (n.op) {
      case OpKind::sigma_channel:
        y[1] = 1;
        break;
      case OpKind::conv:
      case OpKind::conv_transpose:
      case OpKind::max_pool:
        if (n.op != OpKind::max_pool) {
          if (x[1] != a.in_channels)
            shape_error(g, n, "expects " + std::to_string(a.in_channels) + " channels, got " + shape_string(x));
          y[1] = a.out_channels;
        }
        for (int d = 0; d < g.dim; ++d) {
          const int64_t s = x[2 + d], k = a.kernel[d], st = a.stride[d], p = a.padding[d];
          int64_t o;
          if (n.op == OpKind::conv_transpose) {
            o = (s - 1) * st - 2 * p + k + (a.output_padding.empty() ? 0 : a.output_padding[d]);
          } else {
            if (s + 2 * p < k)
              shape_error(g, n, "spatial size " + std::to_string(s) + " is smaller than the kernel " +
                                    std::to_string(k) + " (input " + shape_string(x) + ")");
            if (st > 1 && (s + 2 * p - k) % st != 0)
              shape_error(g, n, "spatial size " + std::to_string(s) + " is not divisible by the stride " +
                                    std::to_string(st) + "; the denoiser needs sizes that are multiples of " +
                                    std::to_string(align) + " after padding (input " + shape_string(in) + ")");
            o = (s + 2 * p - k) / st + 1;
          }
          if (o < 1) shape_error(g, n, "empty output for input " + shape_string(x));
          y[2 + d] = o;
        }
        break;
      case OpKind::batch_norm:
        if (x[1] != a.out_channels)
          shape_error(g, n, "expects " + std::to_string(a.out_channels) + " channels, got " + shape_string(x));
        break;
      case OpKind::relu:
        break;
      case OpKind::add:
        for (size_t i = 1; i < n.inputs.size(); ++i)
          if (shapes[n.inputs[i]] != x)
            shape_error(g, n, "operand shapes differ: " + shape_string(x) + " and " + shape_string(shapes[n.inputs[i]]) +
                                  "; spatial sizes must be multiples of " + std::to_string(align) + " after padding");
        break;
      case OpKind::concat:
        for (size_t i = 1; i < n.inputs.size(); ++i) {
          auto z = shapes[n.inputs[i]];
          auto zz = z;
          zz[1] = x[1];
          if (zz != x)
            shape_error(g, n, "operand shapes differ outside channels: " + shape_string(x) + " and " + shape_string(z) +
                                  "; spatial sizes must be multiples of " + std::to_string(align) + " after padding");
          y[1] += z[1];
        }
        break;
      case OpKind::upsample_nearest:
        for (int d = 0; d < g.dim; ++d) y[2 + d] = x[2 + d] * a.scale[d];
        break;
      case OpKind::pad:
        for (int d = 0; d < g.dim; ++d) y[2 + d] = ceil_to(x[2 + d], a.multiple);
        break;
      case OpKind::crop: {
        const auto& like = shapes.at(n.inputs.at(1));
        for (int d = 0; d < g.dim; ++d) {
          if (like[2 + d] > x[2 + d])
            shape_error(g, n, "cannot crop " + shape_string(x) + " to the larger " + shape_string(like));
          y[2 + d] = like[2 + d];
        }
        break;
      }
      case OpKind::input:
        break;
    }
    shapes[n.id] = std::move(y);
  }
  return shapes;
}

std::vector<int64_t> infer_output_shape(const Graph& g, std::vector<int64_t> input_shape) {
  return infer_shapes(g, input_shape).back();
}

namespace {
// One-axis dependency intervals [lo, hi] (input indices) of every position of every node.
struct Iv {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  bool empty() const { return lo > hi; }
  void join(const Iv& o) {
    lo = std::min(lo, o.lo);
    hi = std::max(hi, o.hi);
  }
};

int64_t radius_1d(const Graph& g, int axis, int64_t n_in) {
  std::vector<std::vector<Iv>> iv(g.nodes.size());
  for (const auto& n : g.nodes) {
    const auto& a = n.attrs;
    std::vector<Iv> out;
    if (n.op == OpKind::input) {
      out.resize(n_in);
      for (int64_t q = 0; q < n_in; ++q) out[q] = {q, q};
      iv[n.id] = std::move(out);
      continue;
    }
    const auto& x = iv[n.inputs[0]];
    const int64_t nx = static_cast<int64_t>(x.size());
    switch (n.op) {
      case OpKind::conv:
      case OpKind::max_pool: {
        const int64_t k = a.kernel[axis], s = a.stride[axis], p = a.padding[axis];
        const int64_t no = (nx + 2 * p - k) / s + 1;
        out.resize(std::max<int64_t>(no, 0));
        for (int64_t q = 0; q < no; ++q)
          for (int64_t t = 0; t < k; ++t) {
            const int64_t i = q * s - p + t;
            if (i >= 0 && i < nx) out[q].join(x[i]);
          }
        break;
      }
      case OpKind::conv_transpose: {
        const int64_t k = a.kernel[axis], s = a.stride[axis], p = a.padding[axis];
        const int64_t no = (nx - 1) * s - 2 * p + k + (a.output_padding.empty() ? 0 : a.output_padding[axis]);
        out.resize(no);
        for (int64_t i = 0; i < nx; ++i)
          for (int64_t t = 0; t < k; ++t) {
            const int64_t q = i * s - p + t;
            if (q >= 0 && q < no) out[q].join(x[i]);
          }
        break;
      }
      case OpKind::upsample_nearest: {
        const int64_t s = a.scale[axis];
        out.resize(nx * s);
        for (int64_t q = 0; q < nx * s; ++q) out[q] = x[q / s];
        break;
      }
      case OpKind::pad: {
        const int64_t no = ceil_to(nx, a.multiple);
        out.resize(no);
        for (int64_t q = 0; q < no; ++q) out[q] = x[std::min(q, nx - 1)];
        break;
      }
      case OpKind::crop: {
        const int64_t no = static_cast<int64_t>(iv[n.inputs[1]].size());
        out.assign(x.begin(), x.begin() + no);
        break;
      }
      case OpKind::add:
      case OpKind::concat:
        out = x;
        for (size_t j = 1; j < n.inputs.size(); ++j) {
          const auto& z = iv[n.inputs[j]];
          for (size_t q = 0; q < out.size() && q < z.size(); ++q) out[q].join(z[q]);
        }
        break;
      default:  // sigma_channel (conservatively as its input), batch_norm, relu
        out = x;
        break;
    }
    iv[n.id] = std::move(out);
  }
  int64_t r = 0;
  const auto& y = iv.back();
  for (int64_t q = 0; q < static_cast<int64_t>(y.size()); ++q)
    if (!y[q].empty()) r = std::max({r, q - y[q].lo, y[q].hi - q});
  return r;
}
}  // namespace

int64_t receptive_radius(const Graph& g) {
  const int64_t align = g.alignment();
  int64_t r = 0;
  for (int axis = 0; axis < g.dim; ++axis) {
    // Grow the line until its middle is free of boundary effects.
    for (int64_t n = ceil_to(256, align);; n *= 4) {
      const int64_t ra = radius_1d(g, axis, n);
      if (4 * ra + 4 * align < n) {
        r = std::max(r, ra);
        break;
      }
      if (n > (int64_t{1} << 24)) throw Error("receptive_radius: did not converge for " + g.architecture);
    }
  }
  return r;
}

}  // namespace pnp::nn
