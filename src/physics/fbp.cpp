// Filtered backprojection: Kak-Slaney ramp (optionally Shepp-Logan or cosine windowed),
// zero-padded to the next power of two >= 2 n_det, applied with ATen's FFT (at::fft_rfft), then A^T with
// the pi / (2K) scaling.
#include <pnp/physics.hpp>

#include <cmath>
#include <numbers>

namespace pnp::physics {

FbpFilter parse_fbp_filter(const std::string& name) {
  if (name == "ramp") return FbpFilter::ramp;
  if (name == "shepp_logan" || name == "shepp-logan") return FbpFilter::shepp_logan;
  if (name == "cosine") return FbpFilter::cosine;
  throw InputError("unknown FBP filter '" + name + "' (expected ramp, shepp_logan or cosine)");
}

std::string to_string(FbpFilter f) {
  switch (f) {
    case FbpFilter::ramp: return "ramp";
    case FbpFilter::shepp_logan: return "shepp_logan";
    case FbpFilter::cosine: return "cosine";
  }
  return "?";
}

at::Tensor fbp_filter_response(int64_t P, FbpFilter f) {
  if (P < 2 || (P & (P - 1)) != 0) throw Error("fbp_filter_response: padded length must be a power of two >= 2");
  constexpr double pi = std::numbers::pi;
  auto h = at::zeros({P}, at::kDouble);
  auto* hp = h.data_ptr<double>();
  hp[0] = 0.25;
  for (int64_t i = 1; i < P; i += 2) {
    const double m = static_cast<double>(std::min(i, P - i));
    hp[i] = -1.0 / ((pi * m) * (pi * m));
  }
  auto H = (2.0 * at::real(at::fft_fft(h))).contiguous();
  auto* Hp = H.data_ptr<double>();
  if (f == FbpFilter::shepp_logan) {
    for (int64_t i = 1; i < P; ++i) {
      const double fr = static_cast<double>(i < (P + 1) / 2 ? i : i - P) / static_cast<double>(P);  // fftfreq
      const double omega = pi * fr;
      Hp[i] *= std::sin(omega) / omega;
    }
  } else if (f == FbpFilter::cosine) {
    // fftshift(sin(linspace(0, pi, P, endpoint=False)))
    for (int64_t i = 0; i < P; ++i) {
      const int64_t src = (i + P / 2) % P;  // fftshift for even P: out[i] = in[(i + P/2) % P]
      Hp[i] *= std::sin(pi * static_cast<double>(src) / static_cast<double>(P));
    }
  }
  return H;
}

at::Tensor fbp_filter(const at::Tensor& sino, FbpFilter f) {
  if (!sino.defined() || sino.dim() != 2) throw Error("fbp_filter: sinogram must be [K, n_det]");
  const int64_t D = sino.size(1);
  int64_t P = 64;
  while (P < 2 * D) P *= 2;
  auto H = fbp_filter_response(P, f).slice(0, 0, P / 2 + 1).to(sino.device(), sino.scalar_type());
  auto S = at::fft_rfft(sino, P, 1);
  return at::fft_irfft(S * H, P, 1).slice(1, 0, D).contiguous();
}

at::Tensor fbp(const at::Tensor& sino, const Geometry& g, const Box& box, FbpFilter f) {
  const double scale = std::numbers::pi / (2.0 * static_cast<double>(g.n_angles()));
  return adjoint(fbp_filter(sino, f), g, box).mul_(scale);
}

}  // namespace pnp::physics
