// pnp_phantom: writes a synthetic DXchange sinogram (Shepp-Logan or random ellipses,
// projected with pnp's Joseph projector, Gaussian noise) with its ground truth.
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>

#include <cmath>

#include "pnp/device.hpp"
#include "pnp/messages.hpp"
#include "pnp/solver.hpp"
#include "pnp/validate.hpp"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  pnp::ProblemConfig p;
  std::string output, device = "cpu";
  bool force = false;
  po::options_description opts(
      "usage: pnp_phantom [options] --output FILE\n\n"
      "Writes /exchange/data [angles, detector] (float32), /exchange/theta (degrees) and\n"
      "/exchange/ground_truth [N, N] to an HDF5 file that pnp_recon reads with problem.sinogram.\n\n"
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
    {
      const double n = static_cast<double>(p.size), k = static_cast<double>(p.angles);
      const double det = p.detector ? static_cast<double>(p.detector) : std::ceil(std::sqrt(2.0) * n);
      const double need = 3 * 4 * n * n + 3 * 4 * k * det;  // phantom, its copies; sinogram and noise
      pnp::validate::require_fits_memory("a " + std::to_string(p.size) + "^2 phantom with " + std::to_string(p.angles) +
                                             " angles needs",
                                         need);
    }
    pnp::validate::require_in_range("--noise", p.noise_sigma, 0, 1e6);
    if (p.phantom != "shepp_logan" && p.phantom != "ellipses")
      throw pnp::InputError("--phantom must be shepp_logan or ellipses, got " + pnp::clip_value(p.phantom));
    const at::Device dev = pnp::parse_device(device, "--device");
    pnp::io::check_output_path(output, force);
    pnp::io::AtomicOutput out(output, force);
    auto s = pnp::simulate_sinogram(p, dev);
    pnp::io::write_dxchange(out.file(), s);
    pnp::io::write_provenance(out.file(), pnp::basic_provenance("pnp_phantom"));
    pnp::io::write_attr(out.file(), "/", "phantom", p.phantom);
    pnp::io::write_attr(out.file(), "/", "noise_sigma", p.noise_sigma);
    pnp::io::write_attr(out.file(), "/", "seed", p.seed);
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
