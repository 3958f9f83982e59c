// Image quality metrics against a ground truth: PSNR and SSIM, whole-image and distributed.
//
// SSIM is Wang et al. (2004) computed the standard way, as
// skimage.metrics.structural_similarity(x, ref, data_range=R, gaussian_weights=True, sigma=1.5,
// use_sample_covariance=False) does: Gaussian-weighted local means, variances and covariance
// (sigma 1.5, truncated at 3.5 sigma: an 11 x 11 window), reflect-mode borders (the edge pixel
// repeated), K1 = 0.01, K2 = 0.03, and the mean of the SSIM map over the pixels at least the
// window radius (5 px) away from the image border. Computed in float64.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "pnp/core.hpp"

namespace pnp::metrics {

struct SsimOptions {
  double sigma = 1.5;
  double truncate = 3.5;  // window radius = int(truncate * sigma + 0.5), scipy's rule
  double k1 = 0.01, k2 = 0.03;
  int64_t radius() const;
};

// The metrics work in strips of rows, each of about kStripElements values (float64), so that
// their device memory is bounded whatever the image's size: at most strip_workspace_bytes at
// once (kStripArrays float64 arrays of a strip: the SSIM's inputs, means, variances, map and
// their temporaries).
inline constexpr int64_t kStripElements = int64_t{1} << 20;
inline constexpr int64_t kStripArrays = 10;  // measured on the CPU: 8.8-8.9 arrays at 512² and 1024²
// Rows per strip for rows of `cols` values with `halo` extra rows and columns on every side
// (SSIM: its window radius; PSNR: none), and the most bytes the strips of `rows` such rows hold
// at once.
int64_t strip_rows(int64_t cols, int64_t halo);
double strip_workspace_bytes(int64_t rows, int64_t cols, int64_t halo);

// sum((x - ref)^2) in float64, strip by strip (x and ref of the same shape, any rank >= 1).
double squared_error_sum(const at::Tensor& x, const at::Tensor& ref);

// PSNR in dB of x against ref (same shape) with peak `data_range`: 10 log10(range^2 / MSE);
// +inf when they are equal.
double psnr(const at::Tensor& x, const at::Tensor& ref, double data_range);

// SSIM of two whole [H, W] images.
double ssim(const at::Tensor& x, const at::Tensor& ref, double data_range, const SsimOptions& o = {});

// The part of a distributed SSIM that one tile contributes: the sum of the SSIM map over the
// pixels of `own` that count (at least radius() from the border of the rows x cols image), and
// their number. `x` and `ref` hold the pixels of `box`, which must contain `own` grown by
// radius() (clipped to the image). The image's SSIM is the sum of `sum` over all tiles divided
// by the sum of `count`, equal to ssim() of the whole image to rounding.
struct SsimSum {
  double sum = 0;
  int64_t count = 0;
};
SsimSum ssim_sum(const at::Tensor& x, const at::Tensor& ref, const Box& box, const Box& own, int64_t rows,
                 int64_t cols, double data_range, const SsimOptions& o = {});

}  // namespace pnp::metrics
