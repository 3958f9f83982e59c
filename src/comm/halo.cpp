#include "pnp/halo.hpp"

#include <ATen/ATen.h>

#include "comm_internal.hpp"

namespace pnp {

HaloPlan::HaloPlan(Communicator& comm, const Decomposition& d, at::TensorOptions opts, std::vector<int64_t> leading)
    : comm_(comm), tile_(d.tile(comm.rank())) {
  auto buffer = [&](const Box& b) {
    std::vector<int64_t> shape = leading;
    shape.push_back(b.rows());
    shape.push_back(b.cols());
    return at::empty(shape, opts);
  };
  for (const auto& t : tile_.sends) sends_.push_back({t.box, {t.peer, buffer(t.box)}});
  for (const auto& t : tile_.recvs) recvs_.push_back({t.box, {t.peer, buffer(t.box)}});
  for (const auto& p : sends_) {
    send_msgs_.push_back(p.msg);
    bytes_sent_ += p.msg.buffer.numel() * p.msg.buffer.element_size();
  }
  for (const auto& p : recvs_) recv_msgs_.push_back(p.msg);
}

void HaloPlan::start(const at::Tensor& ext) {
  if (pending_) throw Error("HaloPlan::start: the previous exchange was not finished");
  if (sends_.empty() && recvs_.empty()) return;
  for (auto& p : sends_) p.msg.buffer.copy_(box_view(ext, tile_.ext, p.box));
  pending_ = comm_.start_exchange(send_msgs_, recv_msgs_);
}

void HaloPlan::finish(at::Tensor& ext) {
  if (!pending_) return;
  pending_->wait();
  pending_.reset();
  for (auto& p : recvs_) box_view(ext, tile_.ext, p.box).copy_(p.msg.buffer);
}

ZHaloPlan::ZHaloPlan(Communicator& comm, const SlabSplit& z, at::TensorOptions opts, std::vector<int64_t> plane)
    : comm_(comm) {
  const int me = comm.rank();
  const auto [z0, z1] = z.range(me);
  e0_ = z.ext(me).first;
  auto piece = [&](int peer, int64_t a, int64_t b) {
    std::vector<int64_t> shape{b - a};
    shape.insert(shape.end(), plane.begin(), plane.end());
    return Piece{a, b - a, {peer, at::empty(shape, opts)}};
  };
  for (int q = 0; q < comm.size(); ++q) {
    if (q == me || z.plane_rank(q) != z.plane_rank(me)) continue;  // the same in-plane tile's slabs
    const auto [q0, q1] = z.range(q);
    const auto [f0, f1] = z.ext(q);
    // what q needs of mine, and what I need of q's
    if (std::max(z0, f0) < std::min(z1, f1)) sends_.push_back(piece(q, std::max(z0, f0), std::min(z1, f1)));
    const auto [m0, m1] = z.ext(me);
    if (std::max(q0, m0) < std::min(q1, m1)) recvs_.push_back(piece(q, std::max(q0, m0), std::min(q1, m1)));
  }
  for (const auto& p : sends_) {
    send_msgs_.push_back(p.msg);
    bytes_sent_ += p.msg.buffer.numel() * p.msg.buffer.element_size();
  }
  for (const auto& p : recvs_) recv_msgs_.push_back(p.msg);
}

void ZHaloPlan::exchange(at::Tensor& ext) {
  if (sends_.empty() && recvs_.empty()) return;
  for (auto& p : sends_) p.msg.buffer.copy_(ext.narrow(0, p.z0 - e0_, p.count));
  comm_.start_exchange(send_msgs_, recv_msgs_)->wait();
  for (auto& p : recvs_) ext.narrow(0, p.z0 - e0_, p.count).copy_(p.msg.buffer);
}

}  // namespace pnp
