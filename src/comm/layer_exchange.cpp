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

std::vector<nn::AxisNeighbours> layer_neighbours_3d(const Decomposition& d, int rank) {
  const int slab = d.z.slab(rank), slabs = static_cast<int>(d.z.ranges.size());
  std::vector<nn::AxisNeighbours> axes{nn::AxisNeighbours{}};
  axes[0].split = slabs > 1;
  axes[0].lo = slab > 0, axes[0].hi = slab + 1 < slabs;
  for (const auto& a : layer_neighbours(d, d.z.plane_rank(rank))) axes.push_back(a);
  return axes;
}

namespace {
std::vector<int> peers_of(const Decomposition& d, int rank, bool hi) {
  std::vector<int> out;
  for (const auto& p : d.peers(rank)) out.push_back(hi ? p.hi : p.lo);
  return out;
}
}  // namespace

LayerExchange::LayerExchange(std::vector<Communicator*> comms, std::vector<nn::AxisNeighbours> axes,
                             std::vector<int> lo, std::vector<int> hi)
    : comms_(std::move(comms)), axes_(std::move(axes)), lo_peer_(std::move(lo)), hi_peer_(std::move(hi)) {}

LayerExchange::LayerExchange(Communicator& comm, const Decomposition& d)
    : LayerExchange({&comm, &comm}, layer_neighbours(d, comm.rank()), peers_of(d, comm.rank(), false),
                    peers_of(d, comm.rank(), true)) {}

namespace {
// A 3D split's peers along z (world ranks: the same tile one slab before or after), then the
// tile's in-plane ones (plane ranks).
std::vector<int> peers_3d(const Decomposition& d, int rank, bool hi) {
  const int slab = d.z.slab(rank), slabs = static_cast<int>(d.z.ranges.size()), pr = d.z.plane_ranks;
  std::vector<int> out{hi ? (slab + 1 < slabs ? rank + pr : -1) : (slab > 0 ? rank - pr : -1)};
  for (int p : peers_of(d, d.z.plane_rank(rank), hi)) out.push_back(p);
  return out;
}
}  // namespace

LayerExchange::LayerExchange(Communicator& world, Communicator& plane, const Decomposition& d)
    : LayerExchange({&world, &plane, &plane}, layer_neighbours_3d(d, world.rank()), peers_3d(d, world.rank(), false),
                    peers_3d(d, world.rank(), true)) {}

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
  const std::vector<int64_t> extent(tile.sizes().begin() + 2, tile.sizes().end());
  auto region = [&](int64_t offset, int64_t w) { return nn::halo_region(a, extent, d, offset, w); };
  auto shape = [&](const nn::HaloRegion& r) {
    std::vector<int64_t> s{tile.size(0), tile.size(1)};
    s.insert(s.end(), r.size.begin(), r.size.end());
    return s;
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
  pending_ = comms_[static_cast<size_t>(d)]->start_exchange(b.sends, b.recvs);
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
  if (tile.dim() != 2 + axis_count())
    throw Error("layer halo at " + halo.name + ": a " + std::to_string(tile.dim() - 2) + "-d tile, but the split has " +
                std::to_string(axis_count()) + " axes");
  if (started_ >= 0) throw Error("layer halo at " + halo.name + ": an exchange is already in flight");
  started_ = halo.id, started_axis_ = -1;
  for (int d = 0; d < axis_count() && started_axis_ < 0; ++d)  // the first split axis needs no earlier strips
    if (axes_[d].split && post_axis(halo, tile, d, nn::HaloStrips(static_cast<size_t>(axis_count())))) started_axis_ = d;
}

nn::HaloStrips LayerExchange::finish_strips(const nn::Node& halo, const at::Tensor& tile) {
  if (started_ != halo.id) throw Error("layer halo at " + halo.name + ": finish_strips without its start_strips");
  nn::HaloStrips strips(static_cast<size_t>(axis_count()));
  if (started_axis_ >= 0) collect_axis(halo, started_axis_, strips);
  for (int d = started_axis_ + 1; d < axis_count(); ++d)  // later axes carry the corners: after the first
    if (axes_[d].split && post_axis(halo, tile, d, strips)) collect_axis(halo, d, strips);
  started_ = -1;
  return strips;
}

nn::HaloStrips LayerExchange::exchange_strips(const nn::Node& halo, const at::Tensor& tile) {
  start_strips(halo, tile);
  return finish_strips(halo, tile);
}

}  // namespace pnp
