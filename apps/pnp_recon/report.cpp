// pnp_recon's terminal output: the phase table, the summary lines, and --check-compile.
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "pnp/device.hpp"
#include "pnp/nn/inductor.hpp"

namespace pnp::recon {

void print_phase_table(const GatheredRecord& g, int ranks, int64_t window, int64_t iterations) {
  const double total = g.table.back().max;
  std::printf("\nPhase times, mean of the last %lld iterations (seconds; max/min/mean over %d ranks):\n",
              (long long)std::min<int64_t>(window, iterations), ranks);
  std::printf("%-20s %12s %12s %12s %8s %8s\n", "phase", "max", "min", "mean", "max/min", "%total");
  for (const auto& r : g.table) {
    if (!std::isfinite(r.max)) {
      std::printf("%-20s %12s   (inside a captured CUDA graph: not separable)\n", r.name.c_str(), "-");
      continue;
    }
    std::printf("%-20s %12.4e %12.4e %12.4e %8.2f %7.1f%%\n", r.name.c_str(), r.max, r.min, r.mean,
                r.min > 0 ? r.max / r.min : 1.0, total > 0 ? 100.0 * r.max / total : 0.0);
  }
  // The set-up before iteration 1, part by part (/timings/setup/*).
  std::printf("\nSet-up before iteration 1 (seconds, max over ranks):");
  double sum = 0;
  for (const auto& [name, v] : g.setup) {
    const double m = v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
    sum += m;
    std::printf(" %s %.3f,", name.c_str(), m);
  }
  std::printf(" sum %.3f\n", sum);
}

void print_summary(const Config& cfg, const PnpRecord& rec, const GatheredRecord& g, at::Device device) {
  int64_t last = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(rec.psnr.size()); ++i)
    if (!std::isnan(rec.psnr[size_t(i)])) last = i;
  const double peak = g.peak.empty() ? 0.0 : *std::max_element(g.peak.begin(), g.peak.end());
  // the power method behind the step, when it ran (a cap reached before solver.power_tol is
  // said), with the set-up's step_size split: its start vector and its first iteration
  char split[96];
  std::snprintf(split, sizeof split, "; start %.3f s, first iteration %.3f s", rec.power_start_s, rec.power_first_s);
  const std::string power =
      rec.power_iterations > 0 ? " (power method, " + std::to_string(rec.power_iterations) + " iterations" +
                                     (rec.power_converged ? "" : ", not converged: raise solver.power_iterations") + split + ")"
                               : "";
  std::printf("\nfirst iteration %.3f s, stable iteration %.4f s, compile %.3f s, step %.4e%s%s\n", g.first, g.stable,
              g.compile, rec.step, power.c_str(),
              last >= 0 ? (", final PSNR " + std::to_string(rec.psnr[size_t(last)]) + " dB, SSIM " +
                           std::to_string(rec.ssim[size_t(last)]))
                              .c_str()
                        : "");
  if (device.is_cuda()) {
    std::printf("peak device memory %s (max over ranks)\n", human_bytes(peak).c_str());
    AllocatorActivity a = device_allocator_stats(device);
    a.reserved_peak_bytes = rec.reserved_peak_bytes;  // the run's (the allocator's is since the last phase)
    std::printf("allocator of rank 0's device: %s\n", to_string(a).c_str());
  }
  const double limit = cfg.denoiser.memory_limit_gb * 1e9;
  if (device.is_cuda() && limit > 0 && peak > limit)
    std::printf("warning: the peak %s exceeded denoiser.memory_limit_gb = %g GB: the estimate (%s) was short; "
                "set a smaller denoiser.patch_size, and please report this case\n",
                human_bytes(peak).c_str(), cfg.denoiser.memory_limit_gb,
                human_bytes(*std::max_element(g.estimate.begin(), g.estimate.end())).c_str());
}

// --check-compile: the configured backend on a small input, against eager (all ranks take part,
// so a shared cache directory sees one compile and the other ranks waiting and loading).
bool check_compile(const Config& cfg, at::Device device, int rank) {
  Config c = cfg;
  if (c.compile.mode == CompileMode::none) c.compile.mode = CompileMode::pre;
  std::ostringstream o;
  o << "check-compile: backend " << to_string(c.compile.backend);
  if (c.compile.backend == CompileBackend::inductor) {
    nn::InductorOptions io_;
    io_.cache_dir = c.compile.cache_dir;
    o << " (" << c.compile.inductor_mode << ", cache " << c.compile.cache_dir << "), " << nn::probe_inductor(io_);
  }
  Denoiser d = make_denoiser(c, device);
  Config ce = cfg;
  ce.compile.mode = CompileMode::none;
  Denoiser e = make_denoiser(ce, device);
  const int64_t a = d.graph.alignment(), s = (16 + a - 1) / a * a;
  std::vector<int64_t> shape{1, d.graph.in_channels};
  for (int i = 0; i < d.graph.dim; ++i) shape.push_back(s);
  at::Tensor x = at::rand(shape, at::TensorOptions().device(device));
  const double sigma = 0.05;
  at::Tensor yc = d.executor->forward(x, sigma).to(at::kFloat), ye = e.executor->forward(x, sigma).to(at::kFloat);
  const double err = (yc - ye).abs().max().item<double>(), scale = ye.abs().max().item<double>();
  // bf16: the two executors round differently (BN folding, fused epilogues): ~2^-8 per layer.
  const double tol = (d.dtype == at::kBFloat16 ? 5e-2 : device.is_cuda() ? 2e-2 : 1e-4) * std::max(1.0, scale);
  const bool ok = std::isfinite(err) && err <= tol;
  o << "\ncheck-compile: " << cfg.denoiser.architecture << " " << nn::shape_string(shape) << " on " << device.str()
    << ": compile " << d.compile_seconds() << " s, max |compiled - eager| = " << err << " (tolerance " << tol << "): "
    << (ok ? "ok" : "FAILED") << "\n";
  for (const auto& n : d.report()) o << "check-compile:   " << n << "\n";
  if (rank == 0) std::cout << o.str() << std::flush;
  return ok;
}

}  // namespace pnp::recon
