// A ×2 nearest upsample and its 3×3 convolution as one transposed convolution (upsample_conv.hpp).
#include "upsample_conv.hpp"

#include "pnp/core.hpp"

namespace pnp::nn::native {

at::Tensor upsample_conv_weight(const at::Tensor& w) {
  const int64_t d = w.dim() - 2;
  for (int64_t k = 0; k < d; ++k)
    if (w.size(2 + k) != 3) throw Error("upsample_conv_weight: a 3x3 kernel expected");
  // tap k of the transposed convolution = sum of the conv's taps marked in row k
  const at::Tensor m =
      at::tensor({0., 0., 1., 0., 1., 1., 1., 1., 0., 1., 0., 0.}, at::TensorOptions().dtype(at::kDouble)).view({4, 3});
  at::Tensor t = w.to(at::kCPU, at::kDouble);
  for (int64_t k = 0; k < d; ++k) t = at::tensordot(t, m, {2 + k}, {1}).movedim(-1, 2 + k);
  return t.transpose(0, 1).contiguous().to(w.device(), w.scalar_type());
}

}  // namespace pnp::nn::native
