// pnp's Hopper implicit-GEMM convolutions (wgmma_conv_kernels.hpp: the weights as the 64-row
// operand of wgmma, output pixels as the wide one) on tensors. They take the 3x3 and 1x1
// convolutions whose channels fill their tiles (C_out a multiple of 64, C_in of 32 float32 or 64
// bf16): DRUNet's and DnCNN's 64- to 512-channel layers; the persistent rows kernel the 3x3,
// padding 1 ones with few channels (C_in 32 or 64 float32, 64 or 128 bf16; C_out 64 or 128) on
// images whose width is a multiple of 128: the full-resolution layers. CUDA builds with the
// nvidia-cutlass headers only (PNP_HAVE_WGMMA_CONV), and a GPU of compute capability 9.0 to
// run them.
#pragma once

#include "cuda/wgmma_conv_kernels.hpp"

#include <ATen/ATen.h>

#include <vector>

namespace pnp::nn::native {

using kernels::WgmmaKernel;  // which kernel: any (rows where it applies), tiles, rows

// The kernel's variants (wgmma_conv_kernels.hpp), for tests: row_reuse (the tile kernel),
// round_tf32, which kernel, the rows kernel's float32 residual on two consumer warpgroups, and
// (wgmma_conv_fp8) the tile kernel's residual in the accumulators' start or in its epilogue.
struct WgmmaVariant {
  bool row_reuse = true, round_tf32 = true;
  WgmmaKernel kernel = WgmmaKernel::any;
  bool two_consumers = false;  // (WgmmaConvArgs::two_consumers)
  bool z_start = true;         // (WgmmaConvArgs::z_start)
};

// Whether wgmma_conv takes this convolution: CUDA on compute capability 9.0, 2D, float32 with
// TF32 allowed for cuDNN (at::globalContext().allowTF32CuDNN(): the kernel's products are TF32)
// or bf16, channels-last and 16-byte aligned x and w, stride 1, groups 1, padding below the
// kernel, kernel at most 9 x 9, the channel counts above. z (may be null): the residual,
// channels-last, aligned, of x's dtype and the output's shape.
bool wgmma_conv_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                        const std::vector<int64_t>& padding, int64_t groups, const at::Tensor* z = nullptr);

// Whether the rows kernel takes it (it also needs wgmma_conv_applies).
bool wgmma_rows_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& padding);

// Untimed (a convolution no cuDNN graph is timed against: NativeOptions::autotune off), pnp's
// Hopper kernels take the convolutions of at most this many input channels, and cuDNN's plain ops
// the wider ones. The timings that autotune records say so for DRUNet 4096² (the notes of
// docs/results/side_by_side_h100_*.h5, one H100, 2026-12-07): at 64 channels the rows kernel beat
// cuDNN's best on every layer (bf16: 1.563 against 2.706 ms, 2.211 against 3.210; float32: 3.660
// against 5.789, 4.638 against 7.281), and at 128 to 512 channels cuDNN's plain ops beat the
// Hopper kernels on all but two (bf16 conv + residual at 256: 2.098 against 3.921 ms; float32 conv
// + ReLU at 128: 3.312 against 4.705); the two, float32 conv + residual at 128 and 256 (5.388
// against 5.092 ms, 4.509 against 4.496), cost 0.3 and 0.01 ms a layer. With this rule DRUNet 1 ch
// 4096² untimed went from 152.3 to 130.8 ms in bf16 and from 261.8 to 256.2 in float32 (one H100,
// one call, docs/performance.md#native-kernels).
inline constexpr int64_t kUntimedHopperMaxChannels = 64;

// y = conv(x, w) (+ b) (+ z) (then ReLU) into a new channels-last tensor, or into *out (channels-
// last, aligned, of the output's shape and x's dtype), on the current CUDA stream; b and z may be
// null. Throws pnp::Error where wgmma_conv_applies is false (or the variant's kernel does not
// apply), b is not a contiguous, aligned [C_out] of x's dtype, or *out is not as above.
at::Tensor wgmma_conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, const at::Tensor* z, bool relu,
                      const std::vector<int64_t>& padding, const WgmmaVariant& v = {}, at::Tensor* out = nullptr);

// FP8 on the tile kernel: xq and wq float8_e4m3fn (channels-last, aligned; C_in a multiple of 64,
// C_out of 64, stride 1), float32 accumulation; y = conv(xq, wq) x descale[c] (+ b) (+ z) (then
// ReLU), where descale is float32 [C_out] (x's scale times each output channel's weight scale:
// pnp/nn/fp8.hpp) and b ([C_out]) and z (the output's shape, channels-last) are bf16. y is bf16,
// or with out_dtype float8_e4m3fn the result divided by out_scale (the next layer's activation
// scale), rounded to e4m3 with saturation at +-448, as e4m3_quantize does. Into a new
// channels-last tensor, or into *out (channels-last, aligned, of the output's shape and out_dtype).
// v: its z_start only (the kernel is the tile kernel). also_e4m3 (with a bf16 y): y's e4m3 copy
// at out_scale written as well, in the same epilogue, bit for bit e4m3_quantize_nhwc(y,
// out_scale), into *also_e4m3 (channels-last, aligned, y's shape; allocated there when undefined).
// Throws pnp::Error where wgmma_conv_fp8_applies is false or an argument is not as above.
bool wgmma_conv_fp8_applies(const at::Tensor& xq, const at::Tensor& wq, const std::vector<int64_t>& padding,
                            const at::Tensor* z = nullptr);
at::Tensor wgmma_conv_fp8(const at::Tensor& xq, const at::Tensor& wq, const at::Tensor& descale, const at::Tensor* b,
                          const at::Tensor* z, bool relu, const std::vector<int64_t>& padding,
                          at::ScalarType out_dtype = at::kBFloat16, double out_scale = 1.0, at::Tensor* out = nullptr,
                          const WgmmaVariant& v = {}, at::Tensor* also_e4m3 = nullptr);

}  // namespace pnp::nn::native
