// pnp_radon_bench's benchmark of the projector (bench.cpp).
#pragma once

#include <ostream>
#include <string>

#include "pnp/physics.hpp"

namespace pnp::physics {

// pnp_radon_bench: times A and A^T (forward_out /
// adjoint_out, median of `reps` synchronised calls after `warmup`, device events on CUDA) on the box of rank 0
// of `slabs` row slabs, prints ms and GUPS (10^9 pixel-angle updates per second) and, with
// `check`, the adjointness and CUDA-vs-CPU errors. Returns 0 when the checks pass.
struct BenchOptions {
  int64_t n = 4096;
  int64_t angles = 100;
  int64_t n_det = 0;             // 0 -> ceil(sqrt(2) n)
  std::string device = "auto";   // auto, cpu, cuda
  std::string dtype = "float32"; // float32, float64
  int warmup = 3;
  int reps = 20;
  int slabs = 1;
  bool check = true;
  bool fbp = false;    // also time FBP
  int opnorm_iterations = 0;  // > 0: also run that many power iterations and print ||A^T A||
};
int run_bench(const BenchOptions& opt, std::ostream& os);

}  // namespace pnp::physics
