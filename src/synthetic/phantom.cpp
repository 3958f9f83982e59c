#include "pnp/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <thread>

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

namespace {
void check_window(int64_t n, const Window& w) {
  if (n < 1) throw InputError("phantom size must be at least 1");
  if (w.rows < 1 || w.cols < 1 || w.r0 < 0 || w.c0 < 0 || w.r0 + w.rows > n || w.c0 + w.cols > n)
    throw InputError("phantom window [" + std::to_string(w.r0) + ", " + std::to_string(w.r0 + w.rows) + ") x [" +
                     std::to_string(w.c0) + ", " + std::to_string(w.c0 + w.cols) + ") is not inside the " +
                     std::to_string(n) + " x " + std::to_string(n) + " image");
}
// Pixel rows/cols of the window whose centres may lie in [lo, hi] (x or y in [-1, 1] units).
void col_range(double xlo, double xhi, int64_t n, const Window& w, int64_t& j0, int64_t& j1) {
  j0 = std::max<int64_t>(w.c0, static_cast<int64_t>(std::floor((xlo + 1.0) * n / 2.0)) - 1);
  j1 = std::min<int64_t>(w.c0 + w.cols, static_cast<int64_t>(std::ceil((xhi + 1.0) * n / 2.0)) + 1);
}
void row_range(double ylo, double yhi, int64_t n, const Window& w, int64_t& i0, int64_t& i1) {
  i0 = std::max<int64_t>(w.r0, static_cast<int64_t>(std::floor((1.0 - yhi) * n / 2.0)) - 1);
  i1 = std::min<int64_t>(w.r0 + w.rows, static_cast<int64_t>(std::ceil((1.0 - ylo) * n / 2.0)) + 1);
}

// The ellipses over the window, supersample^2 samples per pixel. Each ellipse visits only the
// pixels of its bounding circle; rows are split among threads for large rasters. Every pixel
// sums its ellipses in the same order as a plain loop would, so the result does not depend on
// the thread count.
std::vector<float> raster_ellipses(const std::vector<Ellipse>& ellipses, int64_t n, const Window& w, int supersample) {
  check_window(n, w);
  if (supersample < 1) throw InputError("supersample must be at least 1");
  std::vector<float> img(static_cast<size_t>(w.rows * w.cols), 0.0f);
  const double h = 2.0 / static_cast<double>(n);
  const int s = supersample;
  auto rows = [&](int64_t r_lo, int64_t r_hi) {
    for (const auto& e : ellipses) {
      const double phi = e.phi_deg * std::numbers::pi / 180.0, c = std::cos(phi), sn = std::sin(phi);
      const double ext = std::max(std::abs(e.a), std::abs(e.b));
      int64_t i0, i1, j0, j1;
      row_range(e.y0 - ext, e.y0 + ext, n, w, i0, i1);
      col_range(e.x0 - ext, e.x0 + ext, n, w, j0, j1);
      for (int64_t i = std::max(i0, r_lo); i < std::min(i1, r_hi); ++i)
        for (int64_t j = j0; j < j1; ++j) {
          const int inside = ellipse_samples_inside(e, i, j, h, s, c, sn);
          if (inside)
            img[static_cast<size_t>((i - w.r0) * w.cols + (j - w.c0))] +=
                static_cast<float>(e.value * inside / double(s * s));
        }
    }
  };
  const int64_t work = w.rows * w.cols * s * s;
  const int64_t threads = work < (int64_t{1} << 20)
                              ? 1
                              : std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::min<int64_t>(16, w.rows));
  if (threads == 1) {
    rows(w.r0, w.r0 + w.rows);
    return img;
  }
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back(rows, w.r0 + w.rows * t / threads, w.r0 + w.rows * (t + 1) / threads);
  for (auto& t : pool) t.join();
  return img;
}
}  // namespace

std::vector<float> rasterize(const std::vector<Ellipse>& ellipses, int64_t n, int supersample) {
  if (n < 1) throw InputError("phantom size must be at least 1");
  return raster_ellipses(ellipses, n, Window{0, 0, n, n}, supersample);
}

std::vector<float> shepp_logan(int64_t n) {
  auto img = rasterize(shepp_logan_ellipses(), n);
  // Overlapping negative ellipses can round a hair below 0; the phantom is defined on [0, 1].
  for (auto& v : img) v = std::clamp(v, 0.0f, 1.0f);
  return img;
}

std::vector<Ellipsoid> shepp_logan_ellipsoids() {
  // heights (semi-axes along z) of the ten ellipses, in shepp_logan_ellipses() order
  static constexpr double kHeight[] = {0.90, 0.88, 0.22, 0.30, 0.25, 0.046, 0.046, 0.02, 0.02, 0.02};
  const std::vector<Ellipse> plane = shepp_logan_ellipses();
  std::vector<Ellipsoid> out;
  for (size_t k = 0; k < plane.size(); ++k) out.push_back({plane[k], kHeight[k]});
  return out;
}

std::vector<Ellipse> ellipsoid_slice(const std::vector<Ellipsoid>& ellipsoids, double z) {
  std::vector<Ellipse> out;
  for (const Ellipsoid& q : ellipsoids) {
    const double t = (z - q.z0) / q.c;
    if (std::abs(t) >= 1.0) continue;
    Ellipse e = q.e;
    const double scale = std::sqrt(1.0 - t * t);  // exactly 1 at z = 0
    e.a *= scale, e.b *= scale;
    out.push_back(e);
  }
  return out;
}

std::vector<float> shepp_logan_slice(int64_t s, int64_t slices, int64_t n) {
  return shepp_logan_slice_window(s, slices, n, Window{0, 0, n, n});
}

std::vector<float> shepp_logan_slice_window(int64_t s, int64_t slices, int64_t n, const Window& w) {
  if (slices < 1 || s < 0 || s >= slices)
    throw InputError("shepp_logan_slice: slice " + std::to_string(s) + " of " + std::to_string(slices));
  auto img = rasterize_window(ellipsoid_slice(shepp_logan_ellipsoids(), pixel_centre(s, slices)), n, w);
  for (auto& v : img) v = std::clamp(v, 0.0f, 1.0f);
  return img;
}

namespace {
void rescale_unit(std::vector<float>& img) {  // min-max to [0, 1]
  auto [lo, hi] = std::minmax_element(img.begin(), img.end());
  float a = *lo, range = *hi - *lo;
  for (auto& v : img) v = range > 0 ? (v - a) / range : 0.0f;
}
}  // namespace

std::vector<float> random_ellipse_image(int64_t n, int count, uint64_t seed) {
  auto img = rasterize(random_ellipses(count, seed), n);
  rescale_unit(img);
  return img;
}

std::vector<Ellipsoid> random_ellipsoids(int count, uint64_t seed) {
  std::mt19937_64 rng(splitmix64(seed ^ 0x656c6c6970736f69ull));  // "ellipsoi"
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<Ellipsoid> out;
  for (const Ellipse& e : random_ellipses(count, seed)) {
    const double z0 = 0.7 * (2.0 * u(rng) - 1.0), c = 0.05 + 0.5 * u(rng);
    out.push_back({e, c, z0});
  }
  return out;
}

std::vector<float> random_ellipsoid_volume(int64_t n, int count, uint64_t seed) {
  const auto q = random_ellipsoids(count, seed);
  std::vector<float> vol;
  vol.reserve(static_cast<size_t>(n * n * n));
  for (int64_t k = 0; k < n; ++k) {
    auto img = rasterize(ellipsoid_slice(q, pixel_centre(k, n)), n);
    vol.insert(vol.end(), img.begin(), img.end());
  }
  rescale_unit(vol);
  return vol;
}

}  // namespace pnp

// ---- Training images ----

namespace pnp {

std::vector<Polygon> random_polygons(int count, uint64_t seed) {
  if (count < 0) throw InputError("random_polygons: count must not be negative");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<Polygon> out;
  for (int i = 0; i < count; ++i) {
    const int k = 3 + static_cast<int>(u(rng) * 6.0);  // 3..8 vertices
    const double r = 0.05 + 0.3 * u(rng);
    const double rho = (0.75 - r) * std::sqrt(u(rng)), t = 2 * std::numbers::pi * u(rng);
    const double cx = rho * std::cos(t), cy = rho * std::sin(t);
    std::vector<double> ang(static_cast<size_t>(k));
    for (auto& a : ang) a = 2 * std::numbers::pi * u(rng);
    std::sort(ang.begin(), ang.end());
    Polygon p{u(rng) - 0.5, {}};
    for (double a : ang) {
      const double rr = r * (0.4 + 0.6 * u(rng));
      p.vertices.push_back({cx + rr * std::cos(a), cy + rr * std::sin(a)});
    }
    out.push_back(std::move(p));
  }
  return out;
}

Texture random_texture(int waves, double max_frequency, uint64_t seed) {
  if (waves < 1) throw InputError("random_texture: waves must be at least 1");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Texture t;
  double total = 0;
  for (int i = 0; i < waves; ++i) {
    const double f = max_frequency * std::sqrt(u(rng)), dir = 2 * std::numbers::pi * u(rng);
    const double amp = 0.2 + u(rng);
    t.waves.push_back({f * std::cos(dir), f * std::sin(dir), 2 * std::numbers::pi * u(rng), amp});
    total += amp;
  }
  for (auto& w : t.waves) w[3] /= total;
  return t;
}

std::vector<float> rasterize_window(const std::vector<Ellipse>& ellipses, int64_t n, const Window& w) {
  return raster_ellipses(ellipses, n, w, 1);
}

void add_polygons(std::vector<float>& img, const std::vector<Polygon>& polygons, int64_t n, const Window& w) {
  check_window(n, w);
  if (img.size() != static_cast<size_t>(w.rows * w.cols)) throw Error("add_polygons: image does not match the window");
  const double h = 2.0 / static_cast<double>(n);
  for (const auto& p : polygons) {
    if (p.vertices.size() < 3) continue;
    double xlo = 1e9, xhi = -1e9, ylo = 1e9, yhi = -1e9;
    for (const auto& v : p.vertices) {
      xlo = std::min(xlo, v[0]), xhi = std::max(xhi, v[0]);
      ylo = std::min(ylo, v[1]), yhi = std::max(yhi, v[1]);
    }
    int64_t i0, i1, j0, j1;
    row_range(ylo, yhi, n, w, i0, i1);
    col_range(xlo, xhi, n, w, j0, j1);
    const size_t k = p.vertices.size();
    for (int64_t i = i0; i < i1; ++i) {
      const double y = 1.0 - h * (static_cast<double>(i) + 0.5);
      for (int64_t j = j0; j < j1; ++j) {
        const double x = -1.0 + h * (static_cast<double>(j) + 0.5);
        bool inside = false;  // even-odd rule: count edge crossings of a ray towards +x
        for (size_t a = 0, b = k - 1; a < k; b = a++) {
          const auto& va = p.vertices[a];
          const auto& vb = p.vertices[b];
          if ((va[1] > y) != (vb[1] > y) && x < (vb[0] - va[0]) * (y - va[1]) / (vb[1] - va[1]) + va[0])
            inside = !inside;
        }
        if (inside) img[static_cast<size_t>((i - w.r0) * w.cols + (j - w.c0))] += static_cast<float>(p.value);
      }
    }
  }
}

std::vector<float> raster_texture(const Texture& t, int64_t n, const Window& w) {
  check_window(n, w);
  std::vector<double> acc(static_cast<size_t>(w.rows * w.cols), 0.0);
  const double h = 2.0 / static_cast<double>(n);
  // Separable: cos(a x + b y + p) = cos(a x) cos(b y + p) - sin(a x) sin(b y + p).
  std::vector<double> cx(static_cast<size_t>(w.cols)), sx(static_cast<size_t>(w.cols));
  for (const auto& wv : t.waves) {
    for (int64_t j = 0; j < w.cols; ++j) {
      const double x = -1.0 + h * (static_cast<double>(j + w.c0) + 0.5);
      cx[static_cast<size_t>(j)] = wv[3] * std::cos(2 * std::numbers::pi * wv[0] * x);
      sx[static_cast<size_t>(j)] = wv[3] * std::sin(2 * std::numbers::pi * wv[0] * x);
    }
    for (int64_t i = 0; i < w.rows; ++i) {
      const double y = 1.0 - h * (static_cast<double>(i + w.r0) + 0.5);
      const double ph = 2 * std::numbers::pi * wv[1] * y + wv[2], cy = std::cos(ph), sy = std::sin(ph);
      double* row = acc.data() + i * w.cols;
      for (int64_t j = 0; j < w.cols; ++j) row[j] += cx[static_cast<size_t>(j)] * cy - sx[static_cast<size_t>(j)] * sy;
    }
  }
  std::vector<float> img(acc.size());
  for (size_t k = 0; k < acc.size(); ++k) img[k] = static_cast<float>(std::clamp(0.5 * (acc[k] + 1.0), 0.0, 1.0));
  return img;
}

namespace {
// The scene before contrast, rendered on a window: body + interior shapes (+ texture in the body).
struct Scene {
  std::vector<Ellipse> body, interior;
  std::vector<Polygon> polygons;
  bool textured = false;
  Texture texture;
  double texture_amplitude = 0;
  double lo = 0, hi = 1, gamma = 1;  // contrast
};

std::vector<float> render(const Scene& s, int64_t n, const Window& w) {
  std::vector<float> body = rasterize_window(s.body, n, w);
  std::vector<float> img = rasterize_window(s.interior, n, w);
  add_polygons(img, s.polygons, n, w);
  std::vector<float> tex;
  if (s.textured) tex = raster_texture(s.texture, n, w);
  for (size_t k = 0; k < img.size(); ++k) {
    float v = body[k] + img[k] * (body[k] > 0 ? 1.0f : 0.5f);
    if (s.textured && body[k] > 0) v += static_cast<float>(s.texture_amplitude) * (tex[k] - 0.5f);
    img[k] = v;
  }
  return img;
}

// The texture (with its chance) and the random contrast, drawn in this order from rng.
void draw_texture_and_contrast(Scene& s, const SceneOptions& o, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  s.textured = u(rng) < o.texture_probability;
  if (s.textured) {
    s.texture = random_texture(3 + static_cast<int>(u(rng) * 5), o.texture_max_frequency, rng());
    s.texture_amplitude = o.texture_max_amplitude * u(rng);
  }
  const double range = o.contrast_min + (1.0 - o.contrast_min) * u(rng);
  s.lo = (1.0 - range) * u(rng);
  s.hi = s.lo + range;
  const double gmax = std::max(1.0, o.gamma_max);
  s.gamma = std::exp((2.0 * u(rng) - 1.0) * std::log(gmax));
}

// The scene's raw values (whose range over the whole scene is [mn, mx]) to its contrast; what
// finer features push outside the coarse range is clamped.
void apply_contrast(const Scene& s, float mn, float mx, std::vector<float>& img) {
  const float base = std::min(mn, 0.0f), span = std::max(mx - base, 1e-3f);
  for (auto& v : img) {
    double t = std::clamp((v - base) / span, 0.0f, 1.0f);
    v = static_cast<float>(s.lo + (s.hi - s.lo) * std::pow(t, s.gamma));
  }
}
}  // namespace

std::vector<float> random_scene(int64_t n, uint64_t seed, const SceneOptions& o, const Window& w) {
  check_window(n, w);
  if (o.ellipses_min < 0 || o.ellipses_max < o.ellipses_min || o.polygons_min < 0 || o.polygons_max < o.polygons_min)
    throw InputError("random_scene: shape counts must satisfy 0 <= min <= max");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto count = [&](int lo, int hi) { return lo + static_cast<int>(u(rng) * (hi - lo + 1 - 1e-9)); };
  Scene s;
  // The body: a large ellipse with value 1 (sometimes absent: shapes on an empty background).
  if (u(rng) < 0.85) {
    double a = 0.55 + 0.4 * u(rng), b = 0.55 + 0.4 * u(rng);
    s.body.push_back({1.0, a, b, 0.1 * (u(rng) - 0.5), 0.1 * (u(rng) - 0.5), 180.0 * u(rng)});
  } else {
    s.body.push_back({1e-3, 2.0, 2.0, 0.0, 0.0, 0.0});
  }
  const int ne = count(o.ellipses_min, o.ellipses_max), np = count(o.polygons_min, o.polygons_max);
  const uint64_t sub = rng();
  if (ne > 0) {
    s.interior = random_ellipses(ne, sub);
    for (auto& e : s.interior) {  // interior contrasts of either sign, some small and sharp
      e.value = (u(rng) - 0.5) * 1.2;
      e.x0 *= 0.9, e.y0 *= 0.9;
      if (u(rng) < 0.3) e.a *= 0.25, e.b *= 0.25;
    }
  }
  s.polygons = random_polygons(np, rng());
  draw_texture_and_contrast(s, o, rng);
  // Normalise with the scene's range on a coarse raster of the whole image (so every window
  // of one scene is scaled alike), then clamp what finer features push outside.
  const int64_t nc = std::min<int64_t>(n, 32);
  auto coarse = render(s, nc, Window{0, 0, nc, nc});
  auto [mn, mx] = std::minmax_element(coarse.begin(), coarse.end());
  auto img = render(s, n, w);
  apply_contrast(s, *mn, *mx, img);
  return img;
}

namespace {
// random_scene's parts extended along z: ellipsoids, and prisms (a polygon over [zc - h, zc + h]).
struct Scene3 {
  std::vector<Ellipsoid> body, interior;
  std::vector<Polygon> polygons;
  std::vector<std::array<double, 2>> prism_z;  // zc, h per polygon
  Scene plane;                                 // texture and contrast; its shapes are set per slice
};

Scene slice_of(const Scene3& s, double z) {
  Scene out = s.plane;
  out.body = ellipsoid_slice(s.body, z);
  if (out.body.empty()) out.body.push_back({1e-3, 2.0, 2.0, 0.0, 0.0, 0.0});  // air: shapes on an empty background
  out.interior = ellipsoid_slice(s.interior, z);
  for (size_t k = 0; k < s.polygons.size(); ++k)
    if (std::abs(z - s.prism_z[k][0]) < s.prism_z[k][1]) out.polygons.push_back(s.polygons[k]);
  return out;
}
}  // namespace

std::vector<float> random_scene_volume(int64_t n, uint64_t seed, const SceneOptions& o, const Window& w, int64_t z0,
                                       int64_t depth) {
  check_window(n, w);
  if (depth < 1 || z0 < 0 || z0 + depth > n)
    throw InputError("random_scene_volume: slices [" + std::to_string(z0) + ", " + std::to_string(z0 + depth) +
                     ") are not inside the " + std::to_string(n) + " slices");
  if (o.ellipses_min < 0 || o.ellipses_max < o.ellipses_min || o.polygons_min < 0 || o.polygons_max < o.polygons_min)
    throw InputError("random_scene_volume: shape counts must satisfy 0 <= min <= max");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto count = [&](int lo, int hi) { return lo + static_cast<int>(u(rng) * (hi - lo + 1 - 1e-9)); };
  auto centred = [&](double half) { return half * (2.0 * u(rng) - 1.0); };
  Scene3 s;
  if (u(rng) < 0.85) {  // the body, 0.6-0.95 high; else shapes in air
    const double a = 0.55 + 0.4 * u(rng), b = 0.55 + 0.4 * u(rng), c = 0.6 + 0.35 * u(rng);
    s.body.push_back({{1.0, a, b, centred(0.05), centred(0.05), 180.0 * u(rng)}, c, centred(0.05)});
  }
  const int ne = count(o.ellipses_min, o.ellipses_max), np = count(o.polygons_min, o.polygons_max);
  if (ne > 0)
    for (const Ellipse& e : random_ellipses(ne, rng())) {  // contrasts of either sign, some small and sharp
      Ellipsoid q{e, 0.1 + 0.5 * u(rng), centred(0.8)};
      q.e.value = (u(rng) - 0.5) * 1.2;
      q.e.x0 *= 0.9, q.e.y0 *= 0.9;
      if (u(rng) < 0.3) q.e.a *= 0.25, q.e.b *= 0.25, q.c *= 0.25;
      s.interior.push_back(q);
    }
  s.polygons = random_polygons(np, rng());
  for (size_t k = 0; k < s.polygons.size(); ++k) s.prism_z.push_back({centred(0.8), 0.05 + 0.4 * u(rng)});
  draw_texture_and_contrast(s.plane, o, rng);
  // The range on a coarse raster of 8 levels of the whole cube: every crop of one scene alike.
  const int64_t nc = std::min<int64_t>(n, 32);
  float mn = 0, mx = 0;
  for (int64_t k = 0; k < 8; ++k) {
    auto coarse = render(slice_of(s, pixel_centre(k, 8)), nc, Window{0, 0, nc, nc});
    auto [lo, hi] = std::minmax_element(coarse.begin(), coarse.end());
    mn = k ? std::min(mn, *lo) : *lo, mx = k ? std::max(mx, *hi) : *hi;
  }
  std::vector<float> vol;
  vol.reserve(static_cast<size_t>(depth * w.rows * w.cols));
  for (int64_t k = z0; k < z0 + depth; ++k) {
    auto img = render(slice_of(s, pixel_centre(k, n)), n, w);
    apply_contrast(s.plane, mn, mx, img);
    vol.insert(vol.end(), img.begin(), img.end());
  }
  return vol;
}

}  // namespace pnp
