// pnp's memory-bound NHWC kernels on tensors (nhwc_ops.hpp): the checks, then the raw launches.
#include "nhwc_ops.hpp"

#include "cuda_conv_checks.hpp"
#include "cuda/nhwc_ops_kernels.hpp"
#include "pnp/core.hpp"

#include <c10/cuda/CUDAStream.h>

#include <cmath>

namespace pnp::nn::native {

namespace {

bool vec_dtype(const at::Tensor& t) { return t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16; }
int64_t piece(const at::Tensor& t) { return 16 / static_cast<int64_t>(t.element_size()); }
void* stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

// phase_shuffle_applies for an input of n x h x w pixels of dtype dt on the GPU.
bool shuffle_ok(int64_t n, int64_t h, int64_t w, at::ScalarType dt, int64_t c, const at::Tensor* b,
                const at::Tensor* other, const at::Tensor& y) {
  if ((dt != at::kFloat && dt != at::kBFloat16) || !y.is_cuda() || y.scalar_type() != dt) return false;
  const int64_t v = piece(y), c2 = other ? other->size(1) : 0;
  if (c <= 0 || c % v || c2 % v || y.sizes().vec() != std::vector<int64_t>{n, c + c2, 2 * h, 2 * w}) return false;
  if (!nhwc(y) || !aligned16(y)) return false;
  if (other && (other->sizes().vec() != std::vector<int64_t>{n, c2, 2 * h, 2 * w} || !nhwc(*other) ||
                !aligned16(*other) || other->scalar_type() != dt || !other->is_cuda()))
    return false;
  return !b || (b->is_contiguous() && b->numel() == c && b->scalar_type() == dt && aligned16(*b));
}

}  // namespace

bool phase_shuffle_applies(const at::Tensor& x, int64_t c, const at::Tensor* b, const at::Tensor* other,
                           const at::Tensor& y) {
  return x.is_cuda() && x.dim() == 4 && shuffle_ok(x.size(0), x.size(2), x.size(3), x.scalar_type(), c, b, other, y);
}

void phase_shuffle(const at::Tensor& p, const at::Tensor* b, bool relu, const at::Tensor* other, bool other_first,
                   at::Tensor& y) {
  if (p.dim() != 4 || p.size(1) % 4 || p.size(2) < 2 || p.size(3) < 2 || !p.is_cuda() || !nhwc(p) || !aligned16(p))
    throw Error("phase_shuffle: the phases must be a channels-last, aligned [n, 4c, h + 1, w + 1] CUDA tensor");
  const int64_t c = p.size(1) / 4;
  if (!shuffle_ok(p.size(0), p.size(2) - 1, p.size(3) - 1, p.scalar_type(), c, b, other, y))
    throw Error("phase_shuffle: no kernel for these tensors");
  kernels::PhaseShuffleArgs a;
  a.p = p.data_ptr(), a.b = b ? b->data_ptr() : nullptr, a.y = y.data_ptr();
  a.other = other ? other->data_ptr() : nullptr;
  a.n = static_cast<int>(p.size(0)), a.h = static_cast<int>(p.size(2) - 1), a.w = static_cast<int>(p.size(3) - 1);
  a.c = static_cast<int>(c), a.c2 = other ? static_cast<int>(other->size(1)) : 0;
  a.off = other && other_first ? a.c2 : 0;
  a.relu = relu, a.bf16 = p.scalar_type() == at::kBFloat16;
  if (!kernels::launch_phase_shuffle(a, stream())) throw Error("phase_shuffle: the kernel launch failed");
}

bool max_pool2_applies(const at::Tensor& x, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                       const std::vector<int64_t>& padding) {
  const std::vector<int64_t> two{2, 2}, zero{0, 0};
  return x.is_cuda() && vec_dtype(x) && nhwc(x) && aligned16(x) && kernel == two && stride == two && padding == zero &&
         x.size(1) % piece(x) == 0 && x.size(2) >= 2 && x.size(3) >= 2;
}

at::Tensor max_pool2(const at::Tensor& x) {
  if (!max_pool2_applies(x, {2, 2}, {2, 2}, {0, 0})) throw Error("max_pool2: no kernel for this tensor");
  at::Tensor y = at::empty({x.size(0), x.size(1), x.size(2) / 2, x.size(3) / 2},
                           x.options().memory_format(at::MemoryFormat::ChannelsLast));
  kernels::MaxPool2Args a;
  a.x = x.data_ptr(), a.y = y.data_ptr();
  a.n = static_cast<int>(x.size(0)), a.h = static_cast<int>(x.size(2)), a.w = static_cast<int>(x.size(3));
  a.c = static_cast<int>(x.size(1)), a.bf16 = x.scalar_type() == at::kBFloat16;
  if (!kernels::launch_max_pool2(a, stream())) throw Error("max_pool2: the kernel launch failed");
  return y;
}

bool e4m3_quantize_nhwc_applies(const at::Tensor& x) {
  return x.is_cuda() && x.scalar_type() == at::kBFloat16 && nhwc(x) && aligned16(x) && x.size(1) % 8 == 0 &&
         x.numel() > 0;
}

at::Tensor e4m3_quantize_nhwc(const at::Tensor& x, double scale) {
  if (!e4m3_quantize_nhwc_applies(x)) throw Error("e4m3_quantize_nhwc: x must be an aligned, channels-last bf16 CUDA tensor");
  if (!(scale > 0 && std::isfinite(scale))) throw Error("e4m3_quantize_nhwc: the scale must be positive and finite");
  at::Tensor y = at::empty(x.sizes(), x.options().dtype(at::kFloat8_e4m3fn).memory_format(at::MemoryFormat::ChannelsLast));
  kernels::E4m3QuantizeArgs a;
  a.x = x.data_ptr(), a.y = y.data_ptr(), a.n = x.numel();
  a.inv_scale = static_cast<float>(1.0 / scale);
  if (!kernels::launch_e4m3_quantize(a, stream())) throw Error("e4m3_quantize_nhwc: the kernel launch failed");
  return y;
}

}  // namespace pnp::nn::native
