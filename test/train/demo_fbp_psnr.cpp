// Prints the PSNR of the FBP reconstruction of a pnp_recon config's problem: the solver's own
// simulated data (simulate_sinogram: same phantom, angles, noise and seed) and its own FBP
// (physics::fbp with solver.fbp_filter, the image pnp_recon starts from with init = "fbp"),
// with the PSNR defined as pnp_recon defines it (peak = max - min of the truth). The FBP is
// reported clamped to the truth's [min, max] as the solver clamps its iterates (the stronger
// baseline, used by the demo-quality test) and unclamped.
//   demo_fbp_psnr CONFIG.toml
#include <cmath>
#include <cstdio>

#include "pnp/solver.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: demo_fbp_psnr CONFIG.toml\n");
    return 2;
  }
  try {
    pnp::Config cfg = pnp::load_config(argv[1]);
    auto s = pnp::simulate_sinogram(cfg.problem, at::kCPU);
    const int64_t n = cfg.problem.size;
    auto geom = pnp::physics::Geometry::standard(n, cfg.problem.angles, cfg.problem.detector);
    at::Tensor y = at::from_blob(s.data.data.data(), {s.data.shape[0], s.data.shape[1]}, at::kFloat).clone();
    at::Tensor truth = at::from_blob(s.ground_truth->data.data(), {n, n}, at::kFloat).clone().to(at::kDouble);
    at::Tensor x = pnp::physics::fbp(y, geom, geom.full_box(), pnp::physics::parse_fbp_filter(cfg.solver.fbp_filter))
                       .to(at::kDouble);
    const double lo = truth.min().item<double>(), hi = truth.max().item<double>();
    auto psnr = [&](const at::Tensor& im) {
      double mse = (im - truth).square().mean().item<double>();
      return 10.0 * std::log10((hi - lo) * (hi - lo) / mse);
    };
    std::printf("fbp_psnr %.4f\nfbp_psnr_unclamped %.4f\n", psnr(x.clamp(lo, hi)), psnr(x));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
