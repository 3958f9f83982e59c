// pnp's Hopper implicit-GEMM convolution (wgmma_conv_kernels.hpp: the weights as the 64-row
// operand of wgmma, 256 output pixels as the wide one) on tensors. It takes the 3x3 and 1x1
// convolutions whose channels fill its tiles (C_out a multiple of 64, C_in of 32 float32 or 64
// bf16): DRUNet's and DnCNN's 64- to 512-channel layers. CUDA builds with the nvidia-cutlass
// headers only (PNP_HAVE_WGMMA_CONV), and a GPU of compute capability 9.0 to run it.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace pnp::nn::native {

// Whether wgmma_conv takes this convolution: CUDA on compute capability 9.0, 2D, float32 with
// TF32 allowed for cuDNN (at::globalContext().allowTF32CuDNN(): the kernel's products are TF32)
// or bf16, channels-last and 16-byte aligned x and w, stride 1, groups 1, padding below the
// kernel, kernel at most 9 x 9, the channel counts above. z (may be null): the residual,
// channels-last, aligned, of x's dtype and the output's shape.
bool wgmma_conv_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                        const std::vector<int64_t>& padding, int64_t groups, const at::Tensor* z = nullptr);

// y = conv(x, w) (+ b) (+ z) (then ReLU) into a new channels-last tensor, on the current CUDA
// stream; b and z may be null. Throws pnp::Error where wgmma_conv_applies is false, or b is not
// a contiguous, aligned [C_out] of x's dtype. row_reuse and round_tf32: the kernel's
// variants (wgmma_conv_kernels.hpp), for tests.
at::Tensor wgmma_conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, const at::Tensor* z, bool relu,
                      const std::vector<int64_t>& padding, bool row_reuse = true, bool round_tf32 = true);

}  // namespace pnp::nn::native
