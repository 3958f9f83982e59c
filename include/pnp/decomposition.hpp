// Domain decomposition of the N x N image into one tile per rank (row slabs or a 2D grid),
// each with a ghost halo, and the halo-exchange plan: which box every rank sends to and
// receives from every other rank. Pure geometry, no communication.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pnp/core.hpp"

namespace pnp {

struct Transfer {
  int peer;  // the other rank
  Box box;   // global pixel box moved (sent: inside my tile; received: inside my extended box)
};

struct TilePlan {
  int rank = 0;
  Box own;                      // pixels this rank owns and writes
  Box ext;                      // own + halo, clipped to the image, aligned (see plan())
  std::vector<Transfer> sends;  // pieces of `own` other ranks need
  std::vector<Transfer> recvs;  // pieces of `ext` other ranks own
};

// The ranks whose tiles border a tile before (lo) and after (hi) it along one axis; -1: none.
struct AxisPeers {
  int lo = -1, hi = -1;
};

// A volume's slices over the ranks: slabs of whole slices along z, each shared by `plane_ranks`
// ranks that split its plane into the Decomposition's tiles. World rank r works in slab
// r / plane_ranks on tile r % plane_ranks. One 2D image: no slices, every rank in the one plane.
struct SlabSplit {
  int64_t slices = 0;  // 0: one 2D image
  int plane_ranks = 1;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [z0, z1) of each slab (2D: {0, 1})
  // A 3D denoiser's z-halo: each slab extended by `halo` slices on both sides, clipped to the
  // volume, its start rounded down and its end up (clipped) to multiples of `align`, so that the
  // network sees the whole volume's sampling grid (as Decomposition's extended boxes in-plane).
  int64_t halo = 0, align = 1;
  bool volume() const { return slices > 0; }
  std::pair<int64_t, int64_t> ext(int rank) const;  // the extended slab of rank's slab
  int slab(int rank) const { return rank / plane_ranks; }
  int plane_rank(int rank) const { return rank % plane_ranks; }
  std::pair<int64_t, int64_t> range(int rank) const { return ranges.at(static_cast<size_t>(slab(rank))); }
  int64_t count(int rank) const { return range(rank).second - range(rank).first; }  // slices of the rank's slab
};
// `ranks` ranks over a volume of `slices` slices (0: one 2D image, plane_ranks must be 1 or the
// rank count): ranks / plane_ranks slabs of nearly equal slice counts (split_range). InputError
// when plane_ranks does not divide the ranks or there are more slabs than slices.
SlabSplit plan_slabs(int64_t slices, int ranks, int plane_ranks);

struct Decomposition {
  int64_t n = 0;
  int64_t halo = 0;
  int64_t align = 1;
  bool align_owned = false;  // owned boundaries at multiples of align (the layer halo)
  std::string kind;  // "slabs" or "grid"
  int grid_rows = 1, grid_cols = 1;
  std::vector<TilePlan> tiles;  // one per rank of a plane (all ranks for one 2D image)
  SlabSplit z;                  // a volume's slabs (plan_execution); 2D: no slices

  const TilePlan& tile(int rank) const { return tiles.at(static_cast<size_t>(rank)); }
  // The neighbours of `rank` in the grid of ranks (row-major), along rows (0) and columns (1).
  std::vector<AxisPeers> peers(int rank) const;
  // Largest extended tile, in pixels: sizes per-rank buffers and the memory estimate.
  int64_t max_ext_pixels() const;
  // The tile of world rank `rank` (a volume's ranks share the plane's tiles slab by slab).
  const TilePlan& tile_of(int rank) const { return tile(z.volume() ? z.plane_rank(rank) : rank); }
  std::string describe() const;  // the plan, one line per rank
};

// Splits [0, n) into `parts` nearly equal ranges (the first n % parts get one more).
std::vector<std::pair<int64_t, int64_t>> split_range(int64_t n, int parts);
// The same with the inner boundaries at multiples of `align` (split_range's when align <= 1),
// each as near the equal split as the grid allows; InputError when some range would be empty.
std::vector<std::pair<int64_t, int64_t>> aligned_ranges(int64_t n, int parts, int64_t align);

// Plans `ranks` tiles of an n x n image. kind "slabs": ranks x 1 row slabs; "grid": a
// rows x cols grid (grid = {0, 0} picks the most square factorisation of `ranks`).
// The extended box is own +- halo, clipped to the image; its start is rounded down and its
// end rounded up (clipped to n) to multiples of `align`, so that a network that downsamples
// by `align` sees the same sampling grid as on the whole image.
// With align_owned, the owned boundaries themselves are multiples of `align` (the image is split
// into ceil(n / align) blocks of `align` px, the last one shorter when align does not divide n,
// and the blocks shared out as evenly as possible): what the layer halo needs, where every
// level of the network sees tile boundaries on its own sampling grid.
// Throws InputError if a tile would be empty or the grid does not match the rank count.
Decomposition plan_decomposition(int64_t n, int ranks, const std::string& kind, std::vector<int64_t> grid,
                                 int64_t halo, int64_t align = 1, bool align_owned = false);

}  // namespace pnp
