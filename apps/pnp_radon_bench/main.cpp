// pnp_radon_bench: times the projector A and its adjoint A^T and prints GUPS.
//   pnp_radon_bench [--n 4096] [--angles 100] [--det 0] [--device auto|cpu|cuda]
//                   [--dtype float32|float64] [--reps 20] [--warmup 3] [--slabs 1] [--fbp]
//                   [--opnorm-iterations 0] [--no-check]
#include "bench.hpp"

#include <boost/program_options.hpp>

#include <iostream>

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  pnp::physics::BenchOptions o;
  bool no_check = false;
  po::options_description desc("pnp_radon_bench options");
  desc.add_options()("help,h", "show this help")
      ("n", po::value(&o.n)->default_value(o.n), "image side N (N x N pixels)")
      ("angles", po::value(&o.angles)->default_value(o.angles), "number of angles K over [0, 180)")
      ("det", po::value(&o.n_det)->default_value(o.n_det), "detector bins (0: ceil(sqrt(2) N))")
      ("device", po::value(&o.device)->default_value(o.device), "auto, cpu or cuda")
      ("dtype", po::value(&o.dtype)->default_value(o.dtype), "float32 or float64")
      ("reps", po::value(&o.reps)->default_value(o.reps), "timed repetitions (median reported)")
      ("warmup", po::value(&o.warmup)->default_value(o.warmup), "untimed warm-up calls")
      ("slabs", po::value(&o.slabs)->default_value(o.slabs), "time the tile of rank 0 of this many row slabs")
      ("fbp", po::bool_switch(&o.fbp), "also time FBP")
      ("opnorm-iterations", po::value(&o.opnorm_iterations)->default_value(0), "also run this many power iterations")
      ("no-check", po::bool_switch(&no_check), "skip the adjointness and CUDA-vs-CPU checks");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
    o.check = !no_check;
    return pnp::physics::run_bench(o, std::cout);
  } catch (const pnp::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const po::error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
