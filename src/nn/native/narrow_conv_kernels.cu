// Direct 2D convolutions with one output channel, NHWC (narrow_conv.hpp).
//
// A group of L lanes (L = C_in / V pieces of V channels, V = 16 bytes of elements, up to 32
// lanes; more channels loop) computes an R x P tile of output pixels, each lane over its own
// channel pieces; the lanes' partial sums are added by warp shuffles at the end. So a warp's
// loads of one input pixel are one contiguous run (coalesced), every input pixel is loaded
// (R + K - 1)(P + K - 1) / (R P) times from the caches instead of K^2, and the weights come from
// shared memory as 16-byte pieces, staged once per block; the blocks stride over the tiles
// (at most 16 per SM). Accumulation in float32 (FMA, not tensor cores); epilogue + bias,
// + residual, then ReLU, in float32, rounded once to the output type.
//
// The kernel is written for C_out <= 4, but only C_out = 1 is dispatched: on an H200
// (docs/measurements/2026-12-02d) it beat cuDNN there (DRUNet 1 ch 4096²'s 64 -> 1 tail: 3.81
// ms against 6.47 ms plus a 0.96 ms NHWC -> NCHW conversion), and lost with 3 outputs (DnCNN 3
// ch 2048²'s tail, 2.01 ms); a kernel for few inputs (the 2 or 3 -> 64 heads) lost to cuDNN
// everywhere (DRUNet 5.93 against 2.64 ms) and was removed.
#include "narrow_conv_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace pnp::nn::native::kernels {
namespace {

template <typename T>
struct Piece;  // V elements of T as one 16-byte load
template <>
struct Piece<float> {
  static constexpr int V = 4;
  __device__ static void load(const float* p, float (&f)[4]) {
    const float4 r = *reinterpret_cast<const float4*>(p);
    f[0] = r.x, f[1] = r.y, f[2] = r.z, f[3] = r.w;
  }
};
template <>
struct Piece<__nv_bfloat16> {
  static constexpr int V = 8;
  __device__ static void load(const __nv_bfloat16* p, float (&f)[8]) {
    const uint4 r = *reinterpret_cast<const uint4*>(p);
    const unsigned u[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 t = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u[i]));
      f[2 * i] = t.x, f[2 * i + 1] = t.y;
    }
  }
};

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
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

bool launch_narrow_conv(const NarrowConvArgs& a, void* stream) {
  if (a.kh != a.kw || !narrow_conv_supported(a.ci, a.co, a.kh, a.bf16)) return false;
  return a.bf16 ? dispatch<__nv_bfloat16>(a, stream) : dispatch<float>(a, stream);
}

}  // namespace pnp::nn::native::kernels
