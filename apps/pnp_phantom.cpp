// pnp_phantom: writes a synthetic DXchange sinogram (Shepp-Logan or random ellipses,
// projected with pnp's Joseph projector, Gaussian noise) with its ground truth.
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>

#include "pnp/solver.hpp"

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
    if (p.size < 8) throw pnp::InputError("--size must be at least 8");
    if (p.angles < 1) throw pnp::InputError("--angles must be at least 1");
    if (p.phantom != "shepp_logan" && p.phantom != "ellipses")
      throw pnp::InputError("--phantom must be shepp_logan or ellipses, got " + p.phantom);
    if (device != "cpu" && device != "cuda") throw pnp::InputError("--device must be cpu or cuda");
    pnp::io::AtomicOutput out(output, force);
    auto s = pnp::simulate_sinogram(p, device == "cuda" ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU));
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
    std::fprintf(stderr, "error: %s (see pnp_phantom --help)\n", e.what());
    return 2;
  } catch (const pnp::InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
