// The eager executor: one ATen call per IR node, exactly the calls PyTorch eager makes for the
// deepinv modules (F.conv2d -> at::conv2d, nn.BatchNorm in eval -> at::batch_norm, ...).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "pnp/core.hpp"
#include "pnp/nn/executor.hpp"

namespace pnp::nn {

at::Tensor apply_node(const Node& n, int dim, const std::vector<at::Tensor>& ins, const std::vector<at::Tensor>& P,
                      double sigma, const at::Tensor& sigma_per_sample, bool training) {
  const auto& a = n.attrs;
  const at::Tensor& in = ins.at(0);
  switch (n.op) {
    case OpKind::input:
      return in;
    case OpKind::sigma_channel: {
      auto s = in.sizes().vec();
      s[1] = 1;
      if (!sigma_per_sample.defined()) return at::full(s, sigma, in.options());
      std::vector<int64_t> b(s.size(), 1);
      b[0] = s[0];
      return sigma_per_sample.to(in.options()).reshape(b).expand(s).contiguous();
    }
    case OpKind::conv: {
      std::optional<at::Tensor> b;
      if (a.bias) b = P[1];
      const std::vector<int64_t> dil(dim, 1);
      return dim == 2 ? at::conv2d(in, P[0], b, a.stride, a.padding, dil, a.groups)
                      : at::conv3d(in, P[0], b, a.stride, a.padding, dil, a.groups);
    }
    case OpKind::conv_transpose: {
      std::optional<at::Tensor> b;
      if (a.bias) b = P[1];
      const std::vector<int64_t> dil(dim, 1);
      return dim == 2 ? at::conv_transpose2d(in, P[0], b, a.stride, a.padding, a.output_padding, a.groups, dil)
                      : at::conv_transpose3d(in, P[0], b, a.stride, a.padding, a.output_padding, a.groups, dil);
    }
    case OpKind::batch_norm:
      return at::batch_norm(in, P[0], P[1], P[2], P[3], training, a.momentum, a.eps, /*cudnn_enabled=*/true);
    case OpKind::relu:
      return at::relu(in);
    case OpKind::add:
      return at::add(in, ins.at(1));
    case OpKind::concat:
      return at::cat(ins, 1);
    case OpKind::max_pool: {
      const std::vector<int64_t> dil(dim, 1);
      return dim == 2 ? at::max_pool2d(in, a.kernel, a.stride, a.padding, dil, false)
                      : at::max_pool3d(in, a.kernel, a.stride, a.padding, dil, false);
    }
    case OpKind::upsample_nearest: {
      std::vector<double> sc(a.scale.begin(), a.scale.end());
      return dim == 2 ? at::upsample_nearest2d(in, std::nullopt, sc) : at::upsample_nearest3d(in, std::nullopt, sc);
    }
    case OpKind::pad: {
      std::vector<int64_t> pads;  // last axis first: (left, right) pairs
      bool any = false;
      for (int d = dim - 1; d >= 0; --d) {
        const int64_t s = in.size(2 + d), p = (s + a.multiple - 1) / a.multiple * a.multiple - s;
        pads.push_back(0);
        pads.push_back(p);
        any = any || p > 0;
      }
      if (!any) return in;
      return dim == 2 ? at::replication_pad2d(in, pads) : at::replication_pad3d(in, pads);
    }
    case OpKind::crop: {
      at::Tensor y = in;
      const at::Tensor& like = ins.at(1);
      for (int d = 0; d < dim; ++d)
        if (y.size(2 + d) != like.size(2 + d)) y = y.narrow(2 + d, 0, like.size(2 + d));
      return y;
    }
    case OpKind::halo:
      throw Error("apply_node: halo node " + n.name + " needs an exchanger (nn::apply_halo)");
  }
  throw Error("apply_node: unknown op of node " + n.name);
}

at::Tensor apply_halo(const Node& n, int dim, const at::Tensor& x, HaloExchanger* ex) {
  const auto& a = n.attrs;
  std::vector<int64_t> shape = x.sizes().vec();
  bool peers = false;
  for (int d = 0; d < dim; ++d) {
    shape[2 + d] += a.halo_lo[d] + a.halo_hi[d];
    peers = peers || a.halo_peer_lo[d] || a.halo_peer_hi[d];
  }
  at::Tensor y = at::empty(shape, x.options().memory_format(x.suggest_memory_format()));
  at::Tensor mid = y;
  for (int d = 0; d < dim; ++d) mid = mid.narrow(2 + d, a.halo_lo[d], x.size(2 + d));
  mid.copy_(x);
  for (int d = 0; d < dim; ++d) {  // the image border: the op's own padding value
    if (!a.halo_peer_lo[d] && a.halo_lo[d] > 0) y.narrow(2 + d, 0, a.halo_lo[d]).fill_(a.fill);
    if (!a.halo_peer_hi[d] && a.halo_hi[d] > 0) y.narrow(2 + d, y.size(2 + d) - a.halo_hi[d], a.halo_hi[d]).fill_(a.fill);
  }
  if (peers) {
    if (!ex) throw Error("halo node " + n.name + " has neighbours but the executor has no exchanger");
    ex->exchange(n, y);
  }
  return y;
}

HaloRegion halo_region(const Attrs& a, const std::vector<int64_t>& tile, int axis, int64_t offset, int64_t width) {
  const int dim = static_cast<int>(tile.size());
  HaloRegion r{std::vector<int64_t>(static_cast<size_t>(dim)), std::vector<int64_t>(static_cast<size_t>(dim))};
  for (int e = 0; e < dim; ++e) {
    const size_t i = static_cast<size_t>(e);
    if (e < axis) r.lo[i] = 0, r.size[i] = a.halo_lo[i] + tile[i] + a.halo_hi[i];
    else if (e > axis) r.lo[i] = a.halo_lo[i], r.size[i] = tile[i];
    else r.lo[i] = offset, r.size[i] = width;
  }
  return r;
}

HaloRegion halo_strip_region(const Attrs& a, const std::vector<int64_t>& tile, int axis, int side) {
  const size_t d = static_cast<size_t>(axis);
  return side == 0 ? halo_region(a, tile, axis, 0, a.halo_lo[d])
                   : halo_region(a, tile, axis, a.halo_lo[d] + tile[d], a.halo_hi[d]);
}

namespace {
// Copies the part of `src` (holding region `from` of the grown tensor) that falls inside
// `out` (holding the region starting at box_lo, of out's extent).
void copy_overlap(at::Tensor& out, const std::vector<int64_t>& box_lo, const at::Tensor& src, const HaloRegion& from) {
  at::Tensor o = out, f = src;
  for (size_t e = 0; e < box_lo.size(); ++e) {
    const int64_t a = std::max(box_lo[e], from.lo[e]);
    const int64_t b = std::min(box_lo[e] + out.size(2 + static_cast<int64_t>(e)), from.lo[e] + from.size[e]);
    if (b <= a) return;
    o = o.narrow(2 + static_cast<int64_t>(e), a - box_lo[e], b - a);
    f = f.narrow(2 + static_cast<int64_t>(e), a - from.lo[e], b - a);
  }
  o.copy_(f);
}

std::vector<int64_t> tile_extent(const at::Tensor& tile) {
  return std::vector<int64_t>(tile.sizes().begin() + 2, tile.sizes().end());
}
}  // namespace

void halo_box_into(at::Tensor& out, const Node& n, const at::Tensor& tile, const HaloStrips& strips,
                   const std::vector<int64_t>& box_lo) {
  const auto& a = n.attrs;
  const std::vector<int64_t> t = tile_extent(tile);
  const int dim = static_cast<int>(t.size());
  if (static_cast<int>(box_lo.size()) != dim || out.dim() != tile.dim())
    throw Error("halo_box_into at " + n.name + ": box rank differs from the tile's");
  HaloRegion inner{std::vector<int64_t>(static_cast<size_t>(dim)), t};
  bool in_tile = true;  // the box lies in the tile: one copy (a strip a rank sends along axis 0)
  for (int e = 0; e < dim; ++e) {
    inner.lo[e] = a.halo_lo[e];
    in_tile = in_tile && box_lo[e] >= inner.lo[e] && box_lo[e] + out.size(2 + e) <= inner.lo[e] + t[e];
  }
  if (!in_tile) out.fill_(a.fill);  // the image-border sides; everything else is overwritten below
  copy_overlap(out, box_lo, tile, inner);
  if (in_tile) return;
  // axis by axis, as the exchange fills them: later axes' strips hold the corners
  for (int d = 0; d < dim; ++d)
    for (int side = 0; side < 2; ++side) {
      const bool peer = side == 0 ? a.halo_peer_lo[d] : a.halo_peer_hi[d];
      const int64_t width = side == 0 ? a.halo_lo[d] : a.halo_hi[d];
      if (!peer || width == 0) continue;
      const HaloRegion r = halo_strip_region(a, t, d, side);
      const at::Tensor* st = static_cast<size_t>(d) < strips.size() && strips[d][side].defined() ? &strips[d][side] : nullptr;
      if (!st) {  // fine only when the box does not reach this strip
        bool reaches = true;
        for (int e = 0; e < dim; ++e)
          reaches = reaches && box_lo[e] < r.lo[e] + r.size[e] && r.lo[e] < box_lo[e] + out.size(2 + e);
        if (reaches) throw Error("halo_box_into at " + n.name + ": the box needs a strip that was not given");
        continue;
      }
      copy_overlap(out, box_lo, *st, r);
    }
}

void HaloExchanger::exchange(const Node& halo, at::Tensor& grown) {
  const auto& a = halo.attrs;
  const int dim = static_cast<int>(grown.dim()) - 2;
  at::Tensor tile = grown;
  for (int e = 0; e < dim; ++e)
    tile = tile.narrow(2 + e, a.halo_lo[static_cast<size_t>(e)],
                       grown.size(2 + e) - a.halo_lo[static_cast<size_t>(e)] - a.halo_hi[static_cast<size_t>(e)]);
  const std::vector<int64_t> t = tile_extent(tile);
  const HaloStrips strips = exchange_strips(halo, tile);
  for (int d = 0; d < dim && static_cast<size_t>(d) < strips.size(); ++d)
    for (int side = 0; side < 2; ++side) {
      const at::Tensor& st = strips[static_cast<size_t>(d)][static_cast<size_t>(side)];
      if (!st.defined()) continue;
      const HaloRegion r = halo_strip_region(a, t, d, side);
      at::Tensor v = grown;
      for (int e = 0; e < dim; ++e) v = v.narrow(2 + e, r.lo[static_cast<size_t>(e)], r.size[static_cast<size_t>(e)]);
      v.copy_(st);
    }
}

namespace {
// The executors' compute dtypes and their names.
constexpr std::pair<at::ScalarType, const char*> kDtypes[] = {
    {at::kFloat, "float32"}, {at::kDouble, "float64"}, {at::kBFloat16, "bfloat16"}};
}  // namespace

std::string dtype_name(at::ScalarType t) {
  for (const auto& [d, name] : kDtypes)
    if (d == t) return name;
  throw InputError("dtype must be float32, float64 or bfloat16, got " + std::string(c10::toString(t)));
}

at::ScalarType parse_dtype(const std::string& name, const std::string& what) {
  for (const auto& [d, n] : kDtypes)
    if (name == n) return d;
  throw InputError(what + ": expected float32, float64 or bfloat16, got '" + name + "'");
}

void require_executor_dtype(const char* who, at::ScalarType t) {
  try {
    dtype_name(t);
  } catch (const InputError& e) {
    throw InputError(std::string(who) + ": " + e.what());
  }
}

namespace {

class EagerExecutor final : public Executor {
 public:
  EagerExecutor(const Graph& g, const Weights& w, at::Device device, at::ScalarType dtype, HaloExchanger* ex,
                ConvInputHook hook = {}, std::string name = "eager")
      : g_(g), device_(device), dtype_(dtype), ex_(ex), hook_(std::move(hook)), name_(std::move(name)) {
    require_executor_dtype("eager executor", dtype);
    check_weights(g, w, "weights");
    params_.resize(g.nodes.size());
    for (const auto& n : g.nodes)
      for (const auto& p : n.params)
        params_[n.id].push_back(w.at(p.key).detach().to(device, dtype).contiguous());
    last_use_.assign(g.nodes.size(), -1);
    for (const auto& n : g.nodes)
      for (int i : n.inputs) last_use_[i] = std::max(last_use_[i], n.id);
    last_use_[g.output()] = static_cast<int>(g.nodes.size());
    alignment_ = g.alignment();
    radius_ = nn::receptive_radius(g);
  }

  std::string name() const override { return name_; }
  int64_t alignment() const override { return alignment_; }
  int64_t receptive_radius() const override { return radius_; }

  at::Tensor forward(const at::Tensor& x_in, double sigma) override {
    infer_shapes(g_, x_in.sizes().vec());  // clear InputError for bad ranks, channels, sizes
    const MemoryStage stage("denoiser");
    at::NoGradGuard no_grad;
    at::Tensor x = x_in.to(device_, dtype_).contiguous();
    if (g_.output() == 0) return x.is_same(x_in) ? x.clone() : x;  // identity
    const int dim = g_.dim;
    std::vector<at::Tensor> v(g_.nodes.size());
    v[0] = x;
    for (size_t id = 1; id < g_.nodes.size(); ++id) {
      const Node& n = g_.nodes[id];
      const auto& a = n.attrs;
      const auto& P = params_[id];
      // A tensor this node may overwrite: its last reader, and not the caller's x.
      const OpKind producer = g_.nodes[n.inputs[0]].op;
      const bool can_reuse = producer != OpKind::input && producer != OpKind::pad && producer != OpKind::crop &&
                             last_use_[n.inputs[0]] == static_cast<int>(id);
      at::Tensor y;
      if (n.op == OpKind::halo) {
        y = apply_halo(n, dim, v[n.inputs[0]], ex_);
      } else if (n.op == OpKind::relu && a.inplace && can_reuse) {
        y = v[n.inputs[0]];
        y.relu_();
      } else {
        std::vector<at::Tensor> ins;
        ins.reserve(n.inputs.size());
        for (int i : n.inputs) ins.push_back(v[i]);
        if (hook_ && (n.op == OpKind::conv || n.op == OpKind::conv_transpose)) ins[0] = hook_(n, ins[0]);
        y = apply_node(n, dim, ins, P, sigma);
      }
      v[id] = std::move(y);
      for (int i : n.inputs)
        if (last_use_[i] == static_cast<int>(id)) v[i] = at::Tensor();
    }
    return v[g_.output()];
  }

 private:
  Graph g_;
  at::Device device_;
  at::ScalarType dtype_;
  HaloExchanger* ex_;
  ConvInputHook hook_;
  std::string name_;
  std::vector<std::vector<at::Tensor>> params_;
  std::vector<int> last_use_;
  int64_t alignment_ = 1, radius_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_eager(const Graph& g, const Weights& weights, at::Device device,
                                     at::ScalarType dtype, HaloExchanger* exchanger) {
  return std::make_unique<EagerExecutor>(g, weights, device, dtype, exchanger);
}

std::unique_ptr<Executor> make_eager(const Graph& g, const Weights& weights, at::Device device, at::ScalarType dtype,
                                     HaloExchanger* exchanger, ConvInputHook conv_input, std::string name) {
  return std::make_unique<EagerExecutor>(g, weights, device, dtype, exchanger, std::move(conv_input), std::move(name));
}

}  // namespace pnp::nn
