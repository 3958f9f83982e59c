// pnp_recon's terminal output: the phase table, the summary and --check-compile.
#pragma once

#include "pnp/solver.hpp"

namespace pnp::recon {

// Rank 0: per phase and region, max/min/mean over ranks of each rank's stable-window mean.
void print_phase_table(const GatheredRecord& g, int ranks, int64_t window, int64_t iterations);
// Rank 0: first and stable iteration, compile, step, final PSNR and SSIM, peak memory.
void print_summary(const Config& cfg, const PnpRecord& rec, const GatheredRecord& g, at::Device device);
// --check-compile: the configured backend on a small input against eager (every rank takes
// part, so that a shared cache sees one compile); prints on rank 0 and returns whether it held.
bool check_compile(const Config& cfg, at::Device device, int rank);

}  // namespace pnp::recon
