// The halo exchange of one decomposition, planned once (as AMReX's FillBoundary): which boxes
// this rank sends to and receives from which peer, device buffers for each (allocated at
// construction, fixed addresses, so the exchange can be captured in a CUDA graph), and a
// start/finish pair so that interior work can overlap the transfer (FillBoundary_nowait /
// FillBoundary_finish). It reports what one exchange moves.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "pnp/comm.hpp"
#include "pnp/decomposition.hpp"

namespace pnp {

class HaloPlan {
 public:
  // The exchange that fills rank comm.rank()'s extended box `d.tile(rank).ext` from the other
  // ranks' owned pixels: one message per ordered pair of ranks whose extended and owned boxes
  // overlap (diagonal neighbours of a grid included). `opts` gives the buffers' dtype and
  // device; `leading` the sizes of the tensor's leading axes (e.g. {batch, channels}), the last
  // two being the box's rows and columns.
  HaloPlan(Communicator& comm, const Decomposition& d, at::TensorOptions opts, std::vector<int64_t> leading = {});
  HaloPlan(const HaloPlan&) = delete;
  HaloPlan& operator=(const HaloPlan&) = delete;

  // ext: [leading..., ext.rows(), ext.cols()] with the owned part current. start() packs the
  // pieces others need and posts the transfers; finish() completes them and writes the
  // received pieces into ext. Between the two, only the owned pixels of ext may be read.
  void start(const at::Tensor& ext);
  void finish(at::Tensor& ext);
  void exchange(at::Tensor& ext) {
    start(ext);
    finish(ext);
  }

  const TilePlan& tile() const { return tile_; }
  int messages_sent() const { return static_cast<int>(sends_.size()); }  // per exchange
  int messages_received() const { return static_cast<int>(recvs_.size()); }
  int64_t bytes_sent() const { return bytes_sent_; }  // per exchange, by this rank

 private:
  struct Piece {
    Box box;
    Communicator::Message msg;
  };
  Communicator& comm_;
  TilePlan tile_;
  std::vector<Piece> sends_, recvs_;
  std::vector<Communicator::Message> send_msgs_, recv_msgs_;
  std::unique_ptr<Communicator::Pending> pending_;
  int64_t bytes_sent_ = 0;
};

// A volume's z-halo (a 3D denoiser's): rank comm.rank()'s extended slab `z.ext(rank)` filled from
// the slabs of the ranks that own its halo slices, one message per pair of ranks whose extended
// and owned slabs overlap (a slab thinner than the halo draws on several). `comm` holds every
// rank; a rank exchanges with the ranks of its own in-plane tile (z.plane_rank) only, whole
// planes of its extended box (`plane`: the tensor's trailing shape, rows and cols), so the own
// slices' in-plane halos must be exchanged first: the z-halo slices then carry theirs.
class ZHaloPlan {
 public:
  ZHaloPlan(Communicator& comm, const SlabSplit& z, at::TensorOptions opts, std::vector<int64_t> plane);
  ZHaloPlan(const ZHaloPlan&) = delete;
  ZHaloPlan& operator=(const ZHaloPlan&) = delete;
  // ext: [ext slices, plane...] with the owned slices current; the halo slices are written.
  void exchange(at::Tensor& ext);
  int64_t bytes_sent() const { return bytes_sent_; }  // per exchange, by this rank

 private:
  struct Piece {
    int64_t z0, count;  // slices, global
    Communicator::Message msg;
  };
  Communicator& comm_;
  int64_t e0_ = 0;  // the first slice of this rank's extended slab
  std::vector<Piece> sends_, recvs_;
  std::vector<Communicator::Message> send_msgs_, recv_msgs_;
  int64_t bytes_sent_ = 0;
};

}  // namespace pnp
