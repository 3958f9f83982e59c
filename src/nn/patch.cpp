#include "pnp/nn/patch.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <functional>

namespace pnp::nn {

std::vector<PatchRange> patch_ranges(int64_t size, int64_t patch, int64_t overlap, int64_t alignment) {
  if (size < 1) throw InputError("patching: empty axis of size " + std::to_string(size));
  if (alignment < 1) alignment = 1;
  if (patch <= 0 || patch >= size) return {{0, size, 0, size}};
  if (overlap < 0) overlap = 0;
  const int64_t ov = (overlap + alignment - 1) / alignment * alignment;
  const int64_t core = (patch - 2 * ov) / alignment * alignment;
  if (core < alignment)
    throw InputError("patch size " + std::to_string(patch) + " is too small for an overlap of " +
                     std::to_string(overlap) + " (rounded to " + std::to_string(ov) + " for the denoiser's alignment " +
                     std::to_string(alignment) + "): it needs patch >= 2*overlap + " + std::to_string(alignment) +
                     " = " + std::to_string(2 * ov + alignment));
  std::vector<PatchRange> r;
  for (int64_t c0 = 0; c0 < size; c0 += core) {
    const int64_t c1 = std::min(c0 + core, size);
    r.push_back({std::max<int64_t>(0, c0 - ov), std::min(size, c1 + ov), c0, c1});
  }
  // Uniform extents: a range cut short by the border reaches further inwards, so every patch
  // has the same input extent (one compiled shape instead of up to three per axis). Only where
  // the widened start stays aligned; the extra context lies beyond the receptive radius of
  // the kept core and does not change it.
  const int64_t extent = core + 2 * ov;
  if (extent < size)
    for (auto& p : r) {
      const int64_t in1 = std::min(size, p.in0 + extent), in0 = in1 - extent;
      if (in0 >= 0 && in0 % alignment == 0) p.in0 = in0, p.in1 = in1;
    }
  return r;
}

at::Tensor denoise_patched(Executor& ex, const at::Tensor& x, double sigma, int64_t patch, int64_t overlap) {
  const int64_t nsp = std::max<int64_t>(x.dim() - 2, 0);
  return denoise_patched(ex, x, sigma, std::vector<int64_t>(static_cast<size_t>(nsp), std::max<int64_t>(patch, 0)), overlap);
}

at::Tensor denoise_patched(Executor& ex, const at::Tensor& x, double sigma, const std::vector<int64_t>& patch,
                           int64_t overlap) {
  if (x.dim() != 4 && x.dim() != 5)
    throw InputError("denoise_patched: input must be [B, C, H, W] or [B, C, D, H, W], got " +
                     shape_string(x.sizes().vec()));
  const int nsp = static_cast<int>(x.dim()) - 2;
  if (static_cast<int>(patch.size()) != nsp)
    throw InputError("denoise_patched: " + std::to_string(patch.size()) + " patch sizes for " + std::to_string(nsp) +
                     " spatial axes");
  if (std::all_of(patch.begin(), patch.end(), [](int64_t p) { return p <= 0; })) return ex.forward(x, sigma);
  if (overlap < 0) overlap = ex.receptive_radius();
  std::vector<std::vector<PatchRange>> axes;
  bool single = true;
  for (int d = 0; d < nsp; ++d) {
    axes.push_back(patch_ranges(x.size(2 + d), patch[static_cast<size_t>(d)], overlap, ex.alignment()));
    single = single && axes.back().size() == 1;
  }
  if (single) return ex.forward(x, sigma);

  at::NoGradGuard no_grad;
  at::Tensor out;
  std::vector<size_t> idx(nsp, 0);
  std::function<void(int)> walk = [&](int d) {
    if (d < nsp) {
      for (idx[d] = 0; idx[d] < axes[d].size(); ++idx[d]) walk(d + 1);
      return;
    }
    at::Tensor xin = x;
    for (int k = 0; k < nsp; ++k) {
      const auto& r = axes[k][idx[k]];
      xin = xin.narrow(2 + k, r.in0, r.in1 - r.in0);
    }
    at::Tensor y = ex.forward(xin.contiguous(), sigma);
    if (!out.defined()) {
      auto s = x.sizes().vec();
      s[1] = y.size(1);
      out = at::empty(s, y.options());
    }
    at::Tensor dst = out;
    for (int k = 0; k < nsp; ++k) {
      const auto& r = axes[k][idx[k]];
      y = y.narrow(2 + k, r.out0 - r.in0, r.out1 - r.out0);
      dst = dst.narrow(2 + k, r.out0, r.out1 - r.out0);
    }
    dst.copy_(y);
  };
  walk(0);
  return out;
}

std::vector<int64_t> network_shape(const std::vector<int64_t>& s, int dim, int channels) {
  const int r = static_cast<int>(s.size());
  std::vector<int64_t> n;
  if (r == dim) {
    if (channels != 1)
      throw InputError("input has no channel axis (shape " + nn::shape_string(s) + ") but --channels is " +
                       std::to_string(channels));
    n = {1, 1};
  } else if (r == dim + 1) {
    if (s[0] == channels) {
      n = {1};
    } else if (dim == 2 && channels == 1) {
      return {s[0], 1, s[1], s[2]};
    } else {
      throw InputError("input shape " + nn::shape_string(s) + " has " + std::to_string(s[0]) +
                       " leading entries; expected --channels " + std::to_string(channels));
    }
  } else if (r == dim + 2) {
    return s;
  } else {
    throw InputError("input shape " + nn::shape_string(s) + " does not fit a " + std::to_string(dim) +
                     "D denoiser (expected rank " + std::to_string(dim) + " to " + std::to_string(dim + 2) + ")");
  }
  n.insert(n.end(), s.begin(), s.end());
  return n;
}

}  // namespace pnp::nn
