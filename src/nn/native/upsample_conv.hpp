// A ×2 nearest upsample followed by a 3×3 convolution (stride 1, padding 1) as one transposed
// convolution (kernel 4, stride 2, padding 1) on the upsample's input: the planner folds the
// pair (plan.hpp, PlanStep::from_upsample), the executor derives the weight here.
//
// Per axis, output 2i + a (a = 0, 1) reads upsampled rows 2i + a - 1 .. 2i + a + 1, which are
// input rows i - 1 + a and i + a: each output parity is a 2-tap convolution whose taps are sums
// of the 3×3 kernel's. Written as a transposed convolution (output o = 2i + k - 1 for input i
// and tap k), tap k = 0..3 is the sum of the conv's taps {2}, {1, 2}, {0, 1}, {0}. The zero
// padding of the upsampled image is the transposed convolution's missing rows at the border, so
// the two agree everywhere. Per input pixel 4^d taps against 4^d x 3^d multiply-adds for the
// upsampled pixels it makes (UNet 2D: 16 against 36), and no upsampled tensor is written or read.
#pragma once

#include <ATen/ATen.h>

namespace pnp::nn::native {

// w: [C_out, C_in, 3, ...] (d spatial axes of 3): the transposed convolution's weight
// [C_in, C_out, 4, ...], in w's dtype, computed in float64 (contiguous, on w's device).
at::Tensor upsample_conv_weight(const at::Tensor& w);

// The same pair in 2D as one convolution of its four output phases (the executor's CUDA path,
// finished by nhwc_ops.hpp's phase_shuffle): w [C_out, C_in, 3, 3] -> [4 C_out, C_in, 2, 2], in
// w's dtype, computed in float64. Convolved with the upsample's input at padding 1 (output (h +
// 1) x (w + 1)), channel (2a + b) C_out + k at pixel (m + a, n + b) is channel k of output pixel
// (2m + a, 2n + b), a, b in {0, 1}: each phase's two taps per axis are sums of the 3×3 kernel's
// (above). A forward convolution with 16 taps per input pixel and channel pair, like the
// transposed one, but as an implicit GEMM of K = 4 C_in and N = 4 C_out, where cuDNN's transposed
// convolution is a dgrad kernel (UNet 3 ch 2048²'s 128 -> 64 at 2048²: 2.84 ms, about 97 TFLOP/s
// of TF32, H200).
at::Tensor upsample_conv_phase_weight(const at::Tensor& w);

}  // namespace pnp::nn::native
