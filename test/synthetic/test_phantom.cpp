#include "pnp_test.hpp"

#include <algorithm>
#include <cmath>

#include "pnp/core.hpp"
#include "pnp/synthetic.hpp"

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

// ---- Training images: windows, polygons, textures, scenes ----

namespace {
std::vector<float> crop(const std::vector<float>& img, int64_t n, const pnp::Window& w) {
  std::vector<float> out;
  for (int64_t i = w.r0; i < w.r0 + w.rows; ++i)
    for (int64_t j = w.c0; j < w.c0 + w.cols; ++j) out.push_back(img[static_cast<size_t>(i * n + j)]);
  return out;
}
}  // namespace

TEST_CASE("rasterize_window equals rasterize on the whole image and crops it exactly") {
  const int64_t n = 96;
  auto e = pnp::random_ellipses(9, 7);
  auto full = pnp::rasterize(e, n);
  CHECK(pnp::rasterize_window(e, n, {0, 0, n, n}) == full);
  pnp::Window w{13, 40, 37, 50};
  CHECK(pnp::rasterize_window(e, n, w) == crop(full, n, w));
  CHECK(pnp::rasterize_window(pnp::shepp_logan_ellipses(), 64, {0, 0, 64, 64}) == pnp::rasterize(pnp::shepp_logan_ellipses(), 64));
  CHECK_THROWS_AS(pnp::rasterize_window(e, n, {90, 0, 10, 10}), pnp::InputError);
}

TEST_CASE("a square polygon covers its area; random polygons are seeded and inside the disc") {
  const int64_t n = 200;
  std::vector<float> img(static_cast<size_t>(n * n), 0.0f);
  pnp::Polygon sq{2.0, {{-0.5, -0.5}, {0.5, -0.5}, {0.5, 0.5}, {-0.5, 0.5}}};
  pnp::add_polygons(img, {sq}, n, {0, 0, n, n});
  double area = 0;
  for (float v : img) area += v / 2.0;
  area *= (2.0 / n) * (2.0 / n);
  CHECK(area == doctest::Approx(1.0).epsilon(1e-9));
  auto a = pnp::random_polygons(5, 3), b = pnp::random_polygons(5, 3);
  REQUIRE(a.size() == 5);
  for (size_t k = 0; k < a.size(); ++k) {
    CHECK(a[k].vertices == b[k].vertices);
    CHECK(a[k].vertices.size() >= 3);
    CHECK(a[k].vertices.size() <= 8);
    for (const auto& v : a[k].vertices) CHECK(std::hypot(v[0], v[1]) <= 1.0);
  }
  // Window = crop of the full raster.
  std::vector<float> full(static_cast<size_t>(64 * 64), 0.0f), part(static_cast<size_t>(20 * 30), 0.0f);
  pnp::add_polygons(full, a, 64, {0, 0, 64, 64});
  pnp::add_polygons(part, a, 64, {10, 20, 20, 30});
  CHECK(part == crop(full, 64, {10, 20, 20, 30}));
}

TEST_CASE("smooth textures lie in [0, 1] and vary slowly") {
  auto t = pnp::random_texture(5, 4.0, 11);
  auto img = pnp::raster_texture(t, 128, {0, 0, 128, 128});
  auto [lo, hi] = std::minmax_element(img.begin(), img.end());
  CHECK(*lo >= 0.0f);
  CHECK(*hi <= 1.0f);
  CHECK(*hi - *lo > 0.1f);
  double maxstep = 0;  // |f| <= 4 cycles per unit: a pixel step (2/128) changes it by <= 2 pi 4 (2/128) / 2
  for (int64_t i = 0; i < 128; ++i)
    for (int64_t j = 0; j + 1 < 128; ++j)
      maxstep = std::max(maxstep, double(std::abs(img[size_t(i * 128 + j + 1)] - img[size_t(i * 128 + j)])));
  CHECK(maxstep <= M_PI * 4 * (2.0 / 128) / 2 + 1e-6);
}

TEST_CASE("random scenes: seeded, in [0, 1], windows are crops, contrast varies") {
  pnp::SceneOptions o;
  const int64_t n = 128;
  auto a = pnp::random_scene(n, 5, o, {0, 0, n, n});
  CHECK(a == pnp::random_scene(n, 5, o, {0, 0, n, n}));
  CHECK(a != pnp::random_scene(n, 6, o, {0, 0, n, n}));
  pnp::Window w{30, 50, 64, 64};
  CHECK(pnp::random_scene(n, 5, o, w) == crop(a, n, w));
  double min_hi = 1, max_hi = 0, min_lo = 1;
  for (uint64_t s = 0; s < 40; ++s) {
    auto img = pnp::random_scene(64, s, o, {0, 0, 64, 64});
    auto [lo, hi] = std::minmax_element(img.begin(), img.end());
    CHECK(*lo >= 0.0f);
    CHECK(*hi <= 1.0f);
    CHECK(*hi - *lo > 0.0f);
    min_hi = std::min(min_hi, double(*hi)), max_hi = std::max(max_hi, double(*hi)), min_lo = std::min(min_lo, double(*lo));
  }
  CHECK(max_hi - min_hi > 0.3);  // random contrast: peaks differ between scenes
}

TEST_CASE("rasterize (bounding boxes, threads) equals the plain per-pixel loop bitwise") {
  // Every pixel, every ellipse, in order: the definition rasterize must reproduce exactly (the
  // samples of one pixel are counted by the same ellipse_samples_inside).
  auto plain = [](const std::vector<pnp::Ellipse>& es, int64_t n, int s) {
    std::vector<float> img(static_cast<size_t>(n * n), 0.0f);
    const double h = 2.0 / static_cast<double>(n);
    for (const auto& e : es) {
      const double phi = e.phi_deg * M_PI / 180.0, c = std::cos(phi), sn = std::sin(phi);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const int inside = pnp::ellipse_samples_inside(e, i, j, h, s, c, sn);
          if (inside) img[static_cast<size_t>(i * n + j)] += static_cast<float>(e.value * inside / double(s * s));
        }
    }
    return img;
  };
  auto es = pnp::shepp_logan_ellipses();
  es.push_back({0.3, 0.4, 0.1, 0.9, -0.8, 33.0});  // partly outside the image, rotated
  for (auto [n, s] : std::vector<std::pair<int64_t, int>>{{37, 3}, {256, 2}, {1100, 1}}) {  // 1100^2: threaded
    CAPTURE(n);
    CHECK(pnp::rasterize(es, n, s) == plain(es, n, s));
  }
}

TEST_CASE("3D Shepp-Logan: the middle slice is the 2D phantom, the features thin out with height") {
  const int64_t n = 96, S = 33;
  const std::vector<float> mid = pnp::shepp_logan_slice(S / 2, S, n);  // z = 0 exactly
  CHECK(mid == pnp::shepp_logan(n));
  // symmetric in z; every slice within [0, 1]
  for (int64_t s : {0, 5, 12}) CHECK(pnp::shepp_logan_slice(s, S, n) == pnp::shepp_logan_slice(S - 1 - s, S, n));
  auto count_above = [](const std::vector<float>& v, float t) {
    return std::count_if(v.begin(), v.end(), [t](float x) { return x > t; });
  };
  // the head shrinks away from the middle and is gone beyond its height 0.9 (slice 0: z = -0.97)
  const auto q = pnp::shepp_logan_ellipsoids();
  const double z12 = pnp::pixel_centre(12, S);
  CHECK(pnp::ellipsoid_slice(q, z12)[0].a == doctest::Approx(0.69 * std::sqrt(1 - z12 * z12 / 0.81)));
  CHECK(count_above(pnp::shepp_logan_slice(0, S, n), 0.0f) == 0);
  CHECK(count_above(pnp::shepp_logan_slice(2, S, n), 0.5f) > 0);  // z = -0.85: a ring of skull
  // the small features (height <= 0.05) are in the middle slice only: slice 15 (z = -0.06) has the
  // head and ventricles but differs from the middle where they were
  const std::vector<float> near = pnp::shepp_logan_slice(15, S, n);
  CHECK(near != mid);
  CHECK(pnp::ellipsoid_slice(q, -0.06).size() == 5);
  CHECK_THROWS_AS(pnp::shepp_logan_slice(S, S, n), pnp::InputError);
}

TEST_CASE("random ellipsoids and volumes: seeded, in [0, 1], crops of one scene, varying along z") {
  const auto q = pnp::random_ellipsoids(6, 11);
  const auto e = pnp::random_ellipses(6, 11);
  REQUIRE(q.size() == e.size());
  for (size_t k = 0; k < q.size(); ++k) {
    CHECK(q[k].e.a == e[k].a);  // the plane's ellipses exactly
    CHECK(q[k].e.x0 == e[k].x0);
    CHECK(std::abs(q[k].z0) <= 0.7);
    CHECK(q[k].c >= 0.05);
    CHECK(q[k].c <= 0.55);
  }
  // A slice through an ellipsoid's centre holds its ellipse; beyond its height, nothing.
  CHECK(pnp::ellipsoid_slice({q[0]}, q[0].z0).size() == 1);
  CHECK(pnp::ellipsoid_slice({q[0]}, q[0].z0 + 1.01 * q[0].c).empty());
  auto v = pnp::random_ellipsoid_volume(24, 6, 11);
  REQUIRE(v.size() == size_t(24 * 24 * 24));
  CHECK(v == pnp::random_ellipsoid_volume(24, 6, 11));
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  CHECK(*lo == 0.0f);
  CHECK(*hi == 1.0f);

  pnp::SceneOptions o;
  const int64_t n = 48;
  auto whole = pnp::random_scene_volume(n, 5, o, {0, 0, n, n}, 0, n);
  REQUIRE(whole.size() == size_t(n * n * n));
  CHECK(whole == pnp::random_scene_volume(n, 5, o, {0, 0, n, n}, 0, n));
  CHECK(whole != pnp::random_scene_volume(n, 6, o, {0, 0, n, n}, 0, n));
  // A window of slices [z0, z0 + d) is the crop of the whole cube, bitwise.
  const pnp::Window w{7, 20, 16, 24};
  const int64_t z0 = 13, d = 9;
  auto part = pnp::random_scene_volume(n, 5, o, w, z0, d);
  REQUIRE(part.size() == size_t(d * w.rows * w.cols));
  bool crop_equal = true;
  for (int64_t z = 0; z < d; ++z)
    for (int64_t i = 0; i < w.rows; ++i)
      for (int64_t j = 0; j < w.cols; ++j)
        crop_equal &= part[size_t((z * w.rows + i) * w.cols + j)] == whole[size_t(((z0 + z) * n + w.r0 + i) * n + w.c0 + j)];
  CHECK(crop_equal);
  // Values in [0, 1]; slices differ along z; scenes' contrasts differ.
  double min_hi = 1, max_hi = 0;
  for (uint64_t s = 0; s < 12; ++s) {
    auto vol = pnp::random_scene_volume(32, s, o, {0, 0, 32, 32}, 0, 32);
    auto [a, b] = std::minmax_element(vol.begin(), vol.end());
    CHECK(*a >= 0.0f);
    CHECK(*b <= 1.0f);
    min_hi = std::min(min_hi, double(*b)), max_hi = std::max(max_hi, double(*b));
    double diff = 0;
    for (size_t k = 0; k < size_t(32 * 32); ++k) diff += std::abs(vol[k + size_t(4 * 32 * 32)] - vol[k + size_t(27 * 32 * 32)]);
    CHECK(diff > 0);
  }
  CHECK(max_hi - min_hi > 0.2);
  CHECK_THROWS_AS(pnp::random_scene_volume(n, 5, o, w, 45, 9), pnp::InputError);
}
