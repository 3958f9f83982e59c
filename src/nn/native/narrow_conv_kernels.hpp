// The raw launcher of the narrow convolution (narrow_conv_kernels.cu; the tensor interface is
// narrow_conv.hpp). Plain types only, so this compiles without ATen in nvcc.
#pragma once

#include <cstdint>

namespace pnp::nn::native::kernels {

// y = conv(x, w) (+ b) (+ z) (then ReLU), 2D, stride 1, groups 1, zero padding; every tensor
// contiguous in NHWC (w: [C_out][K][K][C_in]), float32 or bf16 (all the same), 16-byte aligned.
// b: [C_out] or null; z: like y or null.
struct NarrowConvArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* b = nullptr;
  const void* z = nullptr;
  void* y = nullptr;
  int n = 0, h = 0, w_in = 0, ci = 0;  // input [n][h][w_in][ci]
  int co = 0, oh = 0, ow = 0;         // output [n][oh][ow][co]
  int k = 0, pad_h = 0, pad_w = 0;
  bool relu = false, bf16 = false;
};

// Whether a kernel exists: K 1 or 3, C_out = 1, C_in a multiple of 16 bytes of elements, the
// weights in 48 KiB of float32.
bool narrow_conv_supported(int ci, int co, int k, bool bf16);

// Launches it on the CUDA stream; false when there is none for these arguments or the
// launch failed.
bool launch_narrow_conv(const NarrowConvArgs& a, void* stream);

}  // namespace pnp::nn::native::kernels
