// Executors run an IR graph. The eager executor is the reference and the "none" arm of every
// benchmark: one plain ATen call per IR node, NCHW (channels-first, contiguous), exactly what
// PyTorch eager runs for the deepinv module.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "pnp/nn/ir.hpp"
#include "pnp/nn/weights.hpp"

namespace pnp::nn {

class Executor {
 public:
  virtual ~Executor() = default;
  // x: [B, C, H, W] or [B, C, D, H, W]. It is moved to the executor's device and dtype if it
  // is not there; the result is on the executor's device in its dtype. sigma fills the sigma
  // map for graphs that have one (DRUNet) and is ignored otherwise.
  virtual at::Tensor forward(const at::Tensor& x, double sigma) = 0;
  virtual std::string name() const = 0;
  // Patches must start at multiples of this (the graph's alignment) to reproduce forward().
  virtual int64_t alignment() const { return 1; }
  virtual int64_t receptive_radius() const { return 0; }
  // Sets sigma ahead of the next forward (for executors that keep it in a device buffer: a
  // forward inside a captured CUDA graph then reads the buffer instead of baking its value in).
  // forward(x, sigma) with the sigma last set writes nothing; with another one it writes it.
  virtual void set_sigma(double sigma) { (void)sigma; }
  // Seconds spent compiling so far (0 for executors that do not compile).
  virtual double compile_seconds() const { return 0.0; }
  // What the backend did, one line each (fusions made, packages compiled or loaded, notes).
  virtual std::vector<std::string> report() const { return {}; }
};

// One IR node as one out-of-place ATen call: the op dispatch of the eager executor, shared with
// the differentiable training forward (src/train). `in` holds the values of n.inputs in order,
// `params` the node's tensors in n.params order. A sigma_channel is filled with `sigma`, or,
// when `sigma_per_sample` ([B]) is defined, with its entry b for batch entry b. batch_norm uses
// the running statistics unless `training` (batch statistics; the running ones are updated in
// place, as nn.BatchNorm does in train mode).
at::Tensor apply_node(const Node& n, int dim, const std::vector<at::Tensor>& in, const std::vector<at::Tensor>& params,
                      double sigma, const at::Tensor& sigma_per_sample = {}, bool training = false);

// The sigma input of a compiled forward (native, inductor): a device buffer written only when
// sigma changes, so that a forward captured in the solver's CUDA graph (post, fused) holds no
// fill of its own, and set() before a replay gives it the iteration's sigma.
struct SigmaBuffer {
  at::Tensor value;                                       // undefined: the graph takes no sigma
  double now = std::numeric_limits<double>::quiet_NaN();  // what `value` holds (NaN: unknown)
  void set(double sigma) {
    if (!value.defined() || sigma == now) return;
    c10::OptionalDeviceGuard guard(value.device());
    value.fill_(sigma);
    now = sigma;
  }
};

// A region of the grown tensor of a halo node (attrs `a`, over a tile of spatial extent `tile`),
// in grown coordinates: per spatial axis, its first index and extent. A halo strip across
// `axis` is [offset, offset + width) along it, the grown extent of the earlier axes and the
// tile's extent of the later ones: what every exchange sends and receives (HaloStrips).
struct HaloRegion {
  std::vector<int64_t> lo, size;
};
HaloRegion halo_region(const Attrs& a, const std::vector<int64_t>& tile, int axis, int64_t offset, int64_t width);
// The region of the strip received on axis d's lo (side 0) or hi (side 1) side.
HaloRegion halo_strip_region(const Attrs& a, const std::vector<int64_t>& tile, int axis, int side);

// The exchange behind a halo node (OpKind::halo, with_layer_halos), implemented over the
// ranks' communicator outside nn (src/comm/layer_exchange.cpp).
//
// exchange_strips() is the primitive: it takes the tile and returns the neighbours' strips,
// axis 0 first, then axis 1 including axis 0's halo (corners without diagonal messages), and
// sends them this rank's. strips[d][0] / [1] are the lo / hi side along axis d, defined where
// that side comes from a neighbour and has a width, with the shape of halo_strip_region (so
// axis 1's strips hold the corners). LayerExchange sends from and receives into fixed buffers
// and returns those (they stay valid until the same node is exchanged again).
using HaloStrips = std::vector<std::array<at::Tensor, 2>>;
class HaloExchanger {
 public:
  virtual ~HaloExchanger() = default;
  virtual HaloStrips exchange_strips(const Node& halo, const at::Tensor& tile) = 0;
  // exchange_strips in two halves, so that work on the tile can overlap the transfer: start
  // posts what it can, finish completes the exchange and returns the strips (the tile must be
  // unchanged in between). One exchange at a time. Default: start does nothing, finish is
  // exchange_strips.
  virtual void start_strips(const Node& halo, const at::Tensor& tile) { (void)halo, (void)tile; }
  virtual HaloStrips finish_strips(const Node& halo, const at::Tensor& tile) { return exchange_strips(halo, tile); }
  // The grown tensor's neighbour sides (apply_halo's: the tile in its interior, the image-border
  // sides already filled), from exchange_strips on its interior: each strip copied into its side.
  void exchange(const Node& halo, at::Tensor& grown);
};

// A halo node on one rank: a new tensor of the grown shape (x's memory format), x in the
// middle, the border sides filled with n.attrs.fill, the neighbour sides from `ex`. Error when
// the node has neighbour sides and ex is null.
at::Tensor apply_halo(const Node& n, int dim, const at::Tensor& x, HaloExchanger* ex);

// A box of the grown tensor apply_halo(n, dim, tile, ...) would make, written into `out` (its
// shape is the box's extent) without making the grown tensor: `box_lo` is the box's first
// index per spatial axis in grown coordinates. The tile's pixels where the box covers it, the
// neighbours' `strips` (HaloExchanger::exchange_strips; strips of axes not yet exchanged may be
// left undefined when the box does not reach them) and n.attrs.fill on the image-border sides.
void halo_box_into(at::Tensor& out, const Node& n, const at::Tensor& tile, const HaloStrips& strips,
                   const std::vector<int64_t>& box_lo);

// The compute dtypes every executor accepts: float32, float64 and bfloat16 (activations and
// weights in bf16; cuDNN and oneDNN convolutions accumulate in fp32). Throws InputError naming
// `who` for any other dtype.
void require_executor_dtype(const char* who, at::ScalarType t);
// "float32", "float64" or "bfloat16" (the names the Python exporter takes); InputError otherwise.
std::string dtype_name(at::ScalarType t);
// The inverse of dtype_name; InputError naming `what` (e.g. "--dtype") for any other name.
at::ScalarType parse_dtype(const std::string& name, const std::string& what);

// Weights are checked against the graph (InputError listing bad keys) and copied to
// device/dtype once. dtype kFloat, kDouble or kBFloat16. A graph with halo nodes needs an
// exchanger (kept by reference; it must outlive the executor).
std::unique_ptr<Executor> make_eager(const Graph& g, const Weights& weights, at::Device device,
                                     at::ScalarType dtype = at::kFloat, HaloExchanger* exchanger = nullptr);
// The same with `conv_input` applied to each conv / conv_transpose node's input before the call
// (the FP8 emulation's activation quantiser, pnp/nn/fp8.hpp); `name` is what name() reports.
using ConvInputHook = std::function<at::Tensor(const Node&, const at::Tensor&)>;
std::unique_ptr<Executor> make_eager(const Graph& g, const Weights& weights, at::Device device, at::ScalarType dtype,
                                     HaloExchanger* exchanger, ConvInputHook conv_input, std::string name);

}  // namespace pnp::nn
