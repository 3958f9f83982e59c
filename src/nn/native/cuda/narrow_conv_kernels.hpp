// The raw launchers of the narrow convolutions (narrow_conv_kernels.cu; the tensor interface is
// narrow_conv.hpp). Plain types only, so this compiles without ATen in nvcc.
#pragma once

#include "conv_kernel_args.hpp"

namespace pnp::nn::native::kernels {

// The convolution of ConvArgs with a square kernel (kh == kw).
using NarrowConvArgs = ConvArgs;

// Whether a kernel exists: K 1 or 3, C_out = 1, C_in a multiple of 16 bytes of elements, the
// weights in 48 KiB of float32.
bool narrow_conv_supported(int ci, int co, int k, bool bf16);

// Launches it on the CUDA stream; false when there is none for these arguments or the
// launch failed.
bool launch_narrow_conv(const NarrowConvArgs& a, void* stream);

// Whether the few-output kernel down rows exists: C_in 64, C_out 1 to 4, 3x3, padding 1.
bool few_out_rows_supported(int ci, int co, int kh, int kw, int pad_h, int pad_w);

// Launches it on the CUDA stream; false as launch_narrow_conv.
bool launch_few_out_rows(const NarrowConvArgs& a, void* stream);

// Whether the few-input kernel exists: C_in 1 to 4, C_out a multiple of 64, a 3x3 kernel.
bool few_in_conv_supported(int ci, int co, int kh, int kw);

// Launches it on the CUDA stream; false as launch_narrow_conv (and for a.band < 0).
bool launch_few_in_conv(const NarrowConvArgs& a, void* stream);

// The output rows a block of the few-input kernel takes where ConvArgs::band is 0: 32, or 16,
// where the grid still fills at least 8 waves of the sms multiprocessors (2 blocks each), else
// 8. A block's first window rows and weights are loaded before any output, so longer bands
// spread that wait over more rows; short images keep enough blocks for every multiprocessor.
int few_in_band(int n, int oh, int ow, int co, int sms);

}  // namespace pnp::nn::native::kernels
