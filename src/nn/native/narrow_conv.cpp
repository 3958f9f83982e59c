// Narrow convolutions on tensors (narrow_conv.hpp): the checks, then the raw launches.
#include "narrow_conv.hpp"

#include "cuda_conv_checks.hpp"
#include "cuda/narrow_conv_kernels.hpp"
#include "pnp/core.hpp"

#include <c10/cuda/CUDAStream.h>

namespace pnp::nn::native {

bool narrow_conv_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& padding, int64_t groups, const at::Tensor* z, const at::Tensor* x2) {
  if (!plain_nhwc_conv(x, w, stride, padding, groups, z)) return false;
  if (x2 && (x2->sizes() != x.sizes() || x2->scalar_type() != x.scalar_type() || !nhwc(*x2) || !aligned16(*x2) ||
             x2->device() != x.device() || !few_out_conv_applies(x, w, stride, padding, groups, z)))
    return false;
  const int64_t k = w.size(2);
  if (w.size(3) != k) return false;
  const auto dt = x.scalar_type();
  return kernels::narrow_conv_supported(static_cast<int>(x.size(1)), static_cast<int>(w.size(0)), static_cast<int>(k),
                                        dt == at::kBFloat16);
}

namespace {

// The bias checked, the output made (or *out checked), the kernel launched on the current stream.
at::Tensor launch_checked(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, const at::Tensor* z, bool relu,
                          const std::vector<int64_t>& padding, at::Tensor* out, const char* who,
                          bool (*launch)(const kernels::NarrowConvArgs&, void*), const at::Tensor* x2 = nullptr,
                          int band = 0) {
  if (b && !bias_for(*b, w))
    throw Error(std::string(who) + ": the bias must be a contiguous, aligned [C_out] tensor of the input's dtype");
  at::Tensor y = nhwc_conv_output_or(x, w, padding, out, who);
  kernels::NarrowConvArgs a;
  fill_conv_args(a, x, w, b, z, y, relu, padding);
  a.x2 = x2 ? x2->data_ptr() : nullptr;
  a.band = band;
  if (!launch(a, c10::cuda::getCurrentCUDAStream().stream())) throw Error(std::string(who) + ": the kernel launch failed");
  return y;
}

}  // namespace

at::Tensor narrow_conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, const at::Tensor* z, bool relu,
                       const std::vector<int64_t>& padding, const at::Tensor* x2) {
  if (!narrow_conv_applies(x, w, {1, 1}, padding, 1, z, x2)) throw Error("narrow_conv: no kernel for this convolution");
  return launch_checked(x, w, b, z, relu, padding, nullptr, "narrow_conv", kernels::launch_narrow_conv, x2);
}

bool few_out_conv_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                          const std::vector<int64_t>& padding, int64_t groups, const at::Tensor* z) {
  return plain_nhwc_conv(x, w, stride, padding, groups, z) &&
         kernels::few_out_rows_supported(static_cast<int>(x.size(1)), static_cast<int>(w.size(0)),
                                         static_cast<int>(w.size(2)), static_cast<int>(w.size(3)),
                                         static_cast<int>(padding[0]), static_cast<int>(padding[1]));
}

at::Tensor few_out_conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, const at::Tensor* z, bool relu,
                        const std::vector<int64_t>& padding, at::Tensor* out) {
  if (!few_out_conv_applies(x, w, {1, 1}, padding, 1, z)) throw Error("few_out_conv: no kernel for this convolution");
  return launch_checked(x, w, b, z, relu, padding, out, "few_out_conv", kernels::launch_few_out_rows);
}

bool few_in_conv_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& padding, int64_t groups, const at::Tensor* z) {
  return plain_nhwc_conv(x, w, stride, padding, groups, z) &&
         kernels::few_in_conv_supported(static_cast<int>(x.size(1)), static_cast<int>(w.size(0)),
                                        static_cast<int>(w.size(2)), static_cast<int>(w.size(3)));
}

at::Tensor few_in_conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, const at::Tensor* z, bool relu,
                       const std::vector<int64_t>& padding, at::Tensor* out, int band) {
  if (!few_in_conv_applies(x, w, {1, 1}, padding, 1, z)) throw Error("few_in_conv: no kernel for this convolution");
  if (band < 0) throw Error("few_in_conv: the band of output rows a block takes must be positive (0: the kernel's choice)");
  return launch_checked(x, w, b, z, relu, padding, out, "few_in_conv", kernels::launch_few_in_conv, nullptr, band);
}

}  // namespace pnp::nn::native
