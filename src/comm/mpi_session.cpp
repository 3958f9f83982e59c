#include <cstdio>
#include <cstring>
#include <vector>

#include "pnp/comm.hpp"
#include "pnp/device.hpp"

#include <cstdlib>

namespace pnp {

MpiSession::MpiSession(int& argc, char**& argv) {
#ifdef OMPI_MAJOR_VERSION
  // Started without mpirun: OpenMPI's MPI_Init would fork its daemon (orted) for a job of one
  // process (the demo's `mpi` set-up part on one rank, 2-core CPU: 0.326 / 0.330 s with the
  // daemon, 0.231 / 0.246 s isolated; docs/design.md, "Decisions").
  // Isolated, the singleton cannot MPI_Comm_spawn, which pnp never does. A value the user set
  // is kept. A job of one process talks to itself only: the ob1 messaging layer with the self
  // transport, not UCX, whose start-up probes the network and CUDA (beside the CUDA context made
  // on DeviceWarmup's thread). One H200, study_4096's set-up: the `mpi` part 0.153 s against
  // 0.347 / 0.445 s with OpenMPI's defaults, and the context 0.398 against 0.496 / 0.600 s
  // (docs/performance.md#the-pnp-iteration).
  if (started_without_launcher()) {
    setenv("OMPI_MCA_ess_singleton_isolated", "1", /*overwrite=*/0);
    setenv("OMPI_MCA_pml", "ob1", 0);
    setenv("OMPI_MCA_btl", "self", 0);
  }
#endif
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void collectively(MPI_Comm comm, const std::function<void()>& fn) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string msg;
  int kind = 0;  // 0 ok, 1 input error, 2 other error
  try {
    fn();
  } catch (const InputError& e) {
    msg = e.what(), kind = 1;
  } catch (const std::exception& e) {
    msg = e.what(), kind = 2;
  }
  // Lowest failing rank, and how many failed.
  int failing = kind ? rank : INT32_MAX, first = 0, nfail = 0, one = kind ? 1 : 0;
  MPI_Allreduce(&failing, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == INT32_MAX) return;
  MPI_Allreduce(&one, &nfail, 1, MPI_INT, MPI_SUM, comm);
  int size = 1;
  MPI_Comm_size(comm, &size);
  int len = static_cast<int>(msg.size());
  MPI_Bcast(&len, 1, MPI_INT, first, comm);
  MPI_Bcast(&kind, 1, MPI_INT, first, comm);
  std::vector<char> buf(static_cast<size_t>(len) + 1, 0);
  if (rank == first) std::memcpy(buf.data(), msg.data(), msg.size());
  MPI_Bcast(buf.data(), len, MPI_CHAR, first, comm);
  std::string text(buf.data(), static_cast<size_t>(len));
  if (nfail < size) text = "rank " + std::to_string(first) + ": " + text;
  throw CollectiveError(text, kind == 1);
}

void agree(MPI_Comm comm, const std::string& text, const std::string& what) {
  const uint64_t h = fnv1a(text);
  uint64_t lo = 0, hi = 0;
  MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, comm);
  MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, comm);
  if (lo == hi) return;
  // They differ: rank 0's text to everyone, each rank finds its first differing line.
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int len = static_cast<int>(text.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, comm);
  std::string ref(static_cast<size_t>(len), '\0');
  if (rank == 0) ref = text;
  MPI_Bcast(ref.data(), len, MPI_CHAR, 0, comm);
  collectively(comm, [&] {
    if (text == ref) return;
    auto lines = [](const std::string& t) {
      std::vector<std::string> v;
      size_t a = 0;
      while (a <= t.size()) {
        const size_t b = t.find('\n', a);
        v.push_back(t.substr(a, b == std::string::npos ? std::string::npos : b - a));
        if (b == std::string::npos) break;
        a = b + 1;
      }
      return v;
    };
    const auto mine = lines(text), theirs = lines(ref);
    size_t i = 0;
    while (i < mine.size() && i < theirs.size() && mine[i] == theirs[i]) ++i;
    const std::string a = i < mine.size() ? mine[i] : "(end)", b = i < theirs.size() ? theirs[i] : "(end)";
    throw InputError("rank " + std::to_string(rank) + "'s " + what + " differs from rank 0's at '" + a +
                     "' (rank 0: '" + b + "'); every rank must run the same configuration on the same inputs");
  });
  // Some rank saw a difference but collectively did not throw here: cannot happen (the hashes
  // differ only if some text differs from rank 0's), but never return as if all agreed.
  throw CollectiveError(what + " differs between ranks", true);
}

void abort_job(const std::string& msg, int code) {
  int rank = 0, init = 0;
  MPI_Initialized(&init);
  if (init) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "error: rank %d: %s\n", rank, msg.c_str());
  std::fflush(stderr);
  if (init) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace pnp
