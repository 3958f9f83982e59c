// The rows kernel's schedule (src/nn/native/cuda/wgmma_rows_walk.hpp), without a GPU: the walk its
// loader and consumers take through each CTA's units must start, fill and store every output row
// exactly once, each from the right input rows in the right accumulator slot, and the stage and
// barrier phase a consumer computes for each use must be the loader's.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "native/cuda/wgmma_rows_walk.hpp"

namespace rows = pnp::nn::native::kernels::rows;

namespace {

// What happened to one output row (img, col, row) in one CTA's walk.
struct RowLog {
  int started = -1;                 // global step whose products were its kernel row 0
  std::vector<std::pair<int, int>> parts;  // (kernel row, input row) in the order received
  int stored = -1;                  // global step that stored it
  int slot_start = -1, slot_store = -1;
};

}  // namespace

TEST_CASE("the rows kernel's walk starts, fills and stores every output row once, from the right input rows") {
  int configs = 0;
  for (int n : {1, 2, 3})
    for (int oh : {1, 2, 3, 4, 5, 7, 100})
      for (int tiles_w : {1, 2, 3})
        for (int ctas : {1, 2, 3, 5, 13, 132, 1000}) {
          const rows::Grid g{oh, tiles_w};
          const int units = n * tiles_w * oh;
          const int cpc = std::min(ctas, units);  // as the launch: at most one CTA per unit
          CAPTURE(n);
          CAPTURE(oh);
          CAPTURE(tiles_w);
          CAPTURE(cpc);
          std::map<std::tuple<int, int, int>, int> stored_by;  // row -> stores over all CTAs
          for (int k = 0; k < cpc; ++k) {
            const int b = static_cast<int>(static_cast<long long>(units) * k / cpc);
            const int e = static_cast<int>(static_cast<long long>(units) * (k + 1) / cpc);
            REQUIRE(b < e);
            std::map<std::tuple<int, int, int>, RowLog> log;
            int steps = 0, loads = 0, dead_steps = 0;
            for (rows::Walk w(g, b, e); w.live;) {
              for (int p = 0; p < 3; ++p, ++steps, w.advance(g)) {
                ++loads;  // the loader loads one input row a step, the steps past the last run too
                if (!w.live) {
                  ++dead_steps;
                  continue;
                }
                const rows::Run& r = w.r;
                REQUIRE(r.len >= 1);
                REQUIRE(r.h0 >= 0);
                REQUIRE(r.h0 + r.len <= oh);
                REQUIRE(w.t >= 0);
                REQUIRE(w.t <= r.len + 2);
                // the store of row t - 3, from the slot of this step (= the slot it started in)
                if (w.stores()) {
                  RowLog& l = log[{r.img, r.col, r.h0 + w.t - 3}];
                  CHECK(l.stored == -1);
                  l.stored = steps;
                  l.slot_store = steps % 3;
                  stored_by[{r.img, r.col, r.h0 + w.t - 3}]++;
                }
                // products of input row rho: kernel row 2 to row t - 2, 1 to t - 1, 0 to t
                const int rho = w.input_row();
                for (int kr = 2; kr >= 0; --kr) {
                  const int i = w.t - kr;  // the run's row index
                  if (i < 0 || i >= r.len) continue;  // thrown away
                  RowLog& l = log[{r.img, r.col, r.h0 + i}];
                  if (kr == 0) {
                    CHECK(w.starts());
                    CHECK(l.started == -1);
                    l.started = steps;
                    l.slot_start = steps % 3;
                  }
                  l.parts.push_back({kr, rho});
                }
              }
            }
            CHECK(steps % 3 == 0);   // whole rounds
            CHECK(dead_steps <= 2);  // at most the rest of the last round
            CHECK(loads == steps);   // the loader fills one stage use per consumer step
            CHECK(static_cast<int>(log.size()) == e - b);
            for (const auto& [row, l] : log) {
              const int h = std::get<2>(row);
              REQUIRE(l.started >= 0);
              REQUIRE(l.stored >= 0);
              CHECK(l.stored == l.started + 3);
              CHECK(l.slot_store == l.slot_start);
              REQUIRE(l.parts.size() == 3u);
              for (int j = 0; j < 3; ++j) {
                CHECK(l.parts[j].first == j);               // kernel rows 0, 1, 2 in order
                CHECK(l.parts[j].second == h - 1 + j);       // from input rows h - 1, h, h + 1
              }
            }
          }
          // every output row of every column of every image, once over all CTAs
          CHECK(static_cast<int>(stored_by.size()) == units);
          for (const auto& [row, count] : stored_by) CHECK(count == 1);
          ++configs;
        }
  CHECK(configs == 3 * 7 * 3 * 7);
}

TEST_CASE("the rows kernel's consumers compute the stage and phase the loader fills") {
  for (int blocks : {1, 2}) {
    const int stages = rows::round_stages(blocks);
    CAPTURE(blocks);
    CHECK((3 * blocks) % stages == 0);
    int it = 0;  // the loader's fills, in order
    for (int round = 0; round < 50; ++round)
      for (int step = 0; step < 3; ++step)
        for (int c = 0; c < blocks; ++c, ++it) {
          const int q = step * blocks + c;
          CHECK(q % stages == it % stages);  // the same stage
          // the loader's it-th fill completes phase (it / stages) of its stage's barrier
          CHECK(rows::consumer_phase(round, q, stages) == ((it / stages) & 1));
        }
  }
  // the residual's slot (bf16, one input block): one fill a step, one slot, 3 uses a round
  int iz = 0;
  for (int round = 0; round < 50; ++round)
    for (int step = 0; step < 3; ++step, ++iz) CHECK(rows::consumer_phase(round, step, 1) == (iz & 1));
  // a ring the formula does not fit (a round using each stage an even number of times) fails
  int mismatches = 0, it = 0;
  for (int round = 0; round < 4; ++round)
    for (int q = 0; q < 6; ++q, ++it) mismatches += rows::consumer_phase(round, q, 3) != ((it / 3) & 1);
  CHECK(mismatches > 0);
}

TEST_CASE("the one-consumer float32 rows kernel reads each residual value where the copy engine put it, bank-conflict free") {
  // The copy engine's layout of the residual's row (independently of the kernel's formula): block
  // ch / 32 of col_px pixel rows of 128 bytes; 16-byte chunk c of pixel row r at chunk c ^ (r % 8).
  constexpr int col = 128;
  auto engine = [](int px, int ch) { return (ch / 32) * col * 128 + px * 128 + ((((ch % 32) / 4) ^ (px % 8)) << 4) + 4 * (ch % 4); };
  std::vector<int> seen(col * 64, 0);
  for (int w = 0; w < 4; ++w)
    for (int i = 0; i < 2; ++i)
      for (int e = 0; e < 2; ++e)
        for (int j = 0; j < 16; ++j) {  // one warp's read of acc[4j + 2i + e]
          std::vector<int> banks;
          for (int l = 0; l < 32; ++l) {
            const int t = 32 * w + l;
            const int px = 8 * j + 2 * (l & 3) + e, ch = 16 * w + l / 4 + 8 * i;  // the accumulator's layout
            const int at = rows::residual_read_offset(col, t, i, e) + j * 8 * 128;
            CAPTURE(t);
            CAPTURE(i);
            CAPTURE(e);
            CAPTURE(j);
            REQUIRE(at == engine(px, ch));
            ++seen[px * 64 + ch];
            banks.push_back((at / 4) % 32);
          }
          std::sort(banks.begin(), banks.end());
          CHECK(std::unique(banks.begin(), banks.end()) == banks.end());  // 32 distinct banks
        }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));  // every value read once
}
