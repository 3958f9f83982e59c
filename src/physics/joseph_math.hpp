// Geometry arithmetic shared by the CPU and CUDA kernels (no torch, no std:: containers).
//
// Joseph projector, per angle with c = cos, s = sin, a = max(|c|, |s|):
//   row mode (|c| >= |s|): the ray steps over box rows g, lateral = box column
//   col mode (|s| >  |c|): the ray steps over box columns g, lateral = box row
// and the lateral coordinate of ray d at step g is  p = L0 + d * Ld + g * Ls  (box-local,
// pixel centres at integers). The sample is the linear interpolation between the pixels
// floor(p) and floor(p)+1 of that step (zero outside the box), times 1/a.
// The adjoint uses the closed form A[(k,d),(i,j)] = max(0, a - |d - t_ij|) / a^2 with
// t_ij = x_j c + y_i s + (n_det-1)/2 in detector-index units.
#pragma once

#include "pnp/splitmix64.hpp"

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define PNP_HD __host__ __device__ __forceinline__
#else
#define PNP_HD inline
#endif

namespace pnp::physics::detail {

// cos/sin of an angle in degrees, exact at multiples of 45 degrees (cos 45 == sin 45 as
// doubles, so the row/column mode choice is the same everywhere).
PNP_HD void cos_sin_deg(double deg, double& c, double& s) {
  double r = fmod(deg, 360.0);
  if (r < 0) r += 360.0;
  const double q = r / 45.0;
  const double fq = floor(q);
  if (q == fq) {
    const double h = 0.70710678118654752440;
    const int m = static_cast<int>(fq) & 7;
    const double ct[8] = {1.0, h, 0.0, -h, -1.0, -h, 0.0, h};
    const double st[8] = {0.0, h, 1.0, h, 0.0, -h, -1.0, -h};
    c = ct[m];
    s = st[m];
    return;
  }
  const double rad = r * 0.017453292519943295769;  // pi / 180
  c = cos(rad);
  s = sin(rad);
}

struct RayParams {
  int col_mode;  // 0: step over rows, 1: step over columns
  double L0, Ld, Ls;
  double inv_a;
};

// Parameters of the forward projector for one angle and a box with origin (r0, c0).
PNP_HD RayParams ray_params(double c, double s, int64_t n, int64_t n_det, int64_t r0, int64_t c0) {
  RayParams p;
  const double hn = 0.5 * static_cast<double>(n - 1);
  const double hd = 0.5 * static_cast<double>(n_det - 1);
  if (fabs(c) >= fabs(s)) {
    p.col_mode = 0;
    p.Ld = 1.0 / c;
    p.Ls = s / c;
    p.L0 = (-hd - (hn - static_cast<double>(r0)) * s) / c + hn - static_cast<double>(c0);
    p.inv_a = 1.0 / fabs(c);
  } else {
    p.col_mode = 1;
    p.Ld = -1.0 / s;
    p.Ls = c / s;
    p.L0 = hn - static_cast<double>(r0) + (hd + (static_cast<double>(c0) - hn) * c) / s;
    p.inv_a = 1.0 / fabs(s);
  }
  return p;
}

// Detector-index coordinate of the centre of global pixel (i, j).
PNP_HD double pixel_t(double c, double s, int64_t n, int64_t n_det, int64_t i, int64_t j) {
  const double hn = 0.5 * static_cast<double>(n - 1);
  const double hd = 0.5 * static_cast<double>(n_det - 1);
  return (static_cast<double>(j) - hn) * c + (hn - static_cast<double>(i)) * s + hd;
}

// The power method's start vector at global pixel index idx (row * n + column): uniform in
// [0, 1), a function of the index and the seed's key only, the same on the CPU and the GPU.
PNP_HD uint64_t power_start_key(uint64_t seed) { return splitmix64(seed ^ 0x5DEECE66Dull); }
PNP_HD double power_start_value(uint64_t key, uint64_t idx) {
  return static_cast<double>(splitmix64(key + idx * 0xD1B54A32D192ED03ull) >> 11) * 0x1.0p-53;
}

}  // namespace pnp::physics::detail
