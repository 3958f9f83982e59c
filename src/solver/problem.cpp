#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "pnp/messages.hpp"
#include "pnp/device.hpp"
#include "pnp/solver.hpp"
#include "pnp/synthetic.hpp"
#include "pnp/validate.hpp"

namespace pnp {

namespace {
at::Tensor from_vector(std::vector<float> v, std::vector<int64_t> shape) {
  return at::from_blob(v.data(), shape, at::kFloat).clone();
}

std::string simulated_angles(const ProblemConfig& p) {
  return "simulated: " + std::to_string(p.angles) + " angles evenly spaced over [0, 180) degrees";
}

// The geometry of a sinogram file's k angles and det bins: its theta (degrees; `warning` when they
// look like radians), or, when it has none, k angles assumed evenly spaced, said so.
void file_geometry(Problem& prob, const ProblemConfig& p, int64_t k, int64_t det, std::vector<double> theta,
                   std::string warning) {
  if (theta.empty()) {
    prob.geom = physics::Geometry::standard(p.size, k, det);
    prob.angles_assumed = true;
    prob.angles_source = "assumed: " + std::to_string(k) + " angles evenly spaced over [0, 180) degrees (" +
                         clip_value(p.sinogram) + " has no " + p.theta_path + ")";
    return;
  }
  prob.angles_source = "read from " + p.theta_path + " of " + p.sinogram;
  prob.angles_warning = std::move(warning);
  prob.geom.n = p.size;
  prob.geom.n_det = det;
  prob.geom.angles_deg = std::move(theta);
}
}  // namespace

at::Tensor noisy_projection(const at::Tensor& truth_own, const physics::Geometry& geom, const Box& own,
                            double noise_sigma, int64_t seed, Communicator* comm) {
  // A x in float64, the ranks' partial sinograms summed, then rounded once: the data do not
  // depend on the rank count (but for the rare sum that lands on the other side of a float32
  // rounding boundary), as a float32 sum of partial projections would, at float32 rounding.
  const auto device = truth_own.device();
  at::Tensor y64 = at::empty({geom.n_angles(), geom.n_det}, at::TensorOptions().dtype(at::kDouble).device(device));
  if (own.empty())
    y64.zero_();
  else
    physics::forward_out(truth_own.to(at::kDouble), geom, own, y64);
  if (comm) comm->allreduce_sum(y64);
  at::Tensor y = y64.to(at::kFloat);
  if (noise_sigma > 0) {  // the same noise on every rank (a host generator of the seed)
    at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed) * 2654435761ull + 17);
    const double scale = noise_sigma * y.abs().max().item<double>();
    y = y + scale * at::normal(0.0, 1.0, y.sizes(), gen, at::kFloat).to(device);
  }
  return y.contiguous();
}

Problem simulate_problem(const ProblemConfig& p, const Box& own, at::Device device, Communicator* comm) {
  auto geom = physics::Geometry::standard(p.size, p.angles, p.detector);
  auto global_max = [&](double v) { return comm ? comm->max(v) : v; };
  const bool ellipses = p.phantom == "ellipses";
  std::vector<float> img;
  auto raster = [&] {
    if (own.empty()) return;
    const Window w{own.r0, own.c0, own.rows(), own.cols()};
    img = rasterize_window(ellipses ? random_ellipses(12, static_cast<uint64_t>(p.seed)) : shepp_logan_ellipses(), p.size, w);
  };
  // the one step that can fail on some ranks only, agreed on before the collectives below
  if (comm) collectively(comm->mpi_comm(), raster);
  else raster();
  // the whole image's [min, max], from every rank's pixels
  auto range = [&] {
    const auto [lo, hi] = std::minmax_element(img.begin(), img.end());
    const float inf = std::numeric_limits<float>::infinity();
    return std::pair<float, float>{static_cast<float>(-global_max(img.empty() ? inf : -*lo)),
                                   static_cast<float>(global_max(img.empty() ? -inf : *hi))};
  };
  if (ellipses) {  // random_ellipse_image's normalisation to [0, 1], by the whole image's range
    const auto [a, b] = range();
    const float span = b - a;
    for (auto& v : img) v = span > 0 ? (v - a) / span : 0.0f;
  } else {  // shepp_logan's clamp to [0, 1]
    for (auto& v : img) v = std::clamp(v, 0.0f, 1.0f);
  }
  const auto [truth_min, truth_max] = range();

  Problem prob;
  prob.geom = geom;
  prob.truth_own = from_vector(std::move(img), {std::max<int64_t>(own.rows(), 0), std::max<int64_t>(own.cols(), 0)}).to(device);
  prob.truth_min = truth_min;
  prob.truth_max = truth_max;
  prob.y = noisy_projection(prob.truth_own, geom, own, p.noise_sigma, p.seed, comm);
  prob.angles_source = simulated_angles(p);
  return prob;
}

io::Sinogram simulate_sinogram(const ProblemConfig& p, at::Device device) {
  const Box all{0, p.size, 0, p.size};
  Problem prob = simulate_problem(p, all, device, nullptr);
  const at::Tensor y = prob.y.to(at::kCPU).contiguous(), gt = prob.truth_own.to(at::kCPU).contiguous();
  io::Sinogram s;
  s.data.shape = {y.size(0), y.size(1)};
  s.data.data.assign(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
  s.theta_deg = prob.geom.angles_deg;
  s.ground_truth = io::Array<float>{{p.size, p.size}, std::vector<float>(gt.data_ptr<float>(), gt.data_ptr<float>() + gt.numel())};
  return s;
}

namespace {
int64_t standard_detector(int64_t n) { return static_cast<int64_t>(std::ceil(std::sqrt(2.0) * static_cast<double>(n))); }
}  // namespace

namespace {
// Whether the sinogram file's data is a projection volume: 3D [angles, slices, detector].
bool volume_file(const ProblemConfig& p) {
  try {
    io::H5File f = io::H5File::open(p.sinogram);
    return io::shape_of(f, p.data_path).size() == 3;
  } catch (...) {
    return false;  // the reader below names what is wrong
  }
}
io::VolumePaths volume_paths(const ProblemConfig& p) {
  io::VolumePaths v;
  v.data = p.data_path, v.theta = p.theta_path, v.ground_truth = p.ground_truth_path;
  return v;
}
}  // namespace

void resolve_problem_sizes(Config& cfg) {
  ProblemConfig& p = cfg.problem;
  if (p.sinogram.empty()) return;  // generated: the configured sizes
  const std::string file = "problem.sinogram " + p.sinogram;
  int64_t k = 0, det = 0, truth_n = 0;  // truth_n: the ground truth's side, 0 = none
  if (volume_file(p)) {
    const io::VolumeShapes sh = io::read_volume_shapes(p.sinogram, volume_paths(p));
    if (cfg.is_given("problem.slices") && p.slices != sh.slices())
      throw InputError("problem.slices = " + std::to_string(p.slices) + " but " + file + " has " +
                       std::to_string(sh.slices()) + " slices (leave problem.slices out to take the file's)");
    p.slices = sh.slices();
    k = sh.angles(), det = sh.detector();
    truth_n = sh.ground_truth.empty() ? 0 : sh.ground_truth[1];
  } else {
    const io::DxchangeShapes sh = io::read_dxchange_shapes(p.sinogram, {p.data_path, p.theta_path, p.ground_truth_path});
    if (cfg.is_given("problem.slices") && p.slices != 0)
      throw InputError("problem.slices = " + std::to_string(p.slices) + " but " + file + " holds one sinogram [" +
                       std::to_string(sh.data[0]) + ", " + std::to_string(sh.data[1]) + "], not a volume");
    k = sh.data[0], det = sh.data[1];
    truth_n = sh.has_truth ? sh.ground_truth[0] : 0;
  }
  if (cfg.is_given("problem.angles") && p.angles != k)
    throw InputError("problem.angles = " + std::to_string(p.angles) + " but " + file + " has " + std::to_string(k) +
                     " angles (leave problem.angles out to take the file's)");
  p.angles = k;
  if (cfg.is_given("problem.detector") && p.detector != 0 && p.detector != det)
    throw InputError("problem.detector = " + std::to_string(p.detector) + " but the sinogram has " + std::to_string(det) +
                     " detector bins");
  int64_t n = 0;
  if (cfg.is_given("problem.size")) {
    n = p.size;
    if (truth_n && truth_n != n)
      throw InputError("problem.size = " + std::to_string(n) + " but the ground truth in " + file + " is " +
                       std::to_string(truth_n) + " x " + std::to_string(truth_n));
  } else if (truth_n) {
    n = truth_n;
  } else {
    // The image size whose standard detector (ceil(sqrt(2) N) bins) is the file's: at most one.
    for (int64_t c = static_cast<int64_t>(std::floor(double(det) / std::sqrt(2.0))) - 2; c <= det; ++c)
      if (c >= 1 && standard_detector(c) == det) {
        n = c;
        break;
      }
    if (n == 0)
      throw InputError(file + " has " + std::to_string(det) + " detector bins, which is ceil(sqrt(2) N) for no image "
                       "size N, and no ground truth: set problem.size (and problem.detector = " +
                       std::to_string(det) + " for this detector)");
  }
  if (n < 8 || n > 65536)
    throw InputError("the image size " + std::to_string(n) + " from " + file + " is outside [8, 65536]");
  if (!(cfg.is_given("problem.detector") && p.detector == det) && standard_detector(n) != det)
    throw InputError(file + " has " + std::to_string(det) + " detector bins, but a " + std::to_string(n) + " x " +
                     std::to_string(n) + " image has ceil(sqrt(2) N) = " + std::to_string(standard_detector(n)) +
                     ": set problem.detector = " + std::to_string(det) + " if the detector really is that wide, or "
                     "the right problem.size");
  p.size = n;
  if (standard_detector(n) != det) p.detector = det;
}

namespace {

// The truth's [min, max] over every rank's pixels (none: +inf, -inf).
std::pair<double, double> global_range(const at::Tensor& truth, Communicator* world) {
  const double inf = std::numeric_limits<double>::infinity();
  double lo = truth.numel() ? truth.min().item<double>() : inf, hi = truth.numel() ? truth.max().item<double>() : -inf;
  if (world) lo = -world->max(-lo), hi = world->max(hi);
  return {lo, hi};
}

// A volume's slab on world rank `rank` (setup_problem).
Problem setup_volume(const Config& cfg, const Decomposition& d, int rank, at::Device device, Communicator* plane,
                     Communicator* world, bool host_resident) {
  const ProblemConfig& p = cfg.problem;
  const Box& own = d.tile_of(rank).own;
  const auto [z0, z1] = d.z.range(rank);
  const int64_t slab = z1 - z0;
  Problem prob;
  prob.slices = d.z.slices, prob.z0 = z0;
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  // the slab's tensors: on the device, or for a streamed slab in host memory
  auto slab_tensor = [&](int64_t a, int64_t b) {
    return host_resident ? host_store({slab, a, b}, device) : at::empty({slab, a, b}, opts.device(device));
  };
  // a host tensor (read or rasterised) as the slab's: moved to the device, or kept in host memory
  auto placed = [&](at::Tensor t) {
    if (!host_resident) return t.to(device);
    at::Tensor h = host_store(t.sizes().vec(), device);
    h.copy_(t);
    return h;
  };
  if (p.sinogram.empty()) {
    prob.geom = physics::Geometry::standard(p.size, p.angles, p.detector);
    prob.truth_own = slab_tensor(own.rows(), own.cols());
    prob.y = slab_tensor(prob.geom.n_angles(), prob.geom.n_det);
    const Window w{own.r0, own.c0, own.rows(), own.cols()};
    for (int64_t s = 0; s < slab; ++s) {  // each slice as pnp_phantom --slices projects it
      const at::Tensor truth = from_vector(shepp_logan_slice_window(z0 + s, p.slices, p.size, w), {own.rows(), own.cols()}).to(device);
      prob.truth_own[s].copy_(truth);
      prob.y[s].copy_(noisy_projection(truth, prob.geom, own, p.noise_sigma, p.seed + 1000003 * (z0 + s), plane));
    }
    prob.angles_source = simulated_angles(p);
  } else {
    const io::VolumePaths paths = volume_paths(p);
    const io::VolumeShapes sh = io::read_volume_shapes(p.sinogram, paths);
    // The slab's share of the host, checked before it is read (the raw slab and its float copy).
    const double bytes = 8.0 * double(slab) * double(sh.angles()) * double(sh.detector()) +
                         (sh.ground_truth.empty() ? 0.0 : 4.0 * double(slab) * double(p.size) * double(p.size));
    if (bytes > host_memory_bytes())
      throw InputError(p.sinogram + ": slices [" + std::to_string(z0) + ", " + std::to_string(z1) + ") need " +
                       human_bytes(bytes) + " to read, more than this host's " + human_bytes(host_memory_bytes()) +
                       ": use more ranks");
    io::SlabSinograms sl = io::read_volume_slab(p.sinogram, paths, sh, z0, z1);
    prob.clipped = sl.clipped, prob.dead_bins = sl.dead_bins;
    prob.y = placed(from_vector(std::move(sl.sinograms.data), {slab, sh.angles(), sh.detector()}));
    std::vector<double> theta;
    std::string warning;
    if (sh.has_theta) {
      io::H5File f = io::H5File::open(p.sinogram);
      theta = io::read_angles(f, p.sinogram, p.theta_path, warning);
    }
    file_geometry(prob, p, sh.angles(), sh.detector(), std::move(theta), std::move(warning));
    if (!sh.ground_truth.empty()) {
      io::H5File f = io::H5File::open(p.sinogram);
      io::Array<float> gt = io::read_hyperslab<float>(f, p.ground_truth_path, {z0, own.r0, own.c0},
                                                      {slab, own.rows(), own.cols()});
      validate::require_finite(gt.data.data(), gt.shape, "'" + p.ground_truth_path + "' of " + p.sinogram);
      prob.truth_own = placed(from_vector(std::move(gt.data), {slab, own.rows(), own.cols()}));
    }
  }
  prob.geom.validate();
  // the range over the whole volume (every rank has a truth or none: the same file)
  if (prob.has_truth()) std::tie(prob.truth_min, prob.truth_max) = global_range(prob.truth_own, world);
  if (world && plane) {  // the whole volume's counts (each plane's ranks read the same slab)
    prob.clipped = static_cast<int64_t>(world->sum(double(prob.clipped)) / plane->size());
    prob.dead_bins = static_cast<int64_t>(world->sum(double(prob.dead_bins)) / plane->size());
  }
  return prob;
}

}  // namespace

Problem setup_problem(const Config& cfg, const Decomposition& d, int rank, at::Device device, Communicator* comm,
                      Communicator* world, bool host_resident) {
  const ProblemConfig& p = cfg.problem;
  if (d.z.volume()) return setup_volume(cfg, d, rank, device, comm, world, host_resident);
  const Box& own = d.tile(rank).own;
  if (p.sinogram.empty()) {
    if (comm) return simulate_problem(p, own, device, comm);
    Problem prob = simulate_problem(p, Box{0, p.size, 0, p.size}, device, nullptr);
    prob.truth_own = prob.truth_own.narrow(0, own.r0, own.rows()).narrow(1, own.c0, own.cols()).contiguous();
    return prob;
  }
  io::Sinogram s;
  {
    io::DxchangeExpect e;
    e.angles = p.angles;
    e.detector = p.detector ? p.detector : standard_detector(p.size);
    e.size = p.size;
    e.max_bytes = host_memory_bytes();
    e.source = "the effective problem.size " + std::to_string(p.size) + " and problem.angles " + std::to_string(p.angles);
    s = io::read_dxchange(p.sinogram, {p.data_path, p.theta_path, p.ground_truth_path}, e);
  }
  Problem prob;
  int64_t k = s.data.shape[0], det = s.data.shape[1];
  file_geometry(prob, p, k, det, s.theta_deg, s.theta_warning);
  if (!p.sinogram.empty() && p.detector != 0 && p.detector != det)
    throw InputError("problem.detector = " + std::to_string(p.detector) + " but the sinogram has " +
                     std::to_string(det) + " detector bins");
  if (s.ground_truth && s.ground_truth->shape[0] != p.size)
    throw InputError("the ground truth is " + std::to_string(s.ground_truth->shape[0]) + " x " +
                     std::to_string(s.ground_truth->shape[1]) + " but problem.size = " + std::to_string(p.size));
  prob.geom.validate();
  prob.y = from_vector(std::move(s.data.data), {k, det}).to(device);
  if (s.ground_truth) {
    at::Tensor gt = from_vector(std::move(s.ground_truth->data), {p.size, p.size});
    prob.truth_min = gt.min().item<double>();
    prob.truth_max = gt.max().item<double>();
    prob.truth_own = gt.narrow(0, own.r0, own.rows()).narrow(1, own.c0, own.cols()).contiguous().to(device);
  }
  return prob;
}

}  // namespace pnp
