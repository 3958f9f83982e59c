// Communication: the MPI session, collective error agreement, and one Communicator
// interface with an MPI backend (CPU tensors, host-staged CUDA tensors) and an NCCL
// backend (CUDA tensors; communicators created before any graph capture).
#pragma once

#include <mpi.h>

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pnp/core.hpp"
#include "pnp/decomposition.hpp"

namespace pnp {

// RAII MPI_Init / MPI_Finalize.
class MpiSession {
 public:
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // rank among the ranks of this node
  int local_size() const { return local_size_; }

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

// Thrown on every rank when `collectively` saw a failure on any rank: carries the job's one
// error line (the lowest failing rank's message and the ranks that reported it) and whether it
// was an input error. Programs print it once, on rank 0. Code that knows every rank fails alike
// (a diverged run) throws it itself, so that the job ends without an abort.
class CollectiveError : public Error {
 public:
  CollectiveError(const std::string& msg, bool input_error) : Error(msg), input_error(input_error) {}
  bool input_error;
};

// Runs fn on every rank, then agrees: if any rank threw, every rank throws CollectiveError
// with the first failing rank's message, said once: "ranks 1 and 3: ..." when it failed on some
// ranks only, "... (all 4 ranks)" when on all; "; rank 2 failed with other errors" when others
// failed differently. Long values are cut (error_line).
// Use it around setup steps so that no rank is left waiting in a later collective.
void collectively(MPI_Comm comm, const std::function<void()>& fn);

// Every rank passes `text`, its view of something all ranks must share (the effective
// configuration, the identity of the input files, the backend). When the texts differ, every
// rank throws CollectiveError (an input error) naming the first rank and line that differ from
// rank 0's ("rank 1's configuration differs from rank 0's at 'iterations = 5' (rank 0:
// 'iterations = 10')"). Two allreduces of a hash when they agree.
void agree(MPI_Comm comm, const std::string& text, const std::string& what);

// Prints "error: <msg>" and aborts the whole job: for failures inside the solver loop,
// where other ranks may be blocked in a collective.
[[noreturn]] void abort_job(const std::string& msg, int code);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "mpi", "mpi-host-staged" or "nccl"

  // Sums a contiguous tensor in place over all ranks (the partial sinograms).
  virtual void allreduce_sum(at::Tensor& t) = 0;

  // Point-to-point transfers of whole contiguous buffers (a HaloPlan's, include/pnp/halo.hpp):
  // start_exchange posts every receive and send, the returned object's wait() completes them.
  // The buffers must stay alive until then. NCCL: one grouped send/recv on the current stream,
  // no host synchronisation (capturable; wait() is a no-op, later work on the stream is ordered
  // after it). MPI: Isend/Irecv, CUDA buffers staged through pinned host memory; wait() is
  // Waitall and the copy back.
  struct Message {
    int peer;
    at::Tensor buffer;
  };
  class Pending {
   public:
    virtual ~Pending() = default;
    virtual void wait() = 0;
  };
  virtual std::unique_ptr<Pending> start_exchange(const std::vector<Message>& sends,
                                                  const std::vector<Message>& recvs) = 0;
  // Gathers every rank's owned tile into an [n, n] image on rank 0 (CPU, float32, or float64
  // when the tiles are);
  // returns an undefined tensor on the other ranks.
  virtual at::Tensor gather_tiles(const at::Tensor& own, const Decomposition& d);

  // What make_communicator chose and why ("nccl (auto: 2 ranks on 2 distinct GPUs)").
  const std::string& choice() const { return choice_; }
  void set_choice(std::string c) { choice_ = std::move(c); }

  // Bytes this rank sent since construction (halo and allreduce payloads).
  int64_t bytes_sent() const { return bytes_sent_; }

  // Host scalar reductions for metrics (always over MPI).
  double sum(double v) const;
  double max(double v) const;
  MPI_Comm mpi_comm() const { return comm_; }

 protected:
  explicit Communicator(MPI_Comm comm) : comm_(comm) {}
  MPI_Comm comm_;
  int64_t bytes_sent_ = 0;
  std::string choice_;
};

// Gathers `mine` ([k] values of this rank) into [k x ranks] (row-major) on rank 0; an empty
// vector on the other ranks.
std::vector<double> gather_columns(const Communicator& comm, const std::vector<double>& mine);

// The NCCL version this build links ("2.27.7"), or "none".
std::string nccl_version();

// The largest element count of one MPI call (default INT_MAX, MPI's int count): transfers
// above it (allreduce, halo messages, gathering tiles) are split into chunks. Lowering it
// exercises the chunking on small data (the tests do).
void set_mpi_max_count(int64_t elements);

// kind: "mpi", "nccl" or "auto" (NCCL when the device is CUDA, NCCL is built in and each rank
// of the node has its own GPU; otherwise MPI, host-staged for CUDA tensors).
// Collective: the ranks compare their (host, GPU UUID) and decide together (see comm_mpi.cpp);
// choice() says what was chosen and why. An NCCL initialisation that fails or hangs longer
// than nccl_timeout_s on any rank is an error on every rank.
std::unique_ptr<Communicator> make_communicator(const std::string& kind, MPI_Comm comm, at::Device device,
                                                int local_size, int device_count, double nccl_timeout_s = 600);

}  // namespace pnp
