// The denoiser work of each rank (include/pnp/solver.hpp, DenoiserWork): what the halo mode
// costs in FLOPs and exchanged bytes, counted on the IR before anything runs.
#include <map>
#include <utility>

#include "pnp/nn/patch.hpp"
#include "pnp/roofline.hpp"
#include "pnp/solver.hpp"

namespace pnp {

namespace {

// The FLOPs of a call on box `ext` in the patches of `m` (a 2D network's lead {1, C}, a 3D one's
// {1, C, depth}), and their count: a few distinct shapes, many patches.
std::pair<double, int64_t> patched_flops(const nn::Graph& g, const Box& ext, const MemoryPlan& m,
                                         const std::vector<int64_t>& lead) {
  const auto rows = nn::patch_ranges(ext.rows(), m.patch_rows, m.overlap, g.alignment());
  const auto cols = nn::patch_ranges(ext.cols(), m.patch_cols, m.overlap, g.alignment());
  std::map<std::pair<int64_t, int64_t>, double> per_shape;
  double flops = 0;
  for (const auto& a : rows)
    for (const auto& b : cols) {
      const std::pair<int64_t, int64_t> hw{a.in1 - a.in0, b.in1 - b.in0};
      auto it = per_shape.find(hw);
      if (it == per_shape.end()) {
        std::vector<int64_t> shape = lead;
        shape.insert(shape.end(), {hw.first, hw.second});
        it = per_shape.emplace(hw, roofline::count(g, shape).flops).first;
      }
      flops += it->second;
    }
  return {flops, static_cast<int64_t>(rows.size() * cols.size())};
}

// A call's work in patches: its FLOPs, their redundancy over the whole call and their count.
void count_patches(DenoiserWork& w, const nn::Graph& g, const Box& ext, const MemoryPlan* m,
                   const std::vector<int64_t>& lead) {
  if (!m || !m->patched()) return;
  const auto [flops, patches] = patched_flops(g, ext, *m, lead);
  w.patch_redundancy = w.flops > 0 ? flops / w.flops : 1;
  w.patches = patches;
  w.flops = flops;
}

}  // namespace

std::vector<DenoiserWork> denoiser_work(const Config& cfg, const Decomposition& d, const nn::Graph& whole,
                                        const std::vector<MemoryPlan>& memory) {
  const int ranks = static_cast<int>(d.tiles.size());
  const int64_t c = cfg.denoiser.channels;
  auto plan_of = [&](int r) { return static_cast<size_t>(r) < memory.size() ? &memory[static_cast<size_t>(r)] : nullptr; };
  if (whole.dim == 3) {  // a volume's 3D denoiser: one call per rank on its z-extended slab
    const int world = static_cast<int>(d.z.ranges.size()) * d.z.plane_ranks;
    const double total = roofline::count(whole, {1, c, d.z.slices, d.n, d.n}).flops;
    std::vector<DenoiserWork> out;
    for (int r = 0; r < world; ++r) {
      const Box& e = d.tile_of(r).ext;
      const auto [e0, e1] = d.z.ext(r);
      DenoiserWork w;
      w.ideal = total / world;
      if (cfg.distributed.halo_mode == HaloMode::layer && world > 1) {  // each layer's strips
        const nn::Graph g = nn::with_layer_halos(whole, layer_neighbours_3d(d, r));
        const std::vector<int64_t> shape{1, c, d.z.count(r), e.rows(), e.cols()};
        w.flops = roofline::count(g, shape).flops;
        const int64_t eb = static_cast<int64_t>(at::elementSize(denoiser_dtype(cfg.denoiser)));
        const nn::HaloTraffic h = nn::layer_halo_traffic(g, nn::infer_shapes(g, shape), eb);
        w.exchange_bytes = h.bytes, w.messages = h.messages, w.exchanges = h.exchanges;
      } else {
        w.flops = roofline::count(whole, {1, c, e1 - e0, e.rows(), e.cols()}).flops;
        // in-plane patches of the z-extended slab (the memory plan's), each as deep as the slab
        count_patches(w, whole, e, plan_of(r), {1, c, e1 - e0});
        // the z-halo received (its slices' extended boxes), as much sent; the own slices' in-plane halos
        const TilePlan& t = d.tile_of(r);
        w.exchange_bytes = (e1 - e0 - d.z.count(r)) * e.size() * 4 * c;
        for (const auto& snd : t.sends) w.exchange_bytes += snd.box.size() * d.z.count(r) * 4 * c;
        w.messages = static_cast<int64_t>(t.sends.size());
        w.exchanges = e1 - e0 > d.z.count(r) || !t.sends.empty() ? 1 : 0;
      }
      out.push_back(w);
    }
    return out;
  }
  const double total = roofline::count(whole, {1, c, d.n, d.n}).flops;
  const int64_t eb = static_cast<int64_t>(at::elementSize(denoiser_dtype(cfg.denoiser)));
  // One call on plane tile r (a slice's), its patches those of `m` (null: whole).
  auto work_of = [&](int r, const MemoryPlan* m) {
    const TilePlan& t = d.tile(r);
    DenoiserWork w;
    w.ideal = total / ranks;
    if (layer_exchanges(cfg.distributed.halo_mode, ranks)) {
      const nn::Graph g = nn::with_layer_halos(whole, layer_neighbours(d, r));
      const std::vector<int64_t> shape{1, c, t.own.rows(), t.own.cols()};
      w.flops = roofline::count(g, shape).flops;
      const nn::HaloTraffic h = nn::layer_halo_traffic(g, nn::infer_shapes(g, shape), eb);
      w.exchange_bytes = h.bytes, w.messages = h.messages, w.exchanges = h.exchanges;
    } else {
      w.flops = roofline::count(whole, {1, c, t.ext.rows(), t.ext.cols()}).flops;
      count_patches(w, whole, t.ext, m, {1, c});
      for (const auto& s : t.sends) w.exchange_bytes += s.box.size() * 4 * c;
      w.messages = static_cast<int64_t>(t.sends.size());
      w.exchanges = t.sends.empty() && t.recvs.empty() ? 0 : 1;
    }
    return w;
  };
  std::vector<DenoiserWork> out;
  if (!d.z.volume()) {
    for (int r = 0; r < ranks; ++r) out.push_back(work_of(r, plan_of(r)));
    return out;
  }
  // A volume: each world rank's slab, one call per slice (batched calls do the slices' work); a
  // streamed slab's groups compute their slices, the last group's overlap with the one before again.
  const int world = static_cast<int>(d.z.ranges.size()) * d.z.plane_ranks;
  for (int r = 0; r < world; ++r) {
    const MemoryPlan* m = plan_of(r);
    const bool streamed = m && m->stream > 0;
    DenoiserWork w = work_of(d.z.plane_rank(r), m);
    const int64_t computed = streamed ? m->stream * m->stream_groups : d.z.count(r);
    w.flops *= static_cast<double>(computed);
    w.ideal = total * static_cast<double>(d.z.slices) / world;
    w.exchange_bytes *= computed, w.messages *= computed;
    if (m) w.patches *= m->batches * (streamed ? m->stream_groups : 1);
    out.push_back(w);
  }
  return out;
}

}  // namespace pnp
