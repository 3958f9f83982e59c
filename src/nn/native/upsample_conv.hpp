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

// The same pair as four ordinary convolutions, one per output parity (a, b) in 2D: output pixel
// (2i + a, 2j + b) is a 2x2 convolution of the input at rows i - 1 + a .. i + a and columns
// j - 1 + b .. j + b, i.e. with padding 1 - a before and a after the rows (1 - b, b for the
// columns). Its weight [C_out, C_in, 2, 2] from the transposed one t (upsample_conv_weight):
// taps 3 - a and 1 - a of t's rows, 3 - b and 1 - b of its columns. (The executor runs these as
// cuDNN graphs writing into the parity's strided view of the output: NativeOptions::
// upsample_parity_graphs.)
at::Tensor upsample_conv_parity_weight(const at::Tensor& t, int a, int b);

}  // namespace pnp::nn::native
