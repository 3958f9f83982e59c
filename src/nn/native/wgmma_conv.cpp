// The Hopper implicit-GEMM convolution on tensors (wgmma_conv.hpp): the checks, then the raw launch.
#include "wgmma_conv.hpp"

#include "cuda_conv_checks.hpp"
#include "pnp/core.hpp"
#include "cuda/wgmma_conv_kernels.hpp"

#include <ATen/Context.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>

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

bool wgmma_conv_fp8_applies(const at::Tensor& xq, const at::Tensor& wq, const std::vector<int64_t>& padding,
                            const at::Tensor* z) {
  if (!plain_nhwc_conv(xq, wq, {1, 1}, padding, 1, z, /*fp8=*/true)) return false;
  return kernels::wgmma_conv_fp8_supported(static_cast<int>(xq.size(1)), static_cast<int>(wq.size(0)),
                                           static_cast<int>(wq.size(2)), static_cast<int>(wq.size(3)));
}

at::Tensor wgmma_conv_fp8(const at::Tensor& xq, const at::Tensor& wq, const at::Tensor& descale, const at::Tensor* b,
                          const at::Tensor* z, bool relu, const std::vector<int64_t>& padding, at::ScalarType out_dtype,
                          double out_scale, at::Tensor* out, const WgmmaVariant& v, at::Tensor* also_e4m3) {
  if (!wgmma_conv_fp8_applies(xq, wq, padding, z)) throw Error("wgmma_conv_fp8: no kernel for this convolution");
  const int64_t co = wq.size(0);
  if (!descale.is_cuda() || descale.scalar_type() != at::kFloat || !descale.is_contiguous() || descale.numel() != co)
    throw Error("wgmma_conv_fp8: the descale must be a contiguous float32 [C_out] tensor on the GPU");
  if (b && (!b->is_contiguous() || b->numel() != co || b->scalar_type() != at::kBFloat16 || !aligned16(*b)))
    throw Error("wgmma_conv_fp8: the bias must be a contiguous, aligned bf16 [C_out] tensor");
  if (out_dtype != at::kBFloat16 && out_dtype != at::kFloat8_e4m3fn)
    throw Error("wgmma_conv_fp8: the output is bf16 or float8_e4m3fn");
  if ((out_dtype == at::kFloat8_e4m3fn || also_e4m3) && !(out_scale > 0 && std::isfinite(out_scale)))
    throw Error("wgmma_conv_fp8: an e4m3 output needs a positive, finite scale");
  if (also_e4m3 && out_dtype != at::kBFloat16) throw Error("wgmma_conv_fp8: the e4m3 copy is of a bf16 output");
  const auto shape = nhwc_conv_shape(xq, wq, padding);
  if (also_e4m3) {
    at::Tensor& q = *also_e4m3;
    if (!q.defined())
      q = at::empty(shape, xq.options().dtype(at::kFloat8_e4m3fn).memory_format(at::MemoryFormat::ChannelsLast));
    else if (q.sizes().vec() != shape || q.scalar_type() != at::kFloat8_e4m3fn || !nhwc(q) || !aligned16(q) || !q.is_cuda())
      throw Error("wgmma_conv_fp8: the e4m3 copy must be a channels-last, aligned float8_e4m3fn tensor of the output's shape");
  }
  at::Tensor y;
  if (out) {
    if (out->sizes().vec() != shape || out->scalar_type() != out_dtype || !nhwc(*out) || !aligned16(*out) || !out->is_cuda())
      throw Error("wgmma_conv_fp8: the output must be a channels-last, aligned tensor of the output's shape and dtype");
    y = *out;
  } else {
    y = at::empty(shape, xq.options().dtype(out_dtype).memory_format(at::MemoryFormat::ChannelsLast));
  }
  kernels::WgmmaConvArgs a;
  fill_conv_args(a, xq, wq, b, z, y, relu, padding);
  a.fp8 = true, a.fp8_out = out_dtype == at::kFloat8_e4m3fn, a.kernel = WgmmaKernel::tiles, a.z_start = v.z_start;
  a.descale = descale.data_ptr<float>();
  a.inv_out_scale = static_cast<float>(1.0 / out_scale);
  if (also_e4m3) a.yq = also_e4m3->data_ptr();
  if (!kernels::launch_wgmma_conv(a, c10::cuda::getCurrentCUDAStream().stream()))
    throw Error("wgmma_conv_fp8: the kernel launch failed");
  return y;
}

}  // namespace pnp::nn::native
