#include "pnp_test.hpp"

#include <vector>

#include "pnp/decomposition.hpp"

using namespace pnp;

namespace {
// Every pixel owned exactly once; every ext pixel outside own received exactly once; sends
// and receives mirror each other.
void check_consistent(const Decomposition& d) {
  std::vector<int> owner(static_cast<size_t>(d.n * d.n), 0);
  for (const auto& t : d.tiles)
    for (int64_t r = t.own.r0; r < t.own.r1; ++r)
      for (int64_t c = t.own.c0; c < t.own.c1; ++c) owner[static_cast<size_t>(r * d.n + c)]++;
  for (int v : owner) REQUIRE(v == 1);
  for (const auto& t : d.tiles) {
    CHECK(t.ext.r0 <= t.own.r0);
    CHECK(t.ext.r1 >= t.own.r1);
    CHECK(t.ext.c0 <= t.own.c0);
    CHECK(t.ext.c1 >= t.own.c1);
    CHECK(t.ext.r0 % d.align == 0);
    CHECK(t.ext.c0 % d.align == 0);
    CHECK((t.ext.r1 == d.n || t.ext.r1 % d.align == 0));
    int64_t covered = t.own.size();
    for (const auto& rv : t.recvs) {
      covered += rv.box.size();
      const auto& src = d.tile(rv.peer);
      CHECK(src.own.contains(rv.box.r0, rv.box.c0));
      bool mirrored = false;
      for (const auto& s : src.sends) mirrored |= (s.peer == t.rank && s.box == rv.box);
      CHECK(mirrored);
    }
    CHECK(covered == t.ext.size());
  }
}
}  // namespace

TEST_CASE("split_range handles uneven sizes") {
  auto r = split_range(10, 3);
  REQUIRE(r.size() == 3);
  CHECK(r[0] == std::pair<int64_t, int64_t>{0, 4});
  CHECK(r[1] == std::pair<int64_t, int64_t>{4, 7});
  CHECK(r[2] == std::pair<int64_t, int64_t>{7, 10});
}

TEST_CASE("aligned_ranges: boundaries on a grid, nearest the equal split, or refused") {
  using R = std::vector<std::pair<int64_t, int64_t>>;
  CHECK(aligned_ranges(10, 3, 1) == split_range(10, 3));
  CHECK(aligned_ranges(12, 2, 8) == R{{0, 8}, {8, 12}});
  CHECK(aligned_ranges(100, 4, 8) == R{{0, 24}, {24, 48}, {48, 72}, {72, 100}});
  CHECK(aligned_ranges(12, 3, 2) == R{{0, 4}, {4, 8}, {8, 12}});
  CHECK_THROWS_AS(aligned_ranges(12, 3, 8), InputError);  // 8 is the only inner multiple
  CHECK_THROWS_AS(aligned_ranges(7, 2, 8), InputError);
  for (int parts = 1; parts <= 6; ++parts) {  // every split covers [0, n) in order, inner ends on the grid
    const R r = aligned_ranges(96, parts, 8);
    REQUIRE(static_cast<int>(r.size()) == parts);
    CHECK(r.front().first == 0);
    CHECK(r.back().second == 96);
    for (size_t i = 0; i + 1 < r.size(); ++i) {
      CHECK(r[i].second == r[i + 1].first);
      CHECK(r[i].second % 8 == 0);
      CHECK(r[i].first < r[i].second);
    }
  }
}

TEST_CASE("slabs with halos, uneven, 1 to 7 ranks") {
  for (int ranks = 1; ranks <= 7; ++ranks)
    for (int64_t halo : {0, 1, 5, 40}) {
      CAPTURE(ranks);
      CAPTURE(halo);
      auto d = plan_decomposition(61, ranks, "slabs", {}, halo);
      CHECK(d.tiles.size() == size_t(ranks));
      check_consistent(d);
      for (const auto& t : d.tiles) {
        CHECK(t.ext.r0 == std::max<int64_t>(0, t.own.r0 - halo));
        CHECK(t.ext.r1 == std::min<int64_t>(61, t.own.r1 + halo));
        CHECK(t.ext.c0 == 0);
        CHECK(t.ext.c1 == 61);
      }
    }
}

TEST_CASE("a halo wider than a slab reaches past the nearest neighbour") {
  auto d = plan_decomposition(64, 4, "slabs", {}, 20);
  check_consistent(d);
  CHECK(d.tile(0).recvs.size() == 2);  // ranks 1 (rows 16-32) and 2 (rows 32-36)
  CHECK(d.tile(1).recvs.size() == 3);
}

TEST_CASE("grids: 2x2, 3x2, auto factorisation, alignment") {
  auto d = plan_decomposition(50, 4, "grid", {0, 0}, 3);
  CHECK(d.grid_rows == 2);
  CHECK(d.grid_cols == 2);
  check_consistent(d);
  CHECK(d.tile(0).recvs.size() == 3);  // right, below and the diagonal corner
  auto g = plan_decomposition(50, 6, "grid", {3, 2}, 4, 8);
  CHECK(g.grid_rows == 3);
  check_consistent(g);
  CHECK(g.tile(4).recvs.size() == 3);  // bottom-left corner: above, above-right, right
  auto c = plan_decomposition(60, 9, "grid", {3, 3}, 4);
  check_consistent(c);
  CHECK(c.tile(4).recvs.size() == 8);  // the centre tile has 8 neighbours
  CHECK(c.tile(4).sends.size() == 8);
  auto a = plan_decomposition(100, 3, "slabs", {}, 5, 8);
  check_consistent(a);
  CHECK(a.tile(1).ext.r0 == 24);  // own starts at 34, 34-5=29 rounded down to 24
  CHECK(a.tile(1).ext.r1 == 72);  // own ends at 67, 67+5=72
}

TEST_CASE("bad plans are input errors") {
  CHECK_THROWS_WITH_AS(plan_decomposition(16, 6, "grid", {4, 2}, 0),
                       "distributed.grid = [4, 2] does not match 6 ranks", InputError);
  CHECK_THROWS_AS(plan_decomposition(4, 8, "slabs", {}, 0), InputError);
  CHECK_THROWS_AS(plan_decomposition(16, 2, "cubes", {}, 0), InputError);
}

TEST_CASE("a volume's slabs: ranks per plane, ranges, z-halo on the network's grid") {
  const SlabSplit one = plan_slabs(0, 4, 1);  // one image: every rank in the one plane
  CHECK(!one.volume());
  CHECK(one.plane_ranks == 4);
  CHECK(one.slab(3) == 0);
  CHECK(one.plane_rank(3) == 3);

  const SlabSplit v = plan_slabs(10, 6, 2);  // 3 slabs of 4, 3, 3 slices, 2 ranks each
  REQUIRE(v.ranges.size() == 3);
  CHECK(v.range(0) == std::make_pair<int64_t, int64_t>(0, 4));
  CHECK(v.range(1) == v.range(0));
  CHECK(v.range(2) == std::make_pair<int64_t, int64_t>(4, 7));
  CHECK(v.range(5) == std::make_pair<int64_t, int64_t>(7, 10));
  CHECK(v.plane_rank(5) == 1);
  CHECK(v.count(4) == 3);
  CHECK(v.ext(2) == v.range(2));  // no halo: the slab itself

  SlabSplit h = plan_slabs(20, 5, 1);  // slabs of 4: [0,4) [4,8) [8,12) [12,16) [16,20)
  h.halo = 5, h.align = 8;             // a network that downsamples by 8
  CHECK(h.ext(0) == std::make_pair<int64_t, int64_t>(0, 16));   // 4 + 5 = 9 rounded up to 16
  CHECK(h.ext(2) == std::make_pair<int64_t, int64_t>(0, 20));   // 8 - 5 = 3 down to 0; 17 up to 24, clipped
  CHECK(h.ext(4) == std::make_pair<int64_t, int64_t>(8, 20));   // 16 - 5 = 11 down to 8
  for (int r = 0; r < 5; ++r) {  // every extended slab holds its own and starts on the grid
    CHECK(h.ext(r).first <= h.range(r).first);
    CHECK(h.ext(r).second >= h.range(r).second);
    CHECK(h.ext(r).first % 8 == 0);
  }
}

TEST_CASE("bad slab splits are input errors") {
  CHECK_THROWS_WITH_AS(plan_slabs(10, 6, 4), doctest::Contains("does not divide the 6 ranks"), InputError);
  CHECK_THROWS_WITH_AS(plan_slabs(2, 3, 1), doctest::Contains("cannot split 2 slice(s) into 3 slabs"), InputError);
  CHECK_THROWS_WITH_AS(plan_slabs(0, 4, 2), doctest::Contains("a 2D image's ranks all share its plane"), InputError);
}
