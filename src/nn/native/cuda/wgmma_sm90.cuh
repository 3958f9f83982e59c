// What pnp's two Hopper convolution kernels share (wgmma_conv_kernels.cu: one 64 x 256 tile per
// CTA; wgmma_rows_kernels.cu: persistent CTAs down 256-pixel columns): the tile geometry, the
// wgmma operation per dtype, the shared-memory descriptors, the epilogue, and the tensor maps
// of the bulk copy engine. Included by those .cu files only (sm_90a device code; CuTe's wgmma
// and bulk-copy wrappers, CUTLASS's barriers, from the nvidia-cutlass package's headers).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

namespace pnp::nn::native::kernels::sm90 {

constexpr int kPx = 256;                       // output pixels per tile: wgmma N
constexpr int kCo = 64;                        // output channels per tile: wgmma M
constexpr int kRow = 128;                      // bytes of one shared-memory row (one pixel or channel)
constexpr int kMaxK = 9;                       // kernel width bound: 256 + 8 rows of B
constexpr int kBRows = kPx + kMaxK - 1;        // 264: a multiple of 8 rows keeps each stage 1024-aligned
constexpr int kABytes = kCo * kRow;            // 8 KiB: one (tap, channel block) of the weights
constexpr int kBBytes = kBRows * kRow;         // 33 KiB: one input row of 256 + K_w - 1 pixels
constexpr int kSteps = 4;                      // wgmma K steps of 32 bytes per 128-byte block

template <class T>
struct Gmma;
template <>
struct Gmma<float> {  // TF32 products of float32 operands
  using Op = cute::SM90::GMMA::MMA_64x256x8_F32TF32TF32_SS_TN<>;
  using Half = cute::SM90::GMMA::MMA_64x128x8_F32TF32TF32_SS_TN<>;
  static CUtensorMapDataType type(bool round) { return round ? CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32; }
};
template <>
struct Gmma<__nv_bfloat16> {
  using Op = cute::SM90::GMMA::MMA_64x256x16_F32BF16BF16_SS<cute::SM90::GMMA::Major::K, cute::SM90::GMMA::Major::K>;
  using Half = cute::SM90::GMMA::MMA_64x128x16_F32BF16BF16_SS<cute::SM90::GMMA::Major::K, cute::SM90::GMMA::Major::K>;
  static CUtensorMapDataType type(bool) { return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; }
};

template <>
struct Gmma<__nv_fp8_e4m3> {  // e4m3 products, float32 accumulation (the tile kernel only)
  using Op = cute::SM90::GMMA::MMA_64x256x32_F32E4M3E4M3_SS_TN<>;
  using Half = cute::SM90::GMMA::MMA_64x128x32_F32E4M3E4M3_SS_TN<>;
  static CUtensorMapDataType type(bool) { return CU_TENSOR_MAP_DATA_TYPE_UINT8; }
};

// The output tile one warpgroup's accumulators hold, and what the epilogue adds.
struct TileOut {
  const void* b;  // bias [C_out] or null
  const void* z;  // residual like y, or null
  void* y;
  int oh, ow, co;          // the output's size (NHWC)
  int bw_log2, bh;         // the tile's pixels: bh rows of 2^bw_log2
  int relu;
  // FP8 (the tile kernel): the products times descale[c] (float32 [C_out]) before the bias; an
  // e4m3 output is the result times inv_out_scale, rounded with saturation at +-448
  const float* descale = nullptr;
  float inv_out_scale = 1.f;
  // Bf16AndE4m3 outputs: the e4m3 copy of y (like y, one byte an element)
  void* yq = nullptr;
};

// The output type of a tile kernel that writes both: y in bf16, and yq, e4m3 of y's bf16 value
// times inv_out_scale (what e4m3_quantize_nhwc makes of y, bit for bit), so that a reader in FP8
// needs no quantising pass of its own.
struct Bf16AndE4m3 {};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)  // sm_90a device code only
__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __nv_fp8_e4m3 from_f<__nv_fp8_e4m3>(float v) {
  __nv_fp8_e4m3 r;
  r.__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
  return r;
}

// One wgmma into the accumulators d[0], d[1], ...
template <class Op, int N, size_t... I>
__device__ __forceinline__ void gmma(uint64_t a, uint64_t b, float (&d)[N], cute::SM90::GMMA::ScaleOut s,
                                     std::index_sequence<I...>) {
  Op::fma(a, b, d[I]..., s);
}

// A K-major operand in 128-byte-swizzled rows, 8-row groups 1024 bytes apart (Row = 64: the
// 64-byte swizzle, 8-row groups 512 bytes apart). The hardware takes the swizzle phase from the
// address itself, so an operand may start at any row (the kernel-column shifts): the
// descriptor's base-offset field stays 0 (set to the row phase, the results were wrong on an H200).
template <int Row = kRow>
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  static_assert(Row == 128 || Row == 64, "rows of 128 or 64 bytes");
  cute::GmmaDescriptor d;
  d.bitfield.start_address_ = static_cast<uint16_t>(addr >> 4);
  d.bitfield.leading_byte_offset_ = 1;  // unused with swizzling
  d.bitfield.stride_byte_offset_ = (8 * Row) >> 4;
  d.bitfield.base_offset_ = 0;
  d.bitfield.layout_type_ = static_cast<uint8_t>(Row == 128 ? cute::SM90::GMMA::LayoutType::B128
                                                            : cute::SM90::GMMA::LayoutType::B64);
  return d.desc_;
}

// One 128-byte channel block of the reduction: the four wgmma K steps of 32 bytes (+2 in the
// descriptors' address fields), accumulating unless `zero` (the first block of a tile); 64 x 256
// outputs (N = 128 accumulators a thread) or 64 x 128 (N = 64). Steps = 2: a 64-byte block.
template <class T, int N, int Steps = kSteps>
__device__ __forceinline__ void gmma_block(uint64_t da, uint64_t db, float (&acc)[N], bool zero) {
  using Op = std::conditional_t<N == 128, typename Gmma<T>::Op, typename Gmma<T>::Half>;
#pragma unroll
  for (int k = 0; k < Steps; ++k)
    gmma<Op>(da + 2 * k, db + 2 * k, acc,
             (zero && k == 0) ? cute::SM90::GMMA::ScaleOut::Zero : cute::SM90::GMMA::ScaleOut::One,
             std::make_index_sequence<N>{});
}

// f(jj, e, i) for a 16-pixel chunk's 8 values of a thread (pixel groups jj of 8, pixels e of 2,
// channels i of 2), in that order, unrolled.
template <class F>
__device__ __forceinline__ void for_chunk(F&& f) {
#pragma unroll
  for (int jj = 0; jj < 2; ++jj)
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int i = 0; i < 2; ++i) f(jj, e, i);
}

// tile_start's floor on an FP8 descale, which it divides by: pnp/nn/fp8.hpp's scales are
// positive, and a product of two below 1e-30 would only meet products too small to matter.
constexpr float kMinDescale = 1e-30f;

// tile_start: where the tile is one image row (bh = 1, images at least 129 wide), its 64 x 2N
// accumulators start from bias + residual (over descale in FP8: the epilogue multiplies the sums
// by it), every residual load of a thread in flight at once before the first products, which wait
// for them while the loading warp fills the pipeline; store_tile (`started`) then scales, applies
// the ReLU and stores (the tile kernel's ZStart instantiations). Otherwise the epilogue loads the
// residual after the last products, 16 pixels at a time: DRUNet 4096²'s FP8 conv + residual took
// 9.98 ms that way against 5.69 from tile_start at 64 channels, 5.28 against 3.21 at 128, 3.02
// against 1.99 at 256 and 1.90 against 1.38 at 512 (H100; docs/performance.md#native-kernels).
// Thread (warp w, lane l): acc[4j + 2i + e] is pixel 8j + 2(l%4) + e, channel co0 + 16w + l/4 +
// 8i, as in store_tile.
template <class TB, int N>
__device__ __forceinline__ void tile_start(float (&acc)[N], const TileOut& p, int wg_tid, int co0, int oh0, int ow0,
                                           int img) {
  const int w = wg_tid >> 5, l = wg_tid & 31;
  const int c = co0 + 16 * w + (l >> 2);
  const TB* bias = static_cast<const TB*>(p.b);
  float bv[2], inv[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    bv[i] = bias ? to_f(bias[c + 8 * i]) : 0.f;
    inv[i] = p.descale ? 1.f / fmaxf(p.descale[c + 8 * i], kMinDescale) : 1.f;
  }
  const TB* z = static_cast<const TB*>(p.z) + ((static_cast<size_t>(img) * p.oh + oh0) * p.ow + ow0 + 2 * (l & 3)) * p.co + c;
  const int n = p.ow - ow0 - 2 * (l & 3);  // this thread's pixels 0, 1, 8, 9, ... lie in the image below n
#pragma unroll
  for (int a = 0; a < N; ++a) {
    const int q = 8 * (a >> 2) + (a & 1), i = (a >> 1) & 1;
    acc[a] = ((q < n ? to_f(z[static_cast<size_t>(q) * p.co + 8 * i]) : 0.f) + bv[i]) * inv[i];
  }
}

// The epilogue of one warpgroup's 64 x 2N tile at (co0, oh0, ow0) of image img: (x descale),
// + bias, + residual, ReLU, one store; `started`: bias and residual are in the accumulators
// already (tile_start). Thread (warp w, lane l of the warpgroup) holds channels 16w + l/4 (+ 8)
// of pixels 8j + 2(l%4) (+ 1); pixels outside the output are not stored. TB: the bias's and the
// residual's type; TO: the output's (an e4m3 one scaled by inv_out_scale; Bf16AndE4m3: bf16 and
// its e4m3 copy).
template <class TB, class TO = TB, int N>
__device__ __forceinline__ void store_tile(const float (&acc)[N], const TileOut& p, int wg_tid, int co0, int oh0,
                                           int ow0, int img, bool started = false) {
  const int w = wg_tid >> 5, l = wg_tid & 31;
  const TB* bias = started ? nullptr : static_cast<const TB*>(p.b);
  const TB* z = started ? nullptr : static_cast<const TB*>(p.z);
  constexpr bool kDual = std::is_same_v<TO, Bf16AndE4m3>;
  using TY = std::conditional_t<kDual, __nv_bfloat16, TO>;
  TY* y = static_cast<TY*>(p.y);
  __nv_fp8_e4m3* yq = kDual ? static_cast<__nv_fp8_e4m3*>(p.yq) : nullptr;
  constexpr bool kFp8Out = std::is_same_v<TO, __nv_fp8_e4m3>;
  int co[2];
  float bv[2], ds[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    co[i] = co0 + 16 * w + (l >> 2) + 8 * i;
    bv[i] = bias ? to_f(bias[co[i]]) : 0.f;
    ds[i] = p.descale ? (started ? fmaxf(p.descale[co[i]], kMinDescale) : p.descale[co[i]]) : 1.f;
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
  // H200, docs/performance.md#native-kernels)
#pragma unroll
  for (int jc = 0; jc < N / 8; ++jc) {
    float zv[8];
    for_chunk([&](int jj, int e, int i) {
      bool ok;
      const size_t idx = index(2 * jc + jj, e, i, ok);
      zv[4 * jj + 2 * i + e] = z && ok ? to_f(z[idx]) : 0.f;
    });
    for_chunk([&](int jj, int e, int i) {
      bool ok;
      const int j = 2 * jc + jj;
      const size_t idx = index(j, e, i, ok);
      float v = fmaf(acc[4 * j + 2 * i + e], ds[i], bv[i]) + zv[4 * jj + 2 * i + e];
      if (p.relu) v = fmaxf(v, 0.f);
      if constexpr (kFp8Out) v *= p.inv_out_scale;
      if constexpr (kDual) {
        const __nv_bfloat16 yb = from_f<__nv_bfloat16>(v);
        if (ok) y[idx] = yb, yq[idx] = from_f<__nv_fp8_e4m3>(to_f(yb) * p.inv_out_scale);
      } else {
        if (ok) y[idx] = from_f<TO>(v);
      }
    });
  }
}

// One warpgroup's 64 x 2N tile of one output row (o, from pixel ow0) of image img, for an output
// of CO channels known at compile time (every access is the row's base plus a constant, so few
// registers are needed beside the accumulators: the persistent kernel holds three tiles' of
// them). Thread (warp w, lane l) holds channels 16w + l/4 (+ 8) of pixels 8j + 2(l%4) (+ 1):
// acc[4j + 2i + e] is pixel 8j + 2(l%4) + e, channel + 8i.
//
// row_start: the accumulators' start, bias + residual (`with_z`), before the row's first
// products: all of a thread's loads in flight at once, into the accumulators themselves, while
// the step's other products run. (The residual still costs DRUNet's 64-channel layers at 4096²
// 5.971 against 4.149 ms in fp32; as an epilogue with the next 16 pixels' loads in flight it
// was 5.967 ms, with 8 pixels' loads at a time 6.872 ms: H200. In bf16 it cost
// 4.154 against 1.909 ms; the rows kernel's bf16 epilogue now goes through shared memory and
// the bulk copy engine instead: 1.684 against 1.521 ms on one H200; docs/performance.md#native-kernels.)
//
// row_bias: thread (warp w, lane l)'s two bias values, channels c = co0 + 16w + l/4 and c + 8
// (0 without a bias); row_start's, and the rows kernel's shared-memory row_start's.
template <class T>
__device__ __forceinline__ void row_bias(const TileOut& p, int wg_tid, int co0, float& b0, float& b8) {
  const int c = co0 + 16 * (wg_tid >> 5) + ((wg_tid & 31) >> 2);
  const T* bias = static_cast<const T*>(p.b);
  b0 = bias ? to_f(bias[c]) : 0.f, b8 = bias ? to_f(bias[c + 8]) : 0.f;
}
template <class T, int CO, int N>
__device__ __forceinline__ void row_start(float (&acc)[N], const TileOut& p, int wg_tid, int co0, int o, int ow0,
                                          int img, bool with_z) {
  const int w = wg_tid >> 5, l = wg_tid & 31;
  const int c = co0 + 16 * w + (l >> 2);
  float b0, b8;
  row_bias<T>(p, wg_tid, co0, b0, b8);
  if (with_z && p.z) {
    const T* z = static_cast<const T*>(p.z) + ((static_cast<size_t>(img) * p.oh + o) * p.ow + ow0 + 2 * (l & 3)) * CO + c;
    const int n = p.ow - ow0 - 2 * (l & 3);  // this thread's pixels 0, 1, 8, 9, ... lie in the image below n
#pragma unroll
    for (int a = 0; a < N; ++a) {
      const int q = 8 * (a >> 2) + (a & 1), i = (a >> 1) & 1;
      acc[a] = (i ? b8 : b0) + (q < n ? to_f(z[q * CO + 8 * i]) : 0.f);
    }
  } else {
#pragma unroll
    for (int a = 0; a < N; ++a) acc[a] = (a >> 1) & 1 ? b8 : b0;
  }
}

// row_end: the row's store, ReLU'd if asked; pixels outside the output are not stored.
template <class T, int CO, int N>
__device__ __forceinline__ void row_end(const float (&acc)[N], const TileOut& p, int wg_tid, int co0, int o, int ow0,
                                        int img) {
  const int w = wg_tid >> 5, l = wg_tid & 31;
  const int c = co0 + 16 * w + (l >> 2);
  T* y = static_cast<T*>(p.y) + ((static_cast<size_t>(img) * p.oh + o) * p.ow + ow0 + 2 * (l & 3)) * CO + c;
  const int n = p.ow - ow0 - 2 * (l & 3);
  const bool relu = p.relu;
#pragma unroll
  for (int a = 0; a < N; ++a) {
    const int q = 8 * (a >> 2) + (a & 1), i = (a >> 1) & 1;
    if (q < n) y[q * CO + 8 * i] = from_f<T>(relu ? fmaxf(acc[a], 0.f) : acc[a]);
  }
}
#endif

// The driver's tensor-map encoder (null when the driver has none).
inline PFN_cuTensorMapEncodeTiled_v12000 encoder() {
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

// A tiled tensor map with the 128-byte swizzle (the wgmma operands' layout; row = 64: the
// 64-byte one); out-of-range coordinates read as zeros.
inline bool encode(CUtensorMap* m, CUtensorMapDataType type, cuuint32_t rank, const void* addr, const cuuint64_t* dims,
                   const cuuint64_t* strides, const cuuint32_t* box, int row = kRow) {
  const cuuint32_t ones[5] = {1, 1, 1, 1, 1};
  auto fn = encoder();
  return fn && fn(m, type, rank, const_cast<void*>(addr), dims, strides, box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  row == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The weights as a 2D map [C_out][K_h K_w C_in] with boxes of 64 outputs x 128 bytes, and the
// input as a 4D map [N][H][W][C_in] with boxes of 128 bytes of channels x bw pixels x bh rows
// (row = 64: boxes 64 bytes wide, 64-byte swizzle).
template <class T>
inline bool weight_map(CUtensorMap* m, const void* w, int co, int kh, int kw, int ci, bool round, int row = kRow) {
  constexpr cuuint64_t es = sizeof(T);
  const cuuint64_t k_total = static_cast<cuuint64_t>(kh) * kw * ci;
  const cuuint64_t d[2] = {k_total, static_cast<cuuint64_t>(co)}, s[1] = {k_total * es};
  const cuuint32_t b[2] = {static_cast<cuuint32_t>(row / es), kCo};
  return encode(m, Gmma<T>::type(round), 2, w, d, s, b, row);
}
template <class T>
inline bool input_map(CUtensorMap* m, const void* x, int n, int h, int w, int ci, int box_w, int box_h, bool round,
                      int row = kRow) {
  constexpr cuuint64_t es = sizeof(T);
  const cuuint64_t d[4] = {static_cast<cuuint64_t>(ci), static_cast<cuuint64_t>(w), static_cast<cuuint64_t>(h),
                           static_cast<cuuint64_t>(n)};
  const cuuint64_t s[3] = {ci * es, ci * es * w, ci * es * w * h};
  const cuuint32_t b[4] = {static_cast<cuuint32_t>(row / es), static_cast<cuuint32_t>(box_w), static_cast<cuuint32_t>(box_h), 1};
  return encode(m, Gmma<T>::type(round), 4, x, d, s, b, row);
}

}  // namespace pnp::nn::native::kernels::sm90
