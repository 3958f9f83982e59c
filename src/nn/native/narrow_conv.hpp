// Convolutions with few input or few output channels as pnp's own CUDA kernels: a network's
// first convolution (DRUNet's 2 -> 64, DnCNN's and UNet's 3 -> 64) and its last (64 -> 1 or 3,
// UNet's 1x1 one). cuDNN runs those as implicit GEMMs whose tiles are mostly padding (a 64 -> 1
// convolution in a tile 32 outputs wide: DRUNet 1 ch 4096², H200, 5.0 ms for 4.3 GB read,
// docs/measurements/2026-12-01), while both are memory-bound: the kernels are direct
// convolutions in float32 FMA that read and write each tensor about once
// (narrow_conv_kernels.cu). CUDA builds only.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace pnp::nn::native {

// Whether narrow_conv takes this convolution: CUDA, 2D, float32 or bf16, channels-last x and w,
// kernel 1x1 or 3x3, stride 1, groups 1, padding below the kernel, and C_out <= 4 (C_in a
// multiple of 4 in float32, 8 in bf16) or C_in <= 4 (C_out such a multiple), the weights in
// 48 KiB as float32.
// z (may be null): the residual, channels-last, aligned, of x's dtype and the output's shape.
bool narrow_conv_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& padding, int64_t groups, const at::Tensor* z = nullptr);

// y = conv(x, w) (+ b) (+ z) (then ReLU) into a new channels-last tensor, on the current CUDA
// stream; b and z may be null. Throws pnp::Error where narrow_conv_applies is false, or b is not
// a contiguous, aligned [C_out] of x's dtype.
at::Tensor narrow_conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, const at::Tensor* z, bool relu,
                       const std::vector<int64_t>& padding);

}  // namespace pnp::nn::native
