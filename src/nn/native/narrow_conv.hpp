// Convolutions with few channels on one side as pnp's own CUDA kernels (narrow_conv_kernels.cu),
// direct convolutions in float32 FMA. CUDA builds only.
//
// One output channel (a gray network's last: DRUNet's 64 -> 1 tail). cuDNN runs it as an
// implicit GEMM whose tile is mostly padding (1 output in a tile 64 wide), then converts NHWC to
// NCHW: DRUNet 1 ch 4096² on an H200, 6.47 + 0.96 ms for a 4.3 GB read, against 3.81 ms for
// narrow_conv's first kernel (docs/performance.md#native-kernels). The executor runs it wherever it
// applies. From 64 inputs with a 3x3 kernel (padding 1) it is few_out_conv's kernel down rows
// (1.42 ms there, docs/performance.md#native-kernels).
//
// Two to four outputs from 64 inputs (DnCNN's and UNet's 64 -> 3 tails): cuDNN computes them in
// a tile 64 outputs wide (DnCNN 3 ch 2048²: 1.34 ms plus a 0.04 ms add, for a 1.07 GB read).
// few_out_conv walks down rows with the weights in registers, reading every input byte once.
//
// Few input channels (a network's head: an image's 1 to 4 channels, with its noise map, to 64 or
// more): cuDNN's implicit GEMM pads the channels and reads like a deep layer, where the head is
// a write (DnCNN 3 ch 2048²'s head 0.58 ms for 1.07 GB, twice its floor). few_in_conv stages the
// window and the weights in shared memory once per 128 pixels of a band of 8 to 32 rows.
//
// The executor times few_out_conv and few_in_conv per layout against cuDNN's choice, like the
// Hopper kernels, and keeps the faster.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace pnp::nn::native {

// Whether narrow_conv takes this convolution: CUDA, 2D, float32 or bf16, channels-last x and w,
// kernel 1x1 or 3x3, stride 1, groups 1, padding below the kernel, C_out = 1 and C_in a multiple
// of 4 in float32 (8 in bf16), the weights in 48 KiB as float32.
// z (may be null): the residual, channels-last, aligned, of x's dtype and the output's shape.
// x2 (may be null): a second input the convolution reads summed with x (a folded add, plan.hpp:
// PlanStep::x2), of x's shape, dtype and layout, aligned; only where the kernel down rows runs
// (few_out_conv_applies), which sums the two in float32 as it loads them.
bool narrow_conv_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& padding, int64_t groups, const at::Tensor* z = nullptr,
                         const at::Tensor* x2 = nullptr);

// y = conv(x (+ x2), w) (+ b) (+ z) (then ReLU) into a new channels-last tensor, on the current
// CUDA stream; b, z and x2 may be null. Throws pnp::Error where narrow_conv_applies is false, or
// b is not a contiguous, aligned [C_out] of x's dtype.
at::Tensor narrow_conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, const at::Tensor* z, bool relu,
                       const std::vector<int64_t>& padding, const at::Tensor* x2 = nullptr);

// Whether few_out_conv takes this convolution: as narrow_conv_applies, but C_in 64, C_out 1 to 4,
// a 3x3 kernel with padding 1 (the kernel down rows, narrow_conv_kernels.cu; narrow_conv runs
// it too where it applies).
bool few_out_conv_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                          const std::vector<int64_t>& padding, int64_t groups, const at::Tensor* z = nullptr);

// y = conv(x, w) (+ b) (+ z) (then ReLU) as few_in_conv, where few_out_conv_applies.
at::Tensor few_out_conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, const at::Tensor* z, bool relu,
                        const std::vector<int64_t>& padding, at::Tensor* out = nullptr);

// Whether few_in_conv takes this convolution: CUDA, 2D, float32 or bf16, channels-last x and w,
// stride 1, groups 1, padding below the kernel, a 3x3 kernel, C_in 1 to 4 and C_out a multiple of
// 64; z (may be null) as for narrow_conv_applies.
bool few_in_conv_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& padding, int64_t groups, const at::Tensor* z = nullptr);

// y = conv(x, w) (+ b) (+ z) (then ReLU) on the current CUDA stream, into *out where given (a
// channels-last, aligned tensor of the output's shape and x's dtype, else pnp::Error) or a new
// channels-last tensor; returns y. Throws pnp::Error where few_in_conv_applies is false, or b is
// not a contiguous, aligned [C_out] of x's dtype, or band is negative. band: the output rows a
// block of the kernel takes (0: its own choice, narrow_conv_kernels.hpp's few_in_band; other
// values for the tests).
at::Tensor few_in_conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, const at::Tensor* z, bool relu,
                       const std::vector<int64_t>& padding, at::Tensor* out = nullptr, int band = 0);

}  // namespace pnp::nn::native
