// Direct 2D convolutions with few channels on one side, NHWC (narrow_conv.hpp): few outputs (a
// network's last convolution) and few inputs (its first).
//
// Few outputs. A group of L lanes (L = C_in / V pieces of V channels, V = 16 bytes of elements,
// up to 32 lanes; more channels loop) computes an R x P tile of output pixels, each lane over its
// own channel pieces; the lanes' partial sums are added by warp shuffles at the end. So a warp's
// loads of one input pixel are one contiguous run (coalesced), every input pixel is loaded
// (R + K - 1)(P + K - 1) / (R P) times from the caches instead of K^2, and the weights come from
// shared memory as 16-byte pieces, staged once per block; the blocks stride over the tiles
// (at most 16 per SM). Accumulation in float32 (FMA, not tensor cores); epilogue + bias,
// + residual, then ReLU, in float32, rounded once to the output type.
//
// That kernel is written for C_out <= 4, but only C_out = 1 is dispatched: on an H200
// (docs/performance.md#native-kernels) it beat cuDNN there (DRUNet 1 ch 4096²'s 64 -> 1 tail: 3.81
// ms against 6.47 ms plus a 0.96 ms NHWC -> NCHW conversion), and lost with 3 outputs (DnCNN 3
// ch 2048²'s tail, 2.01 ms). Every output costs it one shared-memory weight load per 4 FMAs.
//
// Few inputs (few_in_kernel). The head (C_in 1 to 4, C_out 64 and up) is a write:
// at 2048² and 64 float32 outputs, 1.07 GB out against 50 MB in and 7.2 G FMAs, 0.26 ms of
// bandwidth and 0.22 ms of FMA on an H200. cuDNN pads C_in and runs an implicit GEMM built for
// deep inputs (DnCNN 3 ch 2048²'s head 0.58 ms, DRUNet 1 ch 4096²'s 2 -> 64 head 2.3 ms fp32 and
// 4.2 ms bf16; this kernel 0.51, 1.46 and 1.45 ms, docs/performance.md#native-kernels).
// The kernel is output-stationary: a block owns 128 pixels of a band of output rows (8, or 16 or
// 32 where enough blocks remain, few_in_band: DRUNet 1 ch 4096²'s head 1.637 against 1.913 ms
// with 8 in fp32, even in bf16 at 1.92 ms; H200, docs/performance.md#native-kernels) and 64 outputs;
// the 64 outputs' weights (float4s of 4 outputs) are staged in shared memory once, and the
// window's input rows (every channel as one float4) go through a ring in shared memory, one new
// row per output row, loaded while the row before is computed. Thread (q, g) computes pixels
// 8q .. 8q + 7 for outputs 4g .. 4g + 3, loading each window column once per kernel row (a
// float4 broadcast to the 16 threads of its pixels) and each weight float4 once for 8 pixels
// (32 FMAs). The 16 threads of a pixel store its 64 outputs as one contiguous 256-byte run. An
// earlier few-input kernel (one lane group per pixel, the weights reloaded for every pixel) lost
// to cuDNN everywhere (DRUNet's 2 -> 64 head, 5.93 against 2.64 ms) and was removed.
#include "narrow_conv_kernels.hpp"
#include "nhwc_vec.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace pnp::nn::native::kernels {
namespace {

// float4s of 4 channels: loaded from 16 bytes of float32 or 8 of bf16, stored back likewise
__device__ __forceinline__ float component(const float4& v, int c) {
  return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
}
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 load4(const __nv_bfloat16* p) {
  const uint2 r = *reinterpret_cast<const uint2*>(p);
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}
__device__ __forceinline__ void store4(float* p, const float4& v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ void store4(__nv_bfloat16* p, const float4& v) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
  uint2 r;
  r.x = *reinterpret_cast<const unsigned*>(&lo), r.y = *reinterpret_cast<const unsigned*>(&hi);
  *reinterpret_cast<uint2*>(p) = r;
}

constexpr int kThreads = 128;

// ---- few outputs ------------------------------------------------------------------------
// Shared weights: [C_in / V pieces][CO][K][K][V] floats, so a lane's pieces for one tap are one
// 16-byte read and the lanes of a group read neighbouring pieces. The blocks stride over the
// tiles (the weights are staged once per block); each input row of the tile's window is
// unrolled, so which column taps a loaded pixel meets is known at compile time.
template <typename T, int CO, int K, int R, int P>
__global__ void __launch_bounds__(kThreads) few_out_kernel(NarrowConvArgs a, int lanes) {
  constexpr int V = Piece<T>::V;
  extern __shared__ float ws[];
  const T* __restrict__ w = static_cast<const T*>(a.w);
  const int pieces = a.ci / V;
  for (int i = threadIdx.x; i < CO * K * K * a.ci; i += kThreads) {  // w is [CO][K][K][C_in]
    const int c = i % a.ci, tap = (i / a.ci) % (K * K), co = i / (a.ci * K * K);
    ws[((((c / V) * CO + co) * K * K) + tap) * V + c % V] = to_f(w[i]);
  }
  __syncthreads();
  const T* __restrict__ x = static_cast<const T*>(a.x);
  const T* __restrict__ b = static_cast<const T*>(a.b);
  const T* __restrict__ z = static_cast<const T*>(a.z);
  T* __restrict__ y = static_cast<T*>(a.y);
  const int tiles_w = (a.ow + P - 1) / P, tiles_h = (a.oh + R - 1) / R;
  const int64_t tiles = static_cast<int64_t>(a.n) * tiles_h * tiles_w;
  const int per_block = kThreads / lanes, lane = threadIdx.x % lanes;
  // block-uniform loop: every lane of a warp takes part in every shuffle
  for (int64_t t0 = static_cast<int64_t>(blockIdx.x) * per_block; t0 < tiles;
       t0 += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t tile = t0 + threadIdx.x / lanes;
    const bool valid = tile < tiles;
    const int tw = static_cast<int>(tile % tiles_w), th = static_cast<int>((tile / tiles_w) % tiles_h);
    const int n = static_cast<int>(tile / (static_cast<int64_t>(tiles_w) * tiles_h));
    const int oh0 = th * R, ow0 = tw * P;
    float acc[R][P][CO];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int p = 0; p < P; ++p)
#pragma unroll
        for (int co = 0; co < CO; ++co) acc[r][p][co] = 0.f;
    if (valid)
      for (int pc = lane; pc < pieces; pc += lanes) {
        const float* wp = ws + pc * CO * K * K * V;
#pragma unroll 1  // (unrolled, the compiler hoists every row's loads: 255 registers and spills)
        for (int ir = 0; ir < R + K - 1; ++ir) {
          const int ih = oh0 - a.pad_h + ir;
          if (ih < 0 || ih >= a.h) continue;
          const T* row = x + (static_cast<int64_t>(n) * a.h + ih) * a.w_in * a.ci + pc * V;
#pragma unroll
          for (int j = 0; j < P + K - 1; ++j) {
            const int iw = ow0 - a.pad_w + j;
            if (iw < 0 || iw >= a.w_in) continue;
            float f[V];
            Piece<T>::load(row + static_cast<int64_t>(iw) * a.ci, f);
#pragma unroll
            for (int r = 0; r < R; ++r) {
              const int kr = ir - r;
              if (kr < 0 || kr >= K) continue;
#pragma unroll
              for (int p = 0; p < P; ++p) {
                const int ks = j - p;
                if (ks < 0 || ks >= K) continue;
#pragma unroll
                for (int co = 0; co < CO; ++co) {
                  const float* wv = wp + ((co * K + kr) * K + ks) * V;
                  float s = acc[r][p][co];
#pragma unroll
                  for (int v = 0; v < V; ++v) s = fmaf(f[v], wv[v], s);
                  acc[r][p][co] = s;
                }
              }
            }
          }
        }
      }
    // the group's sum (lanes is a power of two: the xor partners stay inside the group)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int p = 0; p < P; ++p)
#pragma unroll
        for (int co = 0; co < CO; ++co)
          for (int off = lanes / 2; off > 0; off /= 2)
            acc[r][p][co] += __shfl_xor_sync(0xffffffffu, acc[r][p][co], off);
    if (!valid) continue;
    // the tile's outputs shared out over the lanes: output (r, p, co) by lane (p CO + co) % lanes
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int oh = oh0 + r;
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int ow = ow0 + p;
#pragma unroll
        for (int co = 0; co < CO; ++co) {
          if ((p * CO + co) % lanes != lane || oh >= a.oh || ow >= a.ow) continue;
          const int64_t o = ((static_cast<int64_t>(n) * a.oh + oh) * a.ow + ow) * CO + co;
          float v = acc[r][p][co];
          if (b) v += to_f(b[co]);
          if (z) v += to_f(z[o]);
          if (a.relu) v = fmaxf(v, 0.f);
          y[o] = from_f<T>(v);
        }
      }
    }
  }
}

// ---- few outputs from 64 inputs, down rows ----------------------------------------------
// 3x3, padding 1, C_in 64, C_out 1 to 4 (a network's tail: DnCNN's and UNet's 64 -> 3, DRUNet's
// 64 -> 1). A group of 16 lanes owns a strip of P output pixels and walks down a band of rows;
// lane l owns input channels 4l .. 4l + 3, holds their weights for every tap and output in
// registers (9 CO float4s) and loads its 16 or 8 bytes of each pixel of the strip's window
// (P + 2 pixels) once per input row, straight from global memory (a warp's loads of a pixel are
// one contiguous 256 or 128 bytes), the next row in flight while this one is multiplied. Input
// row rho feeds output rows rho + 1, rho and rho - 1 (kernel rows 0, 1, 2): three rows of
// accumulators, rotated by unrolling the walk by three; a completed row's 16 partial sums per
// output meet in shared memory, one lane per output adds them and stores it with its bias,
// residual and ReLU. So every input byte is read once from DRAM (plus the bands' two halo rows)
// and no weight is loaded twice, where few_out_kernel reloads a weight float4 every 4 FMAs.
// On an H200 (docs/performance.md#native-kernels): DnCNN 3 ch 2048²'s tail 0.675 ms against cuDNN's
// 1.455 ms; DRUNet 1 ch 4096²'s 64 -> 1 tail 1.42 ms (few_out_kernel 3.60 ms). At 3 outputs it
// takes 255 registers (8 warps a multiprocessor) and is latency-bound (1.59 TB/s). The window
// rows through a cp.async ring in shared memory, three rows ahead, were correct and slower
// there (0.81 ms), and were not kept. With a second input (X2, ConvArgs::x2:
// an add folded into the convolution, DRUNet's x + x1 before its tail) each window pixel is the
// float32 sum of the two: the add's pass over both and its write are gone, for one more read of
// x2 here. x2's row is loaded into registers of its own beside x's and summed only when the row
// is taken, so that both rows' loads are in flight together while the row before is computed.
// (Summed as loaded, into one scratch register set, every load of x2 waited for the one before,
// as the SASS showed: DRUNet 4096²'s tail took 4.15-4.39 ms in fp32, 2.0 TB/s, against 1.47 ms
// without x2. Now 2.15-2.20 ms; bf16 2.02-2.09 against 2.10-2.19 ms. H200, docs/performance.md#native-kernels.)
constexpr int kTailThreads = 256, kTailLanes = 16, kTailBand = 32;

template <typename T, int CO, int P, bool X2>
__global__ void __launch_bounds__(kTailThreads, 1) few_out_rows_kernel(NarrowConvArgs a) {
  constexpr int G = kTailThreads / kTailLanes, N = P * CO, W = P + 2;
  __shared__ float red[G][kTailLanes][N + 1];  // (+1: the lanes' rows on distinct banks)
  const int lane = threadIdx.x % kTailLanes, gq = threadIdx.x / kTailLanes;
  const int tiles_w = (a.ow + G * P - 1) / (G * P), bands = (a.oh + kTailBand - 1) / kTailBand;
  const int tile = static_cast<int>(blockIdx.x % tiles_w), band = static_cast<int>((blockIdx.x / tiles_w) % bands);
  const int n = static_cast<int>(blockIdx.x / (static_cast<unsigned>(tiles_w) * bands));
  const int oh0 = band * kTailBand, oh1 = min(oh0 + kTailBand, a.oh), ow0 = tile * G * P + gq * P;
  const int rows_in = oh1 - oh0 + 2;  // input rows oh0 - 1 .. oh1
  const T* __restrict__ x = static_cast<const T*>(a.x);
  const T* __restrict__ x2 = static_cast<const T*>(a.x2);  // (X2) summed with x when a row is taken
  const T* __restrict__ wp = static_cast<const T*>(a.w);  // [CO][3][3][64]
  float4 w[3][3][CO];
#pragma unroll
  for (int kr = 0; kr < 3; ++kr)
#pragma unroll
    for (int kc = 0; kc < 3; ++kc)
#pragma unroll
      for (int co = 0; co < CO; ++co) w[kr][kc][co] = load4(wp + ((co * 3 + kr) * 3 + kc) * 64 + 4 * lane);
  // input row ih's window for this lane (zeros outside the image: the padding), of x into v and
  // (X2) of x2 into v2
  auto load_row = [&](int ih, float4 (&v)[W], float4 (&v2)[W]) {
    const bool row_ok = ih >= 0 && ih < a.h;
    const int64_t row = (static_cast<int64_t>(n) * a.h + (row_ok ? ih : 0)) * a.w_in * 64 + 4 * lane;
#pragma unroll
    for (int j = 0; j < W; ++j) {
      const int iw = ow0 - 1 + j;
      const bool ok = row_ok && iw >= 0 && iw < a.w_in;
      v[j] = ok ? load4(x + row + static_cast<int64_t>(iw) * 64) : make_float4(0.f, 0.f, 0.f, 0.f);
      if constexpr (X2) v2[j] = ok ? load4(x2 + row + static_cast<int64_t>(iw) * 64) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  // v += v2 (X2): the row taken
  auto take = [&](float4 (&v)[W], const float4 (&v2)[W]) {
    if constexpr (X2)
#pragma unroll
      for (int j = 0; j < W; ++j) v[j].x += v2[j].x, v[j].y += v2[j].y, v[j].z += v2[j].z, v[j].w += v2[j].w;
  };
  float acc[3][P][CO];
#pragma unroll
  for (int s = 0; s < 3; ++s)
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int co = 0; co < CO; ++co) acc[s][p][co] = 0.f;
  const T* __restrict__ b = static_cast<const T*>(a.b);
  const T* __restrict__ z = static_cast<const T*>(a.z);
  T* __restrict__ y = static_cast<T*>(a.y);
  // output row oh0 + u from accumulator slot s: the partial sums summed over the lanes, stored
  auto emit = [&](float (&acc_s)[P][CO], int u) {
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int co = 0; co < CO; ++co) red[gq][lane][p * CO + co] = acc_s[p][co];
    __syncwarp();
    for (int j = lane; j < N; j += kTailLanes) {
      float v = 0.f;
#pragma unroll
      for (int k = 0; k < kTailLanes; ++k) v += red[gq][k][j];
      const int p = j / CO, co = j % CO, ow = ow0 + p;
      if (ow < a.ow) {
        const int64_t o = ((static_cast<int64_t>(n) * a.oh + oh0 + u) * a.ow + ow) * CO + co;
        if (b) v += to_f(b[co]);
        if (z) v += to_f(z[o]);
        if (a.relu) v = fmaxf(v, 0.f);
        y[o] = from_f<T>(v);
      }
    }
    __syncwarp();
  };
  float4 cur[W], nxt[W], nxt2[W];  // (nxt2: x2's next row, X2 only)
  load_row(oh0 - 1, cur, nxt2);
  take(cur, nxt2);
  // input row m (oh0 - 1 + m) with m % 3 == M: kernel row kr adds to output row m - kr, whose
  // accumulators are slot (M - kr) mod 3; output row m - 2 is then complete
  auto step = [&](auto M_, int m) {
    constexpr int M = decltype(M_)::value;
    if (m + 1 < rows_in) load_row(oh0 + m, nxt, nxt2);
#pragma unroll
    for (int kr = 0; kr < 3; ++kr) {
      float(&as)[P][CO] = acc[(M - kr + 3) % 3];
#pragma unroll
      for (int kc = 0; kc < 3; ++kc)
#pragma unroll
        for (int p = 0; p < P; ++p) {
          const float4 v = cur[p + kc];
#pragma unroll
          for (int co = 0; co < CO; ++co) {
            const float4 wv = w[kr][kc][co];
            float t = as[p][co];
            t = fmaf(v.x, wv.x, t), t = fmaf(v.y, wv.y, t), t = fmaf(v.z, wv.z, t), t = fmaf(v.w, wv.w, t);
            as[p][co] = t;
          }
        }
    }
    float(&done)[P][CO] = acc[(M + 1) % 3];
    if (m >= 2) emit(done, m - 2);
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int co = 0; co < CO; ++co) done[p][co] = 0.f;
    if (m + 1 < rows_in) take(nxt, nxt2);
#pragma unroll
    for (int j = 0; j < W; ++j) cur[j] = nxt[j];
  };
  for (int m = 0; m < rows_in; m += 3) {  // (rows_in is the block's: every lane takes the same steps)
    step(std::integral_constant<int, 0>{}, m);
    if (m + 1 < rows_in) step(std::integral_constant<int, 1>{}, m + 1);
    if (m + 2 < rows_in) step(std::integral_constant<int, 2>{}, m + 2);
  }
}

// ---- few inputs ------------------------------------------------------------------------
// 16 pixel groups x 16 output groups; a block's tile: 128 pixels of a band of rows (few_in: 8
// rows, or 16 or 32 where the image has enough of them: few_in_band)
constexpr int kHeadThreads = 256, kHeadTile = 128, kHeadPixels = 8, kHeadBlocksPerSm = 2;

// Block (column tile, band, output block): 128 pixels from column tile * 128 of the output rows
// of one band (`band` rows of one image), outputs 64 * blockIdx.y ...; K x K kernel, CI <= 4
// inputs. The window's rows sit in a ring of K + 1 slots: while a row's outputs are computed and
// stored, the next row's last window row is in flight from global memory, then written into
// the slot the row before last has freed; one barrier a row. A block's first K window rows are
// all in flight at once before any is written to the ring.
template <typename T, int CI, int K>
__global__ void __launch_bounds__(kHeadThreads, kHeadBlocksPerSm) few_in_kernel(NarrowConvArgs a, int band) {
  constexpr int XW = kHeadTile + K - 1, P = kHeadPixels, S = K + 1;
  constexpr int XN = 4 * XW, XL = (XN + kHeadThreads - 1) / kHeadThreads;  // a window row's floats, per thread
  constexpr int WN = 64 * K * K * CI, WL = (WN + kHeadThreads - 1) / kHeadThreads;
  __shared__ float4 xs[S][XW];           // the window's rows, the channels of a pixel as one float4
  __shared__ float4 ws[K * K * CI][16];  // [tap][channel][outputs 4g .. 4g + 3]
  const int t = threadIdx.x, g = t % 16, q = t / 16;
  const int tiles_w = (a.ow + kHeadTile - 1) / kHeadTile, bands = (a.oh + band - 1) / band;
  const int tile = static_cast<int>(blockIdx.x % tiles_w), bi = static_cast<int>((blockIdx.x / tiles_w) % bands);
  const int n = static_cast<int>(blockIdx.x / (static_cast<unsigned>(tiles_w) * bands));
  const int oh0 = bi * band, oh1 = min(oh0 + band, a.oh);
  const int ow0 = tile * kHeadTile, co0 = 64 * static_cast<int>(blockIdx.y);
  const T* __restrict__ w = static_cast<const T*>(a.w);  // [C_out][K][K][CI]
  const T* __restrict__ x = static_cast<const T*>(a.x);
  float* wsf = reinterpret_cast<float*>(ws);
  float* xsf = reinterpret_cast<float*>(xs);
#pragma unroll
  for (int l = 0; l < WL; ++l) {
    const int i = t + l * kHeadThreads;
    if (i >= WN) break;
    const int co = i / (K * K * CI), tc = i % (K * K * CI);
    wsf[tc * 64 + co] = to_f(w[static_cast<int64_t>(co0 + co) * K * K * CI + tc]);
  }
  // input row ih's window row (zeros outside the image and in the float4's unused channels)
  auto fetch = [&](int ih, float (&v)[XL]) {
#pragma unroll
    for (int l = 0; l < XL; ++l) {
      const int i = t + l * kHeadThreads, c = i % 4, iw = ow0 - a.pad_w + i / 4;
      v[l] = i < XN && c < CI && ih >= 0 && ih < a.h && iw >= 0 && iw < a.w_in
                 ? to_f(x[((static_cast<int64_t>(n) * a.h + ih) * a.w_in + iw) * CI + c])
                 : 0.f;
    }
  };
  auto put = [&](int slot, const float (&v)[XL]) {
#pragma unroll
    for (int l = 0; l < XL; ++l)
      if (const int i = t + l * kHeadThreads; i < XN) xsf[slot * XN + i] = v[l];
  };
  float v[XL];
  {
    float first[K][XL];  // the first row's window: input rows oh0 - pad_h + r, then in slot r
#pragma unroll
    for (int r = 0; r < K; ++r) fetch(oh0 - a.pad_h + r, first[r]);
#pragma unroll
    for (int r = 0; r < K; ++r) put(r, first[r]);
  }
  __syncthreads();
  const int co = co0 + 4 * g;
  const float4 bias = a.b ? load4(static_cast<const T*>(a.b) + co) : make_float4(0.f, 0.f, 0.f, 0.f);
  const T* __restrict__ z = static_cast<const T*>(a.z);
  T* __restrict__ y = static_cast<T*>(a.y);
  for (int oh = oh0; oh < oh1; ++oh) {
    const int rel = oh - oh0;
    const bool more = oh + 1 < oh1;
    if (more) fetch(oh + K - a.pad_h, v);  // the next row's last window row, in flight meanwhile
    float4 acc[P];
#pragma unroll
    for (int i = 0; i < P; ++i) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int r = 0; r < K; ++r) {
      const float4* row = xs[(rel + r) % S] + q * P;
      float4 in[P + K - 1];
#pragma unroll
      for (int j = 0; j < P + K - 1; ++j) in[j] = row[j];
#pragma unroll
      for (int kc = 0; kc < K; ++kc)
#pragma unroll
        for (int c = 0; c < CI; ++c) {
          const float4 wv = ws[(r * K + kc) * CI + c][g];
#pragma unroll
          for (int i = 0; i < P; ++i) {
            const float u = component(in[i + kc], c);
            acc[i].x = fmaf(u, wv.x, acc[i].x), acc[i].y = fmaf(u, wv.y, acc[i].y);
            acc[i].z = fmaf(u, wv.z, acc[i].z), acc[i].w = fmaf(u, wv.w, acc[i].w);
          }
        }
    }
    const int64_t orow = static_cast<int64_t>(n) * a.oh + oh;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int ow = ow0 + q * P + i;
      if (ow >= a.ow) break;
      const int64_t o = (orow * a.ow + ow) * a.co + co;
      float4 e = acc[i];
      e.x += bias.x, e.y += bias.y, e.z += bias.z, e.w += bias.w;
      if (z) {
        const float4 r = load4(z + o);
        e.x += r.x, e.y += r.y, e.z += r.z, e.w += r.w;
      }
      if (a.relu) e.x = fmaxf(e.x, 0.f), e.y = fmaxf(e.y, 0.f), e.z = fmaxf(e.z, 0.f), e.w = fmaxf(e.w, 0.f);
      store4(y + o, e);
    }
    if (more) put((rel + K) % S, v);  // the slot of row rel - 1's first window row, unused since the barrier
    __syncthreads();
  }
}

template <typename T, int CI>
bool few_in(const NarrowConvArgs& a, void* stream) {
  int dev = 0, sms = 0;
  if (a.band < 0 || cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return false;
  const int band = a.band > 0 ? a.band : few_in_band(a.n, a.oh, a.ow, a.co, sms);
  const int64_t blocks = static_cast<int64_t>(a.n) * ((a.oh + band - 1) / band) * ((a.ow + kHeadTile - 1) / kHeadTile);
  if (blocks > 0x7fffffff) return false;
  if (blocks == 0) return true;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(a.co / 64));
  few_in_kernel<T, CI, 3><<<grid, kHeadThreads, 0, static_cast<cudaStream_t>(stream)>>>(a, band);
  return cudaPeekAtLastError() == cudaSuccess;
}

template <typename T, int CO>
bool few_out_rows(const NarrowConvArgs& a, void* stream) {
  constexpr int P = CO <= 2 ? 8 : 4;  // (the registers: 9 CO weight float4s, 3 P CO sums, two windows)
  constexpr int tile = kTailThreads / kTailLanes * P;
  const int64_t blocks = static_cast<int64_t>(a.n) * ((a.oh + kTailBand - 1) / kTailBand) * ((a.ow + tile - 1) / tile);
  if (blocks > 0x7fffffff) return false;
  if (blocks == 0) return true;
  const auto s = static_cast<cudaStream_t>(stream);
  if (a.x2)
    few_out_rows_kernel<T, CO, P, true><<<static_cast<unsigned>(blocks), kTailThreads, 0, s>>>(a);
  else
    few_out_rows_kernel<T, CO, P, false><<<static_cast<unsigned>(blocks), kTailThreads, 0, s>>>(a);
  return cudaPeekAtLastError() == cudaSuccess;
}

template <typename T>
bool dispatch_few_out_rows(const NarrowConvArgs& a, void* stream) {
  switch (a.co) {
    case 1: return few_out_rows<T, 1>(a, stream);
    case 2: return few_out_rows<T, 2>(a, stream);
    case 3: return few_out_rows<T, 3>(a, stream);
    case 4: return few_out_rows<T, 4>(a, stream);
    default: return false;
  }
}

template <typename T>
bool dispatch_few_in(const NarrowConvArgs& a, void* stream) {
  switch (a.ci) {
    case 1: return few_in<T, 1>(a, stream);
    case 2: return few_in<T, 2>(a, stream);
    case 3: return few_in<T, 3>(a, stream);
    case 4: return few_in<T, 4>(a, stream);
    default: return false;
  }
}

// Blocks for `threads` threads of work, at most 16 per SM (the kernels stride over the rest).
int64_t grid_for(int64_t threads) {
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      n = 132;
    return n;
  }();
  const int64_t blocks = (threads + kThreads - 1) / kThreads;
  return blocks < int64_t{16} * sms ? blocks : int64_t{16} * sms;
}

template <typename F, typename... A>
bool launch(F kernel, int64_t threads, int smem_bytes, void* stream, A... args) {
  if (threads <= 0) return true;
  const int64_t blocks = grid_for(threads);
  if (smem_bytes > 48 * 1024) return false;
  kernel<<<static_cast<unsigned>(blocks), kThreads, smem_bytes, static_cast<cudaStream_t>(stream)>>>(args...);
  return cudaPeekAtLastError() == cudaSuccess;
}

template <typename T, int CO, int K>
bool few_out(const NarrowConvArgs& a, void* stream) {
  constexpr int V = Piece<T>::V;
  constexpr int R = CO <= 2 ? 4 : 2, P = 8;
  const int pieces = a.ci / V;
  int lanes = 1;
  while (lanes * 2 <= 32 && pieces % (lanes * 2) == 0) lanes *= 2;
  const int smem = CO * K * K * a.ci * static_cast<int>(sizeof(float));
  if constexpr (K == 1) {  // no neighbours to share: one pixel per tile
    return launch(few_out_kernel<T, CO, K, 1, 1>, static_cast<int64_t>(a.n) * a.oh * a.ow * lanes, smem, stream, a, lanes);
  } else {
    const int64_t tiles = static_cast<int64_t>(a.n) * ((a.oh + R - 1) / R) * ((a.ow + P - 1) / P);
    return launch(few_out_kernel<T, CO, K, R, P>, tiles * lanes, smem, stream, a, lanes);
  }
}

template <typename T, int K>
bool dispatch_k(const NarrowConvArgs& a, void* stream) {
  constexpr int V = Piece<T>::V;
  if (a.co == 1 && a.ci % V == 0) return few_out<T, 1, K>(a, stream);
  return false;
}

template <typename T>
bool dispatch(const NarrowConvArgs& a, void* stream) {
  if (a.kh == 1) return dispatch_k<T, 1>(a, stream);
  if (a.kh == 3) return dispatch_k<T, 3>(a, stream);
  return false;
}

}  // namespace

bool narrow_conv_supported(int ci, int co, int k, bool bf16) {
  const int v = bf16 ? 8 : 4;
  if (k != 1 && k != 3) return false;
  return co == 1 && ci >= v && ci % v == 0 && static_cast<int64_t>(ci) * k * k * 4 <= 48 * 1024;
}

bool few_out_rows_supported(int ci, int co, int kh, int kw, int pad_h, int pad_w) {
  return ci == 64 && co >= 1 && co <= 4 && kh == 3 && kw == 3 && pad_h == 1 && pad_w == 1;
}

bool launch_few_out_rows(const NarrowConvArgs& a, void* stream) {
  if (!few_out_rows_supported(a.ci, a.co, a.kh, a.kw, a.pad_h, a.pad_w)) return false;
  return a.bf16 ? dispatch_few_out_rows<__nv_bfloat16>(a, stream) : dispatch_few_out_rows<float>(a, stream);
}

int few_in_band(int n, int oh, int ow, int co, int sms) {
  const int64_t tiles = static_cast<int64_t>(n) * ((ow + kHeadTile - 1) / kHeadTile) * (co / 64);
  const int64_t enough = 8LL * kHeadBlocksPerSm * sms;
  for (int band : {32, 16})
    if (tiles * ((oh + band - 1) / band) >= enough) return band;
  return 8;
}

bool few_in_conv_supported(int ci, int co, int kh, int kw) {
  return ci >= 1 && ci <= 4 && co >= 64 && co % 64 == 0 && kh == 3 && kw == 3 && co <= 64 * 65535;
}

bool launch_few_in_conv(const NarrowConvArgs& a, void* stream) {
  if (!few_in_conv_supported(a.ci, a.co, a.kh, a.kw) || a.x2) return false;
  return a.bf16 ? dispatch_few_in<__nv_bfloat16>(a, stream) : dispatch_few_in<float>(a, stream);
}

bool launch_narrow_conv(const NarrowConvArgs& a, void* stream) {
  if (a.kh != a.kw || !narrow_conv_supported(a.ci, a.co, a.kh, a.bf16)) return false;
  if (few_out_rows_supported(a.ci, a.co, a.kh, a.kw, a.pad_h, a.pad_w)) return launch_few_out_rows(a, stream);
  if (a.x2) return false;  // (only the kernel down rows sums a second input)
  return a.bf16 ? dispatch<__nv_bfloat16>(a, stream) : dispatch<float>(a, stream);
}

}  // namespace pnp::nn::native::kernels
