// Physics under MPI: each rank owns a slab or a grid tile; the allreduced partial
// projections equal the full projection and the operator norm equals the 1-rank value.
#include "physics_test_util.hpp"

#include "pnp_test.hpp"
#include <mpi.h>

using namespace pnp::physics;
using namespace pnp::physics::test;
using pnp::Box;

namespace {
int rank_() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int size_() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}
void allreduce(at::Tensor& t) {
  REQUIRE(t.is_contiguous());
  REQUIRE(t.is_cpu());
  if (t.scalar_type() == at::kDouble)
    MPI_Allreduce(MPI_IN_PLACE, t.data_ptr<double>(), static_cast<int>(t.numel()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  else
    MPI_Allreduce(MPI_IN_PLACE, t.data_ptr<float>(), static_cast<int>(t.numel()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
}  // namespace

TEST_CASE("MPI: slab and grid partial projections sum to the full projection") {
  const int R = size_(), r = rank_();
  auto g = Geometry::standard(45, 12, 70);
  at::manual_seed(11);  // same x and y on every rank
  auto x = at::rand({45, 45}, at::kDouble);
  auto y = at::rand({12, 70}, at::kDouble);
  auto full = forward(x, g, g.full_box());
  auto fullT = adjoint(y, g, g.full_box());
  for (const auto& boxes : {grid_boxes(45, R, 1), grid_boxes(45, 1, R)}) {
    const Box b = boxes[static_cast<size_t>(r)];
    auto p = forward(slice_box(x, b), g, b);
    allreduce(p);
    CHECK(max_rel(p, full) < 1e-13);
    CHECK(max_rel(adjoint(y, g, b), slice_box(fullT, b)) < 1e-14);
  }
}

TEST_CASE("MPI: operator norm is independent of the decomposition") {
  const int R = size_(), r = rank_();
  auto g = Geometry::standard(40, 15);
  PowerOptions po = tight_power_options(3);
  const double one = single_rank_norm(g, po);
  const Box b = grid_boxes(40, R, 1)[static_cast<size_t>(r)];
  const double dist = operator_norm(g, b, allreduce, po, at::kCPU, at::kDouble);
  CHECK(std::fabs(dist - one) / one < 1e-9);
  po.tol = 1e-6;
  const double dist32 = operator_norm(g, b, allreduce, po, at::kCPU, at::kFloat);
  CHECK(std::fabs(dist32 - one) / one < 1e-4);
}

TEST_CASE("MPI: a volume's slabs x tiles, float64: A and its adjoint equal the whole volume's") {
  // R ranks: planes of 2 tiles when R is even (2 ranks: 1 slab x 2 tiles, 4: 2 slabs x 2 tiles),
  // else R slabs of whole slices; each rank's batch of its slab's slices on its tile, the partial
  // sinograms summed over its plane.
  const int R = size_(), r = rank_();
  const int planes = R % 2 == 0 ? 2 : 1, slabs = R / planes;
  const int slab = r / planes, tile = r % planes;
  MPI_Comm plane;
  REQUIRE(MPI_Comm_split(MPI_COMM_WORLD, slab, tile, &plane) == MPI_SUCCESS);
  const int64_t S = 7, n = 37;
  auto g = Geometry::standard(n, 11, 56);
  at::manual_seed(21);  // the same volume and sinograms on every rank
  auto vol = at::rand({S, n, n}, at::kDouble);
  auto sin = at::rand({S, 11, 56}, at::kDouble);
  auto full = forward_slices(vol, g, g.full_box());
  auto fullT = adjoint_slices(sin, g, g.full_box());
  CHECK(full.abs().max().item<double>() > 0.1);  // content, not zeros
  const int64_t z0 = S * slab / slabs, z1 = S * (slab + 1) / slabs;
  const Box b = grid_boxes(n, planes, 1)[static_cast<size_t>(tile)];
  auto mine = vol.slice(0, z0, z1).slice(1, b.r0, b.r1).slice(2, b.c0, b.c1).contiguous();
  auto p = forward_slices(mine, g, b);
  MPI_Allreduce(MPI_IN_PLACE, p.data_ptr<double>(), static_cast<int>(p.numel()), MPI_DOUBLE, MPI_SUM, plane);
  CHECK(max_rel(p, full.slice(0, z0, z1)) < 1e-13);
  auto back = adjoint_slices(sin.slice(0, z0, z1).contiguous(), g, b);
  CHECK(max_rel(back, fullT.slice(0, z0, z1).slice(1, b.r0, b.r1).slice(2, b.c0, b.c1)) < 1e-13);
  MPI_Comm_free(&plane);
}
