// pnp_phantom: writes a synthetic DXchange sinogram (Shepp-Logan or random ellipses,
// projected with pnp's Joseph projector, Gaussian noise) with its ground truth; with --slices,
// a projection volume of pnp's 3D Shepp-Logan, slice by slice, chunked and compressed.
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>

#include <cmath>

#include "pnp/device.hpp"
#include "pnp/messages.hpp"
#include "pnp/io.hpp"
#include "pnp/solver.hpp"
#include "pnp/synthetic.hpp"
#include "pnp/validate.hpp"

namespace po = boost::program_options;

namespace {

// The volume: slices of pnp's 3D Shepp-Logan, each projected as its own 2D problem (noise seed
// seed + 1000003 s for slice s), written slice by slice: /exchange/data [K, S, D] (line integrals,
// or with counts > 0 raw counts dark + counts exp(-line integral) with /exchange/data_white [2, S,
// D] = dark + counts and /exchange/data_dark [1, S, D] = dark), /exchange/ground_truth [S, N, N].
void write_volume(pnp::io::H5File& f, const pnp::ProblemConfig& p, int64_t slices, double counts, at::Device dev) {
  namespace io = pnp::io;
  const auto geom = pnp::physics::Geometry::standard(p.size, p.angles, p.detector);
  const int64_t K = geom.n_angles(), D = geom.n_det, N = p.size;
  constexpr float kDark = 100.0f;
  io::create_chunked(f, "/exchange/data", {K, slices, D}, {K, 1, D}, 4, counts > 0 ? "counts" : "1",
                     counts > 0 ? "raw counts: dark + counts exp(-line integral) (pnp_phantom --counts)"
                                : "line integrals of each slice [angle, slice, detector bin] (pnp's Joseph projector)");
  io::create_chunked(f, "/exchange/ground_truth", {slices, N, N}, {1, N, N}, 4, "attenuation per pixel",
                     "pnp's 3D Shepp-Logan, slice by slice (synthetic.hpp, shepp_logan_slice)");
  for (int64_t s = 0; s < slices; ++s) {
    std::vector<float> truth = pnp::shepp_logan_slice(s, slices, N);
    const at::Tensor t = at::from_blob(truth.data(), {N, N}, at::kFloat).to(dev);
    at::Tensor y = pnp::noisy_projection(t, geom, geom.full_box(), p.noise_sigma, p.seed + 1000003 * s).to(at::kCPU);
    if (counts > 0) y = kDark + counts * at::exp(-y.to(at::kDouble)).to(at::kFloat);
    y = y.contiguous();
    io::write_hyperslab(f, "/exchange/data", {0, s, 0}, {K, 1, D}, y.data_ptr<float>());
    io::write_hyperslab(f, "/exchange/ground_truth", {s, 0, 0}, {1, N, N}, truth.data());
    if ((s + 1) % 64 == 0 || s + 1 == slices) std::printf("slice %lld of %lld\n", (long long)(s + 1), (long long)slices);
  }
  std::vector<float> theta(geom.angles_deg.begin(), geom.angles_deg.end());
  io::write(f, "/exchange/theta", theta.data(), {K}, "deg", "projection angles in degrees");
  if (counts > 0) {
    std::vector<float> white(static_cast<size_t>(2 * slices * D), kDark + static_cast<float>(counts)),
        dark(static_cast<size_t>(slices * D), kDark);
    io::write(f, "/exchange/data_white", white.data(), {2, slices, D}, "counts", "flat fields (two frames)");
    io::write(f, "/exchange/data_dark", dark.data(), {1, slices, D}, "counts", "dark field");
  }
}

}  // namespace

int main(int argc, char** argv) {
  pnp::ProblemConfig p;
  std::string output, device = "cpu";
  bool force = false;
  int64_t slices = 0;
  double counts = 0;
  po::options_description opts(
      "usage: pnp_phantom [options] --output FILE\n\n"
      "Writes /exchange/data [angles, detector] (float32), /exchange/theta (degrees) and\n"
      "/exchange/ground_truth [N, N] to an HDF5 file that pnp_recon reads with problem.sinogram.\n"
      "With --slices S: a projection volume of pnp's 3D Shepp-Logan instead, /exchange/data\n"
      "[angles, S, detector] and /exchange/ground_truth [S, N, N], each slice projected as its own\n"
      "2D problem and written as it is made (chunked by slice, compressed: a notebook reads one\n"
      "slice without the rest); with --counts also raw counts and flat and dark fields.\n\n"
      "Options");
  opts.add_options()("help,h", "print this help and exit")(
      "size,N", po::value<int64_t>(&p.size)->default_value(p.size), "image size N (N x N unit pixels)")(
      "angles,K", po::value<int64_t>(&p.angles)->default_value(p.angles), "number of angles over [0, 180) deg")(
      "detector,D", po::value<int64_t>(&p.detector)->default_value(0), "detector bins; 0 = ceil(sqrt(2) N)")(
      "phantom", po::value<std::string>(&p.phantom)->default_value(p.phantom), "shepp_logan or ellipses")(
      "noise", po::value<double>(&p.noise_sigma)->default_value(p.noise_sigma),
      "Gaussian noise std relative to max |Ax|")("seed", po::value<int64_t>(&p.seed)->default_value(0),
                                                 "seed of the noise and of random ellipses")(
      "device", po::value<std::string>(&device)->default_value(device), "cpu or cuda (projection device)")(
      "slices,S", po::value<int64_t>(&slices)->default_value(0),
      "a volume of S slices of the 3D Shepp-Logan (--phantom shepp_logan); 0 = one 2D image")(
      "counts", po::value<double>(&counts)->default_value(0),
      "with --slices: write raw counts (dark 100 + counts exp(-line integral)) with flat and dark fields; "
      "0 = line integrals")(
      "output,o", po::value<std::string>(&output), "output HDF5 file (required)")(
      "force,f", po::bool_switch(&force), "overwrite an existing output file");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << opts << "\nExample: pnp_phantom -N 512 -K 180 --noise 0.01 -o sino.h5\n";
      return 0;
    }
    if (output.empty()) throw pnp::InputError("--output is required (see --help)");
    // The limits of pnp_recon's problem.size and problem.angles, and what the host can hold,
    // before anything is allocated.
    pnp::validate::require_in_range("--size", static_cast<double>(p.size), 8, 65536);
    pnp::validate::require_in_range("--angles", static_cast<double>(p.angles), 1, 100000);
    pnp::validate::require_in_range("--detector", static_cast<double>(p.detector), 0, 200000);
    pnp::validate::require_in_range("--noise", p.noise_sigma, 0, 1e6);
    pnp::validate::require_in_range("--slices", static_cast<double>(slices), 0, 1 << 20);
    pnp::validate::require_in_range("--counts", counts, 0, 1e12);
    if (slices > 0 && p.phantom != "shepp_logan")
      throw pnp::InputError("--slices needs --phantom shepp_logan (the 3D phantom), got " + pnp::clip_value(p.phantom));
    if (counts > 0 && slices == 0) throw pnp::InputError("--counts needs --slices (a projection volume)");
    if (p.phantom != "shepp_logan" && p.phantom != "ellipses")
      throw pnp::InputError("--phantom must be shepp_logan or ellipses, got " + pnp::clip_value(p.phantom));
    {
      // one image at a time (a volume is written slice by slice), and a volume's flat and dark fields
      const double n = static_cast<double>(p.size), k = static_cast<double>(p.angles);
      const double det = p.detector ? static_cast<double>(p.detector) : std::ceil(std::sqrt(2.0) * n);
      const double need = 3 * 4 * n * n + 3 * 4 * k * det + (counts > 0 ? 3 * 4 * double(slices) * det : 0);
      pnp::validate::require_fits_memory("a " + std::to_string(p.size) + "^2 phantom with " + std::to_string(p.angles) +
                                             " angles needs",
                                         need);
    }
    const at::Device dev = pnp::parse_device(device, "--device");
    pnp::io::check_output_path(output, force);
    pnp::io::AtomicOutput out(output, force);
    pnp::io::write_provenance(out.file(), pnp::basic_provenance("pnp_phantom"));
    pnp::io::write_attr(out.file(), "/", "phantom", slices > 0 ? "shepp_logan_3d" : p.phantom);
    pnp::io::write_attr(out.file(), "/", "noise_sigma", p.noise_sigma);
    pnp::io::write_attr(out.file(), "/", "seed", p.seed);
    if (slices > 0) {
      write_volume(out.file(), p, slices, counts, dev);
      out.commit();
      std::printf("wrote %s: %lld slices of a %lld x %lld 3D Shepp-Logan, %lld angles%s\n", output.c_str(),
                  (long long)slices, (long long)p.size, (long long)p.size, (long long)p.angles,
                  counts > 0 ? ", raw counts with flat and dark fields" : "");
      return 0;
    }
    auto s = pnp::simulate_sinogram(p, dev);
    pnp::io::write_dxchange(out.file(), s);
    out.commit();
    std::printf("wrote %s: %lld x %lld sinogram of a %lld x %lld %s phantom\n", output.c_str(),
                (long long)s.data.shape[0], (long long)s.data.shape[1], (long long)p.size, (long long)p.size,
                p.phantom.c_str());
    return 0;
  } catch (const po::error& e) {
    std::fprintf(stderr, "error: %s (see pnp_phantom --help)\n", pnp::error_line(e.what()).c_str());
    return 2;
  } catch (...) {
    return pnp::report_error();
  }
}
