// The raw launcher of pnp's Hopper implicit-GEMM convolution (wgmma_conv_kernels.cu; the tensor
// interface is wgmma_conv.hpp). Plain types only, so this compiles without ATen in nvcc.
//
// The GEMM is laid out the other way round from cuDNN's: the weights are the 64-row operand and
// 256 output pixels the wide one (wgmma m64n256), so that each tensor-core instruction reads
// 2 KiB of weights and 8 KiB of pixels from shared memory for 64 x 256 outputs. A 64-channel
// layer in cuDNN's orientation reads as much shared memory as it computes (m64n64, the
// channels the narrow side), which is where its 3x3 convolutions stop, near 240 TFLOP/s on an
// H200 (docs/design.md, "Decisions"). The pixels come through the bulk tensor copy engine from
// the NHWC input with zero fill at the image's edge (the padding), the weights from the KRSC
// filter; the epilogue adds the bias and the residual and applies the ReLU before the one store.
#pragma once

#include "conv_kernel_args.hpp"

namespace pnp::nn::native::kernels {

// Which kernel: any (the persistent rows kernel where it applies, else the tile kernel),
// tiles, or rows (none where it does not apply).
enum class WgmmaKernel { any, tiles, rows };

// The convolution of ConvArgs; float32 runs with TF32 products.
struct WgmmaConvArgs : ConvArgs {
  // One input load per kernel row serves all K_w shifts (the shift as a shared-memory row
  // offset) where the tile is one row of 256 pixels; off: one load per tap. For tests.
  bool row_reuse = true;
  // float32: the copy engine rounds the operands to TF32 as it loads them (its TFLOAT32 type),
  // as cuDNN's TF32 convolutions do; off: the tensor cores truncate them. For tests.
  bool round_tf32 = true;
  WgmmaKernel kernel = WgmmaKernel::any;
  // The rows kernel in float32 with a residual on two consumer warpgroups, each thread loading
  // its 64 residual values from global memory in the epilogue (the float32 residual's first version),
  // instead of one consumer warpgroup on 128-pixel columns with the residual's row brought into
  // shared memory by the bulk copy engine (the default: DRUNet 1 ch 4096² fp32 236.2 against
  // 244.2-245.2 ms on one H200, docs/performance.md#native-kernels). For tests and A/B.
  bool two_consumers = false;
  // The tile kernel in FP8 with a residual, where its tile is one image row (outputs at least
  // 129 wide): the accumulators start from bias + residual, loaded before the first products
  // (sm90::tile_start), instead of the residual's loads in the epilogue after the last (off:
  // the latter, its first version, and always in float32 and bf16). For tests and A/B.
  bool z_start = true;
  // FP8: x and w e4m3 (the tile kernel, C_in a multiple of 64: blocks of 128 bytes, or of 64 with
  // the 64-byte swizzle where C_in is not a multiple of 128), float32 accumulation; the
  // products times descale[c] (float32 [C_out]: x's scale times output channel c's weight scale),
  // then a bf16 bias and residual, ReLU; y bf16, or (fp8_out) e4m3 of the result times
  // inv_out_scale, saturated at +-448.
  bool fp8 = false, fp8_out = false;
  const float* descale = nullptr;
  float inv_out_scale = 1.f;
  // FP8 with a bf16 y: also y's e4m3 copy here (y's bf16 value times inv_out_scale, saturated;
  // what e4m3_quantize makes of y, bit for bit), for a reader in FP8; null: none.
  void* yq = nullptr;
};

// Whether a kernel exists: C_in a multiple of 128 bytes of elements (32 float32, 64 bf16), C_out
// a multiple of 64, kernel at most 9 x 9, and a GPU of compute capability 9.0 to run it on.
bool wgmma_conv_supported(int ci, int co, int kh, int kw, bool bf16);
// The same for e4m3 operands: C_in a multiple of 64.
bool wgmma_conv_fp8_supported(int ci, int co, int kh, int kw);

// Launches a.kernel on the CUDA stream; false when there is none for these arguments or the
// launch failed.
bool launch_wgmma_conv(const WgmmaConvArgs& a, void* stream);

// The persistent kernel down columns of rows (wgmma_rows_kernels.cu): 3 x 3, padding 1, C_in one
// or two 128-byte blocks (32 or 64 float32, 64 or 128 bf16), C_out 64 or 128, an output width
// ow that is a multiple of 128. Each CTA keeps
// its 64 outputs' weights in shared memory and streams a run of input rows once, each row's
// products going to the three output rows it meets, where the tile kernel loads the weights
// for every 256 pixels and each input row three times (the L2 traffic that kept it
// latency-bound: docs/performance.md#native-kernels); and each warpgroup's stores overlap its own
// products. row_reuse does not apply.
bool wgmma_rows_supported(int ci, int co, int kh, int kw, int pad_h, int pad_w, int ow, bool bf16);
bool launch_wgmma_rows(const WgmmaConvArgs& a, void* stream);

}  // namespace pnp::nn::native::kernels
