// The Hopper implicit-GEMM convolution on tensors (wgmma_conv.hpp): the checks, then the raw launch.
#include "wgmma_conv.hpp"

#include "cuda_conv_checks.hpp"
#include "pnp/core.hpp"
#include "wgmma_conv_kernels.hpp"

#include <ATen/Context.h>
#include <c10/cuda/CUDAStream.h>

#include <climits>

namespace pnp::nn::native {

bool wgmma_conv_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                        const std::vector<int64_t>& padding, int64_t groups, const at::Tensor* z) {
  if (!plain_nhwc_conv(x, w, stride, padding, groups, z)) return false;
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  if (!bf16 && !at::globalContext().allowTF32CuDNN()) return false;  // strict float32 asked for
  return kernels::wgmma_conv_supported(static_cast<int>(x.size(1)), static_cast<int>(w.size(0)), static_cast<int>(w.size(2)),
                                       static_cast<int>(w.size(3)), bf16);
}

bool wgmma_rows_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& padding) {
  if (x.dim() != 4 || w.dim() != 4 || padding.size() != 2) return false;
  const std::vector<int64_t> out = nhwc_conv_shape(x, w, padding);
  return kernels::wgmma_rows_supported(static_cast<int>(x.size(1)), static_cast<int>(w.size(0)), static_cast<int>(w.size(2)),
                                       static_cast<int>(w.size(3)), static_cast<int>(padding[0]), static_cast<int>(padding[1]),
                                       static_cast<int>(out[3]), x.scalar_type() == at::kBFloat16);
}

at::Tensor wgmma_conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, const at::Tensor* z, bool relu,
                      const std::vector<int64_t>& padding, const WgmmaVariant& v, at::Tensor* out) {
  if (!wgmma_conv_applies(x, w, {1, 1}, padding, 1, z)) throw Error("wgmma_conv: no kernel for this convolution");
  if (v.kernel == WgmmaKernel::rows && !wgmma_rows_applies(x, w, padding))
    throw Error("wgmma_conv: the rows kernel does not take this convolution");
  if (b && !bias_for(*b, w))
    throw Error("wgmma_conv: the bias must be a contiguous, aligned [C_out] tensor of the input's dtype");
  at::Tensor y = nhwc_conv_output_or(x, w, padding, out, "wgmma_conv");
  kernels::WgmmaConvArgs a;
  fill_conv_args(a, x, w, b, z, y, relu, padding);
  a.row_reuse = v.row_reuse, a.round_tf32 = v.round_tf32, a.kernel = v.kernel, a.two_consumers = v.two_consumers;
  if (!kernels::launch_wgmma_conv(a, c10::cuda::getCurrentCUDAStream().stream()))
    throw Error("wgmma_conv: the kernel launch failed");
  return y;
}

namespace {

// x and y of the transposed convolution to co channels with weights of dtype wdt
// (wgmma_stride2_transposed_applies)
bool stride2_fits(const at::Tensor& x, int64_t co, at::ScalarType wdt, const at::Tensor& y) {
  if (!x.is_cuda() || !nhwc(x) || !nhwc(y) || !aligned16(x) || !aligned16(y) || !y.is_cuda() || y.device() != x.device())
    return false;
  const auto dt = x.scalar_type();
  const bool bf16 = dt == at::kBFloat16;
  if ((dt != at::kFloat && !bf16) || wdt != dt || y.scalar_type() != dt) return false;
  if (!bf16 && !at::globalContext().allowTF32CuDNN()) return false;  // strict float32 asked for
  const int64_t n = x.size(0), ci = x.size(1), h = x.size(2), w = x.size(3);
  if (y.sizes().vec() != std::vector<int64_t>{n, co, 2 * h, 2 * w} || co % 64 || 4 * co > INT_MAX || ci > INT_MAX ||
      n > INT_MAX || h > INT_MAX || w > INT_MAX)
    return false;
  return kernels::wgmma_conv_supported(static_cast<int>(ci), static_cast<int>(4 * co), 1, 1, bf16);
}

}  // namespace

bool wgmma_stride2_transposed_applies(const at::Tensor& x, const at::Tensor& w, const at::Tensor& y) {
  return x.dim() == 4 && w.dim() == 4 && w.size(0) == x.size(1) && w.size(2) == 2 && w.size(3) == 2 &&
         stride2_fits(x, w.size(1), w.scalar_type(), y);
}

at::Tensor wgmma_stride2_transposed_weight(const at::Tensor& w) {
  if (w.dim() != 4 || w.size(2) != 2 || w.size(3) != 2)
    throw Error("wgmma_stride2_transposed_weight: a [C_in, C_out, 2, 2] weight expected");
  return w.permute({2, 3, 1, 0})
      .contiguous()
      .view({4 * w.size(1), w.size(0), 1, 1})
      .contiguous(at::MemoryFormat::ChannelsLast);
}

void wgmma_stride2_transposed(const at::Tensor& x, const at::Tensor& w1, at::Tensor& y) {
  if (x.dim() != 4 || w1.dim() != 4 || w1.size(0) % 4 || w1.size(1) != x.size(1) || w1.size(2) != 1 ||
      w1.size(3) != 1 || !nhwc(w1) || !aligned16(w1) || !w1.is_cuda() || !stride2_fits(x, w1.size(0) / 4, w1.scalar_type(), y))
    throw Error("wgmma_stride2_transposed: x, the weight and y must be aligned channels-last CUDA tensors of one dtype "
                "(float32 with TF32 allowed, or bf16), x [N, C_in, H, W], the weight [4 C_out, C_in, 1, 1] with C_out a "
                "multiple of 64, y [N, C_out, 2H, 2W], on compute capability 9.0");
  if (x.numel() == 0 || y.numel() == 0) return;
  kernels::WgmmaConvArgs a;
  fill_conv_args(a, x, w1, nullptr, nullptr, y, false, {0, 0});
  a.oh = a.h, a.ow = a.w_in;  // the 1x1 convolution's grid; y is twice it (up_co)
  a.up_co = static_cast<int>(w1.size(0) / 4);
  a.kernel = WgmmaKernel::tiles;
  if (!kernels::launch_wgmma_conv(a, c10::cuda::getCurrentCUDAStream().stream()))
    throw Error("wgmma_stride2_transposed: the kernel launch failed");
}

}  // namespace pnp::nn::native
