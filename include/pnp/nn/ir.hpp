// The denoiser IR: one small DAG per architecture, shared by every consumer (the eager
// executor, the native compiler, the inductor exporter via JSON, the roofline counter).
//
// A Graph is a topologically ordered list of nodes; node i only reads nodes < i. Node 0 is
// the network input x ([B, C, spatial...], channels-first). The last node is the output.
// Parameters are named by their deepinv state-dict keys, so pretrained files convert one to
// one. This header does not include torch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pnp/core.hpp"

namespace pnp::nn {

enum class OpKind {
  input,             // the network input x; no inputs
  sigma_channel,     // inputs {x}: a [B, 1, spatial...] map filled with the runtime sigma
  conv,              // inputs {x}: conv2d/conv3d, zero padding
  conv_transpose,    // inputs {x}: conv_transpose2d/3d
  batch_norm,        // inputs {x}: inference batch norm with running statistics
  relu,              // inputs {x}
  add,               // inputs {a, b}: a + b, same shape
  concat,            // inputs {a, b, ...}: cat along channels (dim 1)
  max_pool,          // inputs {x}
  upsample_nearest,  // inputs {x}: nearest, integer scale
  pad,               // inputs {x}: pad the end of every spatial axis up to a multiple
  crop,              // inputs {x, like}: keep the leading spatial extent of `like`
  halo,              // inputs {x}: x grown by halo_lo / halo_hi pixels per spatial axis, each side
                     // filled from the neighbouring rank's tile (halo_peer_* = 1) or with `fill`
                     // (the image border, = the next op's padding); inserted by with_layer_halos
};
std::string_view to_string(OpKind k);
OpKind op_from_string(std::string_view s);  // throws InputError

// A named tensor of a node. `trainable` is false for batch-norm running statistics
// (buffers in PyTorch terms): they are stored and loaded but not counted as parameters.
struct Param {
  std::string role;  // "weight", "bias", "running_mean", "running_var"
  std::string key;   // deepinv state-dict key, e.g. "m_down1.0.res.0.weight"
  std::vector<int64_t> shape;
  bool trainable = true;
  int64_t numel() const;
};

// Attributes; which ones are meaningful depends on the op (see to_json for what is emitted).
// Spatial vectors (kernel, stride, padding, scale) have `dim` entries.
struct Attrs {
  int64_t in_channels = 0, out_channels = 0;  // conv, conv_transpose, batch_norm (= channels)
  std::vector<int64_t> kernel, stride, padding;  // conv, conv_transpose, max_pool
  std::vector<int64_t> output_padding;           // conv_transpose
  int64_t groups = 1;
  bool bias = false;             // conv, conv_transpose
  double eps = 1e-5;             // batch_norm
  double momentum = 0.1;         // batch_norm (training only; recorded for the exporter)
  bool inplace = false;          // relu: PyTorch's nn.ReLU(inplace=True) in the reference
  std::vector<int64_t> scale;    // upsample_nearest
  int64_t multiple = 1;          // pad
  std::string mode;              // pad: "replicate"
  // halo: per spatial axis, the pixels added before / after, and whether each side comes from
  // the neighbouring rank (1) or is filled with `fill` (0: the image border).
  std::vector<int64_t> halo_lo, halo_hi, halo_peer_lo, halo_peer_hi;
  double fill = 0.0;             // halo: 0 before a conv, -inf before a max_pool
};

struct Node {
  int id = 0;
  std::string name;  // unique, module path in deepinv terms where one exists
  OpKind op = OpKind::input;
  std::vector<int> inputs;
  Attrs attrs;
  std::vector<Param> params;
  const Param* param(std::string_view role) const;  // nullptr when absent
};

struct Graph {
  std::string architecture;  // "dncnn", "drunet", "unet", "identity"
  int dim = 2;               // spatial dims, 2 or 3
  int64_t in_channels = 1, out_channels = 1;
  bool uses_sigma = false;   // true when a sigma_channel node exists
  std::vector<Node> nodes;   // topological order, nodes[i].id == i, nodes[0] is the input

  int output() const { return static_cast<int>(nodes.size()) - 1; }
  const Node& node(std::string_view name) const;  // throws Error
  std::vector<const Param*> params() const;       // all named tensors, in node order
  int64_t parameter_count() const;                // trainable only (= deepinv's numel sum)
  // Product of strides between input and the coarsest node: inputs (after any pad node)
  // must have spatial sizes divisible by it; patches start at multiples of it.
  int64_t alignment() const;
  bool pads_input() const;  // has a pad node (any spatial size accepted)

  std::string to_json() const;  // stable, includes "hash"
  std::string hash() const;     // 16 hex digits, FNV-1a of the canonical JSON (no hash field)

  Node& add(std::string name, OpKind op, std::vector<int> inputs, Attrs attrs = {},
            std::vector<Param> params = {});  // builder helper; checks names and order
};

// Every node's output shape for an input shape [B, C, spatial...]. Throws InputError with the
// node, op and sizes when a shape is impossible (wrong rank or channels, empty sizes, sizes
// not divisible by the graph's alignment when it does not pad, mismatched add/concat).
std::vector<std::vector<int64_t>> infer_shapes(const Graph& g, const std::vector<int64_t>& input_shape);
std::vector<int64_t> infer_output_shape(const Graph& g, std::vector<int64_t> input_shape);

// Largest distance, in input pixels along any axis, between an output pixel and an input
// pixel it depends on (exact for these box-kernel graphs, computed by interval propagation).
int64_t receptive_radius(const Graph& g);

using pnp::shape_string;  // "[1, 3, 64, 64]" (pnp/core.hpp)

// ---- The layer halo (distributed.halo_mode = layer) ---------------------------------------
// One rank's view of a decomposition along one spatial axis: whether a neighbouring tile lies
// before (lo) or after (hi) this rank's tile. An axis along which the image is not split has
// neither; `split` says whether any rank has a neighbour along it (the same on every rank).
struct AxisNeighbours {
  bool split = false;
  bool lo = false, hi = false;
};

// The graph one rank runs when the denoiser itself is distributed: before every conv and
// max_pool that reads across a split axis, a halo node supplies exactly what that op reads
// beyond the rank's tile (lo = padding, hi = kernel - stride - padding from a neighbour; the
// op's padding at the image border), and the op's padding on that axis becomes 0. Pointwise
// ops, strided convs with kernel == stride and no padding, transposed convs with kernel ==
// stride and nearest upsampling need no halo when tile starts are multiples of the graph's
// alignment (plan_decomposition(..., align_owned = true)); the pad and crop nodes then act on
// the last tile of each axis only, so the global pad-then-crop stays global. Every rank gets
// the same nodes in the same order (the messages match); an axis that is not split is left
// as it is, so with one rank the graph is unchanged. InputError for ops it cannot distribute
// (a conv_transpose with kernel != stride or padding, a kernel shorter than stride + padding).
Graph with_layer_halos(const Graph& g, const std::vector<AxisNeighbours>& axes);

// What one forward of a graph with halo nodes sends, for the node shapes infer_shapes gives:
// messages and bytes (at `element_bytes` per value; the copies into the grown tensors are the
// roofline counter's). The two-phase exchange sends axis 0's strips first, then axis 1's including axis 0's
// halo, so corners travel without diagonal messages.
struct HaloTraffic {
  int64_t exchanges = 0;  // halo nodes
  int64_t messages = 0;   // sent by this rank
  int64_t bytes = 0;      // sent by this rank
  // The exchange's critical path: one phase per split axis per halo node (its messages run
  // concurrently), and the sum over phases of the largest message of each (for an α-β model:
  // phases * α + phase_bytes / β).
  int64_t phases = 0;
  int64_t phase_bytes = 0;
};
HaloTraffic layer_halo_traffic(const Graph& g, const std::vector<std::vector<int64_t>>& shapes, int64_t element_bytes);

}  // namespace pnp::nn
