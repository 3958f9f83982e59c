// Small IR graphs built by hand in the tests (the IR only: pnp/nn/ir.hpp, no LibTorch).
#pragma once

#include <cstdint>

#include "pnp/nn/ir.hpp"

namespace pnp::nn::test {

// A 2D graph of one input "x" with `channels` channels, for a test to add its nodes to.
inline Graph input_graph(int64_t channels) {
  Graph g;
  g.architecture = "test";
  g.dim = 2;
  g.in_channels = g.out_channels = channels;
  g.add("x", OpKind::input, {});
  return g;
}

// A 3×3 convolution's attributes (stride 1, padding 1, no bias) keeping `channels` channels.
inline Attrs conv3x3(int64_t channels) {
  Attrs a;
  a.in_channels = a.out_channels = channels;
  a.kernel = {3, 3};
  a.stride = {1, 1};
  a.padding = {1, 1};
  return a;
}

}  // namespace pnp::nn::test
