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

struct Decomposition {
  int64_t n = 0;
  int64_t halo = 0;
  int64_t align = 1;
  bool align_owned = false;  // owned boundaries at multiples of align (the layer halo)
  std::string kind;  // "slabs" or "grid"
  int grid_rows = 1, grid_cols = 1;
  std::vector<TilePlan> tiles;  // one per rank

  const TilePlan& tile(int rank) const { return tiles.at(static_cast<size_t>(rank)); }
  // The neighbours of `rank` in the grid of ranks (row-major), along rows (0) and columns (1).
  std::vector<AxisPeers> peers(int rank) const;
  // Largest extended tile, in pixels: sizes per-rank buffers and the memory estimate.
  int64_t max_ext_pixels() const;
  std::string describe() const;  // the plan, one line per rank
};

// Splits [0, n) into `parts` nearly equal ranges (the first n % parts get one more).
std::vector<std::pair<int64_t, int64_t>> split_range(int64_t n, int parts);

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
