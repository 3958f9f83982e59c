// Narrow convolutions on tensors (narrow_conv.hpp): the checks, then the raw launch.
#include "narrow_conv.hpp"

#include "narrow_conv_kernels.hpp"
#include "pnp/core.hpp"

#include <c10/cuda/CUDAStream.h>

namespace pnp::nn::native {

namespace {
bool nhwc(const at::Tensor& t) { return t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast); }
bool aligned(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }
}  // namespace

bool narrow_conv_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& padding, int64_t groups, const at::Tensor* z) {
  if (!x.is_cuda() || x.dim() != 4 || w.dim() != 4 || groups != 1) return false;
  const auto dt = x.scalar_type();
  if ((dt != at::kFloat && dt != at::kBFloat16) || w.scalar_type() != dt) return false;
  const int64_t k = w.size(2);
  if (w.size(3) != k || w.size(1) != x.size(1) || stride != std::vector<int64_t>{1, 1} || padding.size() != 2) return false;
  for (int64_t p : padding)
    if (p < 0 || p >= k) return false;
  if (!nhwc(x) || !nhwc(w) || !aligned(x) || !aligned(w)) return false;
  if (x.size(2) + 2 * padding[0] < k || x.size(3) + 2 * padding[1] < k) return false;
  if (z) {
    const std::vector<int64_t> out{x.size(0), w.size(0), x.size(2) + 2 * padding[0] - k + 1, x.size(3) + 2 * padding[1] - k + 1};
    if (z->sizes().vec() != out || !nhwc(*z) || z->scalar_type() != dt || !aligned(*z)) return false;
  }
  return kernels::narrow_conv_supported(static_cast<int>(x.size(1)), static_cast<int>(w.size(0)), static_cast<int>(k),
                                        dt == at::kBFloat16);
}

at::Tensor narrow_conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor* b, const at::Tensor* z, bool relu,
                       const std::vector<int64_t>& padding) {
  if (!narrow_conv_applies(x, w, {1, 1}, padding, 1, z)) throw Error("narrow_conv: no kernel for this convolution");
  const int64_t k = w.size(2), oh = x.size(2) + 2 * padding[0] - k + 1, ow = x.size(3) + 2 * padding[1] - k + 1;
  at::Tensor y = at::empty({x.size(0), w.size(0), oh, ow}, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  if (b && (!b->is_contiguous() || b->numel() != w.size(0) || b->scalar_type() != x.scalar_type() || !aligned(*b)))
    throw Error("narrow_conv: the bias must be a contiguous, aligned [C_out] tensor of the input's dtype");
  kernels::NarrowConvArgs a;
  a.x = x.data_ptr(), a.w = w.data_ptr(), a.y = y.data_ptr();
  a.b = b ? b->data_ptr() : nullptr;
  a.z = z ? z->data_ptr() : nullptr;
  a.n = static_cast<int>(x.size(0)), a.h = static_cast<int>(x.size(2)), a.w_in = static_cast<int>(x.size(3));
  a.ci = static_cast<int>(x.size(1)), a.co = static_cast<int>(w.size(0));
  a.oh = static_cast<int>(oh), a.ow = static_cast<int>(ow), a.k = static_cast<int>(k);
  a.pad_h = static_cast<int>(padding[0]), a.pad_w = static_cast<int>(padding[1]);
  a.relu = relu, a.bf16 = x.scalar_type() == at::kBFloat16;
  if (!kernels::launch_narrow_conv(a, c10::cuda::getCurrentCUDAStream().stream()))
    throw Error("narrow_conv: the kernel launch failed");
  return y;
}

}  // namespace pnp::nn::native
