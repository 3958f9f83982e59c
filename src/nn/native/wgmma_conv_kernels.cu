// pnp's Hopper implicit-GEMM convolution (wgmma_conv_kernels.hpp says what and why). Built for
// sm_90a only (wgmma): CuTe's wgmma and bulk-tensor-copy wrappers and CUTLASS's mbarriers, from
// the nvidia-cutlass package's headers.
//
// One CTA: 64 output channels x 256 output pixels, one warpgroup of 4 warps multiplying and one
// warp loading; two CTAs per multiprocessor, so that one's epilogue overlaps the other's
// products. The reduction runs over (kernel row r, channel block c, kernel column s), 128 bytes
// of channels at a time (the 128-byte swizzle's width: 32 float32 or 64 bf16):
//   - the weights of one (r, s, c) are one 64 x 128-byte tile (A, 4 stages);
//   - the pixels of one (r, c) are 256 + K_w - 1 input pixels of one image row (B, 2 stages),
//     read once and used K_w times: tap s is the same tile from shared-memory row s on. Where a
//     tile spans several image rows (images narrower than 256), one B load per (r, s, c).
// The copy engine fills out-of-image coordinates with zeros, which is the convolution's padding.
#include "wgmma_conv_kernels.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <utility>

#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>

namespace pnp::nn::native::kernels {

namespace {

constexpr int kPx = 256;                       // output pixels per tile: wgmma N
constexpr int kCo = 64;                        // output channels per tile: wgmma M
constexpr int kRow = 128;                      // bytes of one shared-memory row (one pixel or channel)
constexpr int kAStages = 4, kBStages = 2;
constexpr int kMaxK = 9;                       // kernel width bound: 256 + 8 rows of B
constexpr int kBRows = kPx + kMaxK - 1;        // 264: a multiple of 8 rows keeps each stage 1024-aligned
constexpr int kABytes = kCo * kRow;            // 8 KiB
constexpr int kBBytes = kBRows * kRow;         // 33 KiB
constexpr int kThreads = 160;                  // a warpgroup + the loading warp
constexpr int kSmem = kAStages * kABytes + kBStages * kBBytes + 2 * (kAStages + kBStages) * 8 + 1024;

struct Params {
  const void* b;
  const void* z;
  void* y;
  int oh, ow, co, ci, kw, pad_h, pad_w;
  int bw_log2, bh, tiles_w, tiles_h, co_blocks, cblocks, kh;
  int row_reuse, relu;
};

template <class T>
struct Gmma;
template <>
struct Gmma<float> {  // TF32 products of float32 operands
  using Op = cute::SM90::GMMA::MMA_64x256x8_F32TF32TF32_SS_TN<>;
  static CUtensorMapDataType type(bool round) { return round ? CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32; }
};
template <>
struct Gmma<__nv_bfloat16> {
  using Op = cute::SM90::GMMA::MMA_64x256x16_F32BF16BF16_SS<cute::SM90::GMMA::Major::K, cute::SM90::GMMA::Major::K>;
  static CUtensorMapDataType type(bool) { return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; }
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)  // (the kernel body's helpers: sm_90a device code only)
__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <class Op, size_t... I>
__device__ __forceinline__ void gmma(uint64_t a, uint64_t b, float (&d)[128], cute::SM90::GMMA::ScaleOut s,
                                     std::index_sequence<I...>) {
  Op::fma(a, b, d[I]..., s);
}

// A K-major operand in 128-byte-swizzled rows, 8-row groups 1024 bytes apart. The hardware
// takes the swizzle phase from the address itself, so an operand may start at any row (the
// kernel-column shifts): the descriptor's base-offset field stays 0 (set to the row phase, the
// results were wrong: H200, docs/measurements/2026-12-02e).
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  cute::GmmaDescriptor d;
  d.bitfield.start_address_ = static_cast<uint16_t>(addr >> 4);
  d.bitfield.leading_byte_offset_ = 1;  // unused with swizzling
  d.bitfield.stride_byte_offset_ = 1024 >> 4;
  d.bitfield.base_offset_ = 0;
  d.bitfield.layout_type_ = static_cast<uint8_t>(cute::SM90::GMMA::LayoutType::B128);
  return d.desc_;
}

#endif

template <class T>
__global__ void __launch_bounds__(kThreads, 2)
    wgmma_conv_kernel(const __grid_constant__ CUtensorMap tma_w, const __grid_constant__ CUtensorMap tma_x,
                      const __grid_constant__ CUtensorMap tma_tail, const Params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  constexpr int kBk = kRow / static_cast<int>(sizeof(T));  // channels per reduction block
  constexpr int kSteps = 4;                                 // wgmma K steps of 32 bytes per block
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* s_a = smem;
  uint8_t* s_b = smem + kAStages * kABytes;
  uint64_t* full_a = reinterpret_cast<uint64_t*>(s_b + kBStages * kBBytes);
  uint64_t* empty_a = full_a + kAStages;
  uint64_t* full_b = empty_a + kAStages;
  uint64_t* empty_b = full_b + kBStages;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    for (int i = 0; i < kAStages; ++i) {
      Barrier::init(&full_a[i], 1);
      Barrier::init(&empty_a[i], 128);
    }
    for (int i = 0; i < kBStages; ++i) {
      Barrier::init(&full_b[i], 1);
      Barrier::init(&empty_b[i], 128);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  int bid = static_cast<int>(blockIdx.x);
  const int co0 = (bid % p.co_blocks) * kCo;
  bid /= p.co_blocks;
  const int ow0 = (bid % p.tiles_w) << p.bw_log2;
  bid /= p.tiles_w;
  const int oh0 = (bid % p.tiles_h) * p.bh;
  const int img = bid / p.tiles_h;
  const int shifts = p.row_reuse ? p.kw : 1;
  const int nb = p.row_reuse ? p.kh * p.cblocks : p.kh * p.kw * p.cblocks;

  if (tid >= 128) {  // the loading warp: one thread issues every copy
    if (tid == 128) {
      const uint64_t keep = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_LAST);    // weights: every tile's
      const uint64_t normal = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL);
      const uint32_t b_bytes = kPx * kRow + (p.row_reuse ? (p.kw - 1) * kRow : 0);
      int ia = 0;
      for (int ib = 0; ib < nb; ++ib) {
        const int c = ib % p.cblocks;
        const int r = p.row_reuse ? ib / p.cblocks : ib / p.cblocks / p.kw;
        const int s0 = p.row_reuse ? 0 : (ib / p.cblocks) % p.kw;
        const int sb = ib % kBStages;
        Barrier::wait(&empty_b[sb], ((ib / kBStages) & 1) ^ 1);
        Barrier::arrive_and_expect_tx(&full_b[sb], b_bytes);
        uint8_t* dst = s_b + sb * kBBytes;
        cute::SM90_TMA_LOAD_4D::copy(&tma_x, &full_b[sb], normal, dst, c * kBk, ow0 + s0 - p.pad_w, oh0 + r - p.pad_h, img);
        if (p.row_reuse)
          cute::SM90_TMA_LOAD_4D::copy(&tma_tail, &full_b[sb], normal, dst + kPx * kRow, c * kBk, ow0 + kPx - p.pad_w,
                                       oh0 + r - p.pad_h, img);
        for (int j = 0; j < shifts; ++j, ++ia) {
          const int s = p.row_reuse ? j : s0;
          const int sa = ia % kAStages;
          Barrier::wait(&empty_a[sa], ((ia / kAStages) & 1) ^ 1);
          Barrier::arrive_and_expect_tx(&full_a[sa], kABytes);
          cute::SM90_TMA_LOAD_2D::copy(&tma_w, &full_a[sa], keep, s_a + sa * kABytes, (r * p.kw + s) * p.ci + c * kBk, co0);
        }
      }
    }
    return;
  }

  // the warpgroup: 64 x 256 float32 accumulators, 128 per thread
  using Op = typename Gmma<T>::Op;
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;
  const auto seq = std::make_index_sequence<128>{};
  int ia = 0;
  for (int ib = 0; ib < nb; ++ib) {
    const int sb = ib % kBStages;
    Barrier::wait(&full_b[sb], (ib / kBStages) & 1);
    const uint32_t b_base = cute::cast_smem_ptr_to_uint(s_b + sb * kBBytes);
    for (int j = 0; j < shifts; ++j, ++ia) {
      const int sa = ia % kAStages;
      Barrier::wait(&full_a[sa], (ia / kAStages) & 1);
      const uint64_t da = smem_desc(cute::cast_smem_ptr_to_uint(s_a + sa * kABytes));
      const uint64_t db = smem_desc(b_base + static_cast<uint32_t>(j * kRow));
#pragma unroll
      for (int i = 0; i < 128; ++i) cute::warpgroup_fence_operand(acc[i]);
      cute::warpgroup_arrive();
#pragma unroll
      for (int k = 0; k < kSteps; ++k)  // 32 bytes along K: +2 in the descriptor's address field
        gmma<Op>(da + 2 * k, db + 2 * k, acc,
                 (ia == 0 && k == 0) ? cute::SM90::GMMA::ScaleOut::Zero : cute::SM90::GMMA::ScaleOut::One, seq);
      cute::warpgroup_commit_batch();
      cute::warpgroup_wait<1>();  // the previous block's products are done: its stages are free
#pragma unroll
      for (int i = 0; i < 128; ++i) cute::warpgroup_fence_operand(acc[i]);
      if (ia > 0) {
        Barrier::arrive(&empty_a[(ia - 1) % kAStages]);
        if (j == 0) Barrier::arrive(&empty_b[(ib - 1) % kBStages]);
      }
    }
  }
  cute::warpgroup_wait<0>();
#pragma unroll
  for (int i = 0; i < 128; ++i) cute::warpgroup_fence_operand(acc[i]);

  // the epilogue: thread (warp w, lane l) holds channels 16w + l/4 (+ 8) of pixels 8j + 2(l%4) (+ 1)
  const int w = tid >> 5, l = tid & 31;
  const T* bias = static_cast<const T*>(p.b);
  const T* z = static_cast<const T*>(p.z);
  T* y = static_cast<T*>(p.y);
  int co[2];
  float bv[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    co[i] = co0 + 16 * w + (l >> 2) + 8 * i;
    bv[i] = bias ? to_f(bias[co[i]]) : 0.f;
  }
  const int bw_mask = (1 << p.bw_log2) - 1;
  const bool inside = oh0 + p.bh <= p.oh && ow0 + bw_mask + 1 <= p.ow;  // the whole tile in the image
  auto index = [&](int j, int e, int i, bool& ok) {
    const int q = 8 * j + 2 * (l & 3) + e;
    const int oh = oh0 + (q >> p.bw_log2), ow = ow0 + (q & bw_mask);
    ok = inside || (oh < p.oh && ow < p.ow);
    return ((static_cast<size_t>(img) * p.oh + oh) * p.ow + ow) * p.co + co[i];
  };
  // 16 pixels at a time: the chunk's 8 residual loads are issued before the first is used
  // (one after the other, each waiting on memory, they cost the 128-channel layers 75 %:
  // H200, docs/measurements/2026-12-02e)
#pragma unroll
  for (int jc = 0; jc < kPx / 16; ++jc) {
    float zv[8];
#pragma unroll
    for (int jj = 0; jj < 2; ++jj)
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          bool ok;
          const size_t idx = index(2 * jc + jj, e, i, ok);
          zv[4 * jj + 2 * i + e] = z && ok ? to_f(z[idx]) : 0.f;
        }
#pragma unroll
    for (int jj = 0; jj < 2; ++jj)
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          bool ok;
          const int j = 2 * jc + jj;
          const size_t idx = index(j, e, i, ok);
          float v = acc[4 * j + 2 * i + e] + bv[i] + zv[4 * jj + 2 * i + e];
          if (p.relu) v = fmaxf(v, 0.f);
          if (ok) y[idx] = from_f<T>(v);
        }
  }
#endif
}

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

bool encode(CUtensorMap* m, CUtensorMapDataType type, cuuint32_t rank, const void* addr, const cuuint64_t* dims,
            const cuuint64_t* strides, const cuuint32_t* box) {
  const cuuint32_t ones[5] = {1, 1, 1, 1, 1};
  auto fn = encoder();
  return fn && fn(m, type, rank, const_cast<void*>(addr), dims, strides, box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <class T>
bool launch(const WgmmaConvArgs& a, cudaStream_t stream) {
  constexpr int bk = kRow / static_cast<int>(sizeof(T));
  const cuuint64_t es = sizeof(T);
  int bw_log2 = 8;
  while (bw_log2 > 0 && (1 << (bw_log2 - 1)) >= a.ow) --bw_log2;  // the smallest power of two >= ow, at most 256
  const int bw = 1 << bw_log2, bh = kPx / bw;
  Params p{};
  p.b = a.b, p.z = a.z, p.y = a.y;
  p.oh = a.oh, p.ow = a.ow, p.co = a.co, p.ci = a.ci, p.kw = a.kw, p.kh = a.kh;
  p.pad_h = a.pad_h, p.pad_w = a.pad_w;
  p.bw_log2 = bw_log2, p.bh = bh;
  p.tiles_w = (a.ow + bw - 1) / bw, p.tiles_h = (a.oh + bh - 1) / bh;
  p.co_blocks = a.co / kCo, p.cblocks = a.ci / bk;
  p.row_reuse = a.row_reuse && bh == 1 && a.kw > 1;
  p.relu = a.relu;
  const long long grid = static_cast<long long>(p.co_blocks) * p.tiles_w * p.tiles_h * a.n;
  if (grid <= 0 || grid > INT_MAX) return false;

  CUtensorMap mw{}, mx{}, mt{};
  const cuuint64_t k_total = static_cast<cuuint64_t>(a.kh) * a.kw * a.ci;
  const cuuint64_t wd[2] = {k_total, static_cast<cuuint64_t>(a.co)}, ws[1] = {k_total * es};
  const cuuint32_t wb[2] = {static_cast<cuuint32_t>(bk), kCo};
  const cuuint64_t xd[4] = {static_cast<cuuint64_t>(a.ci), static_cast<cuuint64_t>(a.w_in), static_cast<cuuint64_t>(a.h),
                            static_cast<cuuint64_t>(a.n)};
  const cuuint64_t xs[3] = {a.ci * es, a.ci * es * a.w_in, a.ci * es * a.w_in * a.h};
  const cuuint32_t xb[4] = {static_cast<cuuint32_t>(bk), static_cast<cuuint32_t>(bw), static_cast<cuuint32_t>(bh), 1};
  const cuuint32_t tb[4] = {static_cast<cuuint32_t>(bk), static_cast<cuuint32_t>(a.kw > 1 ? a.kw - 1 : 1), 1, 1};
  const CUtensorMapDataType type = Gmma<T>::type(a.round_tf32);
  if (!encode(&mw, type, 2, a.w, wd, ws, wb) || !encode(&mx, type, 4, a.x, xd, xs, xb) || !encode(&mt, type, 4, a.x, xd, xs, tb))
    return false;
  static const bool attr =
      cudaFuncSetAttribute(wgmma_conv_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem) == cudaSuccess;
  if (!attr) return false;
  wgmma_conv_kernel<T><<<static_cast<unsigned>(grid), kThreads, kSmem, stream>>>(mw, mx, mt, p);
  return cudaGetLastError() == cudaSuccess;
}

}  // namespace

bool wgmma_conv_supported(int ci, int co, int kh, int kw, bool bf16) {
  const int bk = bf16 ? 64 : 32;
  if (ci <= 0 || ci % bk || co <= 0 || co % kCo || kh < 1 || kw < 1 || kh > kMaxK || kw > kMaxK) return false;
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return false;
  return major == 9 && minor == 0 && encoder() != nullptr;  // sm_90a code runs on 9.0 only
}

bool launch_wgmma_conv(const WgmmaConvArgs& a, void* stream) {
  if (!wgmma_conv_supported(a.ci, a.co, a.kh, a.kw, a.bf16)) return false;
  if (a.n <= 0 || a.oh <= 0 || a.ow <= 0 || a.oh != a.h + 2 * a.pad_h - a.kh + 1 || a.ow != a.w_in + 2 * a.pad_w - a.kw + 1)
    return false;
  const auto s = static_cast<cudaStream_t>(stream);
  return a.bf16 ? launch<__nv_bfloat16>(a, s) : launch<float>(a, s);
}

}  // namespace pnp::nn::native::kernels
