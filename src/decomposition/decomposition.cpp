#include "pnp/decomposition.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace pnp {

namespace {
Box intersect(const Box& a, const Box& b) {
  Box r{std::max(a.r0, b.r0), std::min(a.r1, b.r1), std::max(a.c0, b.c0), std::min(a.c1, b.c1)};
  if (r.empty()) return Box{};
  return r;
}
int64_t round_down(int64_t v, int64_t a) { return v / a * a; }
int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }
}  // namespace

std::vector<std::pair<int64_t, int64_t>> split_range(int64_t n, int parts) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t base = n / parts, extra = n % parts, start = 0;
  for (int p = 0; p < parts; ++p) {
    int64_t len = base + (p < extra ? 1 : 0);
    out.emplace_back(start, start + len);
    start += len;
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> aligned_ranges(int64_t n, int parts, int64_t align) {
  if (align <= 1) return split_range(n, parts);
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t start = 0;
  for (int p = 1; p <= parts; ++p) {
    const int64_t end = p == parts ? n
                                   : std::min(n, (static_cast<int64_t>(p) * n + parts * align / 2) / (parts * align) * align);
    if (end <= start)
      throw InputError("cannot split " + std::to_string(n) + " into " + std::to_string(parts) +
                       " parts whose boundaries are multiples of " + std::to_string(align) +
                       " (the network's sampling grid): use fewer ranks");
    out.emplace_back(start, end);
    start = end;
  }
  return out;
}

int64_t Decomposition::max_ext_pixels() const {
  int64_t m = 0;
  for (const auto& t : tiles) m = std::max(m, t.ext.size());
  return m;
}

std::vector<AxisPeers> Decomposition::peers(int rank) const {
  const int row = rank / grid_cols, col = rank % grid_cols;
  std::vector<AxisPeers> p(2);
  if (row > 0) p[0].lo = rank - grid_cols;
  if (row < grid_rows - 1) p[0].hi = rank + grid_cols;
  if (col > 0) p[1].lo = rank - 1;
  if (col < grid_cols - 1) p[1].hi = rank + 1;
  return p;
}

SlabSplit plan_slabs(int64_t slices, int ranks, int plane_ranks) {
  SlabSplit z;
  z.slices = slices;
  if (slices == 0) {  // one image: the whole world is its plane
    if (plane_ranks != 1 && plane_ranks != ranks)
      throw InputError("distributed.plane_ranks = " + std::to_string(plane_ranks) + " splits a volume's ranks; a 2D "
                       "image's ranks all share its plane (leave it at 1)");
    z.plane_ranks = ranks;
    z.ranges = {{0, 1}};
    return z;
  }
  if (plane_ranks < 1 || ranks % plane_ranks != 0)
    throw InputError("distributed.plane_ranks = " + std::to_string(plane_ranks) + " does not divide the " +
                     std::to_string(ranks) + " ranks into slabs of slices (use a divisor of the rank count)");
  const int slabs = ranks / plane_ranks;
  if (slabs > slices)
    throw InputError("cannot split " + std::to_string(slices) + " slice(s) into " + std::to_string(slabs) +
                     " slabs (" + std::to_string(ranks) + " ranks / plane_ranks " + std::to_string(plane_ranks) +
                     "): use fewer ranks, or more per plane (distributed.plane_ranks)");
  z.plane_ranks = plane_ranks;
  z.ranges = split_range(slices, slabs);
  return z;
}

std::pair<int64_t, int64_t> SlabSplit::ext(int rank) const {
  const auto [z0, z1] = range(rank);
  if (halo == 0) return {z0, z1};
  const int64_t a = std::max<int64_t>(align, 1);
  const int64_t e0 = std::max<int64_t>(z0 - halo, 0) / a * a;
  const int64_t e1 = std::min(slices, (std::min(slices, z1 + halo) + a - 1) / a * a);
  return {e0, e1};
}

std::string Decomposition::describe() const {
  std::ostringstream os;
  if (z.volume()) {
    os << z.ranges.size() << " slab(s) of the " << z.slices << " slices, " << z.plane_ranks << " rank(s) per slab:";
    for (size_t s = 0; s < z.ranges.size(); ++s)
      os << (s ? "," : "") << " slices [" << z.ranges[s].first << ", " << z.ranges[s].second << ")";
    if (z.halo > 0) os << "; z-halo " << z.halo << " slices (alignment " << z.align << ")";
    os << "\n  each slab's plane: ";
  }
  os << kind << " " << grid_rows << " x " << grid_cols << " of a " << n << " x " << n << " image, halo " << halo
     << " px, alignment " << align << (align_owned ? " (tile boundaries on it)" : "") << "\n";
  for (const auto& t : tiles) {
    os << "  " << (z.volume() ? "plane rank " : "rank ") << t.rank << ": owns " << to_string(t.own) << " (" << t.own.rows() << " x " << t.own.cols()
       << "), extended " << to_string(t.ext) << " (" << t.ext.rows() << " x " << t.ext.cols() << "), "
       << t.recvs.size() << " halo sources, " << t.sends.size() << " halo targets\n";
  }
  return os.str();
}

Decomposition plan_decomposition(int64_t n, int ranks, const std::string& kind, std::vector<int64_t> grid,
                                 int64_t halo, int64_t align, bool align_owned) {
  if (ranks < 1) throw InputError("decomposition needs at least one rank");
  if (halo < 0) throw InputError("distributed.halo must be >= 0");
  if (align < 1) align = 1;
  Decomposition d;
  d.n = n;
  d.halo = halo;
  d.align = align;
  d.align_owned = align_owned;
  d.kind = kind;
  if (kind == "slabs") {
    d.grid_rows = ranks;
    d.grid_cols = 1;
  } else if (kind == "grid") {
    if (grid.size() != 2) grid = {0, 0};
    if (grid[0] == 0 && grid[1] == 0) {
      int r = static_cast<int>(std::sqrt(static_cast<double>(ranks)));
      while (ranks % r) --r;
      grid = {ranks / r, r};
    } else if (grid[0] == 0) {
      grid[0] = grid[1] ? ranks / grid[1] : 0;
    } else if (grid[1] == 0) {
      grid[1] = ranks / grid[0];
    }
    if (grid[0] * grid[1] != ranks)
      throw InputError("distributed.grid = [" + std::to_string(grid[0]) + ", " + std::to_string(grid[1]) +
                       "] does not match " + std::to_string(ranks) + " ranks");
    d.grid_rows = static_cast<int>(grid[0]);
    d.grid_cols = static_cast<int>(grid[1]);
  } else {
    throw InputError("distributed.decomposition must be \"slabs\" or \"grid\", got \"" + kind + "\"");
  }
  if (d.grid_rows > n || d.grid_cols > n)
    throw InputError("cannot split a " + std::to_string(n) + " x " + std::to_string(n) + " image over " +
                     std::to_string(d.grid_rows) + " x " + std::to_string(d.grid_cols) + " tiles: a tile would be empty");
  auto split = [&](int parts) {
    if (!align_owned || align == 1) return split_range(n, parts);
    const int64_t blocks = (n + align - 1) / align;
    if (parts > blocks)
      throw InputError("cannot split a " + std::to_string(n) + " px side into " + std::to_string(parts) +
                       " tiles on the denoiser's " + std::to_string(align) + "-px grid (" + std::to_string(blocks) +
                       " blocks): use fewer ranks along it");
    auto r = split_range(blocks, parts);
    for (auto& [a, b] : r) a = a * align, b = std::min(n, b * align);
    return r;
  };
  auto rows = split(d.grid_rows), cols = split(d.grid_cols);
  for (int r = 0; r < ranks; ++r) {
    TilePlan t;
    t.rank = r;
    auto [r0, r1] = rows[static_cast<size_t>(r / d.grid_cols)];
    auto [c0, c1] = cols[static_cast<size_t>(r % d.grid_cols)];
    t.own = Box{r0, r1, c0, c1};
    t.ext = Box{round_down(std::max<int64_t>(0, r0 - halo), align), std::min(n, round_up(r1 + halo, align)),
                round_down(std::max<int64_t>(0, c0 - halo), align), std::min(n, round_up(c1 + halo, align))};
    d.tiles.push_back(t);
  }
  for (auto& me : d.tiles)
    for (const auto& other : d.tiles) {
      if (other.rank == me.rank) continue;
      Box need = intersect(me.ext, other.own);
      if (!need.empty()) me.recvs.push_back({other.rank, need});
      Box give = intersect(other.ext, me.own);
      if (!give.empty()) me.sends.push_back({other.rank, give});
    }
  return d;
}

}  // namespace pnp
