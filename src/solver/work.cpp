// The denoiser work of each rank (include/pnp/solver.hpp, DenoiserWork): what the halo mode
// costs in FLOPs and exchanged bytes, counted on the IR before anything runs.
#include "pnp/roofline.hpp"
#include "pnp/solver.hpp"

namespace pnp {

std::vector<DenoiserWork> denoiser_work(const Config& cfg, const Decomposition& d, const nn::Graph& whole) {
  const int ranks = static_cast<int>(d.tiles.size());
  const int64_t c = cfg.denoiser.channels;
  const double total = roofline::count(whole, {1, c, d.n, d.n}).flops;
  const int64_t eb = cfg.denoiser.precision == "bf16" ? 2 : 4;
  std::vector<DenoiserWork> out;
  for (int r = 0; r < ranks; ++r) {
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
      for (const auto& s : t.sends) w.exchange_bytes += s.box.size() * 4 * c;
      w.messages = static_cast<int64_t>(t.sends.size());
      w.exchanges = t.sends.empty() && t.recvs.empty() ? 0 : 1;
    }
    out.push_back(w);
  }
  return out;
}

}  // namespace pnp
