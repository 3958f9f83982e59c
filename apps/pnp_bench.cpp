// pnp_bench: the denoiser sweep (see pnp_bench --help).
#include "pnp/bench.hpp"

int main(int argc, char** argv) { return pnp::bench::bench_main(argc, argv); }
