// Prints the PSNR and SSIM of the FBP reconstruction of a pnp_recon config's problem: the
// solver's own simulated data (simulate_sinogram: same phantom, angles, noise and seed) and its
// own FBP (physics::fbp with solver.fbp_filter, the image pnp_recon starts from with init =
// "fbp"), with PSNR and SSIM defined as pnp_recon defines them (data range = max - min of the
// truth). The FBP is reported clamped to the truth's [min, max] as the solver clamps its
// iterates (the stronger baseline, used by the demo-quality test) and unclamped, with the
// seconds of the FBP alone.
//   demo_fbp_psnr CONFIG.toml [cpu|cuda]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "pnp/metrics.hpp"
#include "pnp/solver.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: demo_fbp_psnr CONFIG.toml [cpu|cuda]\n");
    return 2;
  }
  try {
    pnp::Config cfg = pnp::load_config(argv[1]);
    const at::Device dev = argc == 3 && std::string(argv[2]) == "cuda" ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
    auto s = pnp::simulate_sinogram(cfg.problem, dev);
    const int64_t n = cfg.problem.size;
    auto geom = pnp::physics::Geometry::standard(n, cfg.problem.angles, cfg.problem.detector);
    at::Tensor y = at::from_blob(s.data.data.data(), {s.data.shape[0], s.data.shape[1]}, at::kFloat).clone().to(dev);
    at::Tensor truth = at::from_blob(s.ground_truth->data.data(), {n, n}, at::kFloat).clone().to(at::kDouble);
    const auto t0 = std::chrono::steady_clock::now();
    at::Tensor x = pnp::physics::fbp(y, geom, geom.full_box(), pnp::physics::parse_fbp_filter(cfg.solver.fbp_filter))
                       .to(at::kCPU, at::kDouble);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double lo = truth.min().item<double>(), hi = truth.max().item<double>();
    std::printf("fbp_psnr %.4f\nfbp_psnr_unclamped %.4f\nfbp_ssim %.6f\nfbp_seconds %.4f\n",
                pnp::metrics::psnr(x.clamp(lo, hi), truth, hi - lo), pnp::metrics::psnr(x, truth, hi - lo),
                pnp::metrics::ssim(x.clamp(lo, hi), truth, hi - lo), secs);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
