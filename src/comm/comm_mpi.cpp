// The MPI backend (CPU tensors; CUDA tensors staged through host memory) and the parts of
// Communicator shared by all backends.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include <unistd.h>

#include <map>

#include "comm_internal.hpp"
#include "pnp/device.hpp"

#ifdef PNP_HAVE_NCCL
#include <nccl.h>
#endif

namespace pnp {

namespace {
MPI_Datatype mpi_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    default: throw Error("communication of dtype " + std::string(c10::toString(t.scalar_type())) + " is not supported");
  }
}
// Largest element count one MPI call takes (its count argument is an int); longer transfers
// are split into chunks of at most this many elements (set_mpi_max_count lowers it for tests).
int64_t g_max_count = std::numeric_limits<int>::max();

// Calls fn(offset, count) over [0, n) in pieces of at most g_max_count elements.
template <class F>
void for_chunks(int64_t n, F&& fn) {
  for (int64_t off = 0; off < n; off += g_max_count) fn(off, static_cast<int>(std::min(g_max_count, n - off)));
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
    char* base = static_cast<char*>(host.data_ptr());
    const int64_t es = host.element_size();
    for_chunks(host.numel(), [&](int64_t off, int n) {
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, base + off * es, n, mpi_type(host), MPI_SUM, comm_), "MPI_Allreduce");
    });
    bytes_sent_ += host.numel() * host.element_size();
    if (t.is_cuda()) t.copy_(host);
  }

  std::unique_ptr<Pending> start_exchange(const std::vector<Message>& sends, const std::vector<Message>& recvs) override {
    auto p = std::make_unique<MpiPending>();
    for (const auto& r : recvs) {
      at::Tensor host = r.buffer.is_cuda() ? host_buffer("recv", r.peer, r.buffer) : r.buffer;
      staged_ = staged_ || r.buffer.is_cuda();
      char* base = static_cast<char*>(host.data_ptr());
      for_chunks(host.numel(), [&](int64_t off, int n) {  // same peer and tag: MPI keeps the order
        p->reqs.emplace_back();
        check_mpi(MPI_Irecv(base + off * host.element_size(), n, mpi_type(host), r.peer, kHaloTag, comm_, &p->reqs.back()),
                  "MPI_Irecv (halo)");
      });
      if (r.buffer.is_cuda()) p->copy_back.emplace_back(r.buffer, host);
    }
    for (const auto& m : sends) {
      at::Tensor host = m.buffer;
      if (m.buffer.is_cuda()) {
        host = host_buffer("send", m.peer, m.buffer);
        host.copy_(m.buffer);  // synchronous: the data is on the host before MPI reads it
        staged_ = true;
      }
      char* base = static_cast<char*>(host.data_ptr());
      for_chunks(host.numel(), [&](int64_t off, int n) {
        p->reqs.emplace_back();
        check_mpi(MPI_Isend(base + off * host.element_size(), n, mpi_type(host), m.peer, kHaloTag, comm_, &p->reqs.back()),
                  "MPI_Isend (halo)");
      });
      bytes_sent_ += host.numel() * host.element_size();
    }
    return p;
  }

 private:
  static constexpr int kHaloTag = 7101;
  struct MpiPending final : Pending {
    std::vector<MPI_Request> reqs;
    std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (device buffer, host staging)
    void wait() override {
      check_mpi(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), "MPI_Waitall (halo)");
      reqs.clear();
      for (auto& [dev, host] : copy_back) dev.copy_(host);
      copy_back.clear();
    }
  };
  // Pinned host buffers for CUDA messages, one per device buffer (a HaloPlan's buffers live as
  // long as the plan), reused across exchanges.
  at::Tensor host_buffer(const std::string& dir, int peer, const at::Tensor& like) {
    std::string key = dir + std::to_string(peer) + ":" + std::to_string(reinterpret_cast<uintptr_t>(like.data_ptr())) +
                      ":" + std::to_string(like.numel()) + c10::toString(like.scalar_type());
    auto it = buffers_.find(key);
    if (it != buffers_.end()) return it->second;
    auto opts = at::TensorOptions().dtype(like.scalar_type()).pinned_memory(true);
    return buffers_[key] = at::empty(like.sizes(), opts);
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
  check_mpi(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, comm_), "MPI_Allreduce (sum)");
  return out;
}
double Communicator::max(double v) const {
  double out = 0;
  check_mpi(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, comm_), "MPI_Allreduce (max)");
  return out;
}

at::Tensor Communicator::gather_tiles(const at::Tensor& own, const Decomposition& d) {
  constexpr int kGatherTag = 7102;
  const int r = rank(), n_ranks = size();
  const bool volume = d.z.volume();
  // rank q's piece: its tile, and a volume's slab of slices
  auto piece = [&](int q) {
    const Box& b = d.tile_of(q).own;
    return volume ? std::vector<int64_t>{d.z.count(q), b.rows(), b.cols()} : std::vector<int64_t>{b.rows(), b.cols()};
  };
  // float32, or float64 as it came (solver.precision = "fp64")
  const at::ScalarType dtype = own.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const MPI_Datatype type = dtype == at::kDouble ? MPI_DOUBLE : MPI_FLOAT;
  const int64_t esize = static_cast<int64_t>(at::elementSize(dtype));
  at::Tensor mine = own.detach().to(at::kCPU, dtype).contiguous();
  TORCH_CHECK(mine.sizes().vec() == piece(r), "gather_tiles: tile has the wrong size");
  // Point to point, in chunks: a tile can hold more than INT_MAX pixels (MPI counts are ints).
  if (r != 0) {
    for_chunks(mine.numel(), [&](int64_t off, int n) {
      check_mpi(MPI_Send(static_cast<char*>(mine.data_ptr()) + off * esize, n, type, 0, kGatherTag, comm_), "MPI_Send (tiles)");
    });
    return {};
  }
  at::Tensor img = volume ? at::empty({d.z.slices, d.n, d.n}, dtype) : at::empty({d.n, d.n}, dtype);
  for (int q = 0; q < n_ranks; ++q) {
    const Box& b = d.tile_of(q).own;
    at::Tensor tile = q == 0 ? mine : at::empty(piece(q), dtype);
    if (q != 0)
      for_chunks(tile.numel(), [&](int64_t off, int n) {
        check_mpi(MPI_Recv(static_cast<char*>(tile.data_ptr()) + off * esize, n, type, q, kGatherTag, comm_, MPI_STATUS_IGNORE),
                  "MPI_Recv (tiles)");
      });
    at::Tensor dst = volume ? img.narrow(0, d.z.range(q).first, d.z.count(q)) : img;
    box_view(dst, Box{0, d.n, 0, d.n}, b).copy_(tile);
  }
  return img;
}

std::vector<double> gather_columns(const Communicator& comm, const std::vector<double>& mine) {
  const int r = comm.rank(), s = comm.size();
  std::vector<double> all(r == 0 ? mine.size() * size_t(s) : 0);
  check_mpi(MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), static_cast<int>(mine.size()),
                       MPI_DOUBLE, 0, comm.mpi_comm()),
            "MPI_Gather (records)");
  if (r != 0) return {};
  std::vector<double> out(all.size());
  const size_t it = mine.size();
  for (size_t q = 0; q < size_t(s); ++q)
    for (size_t i = 0; i < it; ++i) out[i * size_t(s) + q] = all[q * it + i];
  return out;
}

std::string nccl_version() {
#ifdef PNP_HAVE_NCCL
  return std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH);
#else
  return "none";
#endif
}

void set_mpi_max_count(int64_t n) { g_max_count = std::max<int64_t>(1, std::min<int64_t>(n, std::numeric_limits<int>::max())); }

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm) { return std::make_unique<MpiCommunicator>(comm); }

std::unique_ptr<Communicator> make_communicator(const std::string& kind, MPI_Comm comm, at::Device device,
                                                int /*local_size*/, int /*device_count*/, double nccl_timeout_s) {
  // The choice is made once, from every rank's (host, GPU UUID), identically on all ranks:
  // NCCL needs one distinct GPU per rank (ranks sharing a GPU, or a CPU rank, mean MPI). This
  // holds under Slurm's --gpus-per-task=1 too, where every rank sees only "its" device 0.
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  constexpr int kLen = 160;
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  const std::string me = std::string(host) + " " + (device.is_cuda() ? device_uuid(device) : std::string("cpu"));
  std::vector<char> buf(kLen, 0), all(static_cast<size_t>(kLen) * static_cast<size_t>(size), 0);
  std::copy_n(me.begin(), std::min<size_t>(me.size(), kLen - 1), buf.begin());
  check_mpi(MPI_Allgather(buf.data(), kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, comm), "MPI_Allgather (devices)");
  std::map<std::string, int> first_rank;
  bool cpu = false;
  std::string shared;
  for (int q = 0; q < size; ++q) {
    const std::string who(&all[static_cast<size_t>(q) * kLen]);
    if (who.size() >= 4 && who.compare(who.size() - 4, 4, " cpu") == 0) cpu = true;
    auto [it, fresh] = first_rank.emplace(who, q);
    if (!fresh && shared.empty())
      shared = "ranks " + std::to_string(it->second) + " and " + std::to_string(q) + " share GPU " + who;
  }
  const bool one_gpu_each = !cpu && shared.empty();
  auto note = [&](std::unique_ptr<Communicator> c, const std::string& why) {
    c->set_choice(c->backend() + " (" + why + ")");
    return c;
  };
  if (kind == "nccl") {
    if (cpu) throw InputError("distributed.comm = \"nccl\" needs every rank on a GPU (distributed.device = \"cuda\")");
#ifndef PNP_HAVE_NCCL
    throw InputError("distributed.comm = \"nccl\": this build has no NCCL (configure with CUDA and libnccl-dev)");
#else
    if (!one_gpu_each) throw InputError("distributed.comm = \"nccl\" needs one GPU per rank, but " + shared + "; use comm = \"mpi\"");
    return note(make_nccl_communicator(comm, device, nccl_timeout_s), std::to_string(size) + " ranks on " +
                                                                           std::to_string(size) + " distinct GPUs");
#endif
  }
  // One rank has nothing to send: the MPI communicator's calls return at once, and making an
  // NCCL communicator cost 0.47 s of study_4096's first iteration (H200).
  if (kind == "auto" && size == 1) return note(make_mpi_communicator(comm), "auto: 1 rank, nothing to communicate");
#ifdef PNP_HAVE_NCCL
  if (kind == "auto" && one_gpu_each)
    return note(make_nccl_communicator(comm, device, nccl_timeout_s),
                "auto: " + std::to_string(size) + " ranks on " + std::to_string(size) + " distinct GPUs");
#endif
  const std::string why = kind == "mpi" ? "distributed.comm = \"mpi\""
                          : cpu         ? "auto: CPU ranks"
                          : !shared.empty() ? "auto: " + shared
                                            : "auto: this build has no NCCL";
  return note(make_mpi_communicator(comm), why);
}

}  // namespace pnp
