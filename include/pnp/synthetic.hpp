// Synthetic images: the modified Shepp-Logan phantom and random ellipses, rasterised on
// an N x N grid of unit pixels. The image spans [-1, 1]^2; row 0 is the top (y = +1),
// column 0 the left (x = -1); pixel (i, j) is sampled at its centre.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace pnp {

struct Ellipse {
  double value;    // additive intensity
  double a, b;     // semi-axes along x and y before rotation (in [-1, 1] units)
  double x0, y0;   // centre
  double phi_deg;  // counter-clockwise rotation
};

// The standard modified Shepp-Logan (Toft) phantom: 10 ellipses, intensities in [0, 1].
std::vector<Ellipse> shepp_logan_ellipses();
// `count` random ellipses inside the unit disc, seeded; the raster is rescaled to [0, 1].
std::vector<Ellipse> random_ellipses(int count, uint64_t seed);

// Row-major n x n raster of the sum of the ellipses, sampled at pixel centres
// (supersample^2 samples per pixel when supersample > 1).
std::vector<float> rasterize(const std::vector<Ellipse>& ellipses, int64_t n, int supersample = 1);

// How many of pixel (i, j)'s s x s samples lie inside e (h = 2 / n, the pixel's side; c and sn
// the cosine and sine of e's rotation): rasterize adds e.value * inside / s^2 to the pixel.
inline int ellipse_samples_inside(const Ellipse& e, int64_t i, int64_t j, double h, int s, double c, double sn) {
  int inside = 0;
  for (int si = 0; si < s; ++si)
    for (int sj = 0; sj < s; ++sj) {
      double x = -1.0 + h * (static_cast<double>(j) + (sj + 0.5) / s) - e.x0;
      double y = 1.0 - h * (static_cast<double>(i) + (si + 0.5) / s) - e.y0;
      double xr = x * c + y * sn, yr = -x * sn + y * c;
      if ((xr * xr) / (e.a * e.a) + (yr * yr) / (e.b * e.b) <= 1.0) ++inside;
    }
  return inside;
}

std::vector<float> shepp_logan(int64_t n);
std::vector<float> random_ellipse_image(int64_t n, int count, uint64_t seed);

// ---- Volumes: [slices, n, n], slice s at height z = pixel_centre(s, slices) in [-1, 1]. ----

// An ellipse of the plane extended along z: semi-axis c, centred at z = 0. The slice at height
// z holds the ellipse scaled by sqrt(1 - (z / c)^2) (nothing where |z| >= c).
struct Ellipsoid {
  Ellipse e;
  double c;
  double z0 = 0;  // centre along z
};
// pnp's 3D Shepp-Logan: the modified phantom's ten ellipses as ellipsoids, the head 0.9 high,
// the ventricles 0.22-0.3, the small features 0.02-0.05, so that slices away from the middle
// lose them. Its slice at z = 0 is shepp_logan() exactly.
std::vector<Ellipsoid> shepp_logan_ellipsoids();
// The ellipses of the slice at height z.
std::vector<Ellipse> ellipsoid_slice(const std::vector<Ellipsoid>& ellipsoids, double z);
// `count` random ellipsoids: random_ellipses(count, seed)'s ellipses exactly, each given a centre
// z0 in [-0.7, 0.7] and a height c in [0.05, 0.55] from a generator of its own.
std::vector<Ellipsoid> random_ellipsoids(int count, uint64_t seed);
// pnp_train's held-out volumes: random_ellipsoids on an n^3 grid ([-1, 1]^3, slice k at
// z = pixel_centre(k, n)), [n, n, n] rescaled to [0, 1] as random_ellipse_image is.
std::vector<float> random_ellipsoid_volume(int64_t n, int count, uint64_t seed);
// Slice s of `slices` of the 3D phantom, n x n, clamped to [0, 1] as shepp_logan() is.
std::vector<float> shepp_logan_slice(int64_t s, int64_t slices, int64_t n);

// ---- Training images (pnp_train): polygons, smooth textures and random CT-like scenes. ----

// A filled polygon in [-1, 1] units (even-odd rule), adding `value` inside.
struct Polygon {
  double value;
  std::vector<std::array<double, 2>> vertices;  // (x, y)
};
// `count` random star-shaped polygons (3 to 8 vertices) inside the unit disc, seeded.
std::vector<Polygon> random_polygons(int count, uint64_t seed);

// A smooth texture: the mean of `waves` plane cosines cos(2 pi (fx x + fy y) + phase) with
// random directions, |f| <= max_frequency cycles per unit length, mapped to [0, 1].
struct Texture {
  std::vector<std::array<double, 4>> waves;  // fx, fy, phase, amplitude (amplitudes sum to 1)
};
Texture random_texture(int waves, double max_frequency, uint64_t seed);

// A rectangular window [r0, r0 + rows) x [c0, c0 + cols) of the n x n raster.
struct Window {
  int64_t r0 = 0, c0 = 0, rows = 0, cols = 0;
};

// Rasterise the window of the n x n image (pixel centres, as rasterize): ellipses and
// polygons add, the texture (if any) is returned separately by raster_texture.
std::vector<float> rasterize_window(const std::vector<Ellipse>& ellipses, int64_t n, const Window& w);
// Window w of shepp_logan_slice(s, slices, n), rasterised alone (a rank's tile of a slice).
std::vector<float> shepp_logan_slice_window(int64_t s, int64_t slices, int64_t n, const Window& w);
void add_polygons(std::vector<float>& img, const std::vector<Polygon>& polygons, int64_t n, const Window& w);
std::vector<float> raster_texture(const Texture& t, int64_t n, const Window& w);

// Which parts a random scene draws on; counts are drawn uniformly from [min, max].
struct SceneOptions {
  int ellipses_min = 2, ellipses_max = 14;
  int polygons_min = 0, polygons_max = 6;
  double texture_probability = 0.7;  // chance that a smooth texture modulates the scene
  double texture_max_amplitude = 0.35;
  double texture_max_frequency = 4.0;
  // Random contrast: the scene is rescaled to [lo, hi] with 0 <= lo < hi <= 1 and
  // hi - lo >= contrast_min, then raised to a power gamma in [1/gamma_max, gamma_max].
  double contrast_min = 0.15;
  double gamma_max = 1.5;
};

// A random CT-like image: a body ellipse, interior ellipses and polygons of either sign, an
// optional smooth texture inside the body, random contrast; values in [0, 1]. The scene is
// defined on the whole n x n image; only the window is rendered (so a crop costs its area).
// Deterministic for (n, seed, options, window).
std::vector<float> random_scene(int64_t n, uint64_t seed, const SceneOptions& options, const Window& w);
// A random CT-like volume (pnp_train's 3D scenes) on an n^3 cube, slice k at z = pixel_centre(k, n):
// random_scene's parts extended along z (the body and interior shapes ellipsoids of random
// heights and centres, the polygons prisms of random extent, the texture constant along z),
// its contrast set on the whole cube. Renders slices [z0, z0 + depth) of window w, [depth, rows,
// cols]; each slice costs its window's area. Deterministic for (n, seed, options, window, z0, depth).
std::vector<float> random_scene_volume(int64_t n, uint64_t seed, const SceneOptions& options, const Window& w,
                                       int64_t z0, int64_t depth);

// Centre of pixel index k on an n-pixel axis, in [-1, 1] units (x grows with k).
inline double pixel_centre(int64_t k, int64_t n) { return (2.0 * static_cast<double>(k) + 1.0) / static_cast<double>(n) - 1.0; }

}  // namespace pnp
