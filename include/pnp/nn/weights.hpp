// Denoiser weights: seeded initialisation and HDF5 files with one float32 dataset per
// deepinv state-dict key under /weights (postprocess/pnp_postprocess/deepinv_convert.py writes
// the same layout from a deepinv .pth).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>

#include "pnp/nn/ir.hpp"

namespace pnp::nn {

using Weights = std::map<std::string, at::Tensor>;

// Deterministic for a seed, on CPU, float32, following deepinv's initialisation: DRUNet
// orthogonal (gain 0.2), DnCNN Kaiming-normal (fan_in), UNet PyTorch defaults; conv biases
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)); batch norm weight 1, bias 0, running mean 0, var 1.
// Each key draws from its own generator seeded by (seed, key), so keys are independent.
Weights init_weights(const Graph& g, uint64_t seed);

// Reads /weights/<key> for every parameter of the graph. Throws InputError listing every
// missing, unexpected or mis-shaped key (keys ending in ".num_batches_tracked" are ignored).
Weights load_weights(const std::string& h5_path, const Graph& g);

// Writes /weights/<key> (float32) and root attributes format, architecture, dim, in_channels,
// out_channels, ir_hash, parameter_count. Throws Error on a missing or mis-shaped tensor.
void save_weights(const std::string& h5_path, const Graph& g, const Weights& w);

// Throws InputError listing missing / unexpected / mis-shaped keys of w against g.
void check_weights(const Graph& g, const Weights& w, const std::string& source);

}  // namespace pnp::nn
