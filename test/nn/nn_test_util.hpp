// Shared by the denoiser tests: graphs by architecture, seeded weights with non-trivial batch-norm statistics (so
// that BN folding and inference BN matter) and seeded random inputs (never zeros).
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>

#include "pnp/nn/models.hpp"
#include "pnp/nn/weights.hpp"

namespace pnp::nn::test {

// Removes a directory tree (not std::filesystem::remove_all: libtorch.so exports its own copy,
// which crashes); missing paths and errors are ignored.
inline void remove_tree(const std::filesystem::path& p) {
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec))
    for (const auto& e : std::filesystem::directory_iterator(p, ec)) remove_tree(e.path());
  std::filesystem::remove(p, ec);
}

// The denoiser of `arch` with the given channels; empty features / blocks = -1: defaults.
inline Graph make(std::string arch, int dim, int cin, int cout, std::vector<int64_t> f = {}, int blocks = -1,
                  bool pad = true) {
  DenoiserSpec s;
  s.architecture = std::move(arch);
  s.dim = dim;
  s.in_channels = cin;
  s.out_channels = cout;
  s.features = std::move(f);
  s.blocks = blocks;
  s.pad = pad;
  return build(s);
}

namespace same_channels {
// The denoiser of `arch` with as many output channels as input channels (make's common case).
inline Graph make(std::string arch, int dim, int c, std::vector<int64_t> f, int blocks = -1) {
  return test::make(std::move(arch), dim, c, c, std::move(f), blocks);
}
}  // namespace same_channels

// float32 weights: init_weights(g, seed) with the BN weight, bias, running mean and
// running variance replaced by seeded values away from the identity.
inline Weights random_weights(const Graph& g, uint64_t seed) {
  Weights w = init_weights(g, seed);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 17);
  for (const auto& n : g.nodes)
    if (n.op == OpKind::batch_norm) {
      const int64_t c = n.attrs.out_channels;
      w[n.name + ".weight"] = at::empty({c}).uniform_(0.5, 1.5, gen);
      w[n.name + ".bias"] = at::empty({c}).uniform_(-0.3, 0.3, gen);
      w[n.name + ".running_mean"] = at::empty({c}).uniform_(-0.2, 0.2, gen);
      w[n.name + ".running_var"] = at::empty({c}).uniform_(0.5, 2.0, gen);
    }
  return w;
}

// Uniform [-1, 1) float64 values of the given shape.
inline at::Tensor rnd(std::vector<int64_t> shape, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::empty(shape, at::kDouble).uniform_(-1.0, 1.0, gen);
}

// The helpers the denoiser tests call unqualified: `using namespace test::names;`.
namespace names {
using same_channels::make;
using test::random_weights;
using test::rnd;
}  // namespace names

}  // namespace pnp::nn::test
