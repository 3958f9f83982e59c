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

  std::unique_ptr<Pending> start_exchange(const std::vector<Message>& sends, const std::vector<Message>& recvs) override {
    auto stream = c10::cuda::getCurrentCUDAStream(device_.index());
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (const auto& r : recvs) {
      TORCH_CHECK(r.buffer.is_cuda() && r.buffer.is_contiguous(), "NCCL exchange needs contiguous CUDA buffers");
      check_nccl(ncclRecv(r.buffer.data_ptr(), static_cast<size_t>(r.buffer.numel()), nccl_type(r.buffer), r.peer, nccl_,
                          stream.stream()),
                 "ncclRecv (halo)");
    }
    for (const auto& m : sends) {
      TORCH_CHECK(m.buffer.is_cuda() && m.buffer.is_contiguous(), "NCCL exchange needs contiguous CUDA buffers");
      check_nccl(ncclSend(m.buffer.data_ptr(), static_cast<size_t>(m.buffer.numel()), nccl_type(m.buffer), m.peer, nccl_,
                          stream.stream()),
                 "ncclSend (halo)");
      bytes_sent_ += m.buffer.numel() * m.buffer.element_size();
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    return std::make_unique<StreamOrdered>();
  }

 private:
  // NCCL's grouped calls are ordered on the stream: nothing to wait for on the host.
  struct StreamOrdered final : Pending {
    void wait() override {}
  };
  at::Device device_;
  int rank_ = 0, size_ = 1;
  ncclComm_t nccl_ = nullptr;
};
}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, at::Device device) {
  return std::make_unique<NcclCommunicator>(comm, device);
}

}  // namespace pnp
