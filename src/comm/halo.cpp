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

}  // namespace pnp
