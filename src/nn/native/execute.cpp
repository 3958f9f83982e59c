// The native executor's execution (impl.hpp): the plan's steps run in order, each convolution
// by pnp's kernels, a cuDNN graph or ATen's ops, pools, halos and transposed convolutions.
#include "impl.hpp"

namespace pnp::nn::native {

// Nearest upsampling by whole factors as one broadcast copy: y viewed as [N, C, D0, f0, D1, f1,
// ...] receives x viewed with stride 0 over each f. Same values as upsample_nearest (output
// index i reads input i / f); in channels-last the copy's inner loop runs over contiguous
// channels, where ATen's NHWC nearest-upsample kernel was measured at a fraction of the copy
// bandwidth (UNet 3 ch 2048²: 6.2 ms for 3 calls, H200). False when a factor is not whole.
bool NativeImpl::upsample_by_copy(at::Tensor& y, const at::Tensor& x) {
  const int64_t d = x.dim() - 2;
  std::vector<int64_t> sizes{x.size(0), x.size(1)}, ys{y.stride(0), y.stride(1)}, xs{x.stride(0), x.stride(1)};
  for (int64_t k = 0; k < d; ++k) {
    const int64_t in = x.size(2 + k), out = y.size(2 + k);
    if (in <= 0 || out % in != 0) return false;
    const int64_t f = out / in;
    sizes.insert(sizes.end(), {in, f});
    ys.insert(ys.end(), {y.stride(2 + k) * f, y.stride(2 + k)});
    xs.insert(xs.end(), {x.stride(2 + k), 0});
  }
  y.as_strided(sizes, ys).copy_(x.as_strided(sizes, xs));
  return true;
}

// pnp's NHWC kernels may run (NativeOptions::nhwc_kernels; nhwc_ops.hpp checks each call).
bool NativeImpl::nhwc_ops() const {
  return device_.is_cuda() && opt_.nhwc_kernels && cl_ && g_.dim == 2 && (dtype_ == at::kFloat || dtype_ == at::kBFloat16);
}

// x2: a folded add's other input (PlanStep::x2): the conv of x + x2, the sum made as pnp's tail
// kernel loads its input where that kernel runs, else by an add first.
at::Tensor NativeImpl::conv(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
                            const std::vector<int64_t>& padding, const at::Tensor* x2) {
#ifdef PNP_HAVE_WGMMA_CONV
  if (t.fp8 && !x2)
    if (at::Tensor y = fp8_conv(s, t, x, z, padding); y.defined()) return y;
#endif
#ifdef PNP_HAVE_CUDA
  if (t.narrow && native::narrow_conv_applies(x, t.w, s.stride, padding, s.groups, z, x2)) {
    t.narrow_used = true;
    add_in_kernel_ = add_in_kernel_ || (x2 && (validating_ || from_cache_capture_));
    return native::narrow_conv(x, t.w, t.has_bias ? &t.b : nullptr, z, s.relu, padding, x2);  // (the IR's bias only)
  }
#endif
  if (x2) return conv(s, t, at::add(x, *x2), z, padding);
#ifdef PNP_HAVE_WGMMA_CONV
  // (with graphs: timed, epilogue_conv; untimed only the narrow layers, kUntimedHopperMaxChannels)
  if (t.wgmma && !t.epilogue && x.size(1) <= native::kUntimedHopperMaxChannels && wgmma_applies(s, t, x, z, padding)) {
    t.wgmma_used = true;
    return native::wgmma_conv(x, t.w, t.has_bias ? &t.b : nullptr, z, s.relu, padding);
  }
#endif
#ifdef PNP_HAVE_CUDNN_FE
  if (t.epilogue)
    if (at::Tensor y = epilogue_conv(s, t, x, z, padding); y.defined()) return y;
#endif
  return generic_conv(s, t, x, z, padding);
}

#ifdef PNP_HAVE_WGMMA_CONV
// A convolution in FP8 (NativeOptions::fp8_convs) on pnp's tile kernel: x quantised with the
// input's scale (calibrated here on the warm-up's first run) unless its writer already wrote it
// in e4m3 (or an e4m3 copy beside it: Bound::copy_writer); the output in e4m3 for its one FP8
// reader once that reader has run in FP8, else bf16 (and, for a copy_reader that has, its copy).
// Undefined where the kernel does not take the layer: it then runs in bf16 from now on.
at::Tensor NativeImpl::fp8_conv(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
                                const std::vector<int64_t>& padding) {
  const bool quantised = x.scalar_type() == at::kFloat8_e4m3fn;
  if (!quantised && t.x_scale == 0) {
    if (!validating_) throw Error("native executor: " + s.name + "'s FP8 input scale was not calibrated in the warm-up");
    t.x_scale = e4m3_activation_scale(x);
    t.descale = (t.w_scale * t.x_scale).contiguous();
  }
  at::Tensor xq = quantised ? x : at::Tensor();
  if (!quantised && t.copy_writer >= 0) {  // its writer's e4m3 copy of x, made in this run
    at::Tensor& copy = bound_[static_cast<size_t>(t.copy_writer)].e4m3_copy;
    xq = copy;
    copy = at::Tensor();
  }
  if (!quantised && !xq.defined() && native::e4m3_quantize_nhwc_applies(x)) xq = native::e4m3_quantize_nhwc(x, t.x_scale);
  if (!xq.defined() || !native::wgmma_conv_fp8_applies(xq, t.wq, padding, z)) {
    // (a writer makes e4m3 only for a reader that ran in FP8, which then always does)
    if (quantised) throw Error("native executor: " + s.name + " got an e4m3 input its FP8 kernel does not take");
    t.fp8 = false;
    notes_.push_back("FP8: " + s.name + " runs in bf16 (pnp's FP8 kernel does not take its tensors)");
    return {};
  }
  at::ScalarType out = at::kBFloat16;
  double out_scale = 1.0;
  bool copy = false;
  if (t.fp8_reader >= 0) {
    const Bound& r = bound_[static_cast<size_t>(t.fp8_reader)];
    if (r.fp8 && r.fp8_used && r.x_scale > 0) out = at::kFloat8_e4m3fn, out_scale = r.x_scale;
  } else if (t.copy_reader >= 0) {
    const Bound& r = bound_[static_cast<size_t>(t.copy_reader)];
    if (r.fp8 && r.fp8_used && r.x_scale > 0) copy = true, out_scale = r.x_scale;
  }
  t.fp8_used = true;
  t.e4m3_copy = at::Tensor();
  return native::wgmma_conv_fp8(xq, t.wq, t.descale, t.has_bias ? &t.b : nullptr, z, s.relu, padding, out, out_scale,
                                nullptr, {}, copy ? &t.e4m3_copy : nullptr);
}

bool NativeImpl::wgmma_applies(const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z,
                               const std::vector<int64_t>& padding) {
  return native::wgmma_conv_applies(x, t.w, s.stride, padding, s.groups, z);
}
#endif

// The convolution and its epilogue without a cuDNN graph: cuDNN's fused ops where they apply,
// else the convolution, then add_ and relu_.
at::Tensor NativeImpl::generic_conv(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
                                    const std::vector<int64_t>& padding) {
  const std::vector<int64_t> dil(s.stride.size(), 1);
  const std::optional<at::Tensor> b = bias(t);
#ifdef PNP_HAVE_CUDA
  if (t.cudnn) {
    try {
      if (z) return at::cudnn_convolution_add_relu(x, t.w, *z, at::Scalar(1.0), b, s.stride, padding, dil, s.groups);
      return at::cudnn_convolution_relu(x, t.w, b, s.stride, padding, dil, s.groups);
    } catch (const c10::Error& e) {
      if (!validating_) throw;
      // The fused kernel is not available for this configuration: use generic ops.
      t.cudnn = false;
      std::string msg = e.what_without_backtrace();
      notes_.push_back("cuDNN fused op unavailable for " + s.name + ", generic ops used: " +
                       msg.substr(0, msg.find('\n')));
    }
  }
#endif
  at::Tensor y = at::convolution(x, t.w, b, s.stride, padding, dil, false, std::vector<int64_t>(s.stride.size(), 0),
                                 s.groups);
  if (z) y.add_(*z);
  if (s.relu) y.relu_();
  return y;
}

// A conv or max_pool step with this padding.
at::Tensor NativeImpl::window(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
                              const std::vector<int64_t>& padding) {
  if (s.kind == StepKind::conv) return conv(s, t, x, z, padding);
#ifdef PNP_HAVE_CUDA
  if (nhwc_ops() && native::max_pool2_applies(x, s.kernel, s.stride, padding)) {
    pool_used_ = pool_used_ || validating_ || from_cache_capture_;
    return native::max_pool2(x);
  }
#endif
  return g_.dim == 2 ? at::max_pool2d(x, s.kernel, s.stride, padding, {1, 1}, false)
                     : at::max_pool3d(x, s.kernel, s.stride, padding, {1, 1, 1}, false);
}

// A conv or max_pool step reading a deferred halo (plan.hpp): the op on the bare tile with
// its own padding, which is exact except in the output rows whose window reaches a
// neighbour's pixels; those are recomputed from boxes of the grown tensor (the neighbours'
// strips, the tile's border rows, the fill) with the halo pass's padding. No grown copy of
// the tile is made: the extra work is the boxes, a few rows per neighbour. The exchange is
// started before the op on the tile and finished after it.
at::Tensor NativeImpl::window_over_halo(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z) {
  const Node& h = g_.nodes[static_cast<size_t>(s.halo)];
  const auto& a = h.attrs;
  const int dim = g_.dim;
  auto peer = [&](int d, int side) {
    return (side == 0 ? a.halo_peer_lo[d] && a.halo_lo[d] > 0 : a.halo_peer_hi[d] && a.halo_hi[d] > 0) != 0;
  };
  bool any = false;
  for (int d = 0; d < dim; ++d) any = any || peer(d, 0) || peer(d, 1);
  // the image border on every side: the op's own padding is the halo
  if (!any) return window(s, t, x, z, s.tile_padding);
  if (!opt_.exchanger) throw Error("halo node " + h.name + " has neighbours but the executor has no exchanger");
  // the transfer overlaps the op on the tile, which needs none of it
  opt_.exchanger->start_strips(h, x);
  at::Tensor y = window(s, t, x, z, s.tile_padding);
  const HaloStrips strips = opt_.exchanger->finish_strips(h, x);
  for (int d = 0; d < dim; ++d)
    for (int side = 0; side < 2; ++side) {
      if (!peer(d, side)) continue;
      const int64_t k = a.kernel[d], st = a.stride[d], n = y.size(2 + d);
      // output rows [o0, o1) along d whose window (grown rows [o st, o st + k)) leaves the tile
      int64_t o0 = 0, o1 = n;
      if (side == 0) {
        o1 = std::min(n, (a.halo_lo[d] + st - 1) / st);
      } else {
        const int64_t last_inside = a.halo_lo[d] + x.size(2 + d) - k;  // the last window start inside
        o0 = last_inside < 0 ? 0 : std::min(n, last_inside / st + 1);
      }
      if (o1 <= o0) continue;
      std::vector<int64_t> box_lo(static_cast<size_t>(dim), 0), shape = x.sizes().vec();
      for (int e = 0; e < dim; ++e)
        shape[static_cast<size_t>(2 + e)] = a.halo_lo[e] + x.size(2 + e) + a.halo_hi[e];
      box_lo[static_cast<size_t>(d)] = o0 * st;
      shape[static_cast<size_t>(2 + d)] = (o1 - 1) * st + k - o0 * st;
      at::Tensor box = at::empty(shape, x.options().memory_format(x.suggest_memory_format()));
      halo_box_into(box, h, x, strips, box_lo);
      at::Tensor zb;
      if (z) zb = z->narrow(2 + d, o0, o1 - o0).contiguous(z->suggest_memory_format());
      y.narrow(2 + d, o0, o1 - o0).copy_(window(s, t, box, z ? &zb : nullptr, s.padding));
    }
  return y;
}

// A conv_transpose step into y (its slot, where it has absorbed a concat: PlanStep::cat_other).
// A folded upsample with its phase convolution (phase_) runs that and pnp's shuffle
// (nhwc_ops.hpp) where the shuffle takes the tensors; a lone 2×2, stride-2 one (stride2_) its
// two cuBLAS products into y (transposed_gemm.hpp); otherwise the transposed convolution, then
// its epilogue and the concat as ATen ops.
at::Tensor NativeImpl::transposed(const PlanStep& s, Bound& t, size_t k, const at::Tensor& x, at::Tensor& y) {
  const at::Tensor* other = s.cat_other >= 0 ? &vals_[static_cast<size_t>(s.cat_other)] : nullptr;
#ifdef PNP_HAVE_CUDA
  if (auto it = phase_.find(k); it != phase_.end()) {
    at::Tensor out = y.defined() ? y : at::empty(s.shape, x.options().memory_format(at::MemoryFormat::ChannelsLast));
    const int64_t c = t.w.size(1);  // the transposed weight: [C_in, C_out, 4, 4]
    if (native::phase_shuffle_applies(x, c, t.b.defined() ? &t.b : nullptr, other, out)) {
      PlanStep ps;  // the phase convolution: 2×2, stride 1, padding 1, no epilogue
      ps.kind = StepKind::conv;
      ps.name = s.name + " (phases)";
      ps.stride = {1, 1}, ps.padding = {1, 1};
      ps.out_channels = 4 * c;
      const at::Tensor p = conv(ps, it->second, x, nullptr, ps.padding);
      native::phase_shuffle(p, t.b.defined() ? &t.b : nullptr, s.relu, other, !s.cat_first, out);
      phase_used_ = phase_used_ || validating_ || from_cache_capture_;
      return out;
    }
  }
  if (auto it = stride2_.find(k); it != stride2_.end()) {
    at::Tensor out = y.defined() ? y : at::empty(s.shape, x.options().memory_format(at::MemoryFormat::ChannelsLast));
    if (native::stride2_transposed_applies(x, t.w, s.stride, s.padding, s.output_padding, s.groups, out)) {
      native::stride2_transposed(x, it->second, out);
      stride2_used_ = stride2_used_ || validating_ || from_cache_capture_;
      return out;
    }
  }
#endif
  (void)k;
  at::Tensor u = at::convolution(x, t.w, bias(t), s.stride, s.padding, std::vector<int64_t>(s.stride.size(), 1), true,
                                 s.output_padding, s.groups);
  if (s.z >= 0) u.add_(vals_[static_cast<size_t>(s.z)]);  // a folded upsample's conv keeps its epilogue
  if (s.relu) u.relu_();
  if (!other) return u;
  at::cat_out(y, s.cat_first ? std::vector<at::Tensor>{u, *other} : std::vector<at::Tensor>{*other, u}, 1);
  return y;
}

at::Tensor NativeImpl::run() {
  const int dim = g_.dim;
  std::vector<at::Tensor>& v = vals_;
  v.assign(g_.nodes.size(), at::Tensor());
  v[0] = static_in_;
  for (size_t k = 0; k < plan_.steps.size(); ++k) {
    const PlanStep& s = plan_.steps[k];
    Bound& t = bound_[k];
    const at::Tensor& in = s.in.empty() ? v[0] : v[s.in[0]];
    at::Tensor y = s.slot >= 0 ? slot_view(s) : at::Tensor();  // the out= ops write into their slot
    switch (s.kind) {
      case StepKind::sigma:
        y = sigma_.value.view(std::vector<int64_t>(s.shape.size(), 1)).expand(s.shape);
        break;
      case StepKind::conv:
        y = s.halo >= 0 ? window_over_halo(s, t, in, s.z >= 0 ? &v[s.z] : nullptr)
                        : conv(s, t, in, s.z >= 0 ? &v[s.z] : nullptr, s.padding, s.x2 >= 0 ? &v[s.x2] : nullptr);
        break;
      case StepKind::conv_transpose:
        y = transposed(s, t, k, in, y);
        break;
      case StepKind::batch_norm:
        y = at::batch_norm(in, t.w, t.b, t.mean, t.var, false, 0.1, s.bn_keys.eps, true);
        break;
      case StepKind::relu:
        if (s.inplace >= 0)
          y = v[s.inplace].relu_();
        else
          at::relu_out(y, in);
        break;
      case StepKind::add:
        if (s.inplace >= 0)
          y = v[s.inplace].add_(v[s.inplace == s.in[0] ? s.in[1] : s.in[0]]);
        else
          at::add_out(y, in, v[s.in[1]]);
        break;
      case StepKind::concat: {
        std::vector<at::Tensor> parts;
        for (int i : s.in) parts.push_back(v[i]);
        at::cat_out(y, parts, 1);
        break;
      }
      case StepKind::max_pool:
        y = s.halo >= 0 ? window_over_halo(s, t, in, nullptr) : window(s, t, in, nullptr, s.padding);
        break;
      case StepKind::upsample:
        if (!upsample_by_copy(y, in)) {
          std::vector<int64_t> os(s.shape.begin() + 2, s.shape.end());
          if (dim == 2)
            at::upsample_nearest2d_out(y, in, os, s.scales[0], s.scales[1]);
          else
            at::upsample_nearest3d_out(y, in, os, s.scales[0], s.scales[1], s.scales[2]);
        }
        break;
      case StepKind::pad:
        if (s.alias)  // nothing to pad: the input itself
          y = in;
        else if (dim == 2)
          at::replication_pad2d_out(y, in, s.pads);
        else
          at::replication_pad3d_out(y, in, s.pads);
        break;
      case StepKind::halo:  // deferred: the tile itself, grown by its reader (window_over_halo)
        y = s.deferred ? in : apply_halo(g_.nodes[static_cast<size_t>(s.head)], dim, in, opt_.exchanger);
        break;
      case StepKind::crop:
        y = in;
        for (int d = 0; d < dim; ++d)
          if (y.size(2 + d) != s.shape[static_cast<size_t>(2 + d)])
            y = y.narrow(2 + d, 0, s.shape[static_cast<size_t>(2 + d)]);
        break;
    }
    v[s.out] = std::move(y);
    for (int r : s.release) v[r] = at::Tensor();
  }
  at::Tensor out = v[g_.output()];
  v.clear();
  return out;
}

void NativeImpl::sync() const {
  if (device_.is_cuda()) c10::impl::getDeviceGuardImpl(device_.type())->synchronizeDevice(device_.index());
}

}  // namespace pnp::nn::native
