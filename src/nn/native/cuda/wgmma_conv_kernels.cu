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
#include "wgmma_sm90.cuh"

#include <climits>

namespace pnp::nn::native::kernels {

namespace {

using namespace sm90;

constexpr int kAStages = 4, kBStages = 2;
constexpr int kThreads = 160;                  // a warpgroup + the loading warp
constexpr int kSmem = kAStages * kABytes + kBStages * kBBytes + 2 * (kAStages + kBStages) * 8 + 1024;

struct Params {
  TileOut out;
  int ci, kw, pad_h, pad_w;
  int tiles_w, tiles_h, co_blocks, cblocks, kh;
  int row_reuse;
};

// T: the operands' type; TO: the output's (e4m3 operands: bf16, e4m3, or both (Bf16AndE4m3),
// with a bf16 bias and residual; else T). Row: the bytes of a reduction block, 128, or 64 for e4m3 operands whose
// channels are not a multiple of 128 (DRUNet's 64-channel level: the 64-byte swizzle, two K steps).
// ZStart (e4m3 operands, a residual, one-row tiles): the accumulators start from bias + residual
// (tile_start). A kernel of its own: with tile_start behind a run-time flag the kernels without a
// residual took 5-45 % longer (H100, c12fb04: their spills grew), and with tile_start's loads and
// the zeros in two branches of one kernel ptxas serialised every wgmma (warning C7515).
template <class T, class TO, int Row = kRow, bool ZStart = false>
__global__ void __launch_bounds__(kThreads, 2)
    wgmma_conv_kernel(const __grid_constant__ CUtensorMap tma_w, const __grid_constant__ CUtensorMap tma_x,
                      const __grid_constant__ CUtensorMap tma_tail, const Params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  constexpr int kBk = Row / static_cast<int>(sizeof(T));  // channels per reduction block
  constexpr int kA = kCo * Row, kB = kBRows * Row;        // a stage of each operand
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* s_a = smem;
  uint8_t* s_b = smem + kAStages * kA;
  uint64_t* full_a = reinterpret_cast<uint64_t*>(s_b + kBStages * kB);
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
  const int ow0 = (bid % p.tiles_w) << p.out.bw_log2;
  bid /= p.tiles_w;
  const int oh0 = (bid % p.tiles_h) * p.out.bh;
  const int img = bid / p.tiles_h;
  const int shifts = p.row_reuse ? p.kw : 1;
  const int nb = p.row_reuse ? p.kh * p.cblocks : p.kh * p.kw * p.cblocks;

  if (tid >= 128) {  // the loading warp: one thread issues every copy
    if (tid == 128) {
      const uint64_t keep = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_LAST);    // weights: every tile's
      const uint64_t normal = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL);
      const uint32_t b_bytes = kPx * Row + (p.row_reuse ? (p.kw - 1) * Row : 0);
      int ia = 0;
      for (int ib = 0; ib < nb; ++ib) {
        const int c = ib % p.cblocks;
        const int r = p.row_reuse ? ib / p.cblocks : ib / p.cblocks / p.kw;
        const int s0 = p.row_reuse ? 0 : (ib / p.cblocks) % p.kw;
        const int sb = ib % kBStages;
        Barrier::wait(&empty_b[sb], ((ib / kBStages) & 1) ^ 1);
        Barrier::arrive_and_expect_tx(&full_b[sb], b_bytes);
        uint8_t* dst = s_b + sb * kB;
        cute::SM90_TMA_LOAD_4D::copy(&tma_x, &full_b[sb], normal, dst, c * kBk, ow0 + s0 - p.pad_w, oh0 + r - p.pad_h, img);
        if (p.row_reuse)
          cute::SM90_TMA_LOAD_4D::copy(&tma_tail, &full_b[sb], normal, dst + kPx * Row, c * kBk, ow0 + kPx - p.pad_w,
                                       oh0 + r - p.pad_h, img);
        for (int j = 0; j < shifts; ++j, ++ia) {
          const int s = p.row_reuse ? j : s0;
          const int sa = ia % kAStages;
          Barrier::wait(&empty_a[sa], ((ia / kAStages) & 1) ^ 1);
          Barrier::arrive_and_expect_tx(&full_a[sa], kA);
          cute::SM90_TMA_LOAD_2D::copy(&tma_w, &full_a[sa], keep, s_a + sa * kA, (r * p.kw + s) * p.ci + c * kBk, co0);
        }
      }
    }
    return;
  }

  // the warpgroup: 64 x 256 float32 accumulators, 128 per thread, from zero, or (ZStart) from
  // bias + residual (tile_start; FP8 only: in float32 its loads cost 184 bytes of spills a
  // thread, and the tile kernel's float32 and bf16 residual layers lose to the rows kernel and
  // cuDNN anyway)
  using TB = std::conditional_t<std::is_same_v<T, __nv_fp8_e4m3>, __nv_bfloat16, T>;
  static_assert(!ZStart || std::is_same_v<T, __nv_fp8_e4m3>, "tile_start: e4m3 operands only");
  float acc[128];
  if constexpr (ZStart) {
    tile_start<TB>(acc, p.out, tid, co0, oh0, ow0, img);
  } else {
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.f;
  }
  int ia = 0;
  for (int ib = 0; ib < nb; ++ib) {
    const int sb = ib % kBStages;
    Barrier::wait(&full_b[sb], (ib / kBStages) & 1);
    const uint32_t b_base = cute::cast_smem_ptr_to_uint(s_b + sb * kB);
    for (int j = 0; j < shifts; ++j, ++ia) {
      const int sa = ia % kAStages;
      Barrier::wait(&full_a[sa], (ia / kAStages) & 1);
      const uint64_t da = smem_desc<Row>(cute::cast_smem_ptr_to_uint(s_a + sa * kA));
      const uint64_t db = smem_desc<Row>(b_base + static_cast<uint32_t>(j * Row));
#pragma unroll
      for (int i = 0; i < 128; ++i) cute::warpgroup_fence_operand(acc[i]);
      cute::warpgroup_arrive();
      gmma_block<T, 128, Row / 32>(da, db, acc, ia == 0 && !ZStart);
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
  store_tile<TB, TO>(acc, p.out, tid, co0, oh0, ow0, img, ZStart);
#endif
}

template <class T, class TO = T, int Row = kRow, bool ZStart = false>
bool launch(const WgmmaConvArgs& a, cudaStream_t stream) {
  int bw_log2 = 8;
  while (bw_log2 > 0 && (1 << (bw_log2 - 1)) >= a.ow) --bw_log2;  // the smallest power of two >= ow, at most 256
  const int bw = 1 << bw_log2, bh = kPx / bw;
  Params p{};
  p.out = TileOut{a.b, a.z, a.y, a.oh, a.ow, a.co, bw_log2, bh, a.relu ? 1 : 0, a.descale, a.inv_out_scale, a.yq};
  p.ci = a.ci, p.kw = a.kw, p.kh = a.kh;
  p.pad_h = a.pad_h, p.pad_w = a.pad_w;
  p.tiles_w = (a.ow + bw - 1) / bw, p.tiles_h = (a.oh + bh - 1) / bh;
  p.co_blocks = a.co / kCo, p.cblocks = a.ci / (Row / static_cast<int>(sizeof(T)));
  p.row_reuse = a.row_reuse && bh == 1 && a.kw > 1;
  if (ZStart && (bh != 1 || !a.z)) return false;  // (tile_start: one-row tiles with a residual)
  const long long grid = static_cast<long long>(p.co_blocks) * p.tiles_w * p.tiles_h * a.n;
  if (grid <= 0 || grid > INT_MAX) return false;

  CUtensorMap mw{}, mx{}, mt{};
  if (!weight_map<T>(&mw, a.w, a.co, a.kh, a.kw, a.ci, a.round_tf32, Row) ||
      !input_map<T>(&mx, a.x, a.n, a.h, a.w_in, a.ci, bw, bh, a.round_tf32, Row) ||
      !input_map<T>(&mt, a.x, a.n, a.h, a.w_in, a.ci, a.kw > 1 ? a.kw - 1 : 1, 1, a.round_tf32, Row))
    return false;
  static const bool attr =
      cudaFuncSetAttribute(wgmma_conv_kernel<T, TO, Row, ZStart>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem) ==
      cudaSuccess;
  if (!attr) return false;
  wgmma_conv_kernel<T, TO, Row, ZStart><<<static_cast<unsigned>(grid), kThreads, kSmem, stream>>>(mw, mx, mt, p);
  return cudaGetLastError() == cudaSuccess;
}

}  // namespace

namespace {
// ci in blocks of bk channels (128 bytes)
bool supported(int ci, int co, int kh, int kw, int bk) {
  if (ci <= 0 || ci % bk || co <= 0 || co % kCo || kh < 1 || kw < 1 || kh > kMaxK || kw > kMaxK) return false;
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return false;
  return major == 9 && minor == 0 && encoder() != nullptr;  // sm_90a code runs on 9.0 only
}
}  // namespace

bool wgmma_conv_supported(int ci, int co, int kh, int kw, bool bf16) { return supported(ci, co, kh, kw, bf16 ? 64 : 32); }
bool wgmma_conv_fp8_supported(int ci, int co, int kh, int kw) { return supported(ci, co, kh, kw, 64); }

bool launch_wgmma_conv(const WgmmaConvArgs& a, void* stream) {
  if (a.fp8) {  // the tile kernel only
    if (a.kernel == WgmmaKernel::rows || !wgmma_conv_fp8_supported(a.ci, a.co, a.kh, a.kw) || a.n <= 0 || a.oh <= 0 ||
        a.ow <= 0 || a.oh != a.h + 2 * a.pad_h - a.kh + 1 || a.ow != a.w_in + 2 * a.pad_w - a.kw + 1)
      return false;
    const auto s = static_cast<cudaStream_t>(stream);
    using E = __nv_fp8_e4m3;
    using B = __nv_bfloat16;
    using D = Bf16AndE4m3;
    if (a.yq && a.fp8_out) return false;  // (the e4m3 copy is of a bf16 output)
    // the output: e4m3, bf16 with its e4m3 copy, or bf16
    auto out = [&](auto row, auto z_start) {
      constexpr int R = decltype(row)::value;
      constexpr bool Z = decltype(z_start)::value;
      return a.fp8_out ? launch<E, E, R, Z>(a, s) : a.yq ? launch<E, D, R, Z>(a, s) : launch<E, B, R, Z>(a, s);
    };
    using Zs = std::true_type;
    using NoZs = std::false_type;
    const bool zs = a.z && a.z_start && a.ow > kPx / 2;  // a residual, one-row tiles (bh = 1): tile_start
    if (a.ci % 128 == 0) return zs ? out(std::integral_constant<int, kRow>{}, Zs{}) : out(std::integral_constant<int, kRow>{}, NoZs{});
    return zs ? out(std::integral_constant<int, 64>{}, Zs{}) : out(std::integral_constant<int, 64>{}, NoZs{});  // 64-byte blocks
  }
  if (a.kernel == WgmmaKernel::rows ||
      (a.kernel == WgmmaKernel::any && wgmma_rows_supported(a.ci, a.co, a.kh, a.kw, a.pad_h, a.pad_w, a.ow, a.bf16)))
    return launch_wgmma_rows(a, stream);
  if (!wgmma_conv_supported(a.ci, a.co, a.kh, a.kw, a.bf16)) return false;
  if (a.n <= 0 || a.oh <= 0 || a.ow <= 0 || a.oh != a.h + 2 * a.pad_h - a.kh + 1 || a.ow != a.w_in + 2 * a.pad_w - a.kw + 1)
    return false;
  const auto s = static_cast<cudaStream_t>(stream);
  return a.bf16 ? launch<__nv_bfloat16>(a, s) : launch<float>(a, s);
}

}  // namespace pnp::nn::native::kernels
