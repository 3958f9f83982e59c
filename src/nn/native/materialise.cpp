// The native executor's materialisation (impl.hpp): the plan's weights in float64 on the host
// (BN folded into its conv there), then on the device in the executor's dtype, channels-last for
// convolution weights; the slots, the static input and the sigma buffer.
#include "impl.hpp"

namespace pnp::nn::native {

at::MemoryFormat cl_format(int dim) { return dim == 3 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast; }

std::vector<int64_t> strides_for(const std::vector<int64_t>& s, bool channels_last) {
  const size_t n = s.size();
  std::vector<int64_t> st(n, 1);
  if (!channels_last || n < 4) {
    for (size_t i = n - 1; i-- > 0;) st[i] = st[i + 1] * s[i + 1];
    return st;
  }
  // [B, C, spatial...]: C fastest, then the spatial axes from last to first, then B.
  int64_t acc = s[1];
  st[1] = 1;
  for (size_t i = n - 1; i >= 2; --i) {
    st[i] = acc;
    acc *= s[i];
  }
  st[0] = acc;
  return st;
}

// Weights in float64 on the host (BN folded into its conv there), then on the device in the
// executor's dtype, channels-last for convolution weights.
void NativeImpl::materialise(const Weights& w) {
  const bool cuda_fused =
      device_.is_cuda() && (dtype_ == at::kFloat || (dtype_ == at::kBFloat16 && opt_.cudnn_fused_bf16));
  auto param = [&](const std::string& key) -> at::Tensor {
    return key.empty() ? at::Tensor() : w.at(key).detach().to(at::kCPU, at::kDouble);
  };
  auto to_dev = [&](const at::Tensor& t, bool weight) {
    at::Tensor r = t.to(device_, dtype_);
    return weight && cl_ ? r.contiguous(cl_format(g_.dim)) : r.contiguous();
  };
  bound_.assign(plan_.steps.size(), Bound{});
  for (size_t k = 0; k < plan_.steps.size(); ++k) {
    const PlanStep& s = plan_.steps[k];
    Bound& t = bound_[k];
    // the conv's weight and bias with its batch norm folded in: W * gamma / sqrt(var + eps),
    // (B - mu) * that + beta
    auto folded = [&](at::Tensor& W, at::Tensor& B) {
      W = param(s.weight_key), B = param(s.bias_key);
      if (s.bn < 0) return;
      const auto& bk = s.bn_keys;
      at::Tensor gamma = param(bk.weight), beta = param(bk.bias), mu = param(bk.mean), var = param(bk.var);
      at::Tensor scale = gamma / at::sqrt(var + bk.eps);
      std::vector<int64_t> vs(static_cast<size_t>(W.dim()), 1);
      vs[0] = -1;
      W = W * scale.view(vs);
      B = ((B.defined() ? B : at::zeros_like(mu)) - mu) * scale + beta;
    };
    if (s.kind == StepKind::conv) {
      at::Tensor W, B;
      folded(W, B);
      t.w = to_dev(W, true);
      if (B.defined()) t.b = to_dev(B, false);
      t.cudnn = cuda_fused && s.relu;
      t.has_bias = t.b.defined();
      t.epilogue = cuda_fused && opt_.cudnn_epilogues && (opt_.autotune || opt_.cudnn_epilogues_forced) &&
                   ((s.z >= 0 && !s.relu) || opt_.cudnn_graph_convs) && s.groups == 1 && native_has_cudnn_epilogues();
      t.narrow = device_.is_cuda() && opt_.narrow_convs && cl_ && g_.dim == 2 &&
                 (dtype_ == at::kFloat || dtype_ == at::kBFloat16);
      t.wgmma = device_.is_cuda() && opt_.wgmma_convs && cl_ && g_.dim == 2 &&
                (dtype_ == at::kFloat || dtype_ == at::kBFloat16);
      if (t.wgmma && dtype_ == at::kBFloat16 && s.groups == 1 && s.x2 < 0 &&
          std::find(opt_.fp8_convs.begin(), opt_.fp8_convs.end(), s.head) != opt_.fp8_convs.end())
        materialise_fp8(t, W);
      // cuDNN's fused ops otherwise allocate and fill a zero bias on every call
      if (t.cudnn && !t.b.defined())
        t.b = at::zeros({s.out_channels}, at::TensorOptions().dtype(dtype_).device(device_));
      if (t.epilogue && (s.z >= 0 || s.relu) && !t.has_bias)
        t.zero_b = t.b.defined() ? t.b : at::zeros({s.out_channels}, at::TensorOptions().dtype(dtype_).device(device_));
    } else if (s.kind == StepKind::conv_transpose) {
      at::Tensor W, B;
      folded(W, B);
      t.w = to_dev(s.from_upsample ? native::upsample_conv_weight(W) : W, true);
      if (B.defined()) t.b = to_dev(B, false);
      if (s.from_upsample && s.z < 0 && nhwc_ops()) {  // its four phases as one convolution (phase_conv)
        Bound ph;
        ph.w = to_dev(native::upsample_conv_phase_weight(W), true);
        ph.epilogue = cuda_fused && opt_.cudnn_epilogues && (opt_.autotune || opt_.cudnn_epilogues_forced) &&
                      opt_.cudnn_graph_convs && native_has_cudnn_epilogues();
        ph.wgmma = device_.is_cuda() && opt_.wgmma_convs;
        phase_.emplace(k, std::move(ph));
      }
#ifdef PNP_HAVE_CUDA
      // a 2×2, stride-2 transposed convolution alone (no bias, epilogue or concat) as two
      // cuBLAS products into its output (transposed_gemm.hpp); transposed() checks the tensors
      if (!s.from_upsample && !B.defined() && s.z < 0 && !s.relu && s.cat_other < 0 && nhwc_ops() && W.dim() == 4 &&
          W.size(2) == 2 && W.size(3) == 2) {
        stride2_.emplace(k, native::stride2_transposed_weight(W.to(device_, dtype_)).contiguous());
      }
#endif
    } else if (s.kind == StepKind::batch_norm) {
      t.w = to_dev(param(s.bn_keys.weight), false);
      t.b = to_dev(param(s.bn_keys.bias), false);
      t.mean = to_dev(param(s.bn_keys.mean), false);
      t.var = to_dev(param(s.bn_keys.var), false);
    }
  }
  link_fp8_readers();
#ifdef PNP_HAVE_CUDA
  std::vector<std::array<int64_t, 3>> shapes;  // each product's C_in, C_out (its weight's) and input width
  for (const auto& [k, wt] : stride2_) shapes.push_back({wt.size(0), wt.size(3), plan_.steps[k].shape[3] / 2});
  if (!shapes.empty())
    stride2_warm_ = std::async(std::launch::async, [shapes = std::move(shapes), dt = dtype_, dev = device_] {
      for (const auto& [ci, co, w] : shapes) native::stride2_transposed_warm(ci, co, w, dt, dev);
    });
#endif
}

// An FP8 convolution's weight (W: folded, float64 on the host) in e4m3 with its scale per output
// channel (pnp/nn/fp8.hpp); the bf16 weight stays for where the kernel does not take the layer.
void NativeImpl::materialise_fp8(Bound& t, const at::Tensor& W) {
  const E4m3Weight q = quantize_weight_e4m3(W.to(at::kFloat), /*transposed=*/false);
  t.wq = q.q.to(device_).contiguous(cl_format(g_.dim));
  t.w_scale = q.scale.to(device_, at::kFloat).contiguous();
  t.fp8 = true;
}

// Each FP8 convolution whose output has one reader, an FP8 convolution reading it as its input
// (not as a residual, through a halo or a folded add), and is not the network's output: that
// reader's step (Bound::fp8_reader). Where it has more readers, exactly one of them such a
// convolution: that one's step (Bound::copy_reader, with NativeOptions::fp8_dual_out).
void NativeImpl::link_fp8_readers() {
  std::vector<std::vector<size_t>> readers(g_.nodes.size());
  for (size_t k = 0; k < plan_.steps.size(); ++k) {
    const PlanStep& s = plan_.steps[k];
    std::vector<int> read = s.in;
    if (s.cat_other >= 0) read.push_back(s.cat_other);
    std::sort(read.begin(), read.end());
    read.erase(std::unique(read.begin(), read.end()), read.end());
    for (int v : read) readers[static_cast<size_t>(v)].push_back(k);
  }
  for (size_t k = 0; k < plan_.steps.size(); ++k) {
    const int v = plan_.steps[k].out;
    if (!bound_[k].fp8 || v == g_.output()) continue;
    const std::vector<size_t>& rv = readers[static_cast<size_t>(v)];
    auto fp8_input = [&](size_t r) {
      const PlanStep& rs = plan_.steps[r];
      return bound_[r].fp8 && rs.kind == StepKind::conv && !rs.in.empty() && rs.in[0] == v && rs.z != v &&
             rs.halo < 0 && rs.x2 < 0;
    };
    if (rv.size() == 1 && fp8_input(rv[0])) {
      bound_[k].fp8_reader = static_cast<int>(rv[0]);
    } else if (rv.size() > 1 && opt_.fp8_dual_out && std::count_if(rv.begin(), rv.end(), fp8_input) == 1) {
      const size_t r = *std::find_if(rv.begin(), rv.end(), fp8_input);
      bound_[k].copy_reader = static_cast<int>(r);
      bound_[r].copy_writer = static_cast<int>(k);
    }
  }
}

void NativeImpl::allocate() {
  auto opts = at::TensorOptions().dtype(dtype_).device(device_);
  const int64_t esize = at::elementSize(dtype_);
  for (int64_t bytes : plan_.slot_bytes) slots_.push_back(at::empty({(bytes + esize - 1) / esize}, opts));
  static_in_ = at::empty_strided(shape_, strides_for(shape_, cl_), opts);
  if (plan_.uses_sigma) sigma_.value = at::zeros({1}, opts);
}

at::Tensor NativeImpl::slot_view(const PlanStep& s) const {
  return slots_[static_cast<size_t>(s.slot)].as_strided(s.shape, strides_for(s.shape, cl_));
}

}  // namespace pnp::nn::native
