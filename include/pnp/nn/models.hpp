// Builders for the reference denoisers. Each matches deepinv 0.5's module of the same name
// (architecture, defaults and state-dict keys) and emits an IR Graph.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pnp/nn/ir.hpp"

namespace pnp::nn {

struct DenoiserSpec {
  std::string architecture = "drunet";  // "dncnn", "drunet", "unet", "identity"
  int dim = 2;
  int in_channels = 1;
  int out_channels = 1;
  // Empty = architecture default: drunet nc = {64,128,256,512} (exactly 4);
  // dncnn nf = {64} (exactly 1); unet channels_per_scale = {64,128,256,512} (>= 2 scales).
  std::vector<int64_t> features;
  // -1 = default: drunet nb = 4 ResBlocks per stage; dncnn depth = 20 conv layers;
  // unet: must stay -1 (its depth is the number of features).
  int blocks = -1;
  // Pad the end of each spatial axis (replicate) to the alignment, run, then crop back, so any
  // size works (deepinv's test_pad). false gives a graph that needs aligned sizes (tiles).
  bool pad = true;
};

Graph build(const DenoiserSpec& spec);  // throws InputError naming the bad field

Graph build_dncnn(int dim, int in_channels, int out_channels, int64_t nf = 64, int depth = 20);
Graph build_drunet(int dim, int in_channels, int out_channels,
                   std::vector<int64_t> nc = {64, 128, 256, 512}, int nb = 4, bool pad = true);
Graph build_unet(int dim, int in_channels, int out_channels,
                 std::vector<int64_t> channels_per_scale = {64, 128, 256, 512}, bool pad = true);
Graph build_identity(int dim, int channels);

}  // namespace pnp::nn
