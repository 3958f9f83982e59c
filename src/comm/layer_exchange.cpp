#include "pnp/layer_exchange.hpp"

#include <ATen/ATen.h>

namespace pnp {

std::vector<nn::AxisNeighbours> layer_neighbours(const Decomposition& d, int rank) {
  const auto peers = d.peers(rank);
  std::vector<nn::AxisNeighbours> axes(2);
  axes[0].split = d.grid_rows > 1;
  axes[1].split = d.grid_cols > 1;
  for (size_t a = 0; a < 2; ++a) axes[a].lo = peers[a].lo >= 0, axes[a].hi = peers[a].hi >= 0;
  return axes;
}

LayerExchange::LayerExchange(Communicator& comm, const Decomposition& d)
    : comm_(comm), axes_(layer_neighbours(d, comm.rank())) {
  for (const auto& p : d.peers(comm.rank())) lo_peer_.push_back(p.lo), hi_peer_.push_back(p.hi);
}

void LayerExchange::check_thin(const nn::Node& halo, int d, int64_t tile) const {
  const auto& a = halo.attrs;
  const int64_t p = a.padding[d], inner = a.kernel[d] - a.stride[d] - a.padding[d];
  if ((lo_peer_[d] >= 0 && tile < inner) || (hi_peer_[d] >= 0 && tile < p))
    throw Error("layer halo at " + halo.name + ": this rank's tile is " + std::to_string(tile) + " px along axis " +
                std::to_string(d) + ", thinner than the halo its neighbour needs");
}

bool LayerExchange::post_axis(const nn::Node& halo, const at::Tensor& tile, int d, const nn::HaloStrips& strips) {
  const auto& a = halo.attrs;
  const int64_t t = tile.size(2 + d), p = a.padding[d], inner = a.kernel[d] - a.stride[d] - a.padding[d];
  check_thin(halo, d, t);
  // the strip of the grown tensor from `offset` along d, `w` wide (nn::halo_region), and its shape
  const std::vector<int64_t> extent{tile.size(2), tile.size(3)};
  auto region = [&](int64_t offset, int64_t w) { return nn::halo_region(a, extent, d, offset, w); };
  auto shape = [&](const nn::HaloRegion& r) {
    return std::vector<int64_t>{tile.size(0), tile.size(1), r.size[0], r.size[1]};
  };
  std::vector<std::tuple<int, std::vector<int64_t>, std::vector<int64_t>>> sends;  // peer, box, shape
  std::vector<std::pair<int, std::vector<int64_t>>> recvs;                        // peer, shape
  auto send = [&](int peer, const nn::HaloRegion& r) { sends.emplace_back(peer, r.lo, shape(r)); };
  if (lo_peer_[d] >= 0 && inner > 0) send(lo_peer_[d], region(a.halo_lo[d], inner));
  if (hi_peer_[d] >= 0 && p > 0) send(hi_peer_[d], region(a.halo_lo[d] + t - p, p));
  if (lo_peer_[d] >= 0 && p > 0) recvs.emplace_back(lo_peer_[d], shape(region(0, p)));
  if (hi_peer_[d] >= 0 && inner > 0) recvs.emplace_back(hi_peer_[d], shape(region(a.halo_lo[d] + t, inner)));
  if (sends.empty() && recvs.empty()) return false;
  auto [it, fresh] = buffers_.try_emplace(std::make_tuple(halo.id, d, tile.sizes().vec()));
  Buffers& b = it->second;
  if (fresh) {
    const auto opts = tile.options().memory_format(at::MemoryFormat::Contiguous);
    for (const auto& [peer, lo, sz] : sends) b.sends.push_back({peer, at::empty(sz, opts)});
    for (const auto& [peer, sz] : recvs) b.recvs.push_back({peer, at::empty(sz, opts)});
  }
  for (size_t i = 0; i < sends.size(); ++i) nn::halo_box_into(b.sends[i].buffer, halo, tile, strips, std::get<1>(sends[i]));
  pending_ = comm_.start_exchange(b.sends, b.recvs);
  in_flight_ = &b;
  return true;
}

void LayerExchange::collect_axis(const nn::Node& halo, int d, nn::HaloStrips& strips) {
  const auto& a = halo.attrs;
  pending_->wait();
  pending_.reset();
  const int64_t p = a.padding[d], inner = a.kernel[d] - a.stride[d] - a.padding[d];
  size_t k = 0;
  if (lo_peer_[d] >= 0 && p > 0) strips[d][0] = in_flight_->recvs[k++].buffer;
  if (hi_peer_[d] >= 0 && inner > 0) strips[d][1] = in_flight_->recvs[k++].buffer;
  in_flight_ = nullptr;
}

void LayerExchange::start_strips(const nn::Node& halo, const at::Tensor& tile) {
  if (tile.dim() != 4) throw Error("layer halo: 2-d images only");
  if (started_ >= 0) throw Error("layer halo at " + halo.name + ": an exchange is already in flight");
  started_ = halo.id, started_axis_ = -1;
  for (int d = 0; d < 2 && started_axis_ < 0; ++d)  // the first split axis needs no earlier strips
    if (axes_[d].split && post_axis(halo, tile, d, {{}, {}})) started_axis_ = d;
}

nn::HaloStrips LayerExchange::finish_strips(const nn::Node& halo, const at::Tensor& tile) {
  if (started_ != halo.id) throw Error("layer halo at " + halo.name + ": finish_strips without its start_strips");
  nn::HaloStrips strips(2);
  if (started_axis_ >= 0) collect_axis(halo, started_axis_, strips);
  for (int d = started_axis_ + 1; d < 2; ++d)  // later axes carry the corners: after the first
    if (axes_[d].split && post_axis(halo, tile, d, strips)) collect_axis(halo, d, strips);
  started_ = -1;
  return strips;
}

nn::HaloStrips LayerExchange::exchange_strips(const nn::Node& halo, const at::Tensor& tile) {
  start_strips(halo, tile);
  return finish_strips(halo, tile);
}

}  // namespace pnp
