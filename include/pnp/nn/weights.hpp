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

// Reads /weights/<key> for every parameter of the graph, in any encoding above. Throws
// InputError listing every missing, unexpected or mis-shaped key (keys ending in
// ".num_batches_tracked" are ignored); shapes are checked before any data is read, and every
// value must be finite.
Weights load_weights(const std::string& h5_path, const Graph& g);

// How save_weights stores the tensors (load_weights reads every encoding back as float32):
//   float32  as they are;
//   float16  IEEE binary16 datasets (h5py reads them as float16), half the size;
//   int8     for convolution kernels of at least 4096 elements: one int8 code per weight and
//            one float16 scale per 2D/3D kernel (per [out, in] pair) in /weight_scales/<key>,
//            w = code * scale (symmetric, scale = max |w| / 127 over the kernel); smaller
//            tensors stay float32. A quarter of the size; measured on dncnn_ct, the output
//            moves by 0.27 % (relative L2) and the PSNR by under 0.01 dB (docs/training.md).
// Each dataset's `encoding` attribute names its encoding.
enum class WeightEncoding { float32, float16, int8 };
WeightEncoding parse_weight_encoding(const std::string& name);  // InputError on an unknown name
const char* to_string(WeightEncoding e);

// Writes /weights/<key> and root attributes format, architecture, dim, in_channels,
// out_channels, ir_hash, parameter_count, encoding. Throws Error on a missing or mis-shaped
// tensor.
void save_weights(const std::string& h5_path, const Graph& g, const Weights& w,
                  WeightEncoding encoding = WeightEncoding::float32);

// Throws InputError listing missing / unexpected / mis-shaped keys of w against g.
void check_weights(const Graph& g, const Weights& w, const std::string& source);

}  // namespace pnp::nn
