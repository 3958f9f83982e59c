// The IR: ops, nodes, graphs, their JSON form and content hash (shape inference and the
// receptive radius are in shapes.cpp).
#include "pnp/nn/ir.hpp"

#include <algorithm>
#include <cmath>
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
    {OpKind::halo, "halo"},
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
      case OpKind::halo:
        f.push_back("\"lo\": " + json_ints(a.halo_lo));
        f.push_back("\"hi\": " + json_ints(a.halo_hi));
        f.push_back("\"peer_lo\": " + json_ints(a.halo_peer_lo));
        f.push_back("\"peer_hi\": " + json_ints(a.halo_peer_hi));
        f.push_back("\"fill\": " + (std::isinf(a.fill) ? std::string(a.fill < 0 ? "\"-inf\"" : "\"inf\"") : json_double(a.fill)));
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

}  // namespace pnp::nn
