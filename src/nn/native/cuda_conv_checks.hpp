// The tensor checks shared by pnp's own CUDA convolutions (narrow_conv.cpp, wgmma_conv.cpp): the
// kernels read and write raw NHWC memory, 16-byte vectors or bulk copies.
#pragma once

#include <ATen/ATen.h>

#include "cuda/conv_kernel_args.hpp"
#include "pnp/core.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pnp::nn::native {

inline bool nhwc(const at::Tensor& t) { return t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast); }
inline bool aligned16(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

// A 2D, stride-1, groups-1 convolution of CUDA tensors x and w of one dtype (float32 or bf16;
// fp8: float8_e4m3fn), both channels-last and aligned, padding below the kernel; z (may be null) a
// residual of the output's shape, channels-last, aligned, of x's dtype (fp8: bf16). The caller
// checks its kernel's shapes.
inline bool plain_nhwc_conv(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                            const std::vector<int64_t>& padding, int64_t groups, const at::Tensor* z, bool fp8 = false) {
  if (!x.is_cuda() || x.dim() != 4 || w.dim() != 4 || groups != 1) return false;
  const auto dt = x.scalar_type();
  const bool dtype_ok = fp8 ? dt == at::kFloat8_e4m3fn : (dt == at::kFloat || dt == at::kBFloat16);
  if (!dtype_ok || w.scalar_type() != dt) return false;
  if (w.size(1) != x.size(1) || stride != std::vector<int64_t>{1, 1} || padding.size() != 2) return false;
  if (padding[0] < 0 || padding[0] >= w.size(2) || padding[1] < 0 || padding[1] >= w.size(3)) return false;
  if (!nhwc(x) || !nhwc(w) || !aligned16(x) || !aligned16(w)) return false;
  const int64_t oh = x.size(2) + 2 * padding[0] - w.size(2) + 1, ow = x.size(3) + 2 * padding[1] - w.size(3) + 1;
  if (oh < 1 || ow < 1) return false;
  if (z) {
    const std::vector<int64_t> out{x.size(0), w.size(0), oh, ow};
    if (z->sizes().vec() != out || !nhwc(*z) || z->scalar_type() != (fp8 ? at::kBFloat16 : dt) || !aligned16(*z)) return false;
  }
  return true;
}

// Whether b is a bias for w: contiguous, aligned, [C_out], of w's dtype.
inline bool bias_for(const at::Tensor& b, const at::Tensor& w) {
  return b.is_contiguous() && b.numel() == w.size(0) && b.scalar_type() == w.scalar_type() && aligned16(b);
}

// The output shape of plain_nhwc_conv's convolution.
inline std::vector<int64_t> nhwc_conv_shape(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& padding) {
  return {x.size(0), w.size(0), x.size(2) + 2 * padding[0] - w.size(2) + 1, x.size(3) + 2 * padding[1] - w.size(3) + 1};
}

// The output of plain_nhwc_conv's convolution, channels-last, uninitialised.
inline at::Tensor nhwc_conv_output(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& padding) {
  return at::empty(nhwc_conv_shape(x, w, padding), x.options().memory_format(at::MemoryFormat::ChannelsLast));
}

// The output of plain_nhwc_conv's convolution: *out where given, checked (channels-last,
// aligned, on the GPU, of the output's shape and x's dtype; else pnp::Error naming `who`), else
// a new tensor as nhwc_conv_output.
inline at::Tensor nhwc_conv_output_or(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& padding,
                                      at::Tensor* out, const char* who) {
  if (!out) return nhwc_conv_output(x, w, padding);
  if (out->sizes().vec() != nhwc_conv_shape(x, w, padding) || out->scalar_type() != x.scalar_type() || !nhwc(*out) ||
      !aligned16(*out) || !out->is_cuda())
    throw Error(std::string(who) + ": the output must be a channels-last, aligned tensor of the output's shape and dtype");
  return *out;
}

// The raw arguments of y = conv(x, w) (+ b) (+ z) (then ReLU), checked by the caller.
inline void fill_conv_args(kernels::ConvArgs& a, const at::Tensor& x, const at::Tensor& w, const at::Tensor* b,
                           const at::Tensor* z, at::Tensor& y, bool relu, const std::vector<int64_t>& padding) {
  a.x = x.data_ptr(), a.w = w.data_ptr(), a.y = y.data_ptr();
  a.b = b ? b->data_ptr() : nullptr;
  a.z = z ? z->data_ptr() : nullptr;
  a.n = static_cast<int>(x.size(0)), a.h = static_cast<int>(x.size(2)), a.w_in = static_cast<int>(x.size(3));
  a.ci = static_cast<int>(x.size(1)), a.co = static_cast<int>(w.size(0));
  a.oh = static_cast<int>(y.size(2)), a.ow = static_cast<int>(y.size(3));
  a.kh = static_cast<int>(w.size(2)), a.kw = static_cast<int>(w.size(3));
  a.pad_h = static_cast<int>(padding[0]), a.pad_w = static_cast<int>(padding[1]);
  a.relu = relu, a.bf16 = x.scalar_type() == at::kBFloat16;
}

}  // namespace pnp::nn::native
