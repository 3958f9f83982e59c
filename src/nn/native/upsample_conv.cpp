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

at::Tensor upsample_conv_phase_weight(const at::Tensor& w) {
  if (w.dim() != 4 || w.size(2) != 3 || w.size(3) != 3) throw Error("upsample_conv_phase_weight: a 2D 3x3 kernel expected");
  // per axis, phase a's tap j (input row p - 1 + j for output row 2(p - a) + a) = the sum of the
  // conv's taps marked in row (a, j): phase 0 reads rows i - 1, i, i; phase 1 rows i, i, i + 1
  const at::Tensor m =
      at::tensor({1., 0., 0., 0., 1., 1., 1., 1., 0., 0., 0., 1.}, at::TensorOptions().dtype(at::kDouble)).view({2, 2, 3});
  const at::Tensor t = w.to(at::kCPU, at::kDouble);
  const at::Tensor ph = at::einsum("ajr,bls,oirs->aboijl", {m, m, t});  // [a][b][C_out][C_in][j][l]
  return ph.reshape({4 * w.size(0), w.size(1), 2, 2}).contiguous().to(w.device(), w.scalar_type());
}

}  // namespace pnp::nn::native
