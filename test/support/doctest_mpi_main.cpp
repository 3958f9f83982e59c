// doctest main for tests run under mpiexec: every rank runs every test case; the exit
// code is non-zero on all ranks if any rank failed, so ctest sees one verdict.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  doctest::Context ctx(argc, argv);
  if (rank != 0) ctx.setOption("no-intro", true);
  int local = ctx.run();
  int global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return global;
}
