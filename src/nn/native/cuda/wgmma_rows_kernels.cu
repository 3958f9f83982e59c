// pnp's Hopper convolution down columns of rows (wgmma_conv_kernels.hpp: launch_wgmma_rows, and
// why). Built for sm_90a only, like wgmma_conv_kernels.cu, whose wgmma operations, descriptors,
// epilogue and tensor maps it shares (wgmma_sm90.cuh).
//
// A 3 x 3 convolution, padding 1, of few input channels (one or two 128-byte blocks: 32 or 64
// float32, 64 or 128 bf16). One persistent CTA per multiprocessor owns one 64-channel block of
// the outputs and a run of consecutive output rows of one 256-pixel column of one image (128
// pixels with one consumer warpgroup, below):
//   - its weights (9 taps x the input's blocks x 64 outputs: 144 KiB at most) are loaded once
//     and stay in shared memory;
//   - the input rows of its run stream through a ring of stages, each input row loaded once
//     (256 + 2 pixels, zeros beyond the image: the padding), where a CTA per 64 x 256 tile
//     loads each input row three times and the weights for every tile;
//   - two consumer warpgroups, one per 128-pixel half of the column, each hold the 64 x 128
//     accumulators of three output rows (192 registers a thread). Input row t is kernel row 2
//     of output row t - 1, row 1 of t and row 0 of t + 1: the products of all three come from
//     the same stage. Output row t - 1 is then complete; its epilogue runs while the next
//     stage's products for the two rows still open run on the tensor cores, and only then is
//     its registers' next row (t + 2) started.
// So each input row costs one output row of products and one load, and the stores overlap the
// products of the same warpgroup. For that, every step issues the same products (the rows
// before and after a run's are thrown away: Walk) and the steps come in rounds of three with
// nothing in flight between rounds; otherwise ptxas puts each product in a wgmma group of its
// own or serialises them (C7514), and a store waits for all of the step's products.
//
// In bf16 with one input block (64 channels), the weights and stages leave room for the epilogue
// in shared memory (Layout::kZSmem, kYSmem): the loader brings each row's residual a step ahead with
// the bulk copy engine, the consumers read it with transposing matrix loads (8 a thread, where
// row_start's 64 scattered global loads were), and write their rows with transposing matrix
// stores into 32-pixel staging chunks that bulk copies store (where row_end's 64 scattered
// stores were). DRUNet 4096²'s 64-channel layers in bf16 went from 4.253 to 1.684 ms with a
// residual and from 2.271 to 1.521 ms without (warm-up timings on one H200, docs/performance.md#native-kernels). In float32
// the weights (144 KiB) and two stages leave 16 KiB, too little for a residual row (64 KiB),
// and the epilogue stays in the registers (row_start, row_end). So with a residual a float32
// CTA has one consumer warpgroup (NC = 1): a column is 128 pixels, its stages half as big, and
// the residual's row (32 KiB) fits; the loader brings it a step ahead as in bf16 and
// row_start_shared_f32 reads it; the stores stay in the registers. DRUNet 1 ch 4096² fp32 went
// from 245.181 / 244.184 to 236.155 / 236.225 ms (A/B alternating on one H200,
// docs/performance.md#native-kernels), its eight residual layers from about 6.2 to 5.0 ms each. The two-consumer residual
// with row_start's 64 scattered loads a thread stays for tests (WgmmaConvArgs::two_consumers).
#include "wgmma_conv_kernels.hpp"
#include "wgmma_rows_walk.hpp"
#include "wgmma_sm90.cuh"

#include <algorithm>
#include <climits>

namespace pnp::nn::native::kernels {

namespace {

using namespace sm90;
using namespace rows;

constexpr int kTaps = 9;
constexpr int kLoadRegs = 24, kMmaRegs = 240;        // setmaxnreg (two consumers): 24 + 2 x 240 <= 512 (3 x 168 at entry)
constexpr int kHalf = kPx / 2;                       // pixels of one consumer warpgroup's rows

constexpr int kChunkPx = 32;                         // pixels of one bulk store of a warpgroup's row
constexpr int kChunkBytes = kChunkPx * kRow;         // 4 KiB

template <class T, int CB, int NC>  // CB: 128-byte channel blocks of the input (1 or 2); NC: consumer warpgroups
struct Layout {
  static constexpr int kConsumers = NC;                 // one per 128-pixel half of the column
  static constexpr int kThreads = 128 * (NC + 1);       // + the loading warpgroup
  static constexpr int kCol = kHalf * NC;               // pixels of a column
  static constexpr int kWBytes = kTaps * CB * kABytes;  // 72 or 144 KiB of resident weights
  // input stages of one (row, block) each: a round of three steps uses each the same number of
  // times, so a step's stages are known at compile time (wgmma_rows_walk.hpp); each holds the
  // column and the 2 pixels beside it, in a whole number of KiB (the swizzle's 1024-byte atoms)
  static constexpr int kStages = round_stages(CB);
  static_assert(3 * CB % kStages == 0 && (3 * CB / kStages) % 2 == 1, "a round's stages");
  static constexpr int kStageBytes = NC == 2 ? kBBytes : (kCol + 8) * kRow;
  // the residual through shared memory (see the top): bf16 with one input block (its row of 256
  // pixels x 64 channels), float32 with one consumer (128 pixels x 64 channels, two 128-byte
  // blocks); 32 KiB either way. The stores through shared memory: bf16 with one input block, two
  // 32-pixel staging chunks of each warpgroup's output.
  static constexpr bool kZSmem = (sizeof(T) == 2 && CB == 1) || (sizeof(T) == 4 && NC == 1);
  static constexpr bool kYSmem = sizeof(T) == 2 && CB == 1;
  static constexpr int kZBlocks = kCo * static_cast<int>(sizeof(T)) / kRow;  // of a pixel's 64 channels
  static constexpr int kZBytes = kZSmem ? kZBlocks * kCol * kRow : 0;
  static constexpr int kYBytes = kYSmem ? NC * 2 * kChunkBytes : 0;
  static constexpr int kBarriers = 2 * kStages + 1 + 2;  // full, empty, the weights', the residual's full and empty
  static constexpr int kSmem = kWBytes + kStages * kStageBytes + kZBytes + kYBytes + kBarriers * 8 + 1024;
  static_assert(kSmem <= 227 * 1024, "shared memory of one CTA");
  static_assert(kStageBytes % 1024 == 0 && kZBytes % 1024 == 0, "1024-byte aligned stages and residual");
};

struct Params {
  TileOut out;
  int tiles_w;               // 256-pixel columns per image row
  int units;                 // output rows of all columns of all images: n x tiles_w x oh
  int ctas_per_co;           // persistent CTAs per 64-channel block of the outputs
};

// The tensor maps of the bulk copies: weights, input (256 pixels and the 2 beyond), and, where
// the epilogue goes through shared memory, residual rows and output chunks.
struct Maps {
  CUtensorMap w, x, tail, z, y;
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
using Barrier = cutlass::arch::ClusterTransactionBarrier;

// What a consumer warpgroup keeps beside its accumulators: the rounds done, whether a stage
// waits to be released, and where things are.
struct Consumer {
  int round;
  bool started;
  uint32_t w_base, b_base;  // shared-memory addresses: the weights; stage 0 at this half's pixel 0
  uint64_t* full;  // the stages' barriers: full[s], then empty[s] at full[kStages + s]
  int wg_tid;
  int wg;           // which consumer warpgroup (its named barrier: 1 + wg)
  uint32_t y_base;  // where the epilogue goes through shared memory: this warpgroup's two chunks
};

template <int K>
__device__ __forceinline__ float (&pick(float (&a0)[64], float (&a1)[64], float (&a2)[64]))[64] {
  if constexpr (K == 0) return a0;
  else if constexpr (K == 1) return a1;
  else return a2;
}

__device__ __forceinline__ void fence(float (&a)[64]) {
#pragma unroll
  for (int q = 0; q < 64; ++q) cute::warpgroup_fence_operand(a[q]);
}

template <class T, int CB, int NC>
__device__ __forceinline__ void release(const Consumer& cs, int s) {
  if (cs.wg_tid == 0) Barrier::arrive(&cs.full[Layout<T, CB, NC>::kStages + s]);
}

// The epilogue through shared memory (Layout::kZSmem, kYSmem: bf16, 64 channels a pixel row of 128
// bytes, tiles in the bulk copy engine's 128-byte swizzle: 16-byte chunk c of pixel row r at
// chunk c ^ (r % 8), tiles 1024-aligned). The accumulators' layout is that of eight 8 x 8
// matrices a warp (channels x pixels) for each 16 pixels, so the transposing matrix loads and
// stores move them to and from pixel rows of channels, 4 matrices an instruction: for
// instruction n, acc[8n .. 8n + 7] in pairs (pixels 16n + 8(m / 2) + 2(l % 4) + {0, 1}, channel
// 16w + l / 4 + 8(m % 2) for matrix m), and lane l gives the address of pixel row
// 16n + 8(m / 2) + l % 8 of matrix m = l / 8. Each matrix's 8 rows fall in 8 distinct chunks:
// no bank conflicts.
__device__ __forceinline__ uint32_t matrix_row(int wg_tid) {
  const int w = wg_tid >> 5, l = wg_tid & 31, m = l >> 3, r = l & 7;
  return (8 * (m >> 1) + r) * kRow + ((32 * w + 16 * (m & 1)) ^ (r << 4));
}

// row_start with the residual's row from shared memory: this warpgroup's 128 pixels at z_half.
template <int N>
__device__ __forceinline__ void row_start_shared(float (&acc)[N], const TileOut& p, uint32_t z_half, int wg_tid,
                                                 int co0, bool with_z) {
  float b0, b8;
  row_bias<__nv_bfloat16>(p, wg_tid, co0, b0, b8);
  uint32_t base;  // (opaque, as in mma: the addresses made where they are used, not hoisted)
  asm volatile("mov.b32 %0, %1;" : "=r"(base) : "r"(z_half + matrix_row(wg_tid)));
#pragma unroll
  for (int n = 0; n < N / 8; ++n) {
    uint32_t r[4] = {0, 0, 0, 0};
    if (with_z)
      asm volatile("ldmatrix.sync.aligned.x4.trans.m8n8.shared.b16 {%0, %1, %2, %3}, [%4];"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "r"(base + n * 16 * kRow));
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const float bv = m & 1 ? b8 : b0;
      acc[8 * n + 2 * m] = bv + __uint_as_float(r[m] << 16);              // low half: the even pixel
      acc[8 * n + 2 * m + 1] = bv + __uint_as_float(r[m] & 0xffff0000u);  // high half: the odd one
    }
  }
}

// row_start with the residual's row from shared memory in float32 (one consumer warpgroup, its
// 128 pixels at z_base): two 128-byte blocks of 32 channels, each [pixel][128 bytes] in the
// 128-byte swizzle as the bulk copy engine lays it out. Thread (warp w, lane l) reads channel
// 16w + l/4 + 8i from block w/2, 16-byte chunk 4(w%2) + l/16 + 2i, word (l/4)%4 of pixel
// 8j + 2(l%4) + e (residual_read_offset, wgmma_rows_walk.hpp): for each (i, e) the warp's 32
// reads fall in 8 distinct chunks of 4 pixel rows, all 32 banks once.
template <int N>
__device__ __forceinline__ void row_start_shared_f32(float (&acc)[N], const TileOut& p, uint32_t z_base, int wg_tid,
                                                     int co0, bool with_z) {
  float b0, b8;
  row_bias<float>(p, wg_tid, co0, b0, b8);
  uint32_t base[2][2];  // [i][e]: acc[2i + e]'s address (residual_read_offset)
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int e = 0; e < 2; ++e)
      asm volatile("mov.b32 %0, %1;"  // (opaque, as in mma)
                   : "=r"(base[i][e])
                   : "r"(z_base + residual_read_offset(kHalf, wg_tid, i, e)));
#pragma unroll
  for (int j = 0; j < N / 4; ++j)
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float v = 0.f;
        if (with_z) asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(base[i][e] + j * 8 * kRow));
        acc[4 * j + 2 * i + e] = (i ? b8 : b0) + v;
      }
}

// row_end through shared memory: the row in chunks of 32 pixels (acc[16k .. 16k + 15]),
// alternating between the warpgroup's two staging chunks, each stored by one bulk copy (the
// copy engine clips pixels outside the output). Before the barrier after which a chunk's copy
// is issued, the issuing thread waits until the copy before it has read the other chunk, so
// that the next chunk may overwrite it.
template <int N>
__device__ __forceinline__ void row_end_shared(const float (&acc)[N], const CUtensorMap* tma_y, const Consumer& cs,
                                               bool relu, int co0, int o, int ow0, int img) {
  uint32_t base;  // (opaque, as in row_start_shared)
  asm volatile("mov.b32 %0, %1;" : "=r"(base) : "r"(cs.y_base + matrix_row(cs.wg_tid)));
  auto bf2 = [&](int a) {  // acc[a], acc[a + 1] as a bf16 pair, ReLU'd if asked
    const float x0 = relu ? fmaxf(acc[a], 0.f) : acc[a], x1 = relu ? fmaxf(acc[a + 1], 0.f) : acc[a + 1];
    const __nv_bfloat162 v = __floats2bfloat162_rn(x0, x1);
    return *reinterpret_cast<const uint32_t*>(&v);
  };
#pragma unroll
  for (int k = 0; k < N / 16; ++k) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n = 2 * k + h;
      asm volatile("stmatrix.sync.aligned.x4.trans.m8n8.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(
                       base + (k & 1) * kChunkBytes + h * 16 * kRow),
                   "r"(bf2(8 * n)), "r"(bf2(8 * n + 2)), "r"(bf2(8 * n + 4)), "r"(bf2(8 * n + 6))
                   : "memory");
    }
    cute::tma_store_fence();  // the writes, visible to the copy engine
    if (cs.wg_tid == 0) cute::tma_store_wait<0>();
    asm volatile("bar.sync %0, 128;" ::"r"(1 + cs.wg) : "memory");
    if (cs.wg_tid == 0) {
      asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(tma_y),
                   "r"(cs.y_base + (k & 1) * kChunkBytes), "r"(co0), "r"(ow0 + kChunkPx * k), "r"(o), "r"(img)
                   : "memory");
      cute::tma_store_arrive();
    }
  }
}

// kernel row r's three taps of channel block c, from stage s, added to acc. The bases pass through
// an opaque move, so that the compiler makes each descriptor where it is used: hoisted out of
// the loop, the 100-odd loop-invariant descriptors spilled (ptxas -v: 640 bytes a thread).
template <class T, int CB, int NC>
__device__ __forceinline__ void mma(const Consumer& cs, float (&acc)[64], int r, int c, int s) {
  uint32_t w_base, b_base;
  asm volatile("mov.b32 %0, %1;" : "=r"(w_base) : "r"(cs.w_base));
  asm volatile("mov.b32 %0, %1;" : "=r"(b_base) : "r"(cs.b_base));
#pragma unroll
  for (int sx = 0; sx < 3; ++sx)
    gmma_block<T>(smem_desc(w_base + ((r * 3 + sx) * CB + c) * kABytes),
                  smem_desc(b_base + s * Layout<T, CB, NC>::kStageBytes + sx * kRow), acc, false);
}

// Step P (of a round) of the walk at w: output row t - 2 of the run gets its kernel row 2 (in
// a[(P + 1) % 3]), row t - 1 its row 1 (a[(P + 2) % 3]), row t its row 0 (a[P]), after row
// t - 3 is stored from a[P] and a[P] restarted from row t's bias and residual (row_start). Both
// run while the first two rows' products are in flight.
template <class T, int CB, int CO, int NC, int P>
__device__ __forceinline__ void step(Consumer& cs, float (&a0)[64], float (&a1)[64], float (&a2)[64], const Walk& w,
                                     const TileOut& out, const CUtensorMap* tma_y, int co0, int ow_half) {
  using L = Layout<T, CB, NC>;
  constexpr int kStages = L::kStages;
  float(&open2)[64] = pick<(P + 1) % 3>(a0, a1, a2);
  float(&open1)[64] = pick<(P + 2) % 3>(a0, a1, a2);
  float(&next)[64] = pick<P>(a0, a1, a2);
  const bool store = w.stores();
#pragma unroll
  for (int c = 0; c < CB; ++c) {
    // the round's q-th stage use; a round uses each stage an odd number of times (1 or 3)
    const int q = P * CB + c, s = q % kStages;
    Barrier::wait(&cs.full[s], consumer_phase(cs.round, q, kStages));
    fence(open2);
    fence(open1);
    cute::warpgroup_arrive();
    mma<T, CB, NC>(cs, open2, 2, c, s);
    mma<T, CB, NC>(cs, open1, 1, c, s);
    cute::warpgroup_commit_batch();
    cute::warpgroup_wait<1>();  // all but the products just issued: the stage before is free
    if (cs.started) release<T, CB, NC>(cs, (s + kStages - 1) % kStages);
    cs.started = true;
    fence(next);
    if (c == 0) {
      const int ow0 = w.r.col * L::kCol + ow_half;
      if (store) {
        if constexpr (L::kYSmem) row_end_shared(next, tma_y, cs, out.relu, co0, w.r.h0 + w.t - 3, ow0, w.r.img);
        else row_end<T, CO>(next, out, cs.wg_tid, co0, w.r.h0 + w.t - 3, ow0, w.r.img);
      }
      if (L::kZSmem && out.z) {  // the residual's row: filled by the loader a step ahead; every step takes the slot
        uint64_t* z_full = cs.full + 2 * kStages + 1;
        Barrier::wait(z_full, consumer_phase(cs.round, P, 1));
        const uint32_t z_half = cs.b_base + kStages * L::kStageBytes;  // (bf16: this warpgroup's half of the row)
        if constexpr (sizeof(T) == 2) row_start_shared(next, out, z_half, cs.wg_tid, co0, w.starts());
        else row_start_shared_f32(next, out, z_half, cs.wg_tid, co0, w.starts());
        Barrier::arrive(z_full + 1);  // every consumer thread: its reads are done
      } else {
        row_start<T, CO>(next, out, cs.wg_tid, co0, w.r.h0 + w.t, ow0, w.r.img, w.starts());
      }
      fence(next);
    }
    cute::warpgroup_arrive();
    mma<T, CB, NC>(cs, next, 0, c, s);
    cute::warpgroup_commit_batch();
  }
}

// The loading warpgroup's one thread: the weights once, then each step's input stages and (kZSmem)
// the residual's row, down the walk of units [u_begin, u_end).
template <class T, int CB, int CO, int NC>
__device__ __forceinline__ void load_rows(const Maps& m, const Params& p, const Grid& grid, int u_begin, int u_end,
                                          int co0, uint8_t* s_w, uint8_t* s_b, uint8_t* s_z, uint64_t* full,
                                          uint64_t* empty, uint64_t* w_full, uint64_t* z_full, uint64_t* z_empty) {
  using L = Layout<T, CB, NC>;
  constexpr int kStages = L::kStages;
  constexpr int kBk = kRow / static_cast<int>(sizeof(T));  // channels per block
  const uint64_t keep = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_LAST);  // weights: every CTA's
  const uint64_t normal = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL);
  Barrier::arrive_and_expect_tx(w_full, L::kWBytes);
  for (int t = 0; t < kTaps; ++t)
    for (int c = 0; c < CB; ++c)
      cute::SM90_TMA_LOAD_2D::copy(&m.w, w_full, keep, s_w + (t * CB + c) * kABytes, t * CB * kBk + c * kBk, co0);
  constexpr uint32_t b_bytes = (L::kCol + 2) * kRow;
  const T* z = static_cast<const T*>(p.out.z);
  int it = 0, iz = 0;
  for (Walk w(grid, u_begin, u_end); w.live;)
    for (int k = 0; k < 3; ++k, w.advance(grid)) {
      const Run& r = w.r;
      const int ow0 = r.col * L::kCol, rho = w.input_row();
      // the residual's rows into L2 two steps before row_start reads them (rows 0 to 2 of
      // a run at its first step): its loads wait on them with the products of one step
      // in flight
      if (!L::kZSmem && z && w.live)
        for (int i = w.t == 0 ? 0 : w.t + 2; i <= w.t + 2 && i < r.len; ++i) {
          const uint32_t z_bytes = static_cast<uint32_t>(min(L::kCol, p.out.ow - ow0) * CO * sizeof(T));
          const T* zr = z + ((static_cast<size_t>(r.img) * p.out.oh + r.h0 + i) * p.out.ow + ow0) * CO;
          asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(zr), "r"(z_bytes) : "memory");
        }
      // the residual's row for the row this step starts (none: the slot passes empty); its
      // slot is free once the step before has started its row
      auto load_z = [&] {
        if (!L::kZSmem || !z) return;
        Barrier::wait(z_empty, (iz++ & 1) ^ 1);
        if (w.starts()) {
          Barrier::arrive_and_expect_tx(z_full, L::kZBytes);
          for (int b = 0; b < L::kZBlocks; ++b)
            cute::SM90_TMA_LOAD_4D::copy(&m.z, z_full, normal, s_z + b * L::kCol * kRow, co0 + b * kBk, ow0, r.h0 + w.t,
                                         r.img);
        } else {
          Barrier::arrive(z_full);
        }
      };
      // float32 (one consumer, two stages): before the step's input stages, which wait for
      // that step's products, so that the row comes a whole step ahead; after them, its copy
      // was issued only once this step's first products had freed a stage, and row_start
      // waited on it. bf16 (two consumers, three stages): after them, where the stages lead
      // (DRUNet 1 ch 4096², alternating on one H200: fp32 237.1, 236.8 against 239.2, 239.0
      // ms; bf16 with it first 120.3, 119.7 against 116.4, 117.5 ms: docs/performance.md#native-kernels).
      constexpr bool kZFirst = sizeof(T) == 4;
      if constexpr (kZFirst) load_z();
      for (int c = 0; c < CB; ++c, ++it) {
        const int s = it % kStages;
        Barrier::wait(&empty[s], ((it / kStages) & 1) ^ 1);
        Barrier::arrive_and_expect_tx(&full[s], b_bytes);
        uint8_t* dst = s_b + s * L::kStageBytes;
        cute::SM90_TMA_LOAD_4D::copy(&m.x, &full[s], normal, dst, c * kBk, ow0 - 1, rho, r.img);
        cute::SM90_TMA_LOAD_4D::copy(&m.tail, &full[s], normal, dst + L::kCol * kRow, c * kBk, ow0 + L::kCol - 1, rho,
                                     r.img);
      }
      if constexpr (!kZFirst) load_z();
    }
}
#endif

template <class T, int CB, int CO, int NC>  // CO: the output's channels (64 or 128)
__global__ void __launch_bounds__(Layout<T, CB, NC>::kThreads, 1)
    wgmma_rows_kernel(const __grid_constant__ Maps m, const Params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Layout<T, CB, NC>;
  constexpr int kConsumers = L::kConsumers;
  constexpr int kStages = L::kStages;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* s_w = smem;                 // [tap][block]: 64 x 128 bytes each
  uint8_t* s_b = smem + L::kWBytes;    // [stage]: kStageBytes, the column's pixels and the 2 beside it
  uint8_t* s_z = s_b + kStages * L::kStageBytes;  // the residual's row: [block][pixel][128 bytes] (kZSmem)
  uint8_t* s_y = s_z + L::kZBytes;                // [consumer][2]: 32 x 128 bytes (kYSmem)
  uint64_t* full = reinterpret_cast<uint64_t*>(s_y + L::kYBytes);
  uint64_t* empty = full + kStages;
  uint64_t* w_full = empty + kStages;
  uint64_t* z_full = w_full + 1;  // (kZSmem with a residual) the residual's row loaded
  uint64_t* z_empty = z_full + 1;  // ... and read by all consumer threads
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = __shfl_sync(0xffffffff, tid / 128, 0);  // (warp-uniform, for setmaxnreg)
  if (tid == 0) {
    for (int i = 0; i < kStages; ++i) {
      Barrier::init(&full[i], 1);
      Barrier::init(&empty[i], kConsumers);  // one thread of each consumer warpgroup
    }
    Barrier::init(w_full, 1);
    Barrier::init(z_full, 1);
    Barrier::init(z_empty, kConsumers * 128);
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  const int co0 = (static_cast<int>(blockIdx.x) / p.ctas_per_co) * kCo;
  const long long k = blockIdx.x % p.ctas_per_co;
  const int u_begin = static_cast<int>(p.units * k / p.ctas_per_co),
            u_end = static_cast<int>(p.units * (k + 1) / p.ctas_per_co);
  const Grid grid{p.out.oh, p.tiles_w};

  if (wg == kConsumers) {  // the loading warpgroup: one thread issues every copy
    if constexpr (NC == 2) cutlass::arch::warpgroup_reg_dealloc<kLoadRegs>();
    if (tid == 128 * kConsumers)
      load_rows<T, CB, CO, NC>(m, p, grid, u_begin, u_end, co0, s_w, s_b, s_z, full, empty, w_full, z_full, z_empty);
    return;
  }

  if constexpr (NC == 2) cutlass::arch::warpgroup_reg_alloc<kMmaRegs>();
  Consumer cs;
  cs.round = 0, cs.started = false;
  cs.wg_tid = tid % 128;
  cs.w_base = cute::cast_smem_ptr_to_uint(s_w);
  cs.b_base = cute::cast_smem_ptr_to_uint(s_b) + wg * kHalf * kRow;
  cs.full = full;
  cs.wg = wg;
  cs.y_base = cute::cast_smem_ptr_to_uint(s_y) + wg * 2 * kChunkBytes;
  float a0[64], a1[64], a2[64];
#pragma unroll
  for (int q = 0; q < 64; ++q) a0[q] = a1[q] = a2[q] = 0.f;
  Barrier::wait(w_full, 0);
  const int ow_half = wg * kHalf;
  for (Walk w(grid, u_begin, u_end); w.live;) {
    step<T, CB, CO, NC, 0>(cs, a0, a1, a2, w, p.out, &m.y, co0, ow_half);
    w.advance(grid);
    step<T, CB, CO, NC, 1>(cs, a0, a1, a2, w, p.out, &m.y, co0, ow_half);
    w.advance(grid);
    step<T, CB, CO, NC, 2>(cs, a0, a1, a2, w, p.out, &m.y, co0, ow_half);
    w.advance(grid);
    ++cs.round;
    cute::warpgroup_wait<0>();  // nothing in flight at the loop's back edge (C7514 otherwise)
    fence(a0);
    fence(a1);
    fence(a2);
  }
  if constexpr (L::kYSmem)  // the bulk stores done before the CTA's shared memory goes
    if (cs.wg_tid == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

template <class T, int CB, int CO, int NC>
bool launch(const WgmmaConvArgs& a, cudaStream_t stream) {
  using L = Layout<T, CB, NC>;
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return false;
  Params p{};
  p.out = TileOut{a.b, a.z, a.y, a.oh, a.ow, a.co, 7, 1, a.relu ? 1 : 0};  // each warpgroup's tile: 1 x 128
  p.tiles_w = (a.ow + L::kCol - 1) / L::kCol;
  const long long units = static_cast<long long>(a.n) * p.tiles_w * a.oh;
  if (units > INT_MAX) return false;
  p.units = static_cast<int>(units);
  const int co_blocks = a.co / kCo;
  p.ctas_per_co = std::min(std::max(1, sms / co_blocks), p.units);
  const long long grid = static_cast<long long>(co_blocks) * p.ctas_per_co;
  if (grid <= 0 || grid > INT_MAX) return false;

  Maps m{};
  if (!weight_map<T>(&m.w, a.w, a.co, 3, 3, a.ci, a.round_tf32) ||
      !input_map<T>(&m.x, a.x, a.n, a.h, a.w_in, a.ci, L::kCol, 1, a.round_tf32) ||
      !input_map<T>(&m.tail, a.x, a.n, a.h, a.w_in, a.ci, 2, 1, a.round_tf32))
    return false;
  // the epilogue's maps: the output [N][H][W][C_out] in 32-pixel chunks of one 64-channel block,
  // the residual in rows of the column's pixels, 128 bytes of channels a box
  if (L::kYSmem && !input_map<T>(&m.y, a.y, a.n, a.oh, a.ow, a.co, kChunkPx, 1, false)) return false;
  if (L::kZSmem && a.z && !input_map<T>(&m.z, a.z, a.n, a.oh, a.ow, a.co, L::kCol, 1, false)) return false;
  static const bool attr = cudaFuncSetAttribute(wgmma_rows_kernel<T, CB, CO, NC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                L::kSmem) == cudaSuccess;
  if (!attr) return false;
  wgmma_rows_kernel<T, CB, CO, NC><<<static_cast<unsigned>(grid), L::kThreads, L::kSmem, stream>>>(m, p);
  return cudaGetLastError() == cudaSuccess;
}

}  // namespace

// (the kernel also takes other widths, checked on a GPU once, docs/performance.md#native-kernels; the tests and the
// dispatch keep to multiples of 128)
bool wgmma_rows_supported(int ci, int co, int kh, int kw, int pad_h, int pad_w, int ow, bool bf16) {
  const int bk = bf16 ? 64 : 32;
  return kh == 3 && kw == 3 && pad_h == 1 && pad_w == 1 && (ci == bk || ci == 2 * bk) && (co == 64 || co == 128) &&
         ow > 0 && ow % kHalf == 0 && wgmma_conv_supported(ci, co, kh, kw, bf16);
}

bool launch_wgmma_rows(const WgmmaConvArgs& a, void* stream) {
  if (!wgmma_rows_supported(a.ci, a.co, a.kh, a.kw, a.pad_h, a.pad_w, a.ow, a.bf16)) return false;
  if (a.n <= 0 || a.oh != a.h || a.ow != a.w_in || a.oh <= 0) return false;
  const auto s = static_cast<cudaStream_t>(stream);
  const bool two = a.ci == 2 * (a.bf16 ? 64 : 32), wide = a.co == 128;
  if (a.bf16) {
    if (two) return wide ? launch<__nv_bfloat16, 2, 128, 2>(a, s) : launch<__nv_bfloat16, 2, 64, 2>(a, s);
    return wide ? launch<__nv_bfloat16, 1, 128, 2>(a, s) : launch<__nv_bfloat16, 1, 64, 2>(a, s);
  }
  // float32 with a residual: one consumer warpgroup, so that the residual's row fits in shared
  // memory beside the weights (the top); two where asked (tests)
  if (a.z && !a.two_consumers) {
    if (two) return wide ? launch<float, 2, 128, 1>(a, s) : launch<float, 2, 64, 1>(a, s);
    return wide ? launch<float, 1, 128, 1>(a, s) : launch<float, 1, 64, 1>(a, s);
  }
  if (two) return wide ? launch<float, 2, 128, 2>(a, s) : launch<float, 2, 64, 2>(a, s);
  return wide ? launch<float, 1, 128, 2>(a, s) : launch<float, 1, 64, 2>(a, s);
}

}  // namespace pnp::nn::native::kernels
