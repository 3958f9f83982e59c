// SSIM and PSNR against a direct float64 loop (window sums with explicit reflection), and the
// distributed SSIM (per-tile sums) against the whole image. test/postprocess checks the
// solver's SSIM against scikit-image, the independent reference.
#include <ATen/ATen.h>
#include "pnp_test.hpp"

#include <cmath>
#include <vector>

#include "pnp/metrics.hpp"

using namespace pnp;

namespace {

// The SSIM definition written out: an 11 x 11 Gaussian window (separable weights w_i w_j),
// reflect borders, the map's mean over pixels >= 5 from the border.
double ssim_loop(const at::Tensor& xt, const at::Tensor& yt, double range) {
  const auto x = xt.to(at::kDouble).contiguous(), y = yt.to(at::kDouble).contiguous();
  const int64_t H = x.size(0), W = x.size(1), r = 5;
  const double* X = x.data_ptr<double>();
  const double* Y = y.data_ptr<double>();
  std::vector<double> w(2 * r + 1);
  double wsum = 0;
  for (int64_t i = -r; i <= r; ++i) wsum += w[i + r] = std::exp(-0.5 * double(i * i) / (1.5 * 1.5));
  for (auto& v : w) v /= wsum;
  auto refl = [](int64_t i, int64_t n) {
    while (i < 0 || i >= n) i = i < 0 ? -i - 1 : 2 * n - i - 1;
    return i;
  };
  const double c1 = std::pow(0.01 * range, 2), c2 = std::pow(0.03 * range, 2);
  double total = 0;
  int64_t count = 0;
  for (int64_t i = r; i < H - r; ++i)
    for (int64_t j = r; j < W - r; ++j) {
      double mx = 0, my = 0, xx = 0, yy = 0, xy = 0;
      for (int64_t a = -r; a <= r; ++a)
        for (int64_t b = -r; b <= r; ++b) {
          const double wt = w[a + r] * w[b + r];
          const int64_t k = refl(i + a, H) * W + refl(j + b, W);
          mx += wt * X[k], my += wt * Y[k], xx += wt * X[k] * X[k], yy += wt * Y[k] * Y[k], xy += wt * X[k] * Y[k];
        }
      const double vx = xx - mx * mx, vy = yy - my * my, vxy = xy - mx * my;
      total += ((2 * mx * my + c1) * (2 * vxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2));
      ++count;
    }
  return total / double(count);
}

}  // namespace

TEST_CASE("SSIM equals the direct float64 loop, is 1 for equal images, and PSNR follows its definition") {
  at::manual_seed(3);
  const at::Tensor ref = at::rand({37, 29}, at::kDouble);
  const at::Tensor x = (ref + 0.1 * at::randn({37, 29}, at::kDouble)).to(at::kFloat);
  const double range = (ref.max() - ref.min()).item<double>();
  const double s = metrics::ssim(x, ref, range), loop = ssim_loop(x, ref, range);
  CHECK(s == doctest::Approx(loop).epsilon(1e-12));
  CHECK(s > 0.1);
  CHECK(s < 0.99);
  CHECK(metrics::ssim(ref, ref, range) == doctest::Approx(1.0).epsilon(1e-12));
  const double mse = (x.to(at::kDouble) - ref).square().mean().item<double>();
  CHECK(metrics::psnr(x, ref, range) == doctest::Approx(10 * std::log10(range * range / mse)).epsilon(1e-12));
  CHECK(std::isinf(metrics::psnr(ref, ref, range)));
}

TEST_CASE("distributed SSIM: per-tile sums over any tiling add up to the whole image's SSIM") {
  at::manual_seed(4);
  const int64_t H = 40, W = 33, r = metrics::SsimOptions{}.radius();
  CHECK(r == 5);
  const at::Tensor ref = at::rand({H, W}, at::kDouble), x = ref + 0.05 * at::randn({H, W}, at::kDouble);
  const double whole = metrics::ssim(x, ref, 1.0);
  struct Tiling {
    std::vector<int64_t> rows, cols;
  };
  for (const Tiling& t : {Tiling{{0, 13, 27, 40}, {0, 33}}, Tiling{{0, 20, 40}, {0, 4, 33}}, Tiling{{0, 3, 40}, {0, 16, 33}}}) {
    double sum = 0;
    int64_t count = 0;
    for (size_t a = 0; a + 1 < t.rows.size(); ++a)
      for (size_t b = 0; b + 1 < t.cols.size(); ++b) {
        const Box own{t.rows[a], t.rows[a + 1], t.cols[b], t.cols[b + 1]};
        const Box box{std::max<int64_t>(0, own.r0 - r), std::min(H, own.r1 + r), std::max<int64_t>(0, own.c0 - r),
                      std::min(W, own.c1 + r)};
        auto cut = [&](const at::Tensor& v) { return v.narrow(0, box.r0, box.rows()).narrow(1, box.c0, box.cols()); };
        const auto part = metrics::ssim_sum(cut(x), cut(ref), box, own, H, W, 1.0);
        sum += part.sum;
        count += part.count;
      }
    CHECK(count == (H - 2 * r) * (W - 2 * r));
    CHECK(sum / double(count) == doctest::Approx(whole).epsilon(1e-12));
  }
  // A box that does not cover the window is an error, not a silent wrong value.
  const Box own{10, 20, 0, W}, box{10, 20, 0, W};
  CHECK_THROWS(metrics::ssim_sum(x.narrow(0, 10, 10), ref.narrow(0, 10, 10), box, own, H, W, 1.0));
}
