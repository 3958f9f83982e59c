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

}  // namespace pnp::nn::native
