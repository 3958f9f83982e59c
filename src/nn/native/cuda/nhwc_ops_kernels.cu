// pnp's memory-bound NHWC kernels (nhwc_ops.hpp): one thread per 16-byte piece of the output,
// the pieces of an output row spread over the x blocks and the rows over y, so that a warp's
// loads and stores are contiguous runs of channels.
#include "nhwc_ops_kernels.hpp"
#include "nhwc_vec.cuh"

#include <cuda_fp8.h>

#include <cstdint>

namespace pnp::nn::native::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxRowBlocks = 65535;  // gridDim.y: more rows loop

// A grid of kThreads-thread blocks over `rows` output rows of `per_row` pieces each.
dim3 grid_for(long long rows, int per_row) {
  return dim3(static_cast<unsigned>((per_row + kThreads - 1) / kThreads),
              static_cast<unsigned>(rows < kMaxRowBlocks ? rows : kMaxRowBlocks));
}

template <typename T>
__global__ void __launch_bounds__(kThreads) phase_shuffle_kernel(PhaseShuffleArgs a) {
  constexpr int V = Piece<T>::V;
  const int ctot = a.c + a.c2, cv = ctot / V, oh = 2 * a.h, ow = 2 * a.w;
  const int per_row = ow * cv;
  const T* __restrict__ p = static_cast<const T*>(a.p);
  const T* __restrict__ b = static_cast<const T*>(a.b);
  const T* __restrict__ other = static_cast<const T*>(a.other);
  T* __restrict__ y = static_cast<T*>(a.y);
  const int j = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (j >= per_row) return;
  const int ox = j / cv, ch = (j - ox * cv) * V;
  const bool phase = ch >= a.off && ch < a.off + a.c;
  const int cc = ch - a.off;  // the phase channel (where phase)
  float bias[V];
#pragma unroll
  for (int v = 0; v < V; ++v) bias[v] = phase && b ? to_f(b[cc + v]) : 0.f;
  for (long long row = blockIdx.y; row < static_cast<long long>(a.n) * oh; row += gridDim.y) {
    const long long px = row * ow + ox;  // the output pixel
    T* dst = y + px * ctot + ch;
    float f[V];
    if (phase) {
      const long long img = row / oh;
      const int oy = static_cast<int>(row - img * oh), ry = oy & 1, rx = ox & 1;
      const long long src = ((img * (a.h + 1) + (oy >> 1) + ry) * (a.w + 1) + (ox >> 1) + rx) * 4LL * a.c;
      Piece<T>::load(p + src + (ry * 2 + rx) * a.c + cc, f);
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const float r = f[v] + bias[v];
        f[v] = a.relu ? fmaxf(r, 0.f) : r;
      }
    } else {
      Piece<T>::load(other + px * a.c2 + (ch < a.off ? ch : ch - a.c), f);
    }
    Piece<T>::store(dst, f);
  }
}

// NaN wins, as in ATen's max pooling
__device__ __forceinline__ float nan_max(float m, float v) { return (v > m || v != v) ? v : m; }

template <typename T>
__global__ void __launch_bounds__(kThreads) max_pool2_kernel(MaxPool2Args a) {
  constexpr int V = Piece<T>::V;
  const int oh = a.h / 2, ow = a.w / 2, cv = a.c / V, per_row = ow * cv;
  const T* __restrict__ x = static_cast<const T*>(a.x);
  T* __restrict__ y = static_cast<T*>(a.y);
  const int j = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (j >= per_row) return;
  const int ox = j / cv, ch = (j - ox * cv) * V;
  for (long long row = blockIdx.y; row < static_cast<long long>(a.n) * oh; row += gridDim.y) {
    const long long img = row / oh;
    const int oy = static_cast<int>(row - img * oh);
    const T* src = x + ((img * a.h + 2 * oy) * a.w + 2 * ox) * a.c + ch;
    float m[V], f[V];
    Piece<T>::load(src, m);
#pragma unroll
    for (int k = 1; k < 4; ++k) {
      Piece<T>::load(src + ((k >> 1) * static_cast<long long>(a.w) + (k & 1)) * a.c, f);
#pragma unroll
      for (int v = 0; v < V; ++v) m[v] = nan_max(m[v], f[v]);
    }
    Piece<T>::store(y + (row * ow + ox) * a.c + ch, m);
  }
}

// Eight bf16 values (one 16-byte piece) to eight e4m3 ones (8 bytes) per thread, grid-stride.
__global__ void __launch_bounds__(kThreads) e4m3_quantize_kernel(E4m3QuantizeArgs a) {
  const __nv_bfloat16* __restrict__ x = static_cast<const __nv_bfloat16*>(a.x);
  uint2* __restrict__ y = static_cast<uint2*>(a.y);
  const long long pieces = a.n / 8;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < pieces;
       i += static_cast<long long>(gridDim.x) * kThreads) {
    float f[8];
    Piece<__nv_bfloat16>::load(x + i * 8, f);
    unsigned short q[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      q[k] = __nv_cvt_float2_to_fp8x2(make_float2(f[2 * k] * a.inv_scale, f[2 * k + 1] * a.inv_scale), __NV_SATFINITE,
                                      __NV_E4M3);
    y[i] = make_uint2(q[0] | (static_cast<unsigned>(q[1]) << 16), q[2] | (static_cast<unsigned>(q[3]) << 16));
  }
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool launch_phase_shuffle(const PhaseShuffleArgs& a, void* stream) {
  const int V = a.bf16 ? 8 : 4;
  if (a.n <= 0 || a.h <= 0 || a.w <= 0 || a.c <= 0 || a.c2 < 0 || a.c % V || a.c2 % V) return false;
  if ((a.off != 0 && a.off != a.c2) || (a.c2 > 0) != (a.other != nullptr) || !a.p || !a.y) return false;
  if (!aligned(a.p) || !aligned(a.y) || (a.other && !aligned(a.other)) || (a.b && !aligned(a.b))) return false;
  const long long per_row = 2LL * a.w * ((a.c + a.c2) / V);
  if (per_row > (1LL << 30) || 2LL * a.w * (a.c + a.c2) > (1LL << 31) - 1) return false;
  const dim3 grid = grid_for(2LL * a.h * a.n, static_cast<int>(per_row));
  const auto s = static_cast<cudaStream_t>(stream);
  if (a.bf16)
    phase_shuffle_kernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(a);
  else
    phase_shuffle_kernel<float><<<grid, kThreads, 0, s>>>(a);
  return cudaGetLastError() == cudaSuccess;
}

bool launch_max_pool2(const MaxPool2Args& a, void* stream) {
  const int V = a.bf16 ? 8 : 4;
  if (a.n <= 0 || a.h < 2 || a.w < 2 || a.c <= 0 || a.c % V || !a.x || !a.y || !aligned(a.x) || !aligned(a.y))
    return false;
  const long long per_row = static_cast<long long>(a.w / 2) * (a.c / V);
  if (per_row > (1LL << 30) || static_cast<long long>(a.w) * a.c > (1LL << 31) - 1) return false;
  const dim3 grid = grid_for(static_cast<long long>(a.h / 2) * a.n, static_cast<int>(per_row));
  const auto s = static_cast<cudaStream_t>(stream);
  if (a.bf16)
    max_pool2_kernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(a);
  else
    max_pool2_kernel<float><<<grid, kThreads, 0, s>>>(a);
  return cudaGetLastError() == cudaSuccess;
}

bool launch_e4m3_quantize(const E4m3QuantizeArgs& a, void* stream) {
  if (a.n <= 0 || a.n % 8 || !a.x || !a.y || !aligned(a.x) || !aligned(a.y)) return false;
  const long long blocks = (a.n / 8 + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(blocks < 8192 ? blocks : 8192));
  e4m3_quantize_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a);
  return cudaGetLastError() == cudaSuccess;
}

}  // namespace pnp::nn::native::kernels
