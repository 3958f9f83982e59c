// Synthetic images: the modified Shepp-Logan phantom and random ellipses, rasterised on
// an N x N grid of unit pixels. The image spans [-1, 1]^2; row 0 is the top (y = +1),
// column 0 the left (x = -1); pixel (i, j) is sampled at its centre.
#pragma once

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

std::vector<float> shepp_logan(int64_t n);
std::vector<float> random_ellipse_image(int64_t n, int count, uint64_t seed);

// Centre of pixel index k on an n-pixel axis, in [-1, 1] units (x grows with k).
inline double pixel_centre(int64_t k, int64_t n) { return (2.0 * static_cast<double>(k) + 1.0) / static_cast<double>(n) - 1.0; }

}  // namespace pnp
