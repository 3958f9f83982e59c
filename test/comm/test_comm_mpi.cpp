// Runs under mpiexec with several rank counts (see CMakeLists.txt).
#include "pnp_test.hpp"

#include <functional>
#include <cstdlib>
#include <limits>
#include <vector>

#include "pnp/comm.hpp"
#include "pnp/device.hpp"
#include "pnp/halo.hpp"

using namespace pnp;

namespace {
int world_rank() { int r; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }
int world_size() { int s; MPI_Comm_size(MPI_COMM_WORLD, &s); return s; }
// A value unique to every global pixel (never zero).
at::Tensor pattern(const Box& b, int64_t n) {
  auto r = at::arange(b.r0, b.r1, at::kDouble).unsqueeze(1), c = at::arange(b.c0, b.c1, at::kDouble).unsqueeze(0);
  return (r * n + c + 1.0).to(at::kFloat);
}
}  // namespace

TEST_CASE("allreduce_sum sums the partial sinograms of all ranks") {
  auto comm = make_communicator("mpi", MPI_COMM_WORLD, at::kCPU, 1, 0);
  int r = world_rank(), s = world_size();
  at::Tensor t = at::full({5, 7}, double(r + 1), at::kDouble);
  comm->allreduce_sum(t);
  CHECK(at::allclose(t, at::full({5, 7}, s * (s + 1) / 2.0, at::kDouble)));
  CHECK(comm->bytes_sent() == (s > 1 ? 5 * 7 * 8 : 0));
  CHECK(comm->sum(1.0) == s);
  CHECK(comm->max(double(r)) == s - 1);
}

TEST_CASE("halo exchange fills every ghost pixel with its owner's value, slabs and grids") {
  int s = world_size(), r = world_rank();
  auto comm = make_communicator("auto", MPI_COMM_WORLD, at::kCPU, 1, 0);
  for (std::string kind : {"slabs", "grid"})
    for (int64_t halo : {1, 3, 11}) {
      CAPTURE(kind);
      CAPTURE(halo);
      const int64_t n = 37;
      auto d = plan_decomposition(n, s, kind, {0, 0}, halo, 1);
      const TilePlan& me = d.tile(r);
      // Poison the whole extended tile, then write only the owned part.
      at::Tensor ext = at::full({me.ext.rows(), me.ext.cols()}, std::nanf(""), at::kFloat);
      ext.narrow(0, me.own.r0 - me.ext.r0, me.own.rows()).narrow(1, me.own.c0 - me.ext.c0, me.own.cols())
          .copy_(pattern(me.own, n));
      HaloPlan plan(*comm, d, ext.options());
      plan.exchange(ext);
      CHECK(at::equal(ext, pattern(me.ext, n)));
      // The plan's own count of what it sends: the boxes others need from this rank.
      int64_t sent = 0;
      for (const auto& t : me.sends) sent += t.box.size() * 4;
      CHECK(plan.bytes_sent() == sent);
      CHECK(plan.messages_sent() == static_cast<int>(me.sends.size()));
    }
}

TEST_CASE("gather_tiles assembles the image on rank 0") {
  int s = world_size(), r = world_rank();
  auto comm = make_communicator("mpi", MPI_COMM_WORLD, at::kCPU, 1, 0);
  auto d = plan_decomposition(29, s, s % 2 == 0 ? "grid" : "slabs", {0, 0}, 2, 1);
  at::Tensor img = comm->gather_tiles(pattern(d.tile(r).own, 29), d);
  if (r == 0) CHECK(at::equal(img, pattern(Box{0, 29, 0, 29}, 29)));
  else CHECK_FALSE(img.defined());
}

TEST_CASE("collectively: a failure on one rank reaches every rank with its message") {
  int s = world_size(), r = world_rank();
  bool threw = false;
  try {
    collectively(MPI_COMM_WORLD, [&] {
      if (r == s - 1) throw InputError("bad input on the last rank");
    });
  } catch (const CollectiveError& e) {
    threw = true;
    CHECK(e.input_error);
    std::string expected = s > 1 ? "rank " + std::to_string(s - 1) + ": bad input on the last rank" : "bad input on the last rank";
    CHECK(std::string(e.what()) == expected);
  }
  CHECK(threw);
  CHECK_NOTHROW(collectively(MPI_COMM_WORLD, [] {}));
}

TEST_CASE("collectively: the same failure on several ranks is said once, naming the ranks") {
  const int s = world_size(), r = world_rank();
  auto message = [&](const std::function<void()>& fn) {
    try {
      collectively(MPI_COMM_WORLD, fn);
    } catch (const CollectiveError& e) {
      return std::string(e.what());
    }
    return std::string("(none)");
  };
  CHECK(message([] { throw InputError("the same"); }) ==
        (s > 1 ? "the same (all " + std::to_string(s) + " ranks)" : std::string("the same")));
  if (s == 2 || s == 4) {  // even ranks fail one way, odd ranks another
    const std::string got = message([&] { throw InputError(r % 2 ? "b" : "a"); });
    CHECK(got == (s == 2 ? "rank 0: a; rank 1 failed with other errors"
                         : "ranks 0 and 2: a; ranks 1 and 3 failed with other errors"));
  }
  // A long value is cut (error_line): the message stays one short line.
  const std::string long_msg = message([] { throw InputError("value " + std::string(100000, 'x')); });
  CHECK(long_msg.size() < 400);
  CHECK(long_msg.find("(100000 characters)") != std::string::npos);
}

TEST_CASE("transfers above the MPI count limit are split into chunks, with the same results") {
  // The int-count boundary, tested with a small limit instead of a huge image: every transfer
  // below is several chunks of at most 7 elements.
  set_mpi_max_count(7);
  const int s = world_size(), r = world_rank();
  auto comm = make_communicator("mpi", MPI_COMM_WORLD, at::kCPU, 1, 0);
  at::Tensor t = at::arange(53, at::kDouble) * double(r + 1);
  comm->allreduce_sum(t);
  CHECK(at::allclose(t, at::arange(53, at::kDouble) * (s * (s + 1) / 2.0)));
  const int64_t n = 31;
  auto d = plan_decomposition(n, s, "slabs", {0, 0}, 4, 1);
  const TilePlan& me = d.tile(r);
  at::Tensor ext = at::full({me.ext.rows(), me.ext.cols()}, std::nanf(""), at::kFloat);
  ext.narrow(0, me.own.r0 - me.ext.r0, me.own.rows()).copy_(pattern(me.own, n));
  HaloPlan plan(*comm, d, ext.options());
  plan.exchange(ext);
  CHECK(at::equal(ext, pattern(me.ext, n)));
  at::Tensor img = comm->gather_tiles(pattern(me.own, n), d);
  if (r == 0) CHECK(at::equal(img, pattern(Box{0, n, 0, n}, n)));
  set_mpi_max_count(std::numeric_limits<int>::max());
}

TEST_CASE("the launcher's environment: the local rank it gives is MPI's node-local rank") {
  // Under mpirun (this test's launch): not a singleton, and the local rank read before MPI
  // started (the CUDA context thread's device) is the one MPI_COMM_TYPE_SHARED gives.
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank(), MPI_INFO_NULL, &node);
  int local = -1;
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  CHECK_FALSE(started_without_launcher());
  CHECK(launcher_local_rank() == local);
  // Without the launcher's variables: a singleton, local rank 0; with SLURM_LOCALID only: that
  // value; with one that is not a number: unknown (-1), never a guess.
  const char* names[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_SIZE", "PMI_RANK",
                         "PMI_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_NTASKS", "SLURM_LOCALID"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* n : names)
    if (const char* v = std::getenv(n)) saved.emplace_back(n, v);
  for (const char* n : names) unsetenv(n);
  CHECK(started_without_launcher());
  CHECK(launcher_local_rank() == 0);
  setenv("SLURM_LOCALID", "3", 1);
  CHECK_FALSE(started_without_launcher());
  CHECK(launcher_local_rank() == 3);
  setenv("SLURM_LOCALID", "3x", 1);
  CHECK(launcher_local_rank() == -1);
  unsetenv("SLURM_LOCALID");
  for (const auto& [n, v] : saved) setenv(n.c_str(), v.c_str(), 1);
  CHECK(launcher_local_rank() == local);
}
