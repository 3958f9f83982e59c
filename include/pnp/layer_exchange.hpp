// The layer halo's exchanges (distributed.halo_mode = layer) over the ranks' communicator: the
// nn::HaloExchanger the executors call at every halo node, beside the input halo's HaloPlan
// (pnp/halo.hpp). make_denoiser (src/solver/denoiser.cpp) builds one when the denoiser runs
// distributed; layer_neighbours is also what the work counts (solver) and the scaling model
// (benchmark) split the graph by.
#pragma once

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "pnp/comm.hpp"
#include "pnp/decomposition.hpp"
#include "pnp/nn/executor.hpp"

namespace pnp {

// Rank `rank`'s view of d's split, for nn::with_layer_halos.
std::vector<nn::AxisNeighbours> layer_neighbours(const Decomposition& d, int rank);
// A 3D denoiser's view of a volume's split (d.z's slabs, d's in-plane tiles): axes z, rows and
// columns, for world rank `rank` (slab d.z.slab(rank), tile d.z.plane_rank(rank)).
std::vector<nn::AxisNeighbours> layer_neighbours_3d(const Decomposition& d, int rank);

class LayerExchange final : public nn::HaloExchanger {
 public:
  // The neighbours of comm.rank() in d's grid (row slabs: a grid of ranks x 1).
  LayerExchange(Communicator& comm, const Decomposition& d);
  // A 3D denoiser's over a volume's slabs and tiles (layer_neighbours_3d): the strips across z go
  // over `world` (the same tile's ranks in the slabs before and after), those across rows and
  // columns over `plane` (the slab's ranks, d's tiles).
  LayerExchange(Communicator& world, Communicator& plane, const Decomposition& d);
  // This rank's view of the split, for nn::with_layer_halos (= layer_neighbours(d, rank)).
  const std::vector<nn::AxisNeighbours>& axes() const { return axes_; }
  // The neighbours' strips of the tile, axis by axis (two phases on a grid): for each split
  // axis, this rank's first (kernel - stride - padding) and last (padding) tile rows go to the
  // neighbours before and after, packed from the tile and the strips received so far (axis 0
  // before axis 1: the corners); theirs come back. Send and receive buffers are allocated once
  // per (node, axis, tile shape), at fixed addresses, and the receive buffers are the strips
  // returned, so a CUDA graph can capture the exchange (NCCL). HaloExchanger::exchange fills a
  // grown tensor from them.
  nn::HaloStrips exchange_strips(const nn::Node& halo, const at::Tensor& tile) override;
  // The same in two halves: start_strips packs and posts the first split axis's messages,
  // finish_strips completes them, then exchanges the later axis (which carries the corners and
  // so needs the first one's strips). Work between the two overlaps the first axis's transfer.
  void start_strips(const nn::Node& halo, const at::Tensor& tile) override;
  nn::HaloStrips finish_strips(const nn::Node& halo, const at::Tensor& tile) override;

 private:
  struct Buffers {
    std::vector<Communicator::Message> sends, recvs;
  };
  std::vector<Communicator*> comms_;  // per axis: the communicator its peers are ranks of
  std::vector<nn::AxisNeighbours> axes_;
  std::vector<int> lo_peer_, hi_peer_;  // per axis, -1 when none
  // per (node, axis, tile shape)
  std::map<std::tuple<int, int, std::vector<int64_t>>, Buffers> buffers_;
  LayerExchange(std::vector<Communicator*> comms, std::vector<nn::AxisNeighbours> axes, std::vector<int> lo,
                std::vector<int> hi);
  int axis_count() const { return static_cast<int>(axes_.size()); }
  void check_thin(const nn::Node& halo, int d, int64_t tile) const;
  // Packs and posts axis d's strips (false when this rank has none along d); collect_axis
  // waits for them and puts the received ones into strips[d].
  bool post_axis(const nn::Node& halo, const at::Tensor& tile, int d, const nn::HaloStrips& strips);
  void collect_axis(const nn::Node& halo, int d, nn::HaloStrips& strips);
  std::unique_ptr<Communicator::Pending> pending_;
  Buffers* in_flight_ = nullptr;
  int started_ = -1, started_axis_ = -1;  // the node whose start_strips is in flight, its axis
};

}  // namespace pnp
