// What pnp's own CUDA convolution launchers (narrow_conv_kernels.hpp, wgmma_conv_kernels.hpp)
// take in common. Plain types only, so this compiles without ATen in nvcc.
#pragma once

namespace pnp::nn::native::kernels {

// y = conv(x, w) (+ b) (+ z) (then ReLU), 2D, stride 1, groups 1, zero padding; every tensor
// contiguous in NHWC (w: [C_out][K_h][K_w][C_in]), float32 or bf16 (all the same), 16-byte
// aligned. b: [C_out] or null; z: like y or null.
struct ConvArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* b = nullptr;
  const void* z = nullptr;
  const void* x2 = nullptr;  // (the kernel down rows only) a second input of x's shape: the conv reads x + x2
  void* y = nullptr;
  int n = 0, h = 0, w_in = 0, ci = 0;  // input [n][h][w_in][ci]
  int co = 0, oh = 0, ow = 0;         // output [n][oh][ow][co]
  int kh = 0, kw = 0, pad_h = 0, pad_w = 0;
  bool relu = false, bf16 = false;
  int band = 0;  // (the head kernel only) output rows a block; 0: few_in_band's choice
};

}  // namespace pnp::nn::native::kernels
