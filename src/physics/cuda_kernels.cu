// CUDA Joseph projector and its exact adjoint (gather, no atomics, deterministic).
//
// Forward: one block = one angle x 128 consecutive detector bins, one thread = one ray.
// The rays march together over the steps (rows or columns of the box) in segments of L
// steps; each segment stages the pixels the 128 rays can touch (an L x W window of whole
// 16-byte pieces of memory rows) in shared memory with 16-byte cp.async, zero-filled outside
// the box, double-buffered so the next segment's copies fly while this one is computed. The
// column-stepping angles read the tile's transpose (made first, by a tiled transpose kernel),
// so both kinds stage rows. The inner loop is branch-free: two shared loads and an FMA per
// sample, into two accumulators. Only the run of segments the ray bundle touches is visited
// (found from the bundle's linear path, then checked against the staging windows).
//
// Adjoint: one block = a 32 x 32 pixel tile, 256 threads, 4 pixels each. Angles come in
// chunks of 32: for each the <= 46 detector bins the tile can see are staged in shared
// memory, premultiplied by 1/a^2; each pixel then gathers its two bins with the closed-form
// weights max(0, a - |d - t|) (the transpose of the forward's linear interpolation).
#include "joseph_math.hpp"
#include "kernels.hpp"

#include <cuda_runtime.h>

#include <algorithm>

namespace pnp::physics::detail {
namespace {

constexpr int kFwdThreads = 128;
template <typename T>
struct FwdCfg {
  static constexpr int L = 16;  // steps per staged segment
};
template <>
struct FwdCfg<double> {
  static constexpr int L = 8;
};
template <typename T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte piece
// Lateral window in elements, whole pieces: the bundle spans (B-1) sqrt(2) + (L-1) + 5 < 182 + L + 5
// elements, plus up to V - 1 each side for the pieces' alignment.
template <typename T>
constexpr int fwd_width() {
  constexpr int V = kVec<T>;
  return (182 + FwdCfg<T>::L + 5 + 2 * (V - 1) + V - 1) / V * V;
}
// Threads per staged row (>= the pieces in a window), rows staged per pass.
template <typename T>
constexpr int kFwdRowThreads = fwd_width<T>() / kVec<T> <= 64 ? 64 : 128;

// Asynchronous 16-byte global -> shared copy: `bytes` (0..16) of src, the rest zero-filled.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_wait_1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

struct Window {
  int lo, span;  // first staged element (a multiple of the piece), elements staged (whole pieces)
};

// img: the tile, [rows][ld]; imgT: its transpose, [cols][ldT]; both with 16-byte aligned rows.
template <typename T>
__global__ void __launch_bounds__(kFwdThreads) fwd_kernel(const T* __restrict__ img, int64_t ld,
                                                          const T* __restrict__ imgT, int64_t ldT, int rows, int cols,
                                                          const double* __restrict__ angles, int n, int n_det,
                                                          int r0, int c0, T* __restrict__ out) {
  constexpr int L = FwdCfg<T>::L;
  constexpr int V = kVec<T>;
  constexpr int W = fwd_width<T>();
  constexpr int B = kFwdThreads;
  constexpr int TPR = kFwdRowThreads<T>;
  __shared__ __align__(16) T sm[2][L * W];  // double buffer: stage segment s+1 while computing s
  const int k = blockIdx.y;
  const int d0 = blockIdx.x * B;
  const int tid = threadIdx.x;
  const int d = d0 + tid;
  double c, s;
  cos_sin_deg(angles[k], c, s);
  const RayParams rp = ray_params(c, s, n, n_det, r0, c0);
  const int nsteps = rp.col_mode ? cols : rows;
  const int nlat = rp.col_mode ? rows : cols;
  const T* const base = rp.col_mode ? imgT : img;  // memory row g = step g
  const int64_t ldb = rp.col_mode ? ldT : ld;
  const double pd = rp.L0 + static_cast<double>(d) * rp.Ld;
  const double pf = rp.L0 + static_cast<double>(d0) * rp.Ld;
  const double pl = rp.L0 + static_cast<double>(d0 + B - 1) * rp.Ld;
  const double pmin_d = fmin(pf, pl), pmax_d = fmax(pf, pl);
  const T Ls = static_cast<T>(rp.Ls);

  // Lateral window of segment sg (block-uniform); span 0 when the rays miss the box there.
  auto window = [&](int sg) {
    const int g0 = sg * L;
    const double e0 = static_cast<double>(g0) * rp.Ls, e1 = static_cast<double>(g0 + L - 1) * rp.Ls;
    const double pmin = pmin_d + fmin(e0, e1), pmax = pmax_d + fmax(e0, e1);
    Window w{0, 0};
    if (pmax < -2.0 || pmin > static_cast<double>(nlat) + 1.0) return w;
    const int lo = static_cast<int>(floor(pmin)) - 1;
    const int hi = static_cast<int>(floor(pmax)) + 3;  // exclusive; one spare element each side
    if (hi <= 0 || lo + 1 >= nlat) return w;
    w.lo = lo >= 0 ? lo / V * V : -((-lo + V - 1) / V) * V;  // down to a whole piece
    w.span = min((hi - w.lo + V - 1) / V * V, W);
    return w;
  };
  auto stage = [&](int sg, T* buf) {
    const Window w = window(sg);
    if (w.span == 0) return;
    const int g0 = sg * L;
    const int v = tid % TPR;  // this thread's piece of each row it stages
    if (v * V >= w.span) return;
    const int q = w.lo + v * V;
    // bytes of the piece inside the box's lateral extent [0, nlat) (a piece never straddles 0)
    const int inside = q < 0 ? 0 : static_cast<int>(sizeof(T)) * min(V, nlat - q);
#pragma unroll
    for (int si = tid / TPR; si < L; si += B / TPR) {
      const int g = g0 + si;
      const int bytes = g < nsteps && inside > 0 ? inside : 0;
      cp_async16(buf + si * W + v * V, bytes ? base + static_cast<int64_t>(g) * ldb + q : base, bytes);
    }
  };

  // The segments the bundle touches form one run [sb, se) (its lateral position is linear in
  // g): estimated from where the bundle's path meets [-2, nlat + 1], then moved to the exact
  // ends by the windows themselves.
  const int nseg = (nsteps + L - 1) / L;
  int sb = 0, se = nseg;
  if (rp.Ls != 0.0) {
    const double t1 = (-2.0 - pmax_d) / rp.Ls, t2 = (static_cast<double>(nlat) + 1.0 - pmin_d) / rp.Ls;
    const double glo = fmin(t1, t2) - L, ghi = fmax(t1, t2) + L;
    sb = static_cast<int>(fmax(0.0, fmin(static_cast<double>(nseg), floor(glo / L))));
    se = static_cast<int>(fmax(static_cast<double>(sb), fmin(static_cast<double>(nseg), ceil(ghi / L))));
  }
  while (sb > 0 && window(sb - 1).span != 0) --sb;
  while (sb < nseg && window(sb).span == 0) ++sb;
  se = max(se, sb);
  while (se > sb && window(se - 1).span == 0) --se;
  while (se < nseg && window(se).span != 0) ++se;

  T acc0 = 0, acc1 = 0;
  if (sb < se) stage(sb, sm[0]);
  cp_commit();
  for (int sg = sb; sg < se; ++sg) {
    T* cur = sm[(sg - sb) & 1];
    if (sg + 1 < se) stage(sg + 1, sm[(sg - sb + 1) & 1]);
    cp_commit();
    cp_wait_1();
    __syncthreads();
    const Window w = window(sg);
    const T ub = static_cast<T>(pd + static_cast<double>(sg * L) * rp.Ls - static_cast<double>(w.lo));
#pragma unroll
    for (int si = 0; si < L; ++si) {
      const T p = ub + static_cast<T>(si) * Ls;
      const T fl = floor(p);
      int q = static_cast<int>(fl);
      q = min(max(q, 0), w.span - 2);
      const T f = p - fl;
      const T v0 = cur[si * W + q];
      const T v1 = cur[si * W + q + 1];
      if (si & 1)
        acc1 += v0 + f * (v1 - v0);
      else
        acc0 += v0 + f * (v1 - v0);
    }
    __syncthreads();  // cur is restaged two iterations on
  }
  if (d < n_det) out[static_cast<int64_t>(k) * n_det + d] = (acc0 + acc1) * static_cast<T>(rp.inv_a);
}

// dst[j][i] = src[i][j] for a rows x cols src: 32 x 32 tiles through shared memory, so that
// both the reads and the writes are whole memory rows.
template <typename T>
__global__ void __launch_bounds__(256) transpose_kernel(const T* __restrict__ src, int64_t lds, int rows, int cols,
                                                        T* __restrict__ dst, int64_t ldd) {
  __shared__ T tile[32][33];
  const int i0 = blockIdx.y * 32, j0 = blockIdx.x * 32;
  for (int r = threadIdx.y; r < 32; r += 8) {
    const int i = i0 + r, j = j0 + threadIdx.x;
    if (i < rows && j < cols) tile[r][threadIdx.x] = src[static_cast<int64_t>(i) * lds + j];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < 32; r += 8) {
    const int j = j0 + r, i = i0 + threadIdx.x;
    if (i < rows && j < cols) dst[static_cast<int64_t>(j) * ldd + i] = tile[threadIdx.x][r];
  }
}

constexpr int kAdjTile = 32;  // pixels per tile side
constexpr int kAdjRowsPerThread = 4;
constexpr int kAdjKC = 32;  // angles per staged chunk
constexpr int kAdjWD = 52;  // staged bins per angle (>= 31 (|c|+|s|) + 4)

template <typename T>
__global__ void __launch_bounds__(256) adj_kernel(const T* __restrict__ sino, const double* __restrict__ angles,
                                                  int K, int n, int n_det, int r0, int c0, int rows, int cols,
                                                  T* __restrict__ out, int64_t ld_out) {
  __shared__ T ys[kAdjKC * kAdjWD];
  __shared__ T prm[kAdjKC][5];
  __shared__ int dstart[kAdjKC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * 32 + tx;
  const int ti0 = blockIdx.y * kAdjTile, tj0 = blockIdx.x * kAdjTile;
  T acc[kAdjRowsPerThread];
#pragma unroll
  for (int m = 0; m < kAdjRowsPerThread; ++m) acc[m] = 0;
  for (int k0 = 0; k0 < K; k0 += kAdjKC) {
    if (tid < kAdjKC) {
      const int k = k0 + tid;
      if (k < K) {
        double c, s;
        cos_sin_deg(angles[k], c, s);
        const double a = fmax(fabs(c), fabs(s));
        const double t0 = pixel_t(c, s, n, n_det, r0 + ti0, c0 + tj0);
        const double tmin = t0 + fmin(0.0, (kAdjTile - 1) * c) + fmin(0.0, -(kAdjTile - 1) * s);
        const int ds = static_cast<int>(floor(tmin)) - 1;
        prm[tid][0] = static_cast<T>(t0 - ds);
        prm[tid][1] = static_cast<T>(c);
        prm[tid][2] = static_cast<T>(-s);
        prm[tid][3] = static_cast<T>(a);
        prm[tid][4] = static_cast<T>(1.0 / (a * a));
        dstart[tid] = ds;
      } else {
        prm[tid][0] = prm[tid][1] = prm[tid][2] = prm[tid][3] = prm[tid][4] = 0;
        dstart[tid] = 0;
      }
    }
    __syncthreads();
    for (int idx = tid; idx < kAdjKC * kAdjWD; idx += 256) {
      const int kk = idx / kAdjWD;
      const int p = idx - kk * kAdjWD;
      const int k = k0 + kk;
      T v = 0;
      if (k < K) {
        const int dd = dstart[kk] + p;
        if (dd >= 0 && dd < n_det) v = sino[static_cast<int64_t>(k) * n_det + dd] * prm[kk][4];
      }
      ys[idx] = v;
    }
    __syncthreads();
    const int kn = min(kAdjKC, K - k0);
    for (int kk = 0; kk < kn; ++kk) {
      const T base = prm[kk][0], c = prm[kk][1], ms = prm[kk][2], a = prm[kk][3];
      const T tb = base + static_cast<T>(tx) * c;
      const T* yk = ys + kk * kAdjWD;
#pragma unroll
      for (int m = 0; m < kAdjRowsPerThread; ++m) {
        const T t = tb + static_cast<T>(ty + 8 * m) * ms;
        const T fl = floor(t);
        int q = static_cast<int>(fl);
        q = min(max(q, 0), kAdjWD - 2);
        const T fr = t - fl;
        const T w0 = fmax(T(0), a - fr);
        const T w1 = fmax(T(0), a - T(1) + fr);
        acc[m] += w0 * yk[q] + w1 * yk[q + 1];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int m = 0; m < kAdjRowsPerThread; ++m) {
    const int i = ti0 + ty + 8 * m, j = tj0 + tx;
    if (i < rows && j < cols) out[static_cast<int64_t>(i) * ld_out + j] = acc[m];
  }
}

template <typename T>
__global__ void __launch_bounds__(256) power_start_kernel(T* __restrict__ out, int64_t rows, int64_t cols, int64_t n,
                                                          int64_t r0, int64_t c0, uint64_t key) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    out[i] = static_cast<T>(power_start_value(key, static_cast<uint64_t>((r0 + r) * n + (c0 + c))));
  }
}

const char* last_error() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace

template <typename T>
const char* forward_cuda(const T* img, int64_t ld, T* imgT, int64_t ldT, int64_t rows, int64_t cols,
                         const double* angles, int64_t K, int64_t n, int64_t n_det, int64_t r0, int64_t c0, T* out,
                         void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (K == 0 || n_det == 0) return nullptr;
  if (K > 65535) return "pnp radon_forward (CUDA): more than 65535 angles";
  if (rows == 0 || cols == 0) {
    const cudaError_t e = cudaMemsetAsync(out, 0, static_cast<size_t>(K * n_det) * sizeof(T), st);
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
  }
  constexpr int64_t V = kVec<T>;
  if (reinterpret_cast<uintptr_t>(img) % 16 != 0 || reinterpret_cast<uintptr_t>(imgT) % 16 != 0 || ld % V != 0 ||
      ldT % V != 0 || ld < cols || ldT < rows)
    return "pnp radon_forward (CUDA): the tile and its transpose need 16-byte aligned rows";
  if ((cols + 31) / 32 > 2147483647 || (rows + 31) / 32 > 65535) return "pnp radon_forward (CUDA): tile too large";
  transpose_kernel<T><<<dim3(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>((rows + 31) / 32)),
                        dim3(32, 8), 0, st>>>(img, ld, static_cast<int>(rows), static_cast<int>(cols), imgT, ldT);
  const dim3 grid(static_cast<unsigned>((n_det + kFwdThreads - 1) / kFwdThreads), static_cast<unsigned>(K));
  fwd_kernel<T><<<grid, kFwdThreads, 0, st>>>(img, ld, imgT, ldT, static_cast<int>(rows), static_cast<int>(cols),
                                               angles, static_cast<int>(n), static_cast<int>(n_det),
                                               static_cast<int>(r0), static_cast<int>(c0), out);
  return last_error();
}

template <typename T>
const char* adjoint_cuda(const T* sino, const double* angles, int64_t K, int64_t n, int64_t n_det, int64_t r0,
                         int64_t c0, int64_t rows, int64_t cols, T* out, int64_t ld_out, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (rows == 0 || cols == 0) return nullptr;
  if ((rows + kAdjTile - 1) / kAdjTile > 65535) return "pnp radon_adjoint (CUDA): box too tall";
  const dim3 grid(static_cast<unsigned>((cols + kAdjTile - 1) / kAdjTile),
                  static_cast<unsigned>((rows + kAdjTile - 1) / kAdjTile));
  const dim3 block(32, 8);
  adj_kernel<T><<<grid, block, 0, st>>>(sino, angles, static_cast<int>(K), static_cast<int>(n),
                                        static_cast<int>(n_det), static_cast<int>(r0), static_cast<int>(c0),
                                        static_cast<int>(rows), static_cast<int>(cols), out, ld_out);
  return last_error();
}

template <typename T>
const char* power_start_cuda(T* out, int64_t rows, int64_t cols, int64_t n, int64_t r0, int64_t c0, uint64_t key,
                             void* stream) {
  if (rows <= 0 || cols <= 0) return nullptr;
  const int64_t blocks = std::min<int64_t>((rows * cols + 255) / 256, 65536);
  power_start_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, static_cast<cudaStream_t>(stream)>>>(out, rows, cols, n,
                                                                                                     r0, c0, key);
  return last_error();
}

template const char* power_start_cuda<float>(float*, int64_t, int64_t, int64_t, int64_t, int64_t, uint64_t, void*);
template const char* power_start_cuda<double>(double*, int64_t, int64_t, int64_t, int64_t, int64_t, uint64_t, void*);
template const char* forward_cuda<float>(const float*, int64_t, float*, int64_t, int64_t, int64_t, const double*,
                                         int64_t, int64_t, int64_t, int64_t, int64_t, float*, void*);
template const char* forward_cuda<double>(const double*, int64_t, double*, int64_t, int64_t, int64_t, const double*,
                                          int64_t, int64_t, int64_t, int64_t, int64_t, double*, void*);
template const char* adjoint_cuda<float>(const float*, const double*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                         int64_t, int64_t, float*, int64_t, void*);
template const char* adjoint_cuda<double>(const double*, const double*, int64_t, int64_t, int64_t, int64_t,
                                          int64_t, int64_t, int64_t, double*, int64_t, void*);

}  // namespace pnp::physics::detail
