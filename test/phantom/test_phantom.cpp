#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "pnp/phantom.hpp"

namespace {
// Value at pixel (i, j) of an n x n Shepp-Logan.
float at(const std::vector<float>& img, int64_t n, int64_t i, int64_t j) { return img[static_cast<size_t>(i * n + j)]; }
// Pixel index whose centre is nearest to coordinate v on an n-pixel axis.
int64_t col_of(double x, int64_t n) { return static_cast<int64_t>(std::floor((x + 1.0) * n / 2.0)); }
int64_t row_of(double y, int64_t n) { return static_cast<int64_t>(std::floor((1.0 - y) * n / 2.0)); }
}  // namespace

TEST_CASE("modified Shepp-Logan has 10 ellipses and values at known points") {
  CHECK(pnp::shepp_logan_ellipses().size() == 10);
  const int64_t n = 256;
  auto img = pnp::shepp_logan(n);
  REQUIRE(img.size() == static_cast<size_t>(n * n));
  CHECK(at(img, n, 0, 0) == 0.0f);                                         // corner: outside the head
  CHECK(at(img, n, row_of(0.0, n), col_of(0.0, n)) == doctest::Approx(0.2));   // brain: 1 - 0.8
  CHECK(at(img, n, row_of(0.9, n), col_of(0.0, n)) == doctest::Approx(1.0));   // skull: ellipse 1 only
  CHECK(at(img, n, row_of(0.35, n), col_of(0.0, n)) == doctest::Approx(0.3));  // ellipse 5
  CHECK(at(img, n, row_of(-0.1, n), col_of(0.0, n)) == doctest::Approx(0.3));  // ellipse 7
  CHECK(at(img, n, row_of(0.0, n), col_of(0.22, n)) == doctest::Approx(0.0).epsilon(1e-6));  // ellipse 3: 1-0.8-0.2
  CHECK(at(img, n, row_of(0.0, n), col_of(-0.22, n)) == doctest::Approx(0.0).epsilon(1e-6)); // ellipse 4
  auto [lo, hi] = std::minmax_element(img.begin(), img.end());
  CHECK(*lo == 0.0f);
  CHECK(*hi == 1.0f);
}

TEST_CASE("phantom is symmetric where the ellipses are") {
  const int64_t n = 128;
  auto img = pnp::shepp_logan(n);
  // At y = 0.5 only ellipses 1, 2 and 5 are present, all symmetric about x = 0.
  int64_t r = row_of(0.5, n);
  for (int64_t j = 0; j < n; ++j) CHECK(at(img, n, r, j) == at(img, n, r, n - 1 - j));
}

TEST_CASE("supersampled raster of a disc has the right area") {
  const int64_t n = 200;
  auto img = pnp::rasterize({{1.0, 0.5, 0.5, 0.0, 0.0, 0.0}}, n, 4);
  double area = 0;
  for (float v : img) area += v;
  area *= (2.0 / n) * (2.0 / n);
  CHECK(area == doctest::Approx(M_PI * 0.25).epsilon(2e-3));
}

TEST_CASE("random ellipses are seeded and span [0, 1]") {
  auto a = pnp::random_ellipse_image(64, 6, 42), b = pnp::random_ellipse_image(64, 6, 42),
       c = pnp::random_ellipse_image(64, 6, 43);
  CHECK(a == b);
  CHECK(a != c);
  auto [lo, hi] = std::minmax_element(a.begin(), a.end());
  CHECK(*lo == 0.0f);
  CHECK(*hi == 1.0f);
}
