// CPU reference of the Joseph projector and its exact adjoint (float and double; the
// coordinates and the accumulation are double for both).
#include "joseph_math.hpp"
#include "kernels.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace pnp::physics::detail {

template <typename T>
void forward_cpu(const T* img, int64_t ld, int64_t rows, int64_t cols, const double* angles, int64_t K,
                 int64_t n, int64_t n_det, int64_t r0, int64_t c0, T* out) {
  at::parallel_for(0, K, 1, [&](int64_t kb, int64_t ke) {
    std::vector<double> acc(static_cast<size_t>(n_det));
    for (int64_t k = kb; k < ke; ++k) {
      std::fill(acc.begin(), acc.end(), 0.0);
      double c, s;
      cos_sin_deg(angles[k], c, s);
      const RayParams rp = ray_params(c, s, n, n_det, r0, c0);
      const int64_t nsteps = rp.col_mode ? cols : rows;
      const int64_t nlat = rp.col_mode ? rows : cols;
      const int64_t step_stride = rp.col_mode ? 1 : ld;  // element offset of step g
      const int64_t lat_stride = rp.col_mode ? ld : 1;   // element offset of lateral q
      for (int64_t g = 0; g < nsteps; ++g) {
        const double base = rp.L0 + static_cast<double>(g) * rp.Ls;
        // rays with p = base + d Ld in (-1, nlat) touch this step
        const double da = (-1.0 - base) / rp.Ld, db = (static_cast<double>(nlat) - base) / rp.Ld;
        const int64_t dlo = std::max<int64_t>(0, static_cast<int64_t>(std::floor(std::min(da, db))) - 1);
        const int64_t dhi = std::min<int64_t>(n_det - 1, static_cast<int64_t>(std::ceil(std::max(da, db))) + 1);
        const T* line = img + g * step_stride;
        for (int64_t d = dlo; d <= dhi; ++d) {
          const double p = base + static_cast<double>(d) * rp.Ld;
          const double fl = std::floor(p);
          const int64_t q = static_cast<int64_t>(fl);
          if (q < -1 || q >= nlat) continue;
          const double f = p - fl;
          const double v0 = q >= 0 ? static_cast<double>(line[q * lat_stride]) : 0.0;
          const double v1 = q + 1 < nlat ? static_cast<double>(line[(q + 1) * lat_stride]) : 0.0;
          acc[static_cast<size_t>(d)] += (1.0 - f) * v0 + f * v1;
        }
      }
      T* o = out + k * n_det;
      for (int64_t d = 0; d < n_det; ++d) o[d] = static_cast<T>(acc[static_cast<size_t>(d)] * rp.inv_a);
    }
  });
}

template <typename T>
void adjoint_cpu(const T* sino, const double* angles, int64_t K, int64_t n, int64_t n_det, int64_t r0,
                 int64_t c0, int64_t rows, int64_t cols, T* out, int64_t ld_out) {
  struct Ang {
    double c, s, a, inv_a2;
  };
  std::vector<Ang> ang(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) {
    Ang& A = ang[static_cast<size_t>(k)];
    cos_sin_deg(angles[k], A.c, A.s);
    A.a = std::max(std::fabs(A.c), std::fabs(A.s));
    A.inv_a2 = 1.0 / (A.a * A.a);
  }
  at::parallel_for(0, rows, 1, [&](int64_t rb, int64_t re) {
    std::vector<double> acc(static_cast<size_t>(cols));
    for (int64_t r = rb; r < re; ++r) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k = 0; k < K; ++k) {
        const Ang& A = ang[static_cast<size_t>(k)];
        const double t_row = pixel_t(A.c, A.s, n, n_det, r0 + r, c0);
        const T* y = sino + k * n_det;
        for (int64_t jj = 0; jj < cols; ++jj) {
          const double t = t_row + static_cast<double>(jj) * A.c;
          const double fl = std::floor(t);
          const int64_t q = static_cast<int64_t>(fl);
          if (q < -1 || q >= n_det) continue;
          const double fr = t - fl;
          const double w0 = std::max(0.0, A.a - fr), w1 = std::max(0.0, A.a - (1.0 - fr));
          double v = 0.0;
          if (q >= 0) v += w0 * static_cast<double>(y[q]);
          if (q + 1 < n_det) v += w1 * static_cast<double>(y[q + 1]);
          acc[static_cast<size_t>(jj)] += v * A.inv_a2;
        }
      }
      T* o = out + r * ld_out;
      for (int64_t jj = 0; jj < cols; ++jj) o[jj] = static_cast<T>(acc[static_cast<size_t>(jj)]);
    }
  });
}

template void forward_cpu<float>(const float*, int64_t, int64_t, int64_t, const double*, int64_t, int64_t, int64_t,
                                 int64_t, int64_t, float*);
template void forward_cpu<double>(const double*, int64_t, int64_t, int64_t, const double*, int64_t, int64_t,
                                  int64_t, int64_t, int64_t, double*);
template void adjoint_cpu<float>(const float*, const double*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                 int64_t, float*, int64_t);
template void adjoint_cpu<double>(const double*, const double*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                  int64_t, int64_t, double*, int64_t);

}  // namespace pnp::physics::detail
