// The schedule of pnp's persistent rows kernel (wgmma_rows_kernels.cu): which output rows a CTA
// owns, the walk its loader and its consumer warpgroups take through them one input row a
// step, and the stage and barrier phase of each step; and where the one-consumer float32
// kernel reads its residual's row in shared memory. Host and device code, so that they are
// tested without a GPU (test/nn/test_rows_walk.cpp).
#pragma once

#if defined(__CUDACC__)
#define PNP_ROWS_HD __host__ __device__
#else
#define PNP_ROWS_HD
#endif

namespace pnp::nn::native::kernels::rows {

// The output's rows as units: unit u = (img * tiles_w + col) * oh + row, col a 256-pixel column.
struct Grid {
  int oh, tiles_w;
};

// The stretch of output rows [h0, h0 + len) of column `col` of image `img` that unit u starts,
// cut at u_end.
struct Run {
  int img, col, h0, len;
};
PNP_ROWS_HD inline Run run_at(const Grid& g, int u, int u_end) {
  const int line = u / g.oh;
  Run r;
  r.h0 = u - line * g.oh;
  const int left = u_end - u;
  r.len = left < g.oh - r.h0 ? left : g.oh - r.h0;
  r.col = line % g.tiles_w;
  r.img = line / g.tiles_w;
  return r;
}

// The walk both sides of a CTA take through its units [b, e), one step per input row: run r,
// step t of it (0 .. len + 2), live while runs remain. Step t reads input row h0 - 1 + t (rows
// outside the image read as zeros); its products go to output rows t - 2, t - 1 and t of the
// run (kernel rows 2, 1, 0), the ones outside it thrown away; it stores row t - 3 (t >= 3) and
// starts row t. Every step issues the same products, so that ptxas keeps them in flight behind
// the stores (the version before issued only the rows that exist, each in its own wgmma group,
// and its stores waited for all of a step's products: its SASS, docs/performance.md#native-kernels). The steps come in
// rounds of three (the accumulators rotate); steps past the last run load other rows and
// multiply them to finish the round.
struct Walk {
  Run r{};
  int u, u_end;
  int t = 0;
  bool live;
  PNP_ROWS_HD Walk(const Grid& g, int b, int e) : u(b), u_end(e), live(b < e) {
    if (live) r = run_at(g, b, e);
  }
  PNP_ROWS_HD int input_row() const { return r.h0 - 1 + t; }
  PNP_ROWS_HD bool stores() const { return live && t >= 3; }  // row t - 3 of the run
  PNP_ROWS_HD bool starts() const { return live && t < r.len; }  // row t of the run
  PNP_ROWS_HD void advance(const Grid& g) {
    ++t;
    if (live && t == r.len + 3) {
      u += r.len, t = 0, live = u < u_end;
      if (live) r = run_at(g, u, u_end);
    }
  }
};

// The input stages: one (row, channel block) each, `stages` of them in a ring, filled by the
// loader in order (its it-th fill goes to stage it % stages and waits for the fill before it
// there to be released). A round of three steps of `blocks` channel blocks each uses every stage
// the same odd number of times (stages 3 for one block, 2 for two), so the consumer's q-th use
// of a round (q = step * blocks + block) is stage q % stages, whose barrier phase is this. The
// residual's one slot (bf16 with one input block), filled once a step, is the case stages = 1.
PNP_ROWS_HD constexpr int round_stages(int blocks) { return blocks == 1 ? 3 : 2; }
PNP_ROWS_HD constexpr int consumer_phase(int round, int q, int stages) { return (round + q / stages) & 1; }

// Where the one-consumer float32 kernel's row_start_shared_f32 reads the residual's row: the
// byte offset, from the row's start, of what thread wg_tid (warp w, lane l) adds to acc[2i + e]:
// pixel 2(l%4) + e, channel 16w + l/4 + 8i; acc[4j + 2i + e] lies 8j pixel rows (j KiB) further.
// The copy engine lays the row out as `blocks` of 32 channels, each col_px pixel rows of 128
// bytes in its 128-byte swizzle (16-byte chunk c of pixel row r at chunk c ^ (r % 8)); the test
// checks this against that layout and for bank conflicts.
PNP_ROWS_HD constexpr int residual_read_offset(int col_px, int wg_tid, int i, int e) {
  const int w = wg_tid >> 5, l = wg_tid & 31, r = 2 * (l & 3) + e;
  const int chunk = 4 * (w & 1) + (l >> 4) + 2 * i;
  return (w >> 1) * col_px * 128 + r * 128 + ((chunk ^ r) << 4) + 4 * ((l >> 2) & 3);
}

}  // namespace pnp::nn::native::kernels::rows
