// The MPI backend (CPU tensors; CUDA tensors staged through host memory) and the parts of
// Communicator shared by all backends.
#include <vector>

#include "comm_internal.hpp"

namespace pnp {

namespace {
MPI_Datatype mpi_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    default: throw Error("communication of dtype " + std::string(c10::toString(t.scalar_type())) + " is not supported");
  }
}
void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw Error(std::string(what) + " failed: " + std::string(msg, static_cast<size_t>(len)));
  }
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : Communicator(comm) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return staged_ ? "mpi-host-staged" : "mpi"; }

  void allreduce_sum(at::Tensor& t) override {
    TORCH_CHECK(t.is_contiguous(), "allreduce_sum needs a contiguous tensor");
    if (size_ == 1) return;
    at::Tensor host = t.is_cuda() ? staging(t, "allreduce").copy_(t) : t;
    staged_ = staged_ || t.is_cuda();
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, host.data_ptr(), static_cast<int>(host.numel()), mpi_type(host), MPI_SUM, comm_),
              "MPI_Allreduce");
    bytes_sent_ += host.numel() * host.element_size();
    if (t.is_cuda()) t.copy_(host);
  }

  void halo_exchange(at::Tensor& ext, const Decomposition& d) override {
    const TilePlan& me = d.tile(rank_);
    if (me.recvs.empty() && me.sends.empty()) return;
    staged_ = staged_ || ext.is_cuda();
    std::vector<MPI_Request> reqs;
    std::vector<at::Tensor> recv_bufs;
    for (const auto& r : me.recvs) {
      at::Tensor buf = host_buffer("recv", r.peer, r.box, ext);
      recv_bufs.push_back(buf);
      reqs.emplace_back();
      check_mpi(MPI_Irecv(buf.data_ptr(), static_cast<int>(buf.numel()), mpi_type(buf), r.peer, kHaloTag, comm_,
                          &reqs.back()),
                "MPI_Irecv (halo)");
    }
    for (const auto& s : me.sends) {
      at::Tensor buf = host_buffer("send", s.peer, s.box, ext);
      buf.copy_(box_view(ext, me.ext, s.box));
      reqs.emplace_back();
      check_mpi(MPI_Isend(buf.data_ptr(), static_cast<int>(buf.numel()), mpi_type(buf), s.peer, kHaloTag, comm_,
                          &reqs.back()),
                "MPI_Isend (halo)");
      bytes_sent_ += buf.numel() * buf.element_size();
    }
    check_mpi(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), "MPI_Waitall (halo)");
    for (size_t i = 0; i < me.recvs.size(); ++i) box_view(ext, me.ext, me.recvs[i].box).copy_(recv_bufs[i]);
  }

 private:
  static constexpr int kHaloTag = 7101;
  // Host buffers reused across iterations (pinned when the data lives on the GPU).
  at::Tensor host_buffer(const std::string& dir, int peer, const Box& b, const at::Tensor& like) {
    std::string key = dir + std::to_string(peer) + ":" + to_string(b) + c10::toString(like.scalar_type());
    auto it = buffers_.find(key);
    if (it != buffers_.end()) return it->second;
    auto opts = at::TensorOptions().dtype(like.scalar_type()).pinned_memory(like.is_cuda());
    return buffers_[key] = at::empty({b.rows(), b.cols()}, opts);
  }
  at::Tensor staging(const at::Tensor& t, const std::string& name) {
    std::string key = name + std::to_string(t.numel()) + c10::toString(t.scalar_type());
    auto it = buffers_.find(key);
    if (it != buffers_.end()) return it->second;
    return buffers_[key] = at::empty(t.sizes(), at::TensorOptions().dtype(t.scalar_type()).pinned_memory(true));
  }
  int rank_ = 0, size_ = 1;
  bool staged_ = false;
  std::map<std::string, at::Tensor> buffers_;
};
}  // namespace

at::Tensor box_view(const at::Tensor& ext, const Box& ext_box, const Box& b) {
  return ext.narrow(-2, b.r0 - ext_box.r0, b.rows()).narrow(-1, b.c0 - ext_box.c0, b.cols());
}

double Communicator::sum(double v) const {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, comm_);
  return out;
}
double Communicator::max(double v) const {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, comm_);
  return out;
}

at::Tensor Communicator::gather_tiles(const at::Tensor& own, const Decomposition& d) {
  int r = rank(), n_ranks = size();
  at::Tensor mine = own.detach().to(at::kCPU, at::kFloat).contiguous();
  std::vector<int> counts(static_cast<size_t>(n_ranks)), displs(static_cast<size_t>(n_ranks));
  int64_t total = 0;
  for (int q = 0; q < n_ranks; ++q) {
    counts[static_cast<size_t>(q)] = static_cast<int>(d.tile(q).own.size());
    displs[static_cast<size_t>(q)] = static_cast<int>(total);
    total += d.tile(q).own.size();
  }
  TORCH_CHECK(mine.numel() == d.tile(r).own.size(), "gather_tiles: tile has the wrong size");
  at::Tensor flat = r == 0 ? at::empty({total}, at::kFloat) : at::Tensor();
  check_mpi(MPI_Gatherv(mine.data_ptr(), static_cast<int>(mine.numel()), MPI_FLOAT, r == 0 ? flat.data_ptr() : nullptr,
                        counts.data(), displs.data(), MPI_FLOAT, 0, comm_),
            "MPI_Gatherv (tiles)");
  if (r != 0) return {};
  at::Tensor img = at::empty({d.n, d.n}, at::kFloat);
  for (int q = 0; q < n_ranks; ++q) {
    const Box& b = d.tile(q).own;
    box_view(img, Box{0, d.n, 0, d.n}, b).copy_(flat.narrow(0, displs[static_cast<size_t>(q)], b.size()).view({b.rows(), b.cols()}));
  }
  return img;
}

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm) { return std::make_unique<MpiCommunicator>(comm); }

std::unique_ptr<Communicator> make_communicator(const std::string& kind, MPI_Comm comm, at::Device device,
                                                int local_size, int device_count) {
  bool cuda = device.is_cuda();
  [[maybe_unused]] const bool own_gpu = cuda && local_size <= device_count;
  if (kind == "nccl") {
    if (!cuda) throw InputError("distributed.comm = \"nccl\" needs distributed.device = \"cuda\"");
#ifndef PNP_HAVE_NCCL
    throw InputError("distributed.comm = \"nccl\": this build has no NCCL (configure with CUDA and libnccl-dev)");
#else
    if (!own_gpu)
      throw InputError("distributed.comm = \"nccl\" needs one GPU per rank: " + std::to_string(local_size) +
                       " ranks share " + std::to_string(device_count) + " GPUs on this node; use comm = \"mpi\"");
    return make_nccl_communicator(comm, device);
#endif
  }
#ifdef PNP_HAVE_NCCL
  if (kind == "auto" && own_gpu) return make_nccl_communicator(comm, device);
#endif
  return make_mpi_communicator(comm);
}

}  // namespace pnp
