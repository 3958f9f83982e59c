#include "pnp/metrics.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace pnp::metrics {

int64_t SsimOptions::radius() const { return static_cast<int64_t>(truncate * sigma + 0.5); }

int64_t strip_rows(int64_t cols, int64_t halo) {
  const int64_t wide = std::max<int64_t>(cols + 2 * halo, 1);
  return std::max<int64_t>(1, kStripElements / wide - 2 * halo);
}

double strip_workspace_bytes(int64_t rows, int64_t cols, int64_t halo) {
  const int64_t strip = std::min(rows, strip_rows(cols, halo));
  return static_cast<double>(kStripArrays) * 8.0 * static_cast<double>(strip + 2 * halo) *
         static_cast<double>(cols + 2 * halo);
}

double squared_error_sum(const at::Tensor& x, const at::Tensor& ref) {
  if (x.sizes() != ref.sizes()) throw Error("squared error: x and ref differ in shape");
  if (x.numel() == 0) return 0;
  const int64_t last = x.dim() > 0 ? x.size(-1) : 1;
  const at::Tensor a = x.dim() == 2 ? x : x.reshape({-1, last});
  const at::Tensor b = ref.dim() == 2 ? ref : ref.reshape({-1, last});
  const int64_t rows = a.size(0), step = strip_rows(a.size(1), 0);
  at::Tensor total = at::zeros({}, a.options().dtype(at::kDouble));
  for (int64_t r = 0; r < rows; r += step) {
    const int64_t n = std::min(step, rows - r);
    total += (a.narrow(0, r, n).to(at::kDouble) - b.narrow(0, r, n).to(at::kDouble)).square().sum();
  }
  return total.item<double>();
}

double psnr(const at::Tensor& x, const at::Tensor& ref, double data_range) {
  const double mse = squared_error_sum(x, ref) / static_cast<double>(std::max<int64_t>(x.numel(), 1));
  return mse > 0 ? 10.0 * std::log10(data_range * data_range / mse) : std::numeric_limits<double>::infinity();
}

namespace {

// scipy.ndimage's 'reflect' (numpy's 'symmetric'): ... b a | a b c ... z | z y ...
int64_t reflect(int64_t i, int64_t n) {
  const int64_t period = 2 * n;
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - 1 - i;
}

// Indices into [0, len) of the box for the global coordinates [lo - r, hi + r), reflected at
// the image border [0, n).
at::Tensor window_index(int64_t lo, int64_t hi, int64_t r, int64_t n, int64_t box0, int64_t len, const char* axis) {
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(hi - lo + 2 * r));
  for (int64_t g = lo - r; g < hi + r; ++g) {
    const int64_t k = reflect(g, n) - box0;
    if (k < 0 || k >= len)
      throw Error(std::string("SSIM: the ") + axis + " extent of the box does not cover the " + std::to_string(r) +
                  " px window around the tile");
    idx.push_back(k);
  }
  return at::tensor(idx, at::kLong);
}

}  // namespace

namespace {

// The SSIM sum over one strip of own rows (own here is the strip).
SsimSum ssim_strip(const at::Tensor& x, const at::Tensor& ref, const Box& box, const Box& own, int64_t rows,
                   int64_t cols, double data_range, const SsimOptions& o) {
  const int64_t r = o.radius();
  const auto dev = x.device();
  const at::Tensor ri = window_index(own.r0, own.r1, r, rows, box.r0, box.rows(), "row").to(dev);
  const at::Tensor ci = window_index(own.c0, own.c1, r, cols, box.c0, box.cols(), "column").to(dev);
  auto padded = [&](const at::Tensor& t) {
    return t.index_select(0, ri).index_select(1, ci).to(at::kDouble);
  };
  at::Tensor p = padded(x), q = padded(ref);
  // The normalised 1D Gaussian of scipy.ndimage.gaussian_filter, applied along the rows, then
  // the columns, as a weighted sum of shifted views: two arrays of work, where a convolution
  // would unfold its input (2r + 1 copies on the CPU).
  std::vector<double> k(static_cast<size_t>(2 * r + 1));
  double ksum = 0;
  for (int64_t j = -r; j <= r; ++j) ksum += k[static_cast<size_t>(j + r)] = std::exp(-0.5 * double(j * j) / (o.sigma * o.sigma));
  for (double& v : k) v /= ksum;
  const int64_t R = p.size(0) - 2 * r, C = p.size(1) - 2 * r;
  auto filt = [&](const at::Tensor& t) {
    at::Tensor a = t.narrow(0, 0, R) * k[0];
    for (int64_t j = 1; j <= 2 * r; ++j) a.add_(t.narrow(0, j, R), k[static_cast<size_t>(j)]);
    at::Tensor b = a.narrow(1, 0, C) * k[0];
    for (int64_t j = 1; j <= 2 * r; ++j) b.add_(a.narrow(1, j, C), k[static_cast<size_t>(j)]);
    return b;
  };
  // In place where a value dies, so that a strip holds at most about ten arrays at once.
  at::Tensor mx = filt(p), my = filt(q);
  at::Tensor vx = filt(p * p).addcmul_(mx, mx, -1), vy = filt(q * q).addcmul_(my, my, -1);
  at::Tensor vxy = filt(p * q).addcmul_(mx, my, -1);
  p = q = at::Tensor();
  const double c1 = std::pow(o.k1 * data_range, 2), c2 = std::pow(o.k2 * data_range, 2);
  // s = (2 mx my + c1)(2 vxy + c2) / ((mx² + my² + c1)(vx + vy + c2))
  at::Tensor s = (mx * my).mul_(2).add_(c1).mul_(vxy.mul_(2).add_(c2));
  vxy = at::Tensor();
  mx.square_().addcmul_(my, my).add_(c1).mul_(vx.add_(vy).add_(c2));
  s.div_(mx);
  // Count only the pixels at least r from the image border (skimage crops the map by r).
  const int64_t a0 = std::max(own.r0, r), a1 = std::min(own.r1, rows - r);
  const int64_t b0 = std::max(own.c0, r), b1 = std::min(own.c1, cols - r);
  SsimSum out;
  if (a1 <= a0 || b1 <= b0) return out;
  out.sum = s.narrow(0, a0 - own.r0, a1 - a0).narrow(1, b0 - own.c0, b1 - b0).sum().item<double>();
  out.count = (a1 - a0) * (b1 - b0);
  return out;
}

}  // namespace

SsimSum ssim_sum(const at::Tensor& x, const at::Tensor& ref, const Box& box, const Box& own, int64_t rows,
                 int64_t cols, double data_range, const SsimOptions& o) {
  if (x.dim() != 2 || x.sizes() != ref.sizes() || x.size(0) != box.rows() || x.size(1) != box.cols())
    throw Error("SSIM: x and ref must both be [" + std::to_string(box.rows()) + ", " + std::to_string(box.cols()) + "]");
  // In strips of rows, so that the float64 work stays within strip_workspace_bytes whatever the
  // tile's size (a whole 16384² tile would need some 24 GB).
  const int64_t step = strip_rows(own.cols(), o.radius());
  SsimSum out;
  for (int64_t r0 = own.r0; r0 < own.r1; r0 += step) {
    const Box strip{r0, std::min(own.r1, r0 + step), own.c0, own.c1};
    const SsimSum part = ssim_strip(x, ref, box, strip, rows, cols, data_range, o);
    out.sum += part.sum, out.count += part.count;
  }
  return out;
}

double ssim(const at::Tensor& x, const at::Tensor& ref, double data_range, const SsimOptions& o) {
  if (x.dim() != 2) throw Error("SSIM: expected a [H, W] image");
  const Box all{0, x.size(0), 0, x.size(1)};
  const SsimSum s = ssim_sum(x, ref, all, all, x.size(0), x.size(1), data_range, o);
  return s.count ? s.sum / static_cast<double>(s.count) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace pnp::metrics
