// The projector benchmark: times A and A^T on the tile of rank 0 of `slabs` row slabs, with
// the checks of adjointness and of CUDA against the float64 CPU reference.
#include "bench.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <ostream>

#include "pnp/timing.hpp"

namespace pnp::physics {

namespace {

struct Timing {
  double median_ms = 0, min_ms = 0;
};

// Median and minimum of `reps` synchronised calls after `warmup` (device events on CUDA).
Timing time_it(const std::function<void()>& fn, at::Device dev, int warmup, int reps) {
  const CallTimer timer(dev);
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) ms.push_back(1e3 * timer.time(fn));
  std::sort(ms.begin(), ms.end());
  return Timing{ms[ms.size() / 2], ms.front()};
}

double rel_err(const at::Tensor& a, const at::Tensor& b) {
  auto A = a.to(at::kCPU, at::kDouble), B = b.to(at::kCPU, at::kDouble);
  return (A - B).norm().item<double>() / std::max(B.norm().item<double>(), 1e-300);
}

double adjointness(const at::Tensor& x, const at::Tensor& y, const Geometry& g, const Box& box) {
  auto Ax = forward(x, g, box).to(at::kCPU, at::kDouble);
  auto Aty = adjoint(y, g, box).to(at::kCPU, at::kDouble);
  auto X = x.to(at::kCPU, at::kDouble), Y = y.to(at::kCPU, at::kDouble);
  const double lhs = (Ax * Y).sum().item<double>(), rhs = (X * Aty).sum().item<double>();
  return std::fabs(lhs - rhs) / (Ax.norm().item<double>() * Y.norm().item<double>());
}

}  // namespace

int run_bench(const BenchOptions& opt, std::ostream& os) {
  const at::Device dev = parse_device(opt.device, "--device");
  const bool cuda = dev.is_cuda();
#ifndef PNP_HAVE_CUDA
  if (cuda) throw InputError("--device cuda: this build has no CUDA kernels (PNP_WITH_CUDA=OFF)");
#endif
  at::ScalarType dtype;
  if (opt.dtype == "float32")
    dtype = at::kFloat;
  else if (opt.dtype == "float64")
    dtype = at::kDouble;
  else
    throw InputError("--dtype must be float32 or float64, got '" + opt.dtype + "'");
  if (opt.slabs < 1 || opt.reps < 1 || opt.warmup < 0) throw InputError("--slabs and --reps must be >= 1");
  const Geometry g = Geometry::standard(opt.n, opt.angles, opt.n_det);
  const int64_t rows0 = (g.n + opt.slabs - 1) / opt.slabs;
  const Box box{0, rows0, 0, g.n};
  const int64_t K = g.n_angles(), D = g.n_det;
  const int64_t esize = dtype == at::kFloat ? 4 : 8;

  const std::string devname = device_name(dev);
  os << "pnp_radon_bench: n=" << g.n << " K=" << K << " n_det=" << D << " dtype=" << opt.dtype
     << " device=" << devname << " slabs=" << opt.slabs << " box=" << pnp::to_string(box) << " date=" << iso8601_utc_now()
     << "\n";
  const double U = updates(g, box);
  const double samples = static_cast<double>(K) * static_cast<double>(D) * static_cast<double>(box.rows());
  const double bytes = static_cast<double>(box.size() + K * D) * static_cast<double>(esize);
  os << std::setprecision(4) << "  work: " << U / 1e9 << " G pixel-angle updates; forward ray samples (upper bound) "
     << samples / 1e9 << " G; compulsory bytes " << bytes / 1e6 << " MB (image + sinogram, once)\n";

  at::manual_seed(1234);
  const auto opts = at::TensorOptions().dtype(dtype).device(dev);
  std::vector<at::Tensor> xs, ys;
  for (int i = 0; i < 2; ++i) {
    xs.push_back(at::rand({box.rows(), box.cols()}, opts));
    ys.push_back(at::rand({K, D}, opts));
  }
  at::Tensor p = at::empty({K, D}, opts), z = at::empty({box.rows(), box.cols()}, opts);
  int it = 0;
  const Timing tf = time_it([&] { forward_out(xs[(it++) & 1], g, box, p); }, dev, opt.warmup, opt.reps);
  it = 0;
  const Timing ta = time_it([&] { adjoint_out(ys[(it++) & 1], g, box, z); }, dev, opt.warmup, opt.reps);
  auto line = [&](const char* what, const Timing& t) {
    os << "  " << std::left << std::setw(10) << what << std::right << std::fixed << std::setprecision(3)
       << " median " << std::setw(9) << t.median_ms << " ms  min " << std::setw(9) << t.min_ms << " ms  "
       << std::setprecision(1) << std::setw(7) << U / (t.median_ms * 1e-3) / 1e9 << " GUPS\n"
       << std::defaultfloat;
  };
  line("forward", tf);
  line("adjoint", ta);
  if (opt.fbp) {
    const Timing tb = time_it([&] { (void)fbp(ys[0], g, box); }, dev, opt.warmup, opt.reps);
    line("fbp", tb);
  }
  int rc = 0;
  if (opt.check) {
    const double adj = adjointness(xs[0], ys[0], g, box);
    const double tol = dtype == at::kFloat ? 1e-5 : 1e-12;
    os << std::setprecision(3) << "  check: adjointness |<Ax,y>-<x,A^T y>|/(|Ax||y|) = " << adj << " (tol " << tol
       << ")\n";
    if (!(adj < tol)) rc = 1;
    if (cuda) {
      // CUDA against the float64 CPU reference on a smaller problem with the same angles.
      Geometry gs = Geometry::standard(std::min<int64_t>(g.n, 384), K);
      const Box bs{gs.n / 5, gs.n - 3, 7, gs.n - 11};
      auto xc = at::rand({bs.rows(), bs.cols()}, at::kDouble), yc = at::rand({K, gs.n_det}, at::kDouble);
      const double ef = rel_err(forward(xc.to(opts), gs, bs), forward(xc, gs, bs));
      const double ea = rel_err(adjoint(yc.to(opts), gs, bs), adjoint(yc, gs, bs));
      const double tol2 = dtype == at::kFloat ? 1e-5 : 1e-12;
      os << "  check: CUDA vs CPU float64 (n=" << gs.n << ", box " << pnp::to_string(bs)
         << "): forward rel " << ef << ", adjoint rel " << ea << " (tol " << tol2 << ")\n";
      if (!(ef < tol2 && ea < tol2)) rc = 1;
    }
  }
  if (opt.opnorm_iterations > 0) {
    PowerOptions po;
    po.max_iterations = opt.opnorm_iterations;
    po.tol = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const PowerResult r = operator_norm_detailed(g, g.full_box(), [](at::Tensor&) {}, po, dev, dtype);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    os << std::setprecision(8) << "  operator norm ||A^T A|| ~ " << r.norm << " after " << r.iterations
       << " iterations (" << std::setprecision(3) << s << " s)\n";
  }
  os << "  result: " << (rc == 0 ? "PASS" : "FAIL") << "\n";
  return rc;
}

}  // namespace pnp::physics
