// pnp_recon's checkpoint (not a public header): what a resumed run needs to continue exactly
// where the interrupted one stopped, and to write an output file that covers every iteration.
//   /image                    [n, n] the iterate after `done` iterations (float32)
//   /metrics/{psnr,ssim,residual,sigma}  [done]
//   /timings/<series>         [done x ranks] every rank's per-iteration record so far
//   /segments                 one line per run so far: "iterations a-b on N ranks, host, date, commit"
//   root attributes: done, step, identity (the configuration that wrote it), ranks, n,
//   first_iteration, compile
// Written by rank 0 through io::AtomicOutput (a temporary file renamed into place), so a crash
// while writing leaves the previous checkpoint.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "pnp/solver.hpp"

namespace pnp {

struct Checkpoint {
  int64_t done = 0;
  double step = 0, first_iteration = 0, compile = 0;
  at::Tensor image;  // [n, n] CPU float32
  std::vector<double> psnr, ssim, residual, sigma;  // [done]
  // [series][done x ranks]: the phases ("total" last), wall, region_gradient, region_denoise, bytes
  std::vector<std::vector<double>> series;
  std::vector<std::string> segments;
};

// The names of Checkpoint::series, in order.
const std::vector<std::string>& checkpoint_series();

// What a checkpoint must have been written by: the configuration without its [output] keys,
// and the rank count.
std::string checkpoint_identity(const Config& cfg, int ranks);

void write_checkpoint(const std::string& path, const Checkpoint& c, const std::string& identity, int ranks);
// Every rank reads it; InputError when it comes from another configuration, rank count or
// image size, or is damaged (shapes, non-finite values). `slices`: a volume's (its image is
// [slices, n, n]); 0 for one image.
Checkpoint read_checkpoint(const std::string& path, const std::string& identity, int ranks, int64_t n, int64_t iterations,
                           int64_t slices = 0);

}  // namespace pnp
