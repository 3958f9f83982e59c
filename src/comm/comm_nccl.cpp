// The NCCL backend: CUDA tensors only, on the current stream, no host synchronisation, so
// that its calls can be captured in a CUDA graph (the communicator exists before capture).
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "comm_internal.hpp"
#include "pnp/watchdog.hpp"

namespace pnp {
namespace {

void check_nccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess && rc != ncclInProgress) throw Error(std::string(what) + " failed: " + ncclGetErrorString(rc));
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
  // Initialised non-blocking: a failure or a hang on any rank (up to `timeout_s`) becomes an
  // error on every rank, the half-made communicator aborted, instead of a rank left waiting.
  NcclCommunicator(MPI_Comm comm, at::Device device, double timeout_s)
      : Communicator(comm), device_(device), timeout_s_(timeout_s) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    ncclUniqueId id{};
    int ok = 1;
    if (rank_ == 0) ok = ncclGetUniqueId(&id) == ncclSuccess;
    MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
    if (!ok) throw Error("NCCL: ncclGetUniqueId failed on rank 0");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
    c10::cuda::CUDAGuard guard(device_);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    std::string why;
    const ncclResult_t rc = ncclCommInitRankConfig(&nccl_, size_, id, rank_, &config);
    if (rc != ncclSuccess && rc != ncclInProgress) why = ncclGetErrorString(rc);
    else why = wait_ready();
    int mine = why.empty() ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all) {
      if (nccl_) ncclCommAbort(nccl_);
      nccl_ = nullptr;
      throw Error("NCCL initialisation failed " + (why.empty() ? std::string("on another rank") : "here: " + why) +
                  " (distributed.comm = \"mpi\" avoids NCCL)");
    }
    alive_ = std::make_shared<std::atomic<bool>>(true);
    Watchdog::add_abort_hook([c = nccl_, alive = alive_] {
      if (alive->load()) ncclCommAbort(c);  // unblocks a rank stuck in a collective
    });
  }
  ~NcclCommunicator() override {
    if (alive_) alive_->store(false);
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
    ready_or_throw("ncclAllReduce");
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
    ready_or_throw("ncclGroupEnd (halo)");
    return std::make_unique<StreamOrdered>();
  }

 private:
  // A non-blocking communicator may return from a call before NCCL has finished enqueueing it:
  // poll its state (host only) until it is ready, an error, or the timeout. "" when ready.
  std::string wait_ready() const {
    const auto t0 = std::chrono::steady_clock::now();
    while (true) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t rc = ncclCommGetAsyncError(nccl_, &state);
      if (rc != ncclSuccess) return ncclGetErrorString(rc);
      if (state == ncclSuccess) return "";
      if (state != ncclInProgress) return ncclGetErrorString(state);
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s_)
        return "still in progress after " + std::to_string(static_cast<int>(timeout_s_)) + " s";
      std::this_thread::yield();
    }
  }
  void ready_or_throw(const char* what) const {
    const std::string why = wait_ready();
    if (!why.empty()) throw Error(std::string(what) + ": " + why);
  }
  // NCCL's grouped calls are ordered on the stream: nothing to wait for on the host.
  struct StreamOrdered final : Pending {
    void wait() override {}
  };
  at::Device device_;
  double timeout_s_ = 600;
  int rank_ = 0, size_ = 1;
  ncclComm_t nccl_ = nullptr;
  std::shared_ptr<std::atomic<bool>> alive_;
};
}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, at::Device device, double timeout_s) {
  return std::make_unique<NcclCommunicator>(comm, device, timeout_s);
}

}  // namespace pnp
