#include "pnp/phantom.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

#include "pnp/core.hpp"

namespace pnp {

std::vector<Ellipse> shepp_logan_ellipses() {
  // Toft's modified Shepp-Logan: higher contrast than the original, values in [0, 1].
  return {
      {1.0, 0.69, 0.92, 0.0, 0.0, 0.0},        {-0.8, 0.6624, 0.8740, 0.0, -0.0184, 0.0},
      {-0.2, 0.1100, 0.3100, 0.22, 0.0, -18.0}, {-0.2, 0.1600, 0.4100, -0.22, 0.0, 18.0},
      {0.1, 0.2100, 0.2500, 0.0, 0.35, 0.0},    {0.1, 0.0460, 0.0460, 0.0, 0.1, 0.0},
      {0.1, 0.0460, 0.0460, 0.0, -0.1, 0.0},    {0.1, 0.0460, 0.0230, -0.08, -0.605, 0.0},
      {0.1, 0.0230, 0.0230, 0.0, -0.606, 0.0},  {0.1, 0.0230, 0.0460, 0.06, -0.605, 0.0},
  };
}

std::vector<Ellipse> random_ellipses(int count, uint64_t seed) {
  if (count < 1) throw InputError("random_ellipses: count must be at least 1");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<Ellipse> out;
  for (int i = 0; i < count; ++i) {
    double r = 0.7 * std::sqrt(u(rng)), t = 2 * std::numbers::pi * u(rng);
    double a = 0.05 + 0.3 * u(rng), b = 0.05 + 0.3 * u(rng);
    double v = (i == 0 ? 0.5 : 0.0) + (u(rng) - 0.3);
    out.push_back({v, a, b, r * std::cos(t), r * std::sin(t), 180.0 * u(rng)});
  }
  return out;
}

std::vector<float> rasterize(const std::vector<Ellipse>& ellipses, int64_t n, int supersample) {
  if (n < 1) throw InputError("phantom size must be at least 1");
  if (supersample < 1) throw InputError("supersample must be at least 1");
  std::vector<float> img(static_cast<size_t>(n * n), 0.0f);
  const double h = 2.0 / static_cast<double>(n);
  const int s = supersample;
  for (const auto& e : ellipses) {
    const double phi = e.phi_deg * std::numbers::pi / 180.0, c = std::cos(phi), sn = std::sin(phi);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        int inside = 0;
        for (int si = 0; si < s; ++si)
          for (int sj = 0; sj < s; ++sj) {
            double x = -1.0 + h * (static_cast<double>(j) + (sj + 0.5) / s) - e.x0;
            double y = 1.0 - h * (static_cast<double>(i) + (si + 0.5) / s) - e.y0;
            double xr = x * c + y * sn, yr = -x * sn + y * c;
            if ((xr * xr) / (e.a * e.a) + (yr * yr) / (e.b * e.b) <= 1.0) ++inside;
          }
        if (inside) img[static_cast<size_t>(i * n + j)] += static_cast<float>(e.value * inside / double(s * s));
      }
    }
  }
  return img;
}

std::vector<float> shepp_logan(int64_t n) {
  auto img = rasterize(shepp_logan_ellipses(), n);
  // Overlapping negative ellipses can round a hair below 0; the phantom is defined on [0, 1].
  for (auto& v : img) v = std::clamp(v, 0.0f, 1.0f);
  return img;
}

std::vector<float> random_ellipse_image(int64_t n, int count, uint64_t seed) {
  auto img = rasterize(random_ellipses(count, seed), n);
  auto [lo, hi] = std::minmax_element(img.begin(), img.end());
  float a = *lo, range = *hi - *lo;
  for (auto& v : img) v = range > 0 ? (v - a) / range : 0.0f;
  return img;
}

}  // namespace pnp
