// The layer-halo transform of the IR (distributed.halo_mode = layer): halo nodes before the
// ops that read across a split axis, and what their exchanges send. See ir.hpp for the
// contract; docs/layer-halo.md for the design and why it is exact.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "pnp/nn/ir.hpp"

namespace pnp::nn {

namespace {
bool any_split(const std::vector<AxisNeighbours>& axes) {
  for (const auto& a : axes)
    if (a.split) return true;
  return false;
}
}  // namespace

Graph with_layer_halos(const Graph& g, const std::vector<AxisNeighbours>& axes) {
  if (static_cast<int>(axes.size()) != g.dim)
    throw Error("with_layer_halos: " + std::to_string(axes.size()) + " axes given for a " + std::to_string(g.dim) +
                "-d graph");
  if (!any_split(axes)) return g;
  Graph out;
  out.architecture = g.architecture;
  out.dim = g.dim;
  out.in_channels = g.in_channels;
  out.out_channels = g.out_channels;
  std::vector<int> map(g.nodes.size(), -1);
  // One halo node per (input, window, fill): ops reading the same value the same way share it.
  std::map<std::tuple<int, std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>, double>, int> shared;
  for (const auto& n : g.nodes) {
    std::vector<int> ins;
    for (int i : n.inputs) ins.push_back(map[static_cast<size_t>(i)]);
    Attrs a = n.attrs;
    const bool window = n.op == OpKind::conv || n.op == OpKind::max_pool;
    if (n.op == OpKind::conv_transpose)
      for (int d = 0; d < g.dim; ++d)
        if (axes[d].split && (a.kernel[d] != a.stride[d] || a.padding[d] != 0 ||
                              (!a.output_padding.empty() && a.output_padding[d] != 0)))
          throw InputError(g.architecture + " denoiser: node '" + n.name +
                           "' (conv_transpose) has kernel != stride or padding, which distributed.halo_mode = "
                           "\"layer\" cannot split; use halo_mode = \"input\"");
    if (window) {
      Attrs h;
      h.halo_lo.assign(g.dim, 0);
      h.halo_hi.assign(g.dim, 0);
      h.halo_peer_lo.assign(g.dim, 0);
      h.halo_peer_hi.assign(g.dim, 0);
      h.kernel.assign(g.dim, 1);
      h.stride.assign(g.dim, 1);
      h.padding.assign(g.dim, 0);
      bool needed = false;
      for (int d = 0; d < g.dim; ++d) {
        if (!axes[d].split) continue;
        const int64_t k = a.kernel[d], s = a.stride[d], p = a.padding[d], inner = k - s - p;
        if (inner < 0)
          throw InputError(g.architecture + " denoiser: node '" + n.name + "' (" + std::string(to_string(n.op)) +
                           ") has a kernel shorter than stride + padding, which distributed.halo_mode = \"layer\" "
                           "cannot split; use halo_mode = \"input\"");
        h.kernel[d] = k, h.stride[d] = s, h.padding[d] = p;
        h.halo_lo[d] = p;  // from the neighbour before, or the op's own padding at the border
        h.halo_hi[d] = axes[d].hi ? inner : p;
        h.halo_peer_lo[d] = axes[d].lo ? 1 : 0;
        h.halo_peer_hi[d] = axes[d].hi ? 1 : 0;
        needed = needed || p > 0 || inner > 0;  // the same on every rank
        a.padding[d] = 0;
      }
      if (needed) {
        h.fill = n.op == OpKind::max_pool ? -std::numeric_limits<double>::infinity() : 0.0;
        auto key = std::make_tuple(ins.at(0), h.kernel, h.stride, h.padding, h.fill);  // rank-independent
        auto it = shared.find(key);
        if (it == shared.end()) {
          const Node& hn = out.add(n.name + ".halo", OpKind::halo, {ins.at(0)}, h);
          it = shared.emplace(key, hn.id).first;
        }
        ins[0] = it->second;
      }
    }
    const Node& m = out.add(n.name, n.op, ins, a, n.params);
    map[static_cast<size_t>(n.id)] = m.id;
  }
  return out;
}

HaloTraffic layer_halo_traffic(const Graph& g, const std::vector<std::vector<int64_t>>& shapes, int64_t element_bytes) {
  HaloTraffic t;
  for (const auto& n : g.nodes) {
    if (n.op != OpKind::halo) continue;
    const auto& a = n.attrs;
    const auto& x = shapes.at(static_cast<size_t>(n.inputs.at(0)));
    const auto& y = shapes.at(static_cast<size_t>(n.id));
    ++t.exchanges;
    const int64_t lead = x[0] * x[1];
    for (int d = 0; d < g.dim; ++d) {
      // a strip across axis d: the grown extent along earlier axes, the tile's along later ones
      int64_t cross = lead;
      for (int e = 0; e < g.dim; ++e)
        if (e != d) cross *= e < d ? y[2 + e] : x[2 + e];
      const int64_t inner = a.kernel[d] - a.stride[d] - a.padding[d];
      int64_t largest = 0;
      if (a.halo_peer_lo[d] && inner > 0) {
        ++t.messages, t.bytes += inner * cross * element_bytes;
        largest = std::max(largest, inner * cross * element_bytes);
      }
      if (a.halo_peer_hi[d] && a.padding[d] > 0) {
        ++t.messages, t.bytes += a.padding[d] * cross * element_bytes;
        largest = std::max(largest, a.padding[d] * cross * element_bytes);
      }
      // received too: the neighbours' strips are the same sizes the other way round
      if (a.halo_peer_lo[d] && a.padding[d] > 0) largest = std::max(largest, a.padding[d] * cross * element_bytes);
      if (a.halo_peer_hi[d] && inner > 0) largest = std::max(largest, inner * cross * element_bytes);
      if (a.halo_peer_lo[d] || a.halo_peer_hi[d]) ++t.phases, t.phase_bytes += largest;
    }
  }
  return t;
}

}  // namespace pnp::nn
