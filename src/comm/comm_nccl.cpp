// The NCCL backend: CUDA tensors only, on the current stream, no host synchronisation, so
// that its calls can be captured in a CUDA graph (the communicator exists before capture).
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nccl.h>

#include "comm_internal.hpp"

namespace pnp {
namespace {

void check_nccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) throw Error(std::string(what) + " failed: " + ncclGetErrorString(rc));
}
ncclDataType_t nccl_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kBFloat16: return ncclBfloat16;
    default: throw Error("NCCL communication of this dtype is not supported");
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MPI_Comm comm, at::Device device) : Communicator(comm), device_(device) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    ncclUniqueId id;
    if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
    c10::cuda::CUDAGuard guard(device_);
    check_nccl(ncclCommInitRank(&nccl_, size_, id, rank_), "ncclCommInitRank");
  }
  ~NcclCommunicator() override {
    if (nccl_) ncclCommDestroy(nccl_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  void allreduce_sum(at::Tensor& t) override {
    TORCH_CHECK(t.is_cuda() && t.is_contiguous(), "NCCL allreduce needs a contiguous CUDA tensor");
    // Called on one rank too: the call is what post/fused capture in their graphs, and what a
    // 1-GPU check of that capture can test.
    auto stream = c10::cuda::getCurrentCUDAStream(device_.index());
    check_nccl(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t), ncclSum, nccl_,
                             stream.stream()),
               "ncclAllReduce");
    bytes_sent_ += t.numel() * t.element_size();
  }

  void halo_exchange(at::Tensor& ext, const Decomposition& d) override {
    const TilePlan& me = d.tile(rank_);
    if (me.recvs.empty() && me.sends.empty()) return;
    TORCH_CHECK(ext.is_cuda(), "NCCL halo exchange needs a CUDA tensor");
    auto stream = c10::cuda::getCurrentCUDAStream(device_.index());
    std::vector<at::Tensor> recv_bufs;
    for (const auto& s : me.sends) buffer("send", s.peer, s.box, ext).copy_(box_view(ext, me.ext, s.box));
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (const auto& r : me.recvs) {
      at::Tensor b = buffer("recv", r.peer, r.box, ext);
      recv_bufs.push_back(b);
      check_nccl(ncclRecv(b.data_ptr(), static_cast<size_t>(b.numel()), nccl_type(b), r.peer, nccl_, stream.stream()),
                 "ncclRecv (halo)");
    }
    for (const auto& s : me.sends) {
      at::Tensor b = buffer("send", s.peer, s.box, ext);
      check_nccl(ncclSend(b.data_ptr(), static_cast<size_t>(b.numel()), nccl_type(b), s.peer, nccl_, stream.stream()),
                 "ncclSend (halo)");
      bytes_sent_ += b.numel() * b.element_size();
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    for (size_t i = 0; i < me.recvs.size(); ++i) box_view(ext, me.ext, me.recvs[i].box).copy_(recv_bufs[i]);
  }

 private:
  // Device buffers preallocated on first use and reused, so captured graphs see fixed addresses.
  at::Tensor buffer(const std::string& dir, int peer, const Box& b, const at::Tensor& like) {
    std::string key = dir + std::to_string(peer) + ":" + to_string(b) + c10::toString(like.scalar_type());
    auto it = buffers_.find(key);
    if (it != buffers_.end()) return it->second;
    return buffers_[key] = at::empty({b.rows(), b.cols()}, like.options());
  }
  at::Device device_;
  int rank_ = 0, size_ = 1;
  ncclComm_t nccl_ = nullptr;
  std::map<std::string, at::Tensor> buffers_;
};
}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, at::Device device) {
  return std::make_unique<NcclCommunicator>(comm, device);
}

}  // namespace pnp
