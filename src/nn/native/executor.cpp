// The native backend's executor (include/pnp/nn/native.hpp): materialises a plan (plan.hpp:
// fusions, steps, liveness, in-place and slots, decided on the IR alone) on a device and dtype,
// i.e. folds BN in float64, uploads channels-last weights and allocates the slots, then runs the
// steps, warms up / autotunes cuDNN (choosing, per layout, between a cuDNN graph with the
// residual add in its epilogue and conv then add_) and captures the forward as a CUDA graph.
// About 600 lines: materialising, running, choosing and capturing share the executor's private
// state (slots, workspace, the side stream, the graph); the planning half lives in plan.cpp and
// the cuDNN graphs themselves in cudnn_epilogue.cpp.
#include "pnp/nn/native.hpp"
#include "pnp/timing.hpp"
#include "plan.hpp"
#include "upsample_conv.hpp"
#ifdef PNP_HAVE_CUDA
#include "narrow_conv.hpp"
#include "capture.hpp"
#include "nhwc_ops.hpp"
#include "transposed_gemm.hpp"
#ifdef PNP_HAVE_WGMMA_CONV
#include "wgmma_conv.hpp"
#endif
#endif

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <array>
#include <chrono>
#include <future>
#include <map>
#include <optional>

#ifdef PNP_HAVE_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif
#ifdef PNP_HAVE_CUDNN_FE
#include "cudnn_epilogue.hpp"
#include "plan_cache.hpp"
#include <torch/version.h>
#endif

namespace pnp::nn {

namespace {

using native::PlanStep;
using native::StepKind;

// A plan step's tensors on the executor's device and dtype (conv / conv_transpose: w, b after
// BN folding; batch_norm: w, b, mean, var), and whether it runs as a cuDNN fused op.
struct Bound {
  at::Tensor w, b, mean, var;
  bool cudnn = false;  // at::cudnn_convolution_relu / _add_relu
  bool has_bias = false;  // the IR's conv has a bias (b may also be the zero bias cuDNN's fused ops want)
  // The conv with its epilogue may run as one cuDNN graph (cudnn_epilogue.hpp): conv +
  // residual add without a ReLU (cudnn_epilogues), any convolution (cudnn_graph_convs);
  // epilogue_used: it did in the warm-up (chosen by timing, or forced)
  bool epilogue = false, epilogue_used = false;
  // The bias of a graph with an epilogue (residual add or ReLU) where the IR's conv has none:
  // zeros. cuDNN's precompiled conv (+ residual) + bias (+ ReLU) engines (eng41, eng51 on an
  // H200) take those graphs; conv + residual alone, and conv + ReLU, had only engines that cuDNN
  // compiles at run time (eng4): 0.35-0.61 s to build each, and slower (docs/measurements/2026-12-04c)
  at::Tensor zero_b;
  // A convolution with one output channel may run as pnp's own kernel (narrow_conv.hpp;
  // NativeOptions::narrow_convs); narrow_used: it did in the warm-up. One with few input or
  // (2 to 4) output channels may run as pnp's head or tail kernel (the same option; chosen by
  // timing like the Hopper kernels); few_in_used, few_out_used: it did
  bool narrow = false, narrow_used = false, few_in_used = false, few_out_used = false;
  // A convolution whose channels fill 64 x 256 tiles may run as pnp's Hopper kernels
  // (wgmma_conv.hpp; NativeOptions::wgmma_convs): chosen by timing with the cuDNN graphs where
  // those are (epilogue), else always; wgmma_used: it did in the warm-up
  bool wgmma = false, wgmma_used = false;
};

#ifdef PNP_HAVE_CUDNN_FE
// Which of pnp's own kernels runs a layout chosen by timing (the executor's epilogue layouts).
enum class PnpKernel { none, few_in, few_out, hopper };

// Its name in the notes.
const char* pnp_kernel_name(PnpKernel k) {
  return k == PnpKernel::few_in ? "head" : k == PnpKernel::few_out ? "tail" : "Hopper";
}
#endif

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

class NativeImpl final : public NativeExecutor {
 public:
  NativeImpl(const Graph& g, const Weights& w, at::Device device, at::ScalarType dtype, std::vector<int64_t> shape,
             NativeOptions opt)
      : g_(g), device_(concrete_device(device)), dtype_(dtype), shape_(std::move(shape)), opt_(opt) {
    const auto t0 = std::chrono::steady_clock::now();
    require_executor_dtype("native executor", dtype);
    check_weights(g, w, "weights");
    shapes_ = infer_shapes(g, shape_);  // InputError for an impossible shape
    alignment_ = g.alignment();
    radius_ = nn::receptive_radius(g);
    cl_ = opt.channels_last;
    c10::DeviceGuard guard(device_);
    at::NoGradGuard no_grad;
    plan_ = native::make_plan(g, shapes_, {opt.fuse, static_cast<int64_t>(at::elementSize(dtype)), opt.copy_free_halo,
                                              opt.copy_free_min_bytes, opt.upsample_conv});
    int deferred = 0, halos = 0;
    for (const auto& st : plan_.steps)
      if (st.kind == StepKind::halo) ++halos, deferred += st.deferred ? 1 : 0;
    if (halos > 0)
      notes_.push_back("layer halo: " + std::to_string(deferred) + " of " + std::to_string(halos) +
                       " halo nodes copy-free (op on the tile, border rows recomputed), the rest grow a copy");
    for (const auto& st : plan_.steps)
      if (st.kind == StepKind::halo && opt_.cuda_graph) {
        // The exchanges run between the compiled steps (compile.mode = "pre"); a graph of the
        // whole distributed forward is the solver's capture (post, fused).
        opt_.cuda_graph = false;
        notes_.push_back("layer halo: exchanges between the compiled steps, no CUDA graph of the forward");
      }
    const auto t_weights = std::chrono::steady_clock::now();
    materialise(w);
    allocate();
    if (device_.is_cuda()) {
      sync();
      char buf[96];
      std::snprintf(buf, sizeof buf, "weights (BN folded in float64) and buffers on the device in %.3f s",
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t_weights).count());
      notes_.push_back(buf);
    }
    if (!opt_.warm_up_on_first_call) warm_up_and_capture(false);
    sync();
    compile_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  ~NativeImpl() override {
#ifdef PNP_HAVE_CUDA
    graph_.reset();
#endif
  }

  std::string name() const override { return "native"; }
  int64_t alignment() const override { return alignment_; }
  int64_t receptive_radius() const override { return radius_; }
  double compile_seconds() const override { return compile_s_; }
  std::vector<std::string> fusions() const override { return plan_.fusions; }
  bool graph_captured() const override { return captured_; }
  std::vector<std::string> notes() const override { return notes_; }
  const std::vector<int64_t>& input_shape() const override { return shape_; }
  int64_t slot_bytes() const override { return plan_.total_slot_bytes(); }
  int slot_count() const override { return static_cast<int>(slots_.size()); }

  void set_sigma(double sigma) override { sigma_.set(sigma); }  // (SigmaBuffer: only when it changes)

  at::Tensor forward(const at::Tensor& x, double sigma) override {
    if (x.sizes().vec() != shape_)
      throw InputError("native executor: compiled for input shape " + shape_string(shape_) + ", got " +
                       shape_string(x.sizes().vec()) + " (compile another executor for that shape)");
    c10::DeviceGuard guard(device_);
    at::NoGradGuard no_grad;
    static_in_.copy_(x);
    set_sigma(sigma);
    if (!warmed_) return warm_up_and_capture(true);  // NativeOptions::warm_up_on_first_call
#ifdef PNP_HAVE_CUDA
    if (captured_) {
      graph_->replay();
      return static_out_.clone(at::MemoryFormat::Contiguous);
    }
#endif
    at::Tensor y = run();
    return y.clone(at::MemoryFormat::Contiguous);
  }

 private:
  // ---- materialising the plan ---------------------------------------------------------------
  // Weights in float64 on the host (BN folded into its conv there), then on the device in the
  // executor's dtype, channels-last for convolution weights.
  void materialise(const Weights& w) {
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
#ifdef PNP_HAVE_CUDA
    std::vector<std::array<int64_t, 3>> shapes;  // each product's C_in, C_out (its weight's) and input width
    for (const auto& [k, wt] : stride2_) shapes.push_back({wt.size(0), wt.size(3), plan_.steps[k].shape[3] / 2});
    if (!shapes.empty())
      stride2_warm_ = std::async(std::launch::async, [shapes = std::move(shapes), dt = dtype_, dev = device_] {
        for (const auto& [ci, co, w] : shapes) native::stride2_transposed_warm(ci, co, w, dt, dev);
      });
#endif
  }

  void allocate() {
    auto opts = at::TensorOptions().dtype(dtype_).device(device_);
    const int64_t esize = at::elementSize(dtype_);
    for (int64_t bytes : plan_.slot_bytes) slots_.push_back(at::empty({(bytes + esize - 1) / esize}, opts));
    static_in_ = at::empty_strided(shape_, strides_for(shape_, cl_), opts);
    if (plan_.uses_sigma) sigma_.value = at::zeros({1}, opts);
  }

  // Nearest upsampling by whole factors as one broadcast copy: y viewed as [N, C, D0, f0, D1, f1,
  // ...] receives x viewed with stride 0 over each f. Same values as upsample_nearest (output
  // index i reads input i / f); in channels-last the copy's inner loop runs over contiguous
  // channels, where ATen's NHWC nearest-upsample kernel was measured at a fraction of the copy
  // bandwidth (UNet 3 ch 2048²: 6.2 ms for 3 calls, H200). False when a factor is not whole.
  static bool upsample_by_copy(at::Tensor& y, const at::Tensor& x) {
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
  bool nhwc_ops() const {
    return device_.is_cuda() && opt_.nhwc_kernels && cl_ && g_.dim == 2 && (dtype_ == at::kFloat || dtype_ == at::kBFloat16);
  }

  at::Tensor slot_view(const PlanStep& s) const {
    return slots_[static_cast<size_t>(s.slot)].as_strided(s.shape, strides_for(s.shape, cl_));
  }

  // ---- execution --------------------------------------------------------------------------
  static std::optional<at::Tensor> bias(const Bound& t) { return t.b.defined() ? std::optional(t.b) : std::nullopt; }
  // ATen's cuDNN benchmark mode in the warm-up (for the convolutions pnp does not choose itself)
  bool aten_benchmark() const { return opt_.autotune && opt_.cudnn_benchmark; }

  // x2: a folded add's other input (PlanStep::x2): the conv of x + x2, the sum made as pnp's tail
  // kernel loads its input where that kernel runs, else by an add first.
  at::Tensor conv(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
                  const std::vector<int64_t>& padding, const at::Tensor* x2 = nullptr) {
#ifdef PNP_HAVE_CUDA
    if (t.narrow && native::narrow_conv_applies(x, t.w, s.stride, padding, s.groups, z, x2)) {
      t.narrow_used = true;
      add_in_kernel_ = add_in_kernel_ || (x2 && (validating_ || from_cache_capture_));
      return native::narrow_conv(x, t.w, t.has_bias ? &t.b : nullptr, z, s.relu, padding, x2);  // (the IR's bias only)
    }
#endif
    if (x2) return conv(s, t, at::add(x, *x2), z, padding);
#ifdef PNP_HAVE_WGMMA_CONV
    if (t.wgmma && !t.epilogue && wgmma_applies(s, t, x, z, padding)) {  // (with graphs: timed, epilogue_conv)
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
  static bool wgmma_applies(const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z,
                            const std::vector<int64_t>& padding) {
    return native::wgmma_conv_applies(x, t.w, s.stride, padding, s.groups, z);
  }
#endif

  // The convolution and its epilogue without a cuDNN graph: cuDNN's fused ops where they apply,
  // else the convolution, then add_ and relu_.
  at::Tensor generic_conv(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
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

#ifdef PNP_HAVE_CUDNN_FE
  // The conv with its epilogue (+ z, + bias, ReLU: what the step has) as one cuDNN graph;
  // undefined when the generic ops run instead. Each layout (shapes, strides, padding,
  // epilogue: the same for a network level's convolutions) is decided once, in the warm-up:
  // cuDNN's first three plans are timed and the fastest is timed against the generic ops
  // (NativeOptions::cudnn_epilogues_forced: the heuristics' first plan, not timed). Undefined
  // too for a layout cuDNN has no engine for, and for one first met outside the warm-up
  // (nothing is built or timed inside a capture; in a capture from the plan cache's list, such
  // a layout ends the capture).
  at::Tensor epilogue_conv(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
                           const std::vector<int64_t>& padding) {
    std::vector<int64_t> shape{x.size(0), t.w.size(0)};
    for (int64_t d = 0; d + 2 < x.dim(); ++d)
      shape.push_back((x.size(2 + d) + 2 * padding[static_cast<size_t>(d)] - t.w.size(2 + d)) / s.stride[static_cast<size_t>(d)] + 1);
    if (z && z->sizes().vec() != shape) return {};
    at::Tensor y = at::empty(shape, x.options().memory_format(x.suggest_memory_format()));
    auto aligned = [](const at::Tensor& a) { return reinterpret_cast<uintptr_t>(a.data_ptr()) % 16 == 0; };
    if (!aligned(x) || (z && !aligned(*z)) || !aligned(y)) return {};
    const std::string key = layout_key(s, t, x, z, y, padding);
    auto it = epilogues_.find(key);
    if (it == epilogues_.end()) {
      if (from_cache_capture_)
        throw Error("a convolution layout the plan cache's list of this network lacks: " + key);
      if (!validating_) return {};
      it = epilogues_.emplace(key, choose_epilogue(key, s, t, x, z, y, padding)).first;
    }
    Epilogue& e = it->second;
    if (e.pending.valid()) {
      // its candidates are being built: the warm-up that met the layout waits for them within its
      // budget (wait_for_builds), else the two ops run until they are all built (or until the
      // next warm-up run, which waits for them); then they are timed here, on these tensors
      if (!validating_) return {};
      const bool ready = e.pending.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
      if (!ready && warmup_run_ == e.run && !wait_for_builds(e)) return {};
      decide_epilogue(key, e, s, t, x, z, y, padding);
    }
    if (e.pnp) {
      if (const PnpKernel k = pnp_kernel(s, t, x, z, padding); k != PnpKernel::none) {
        e.pnp_kernel = k;
        run_pnp(k, s, t, x, z, y, padding);
        bool& used = k == PnpKernel::few_in ? t.few_in_used : k == PnpKernel::few_out ? t.few_out_used : t.wgmma_used;
        used = used || validating_ || from_cache_capture_;
        return y;
      }  // (a list's entry for a kernel that does not take the layout here: cuDNN's side)
    }
    if (!e.use) return {};
    if (e.graph->workspace_bytes() > (ws_.defined() ? ws_.numel() : 0)) return {};  // (grown when chosen)
    e.graph->run(x, t.w, z ? *z : at::Tensor(), graph_bias(t), y, ws_.defined() ? ws_.data_ptr() : nullptr);
    t.epilogue_used = t.epilogue_used || validating_ || from_cache_capture_;
    return y;
  }

  // The bias of the IR's conv (not the zero bias made for cuDNN's fused ops): what pnp's kernels add.
  static const at::Tensor* ir_bias(const Bound& t) { return t.has_bias ? &t.b : nullptr; }

  // The bias a step's cuDNN graph adds: the IR's, else the zero bias of a graph with an epilogue
  // (Bound::zero_b).
  static const at::Tensor* graph_bias(const Bound& t) {
    if (t.has_bias) return &t.b;
    return t.zero_b.defined() ? &t.zero_b : nullptr;
  }

  // A layout's key (the plan cache's too): the epilogue (a zero bias where the graph adds one,
  // Bound::zero_b), the tensors' sizes and strides, stride, padding.
  static std::string layout_key(const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z,
                                const at::Tensor& y, const std::vector<int64_t>& padding) {
    std::string key = t.has_bias ? "bias " : graph_bias(t) ? "zero-bias " : "";
    if (!z) key += "no-residual ";
    if (s.relu) key += "relu ";
    for (const at::Tensor* a : std::initializer_list<const at::Tensor*>{&x, &t.w, z, &y})
      if (a) key += shape_string(a->sizes().vec()) + shape_string(a->strides().vec());
    return key + " stride" + shape_string(s.stride) + " padding" + shape_string(padding);
  }

  struct Epilogue {
    std::shared_ptr<native::EpilogueConv> graph;
    bool use = false, cached = false;  // cached: the choice (and plan) came from the plan cache
    double graph_ms = 0, generic_ms = 0;  // NaN when not timed
    // pnp's kernel for the layout (pnp_kernel: the Hopper kernels, wgmma_conv.hpp, or the head
    // or tail kernel, narrow_conv.hpp) runs instead of cuDNN's choice (the graph or the generic ops);
    // pnp_ms: its time, NaN when not timed (no kernel of pnp's applies)
    bool pnp = false;
    PnpKernel pnp_kernel = PnpKernel::none;
    double pnp_ms = std::numeric_limits<double>::quiet_NaN();
    std::string shape, engine, why;       // engine: the graph's plan; why: no graph built
    // NativeOptions::parallel_plan_builds: the candidates being built (empty once decided),
    // since warm-up run `run`; build_s: the slowest candidate's build (parallel) or the whole
    // build (serial, e.g. forced), wait_s: how long the warm-up waited for them
    std::future<std::vector<native::EpilogueCandidate>> pending;
    int run = 0;
    bool parallel = false;
    double build_s = 0, wait_s = 0;
  };

  // In the warm-up run that met the layout: waits for its candidates' builds while the warm-up's
  // budget for such waits lasts (kBuildWaitBudgetS), so that precompiled plans (built in
  // milliseconds) are timed and run at once. The two ops that would run meanwhile allocate their
  // own outputs outside the memory plan: DRUNet 1 ch 4096² fp32's cold compile peaked at 22.0 GB
  // with them, 17.9 GB with serial builds (docs/measurements/2026-12-04c, call 5). The budget
  // bounds what runtime-compiled plans (0.35-1.2 s each) can add to a compile.
  bool wait_for_builds(Epilogue& e) {
    if (build_wait_left_s_ <= 0) return false;
    const auto t0 = std::chrono::steady_clock::now();
    const bool ready = e.pending.wait_for(std::chrono::duration<double>(build_wait_left_s_)) == std::future_status::ready;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    build_wait_left_s_ -= waited;
    e.wait_s += waited;  // (the note's "waited")
    return ready;
  }

  // The plan cache (NativeOptions::plan_cache_dir), made at the first layout it is asked for.
  native::PlanCache& plan_cache() {
    if (!plan_cache_ && !opt_.plan_cache_dir.empty() && !opt_.cudnn_epilogues_forced)
      plan_cache_.emplace(opt_.plan_cache_dir,
                          native::epilogue_environment(device_.index()) + " torch=" + TORCH_VERSION +
                              " dtype=" + std::string(c10::toString(dtype_)) +
                              " tf32=" + (at::globalContext().allowTF32CuDNN() ? "1" : "0") +
                              // which layouts pnp's kernels take (2: the head and tail kernels too), so an
                              // entry timed without a kernel is not kept once one applies
                              " pnp_kernels=2" +
                              // a graph with an epilogue and no bias of the IR's adds a zero one (Bound::zero_b)
                              " epilogue_graphs=zero_bias" +
                              // the generic ops a graph was timed against ran on ATen's benchmark or on its heuristics
                              (aten_benchmark() ? " aten_benchmark=1" : ""));
    if (!plan_cache_) plan_cache_.emplace();
    return *plan_cache_;
  }

  // What cuDNN builds for this step: conv(x, w) (+ z) (+ b) (ReLU) into y.
  native::EpilogueSpec epilogue_spec(const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z,
                                     const at::Tensor& y, const std::vector<int64_t>& padding, int candidates) const {
    native::EpilogueSpec spec;
    spec.x = x, spec.w = t.w, spec.y = y;
    if (z) spec.z = *z;
    if (const at::Tensor* b = graph_bias(t)) spec.b = *b;
    spec.relu = s.relu;
    spec.stride = s.stride, spec.padding = padding;
    spec.tf32 = at::globalContext().allowTF32CuDNN();
    spec.candidates = candidates;
    spec.precompiled = candidates > 1 ? std::max(0, opt_.cudnn_graph_precompiled) : 0;
    return spec;
  }

  Epilogue choose_epilogue(const std::string& layout, const PlanStep& s, Bound& t, const at::Tensor& x,
                           const at::Tensor* z, at::Tensor& y, const std::vector<int64_t>& padding) {
    Epilogue e;
    e.shape = shape_string(y.sizes().vec());
    const bool forced = opt_.cudnn_epilogues_forced;
    native::EpilogueSpec spec = epilogue_spec(s, t, x, z, y, padding, forced ? 1 : 3);
    native::PlanCache& cache = plan_cache();
    if (cache.enabled()) {
      std::string why;
      if (std::optional<native::PlanChoice> c = cache.load(layout, &why)) {
        try {
          Epilogue cached = from_cache(*c, spec, x, pnp_kernel(s, t, x, z, padding) != PnpKernel::none);
          cached.shape = e.shape;
          ++cache_loaded_;
          return cached;
        } catch (const std::exception& ex) {
          const std::string msg = ex.what();
          cache_notes_.push_back(cache.path(layout) + ": its plan was not taken (" + msg.substr(0, msg.find('\n')) +
                                 "), chosen again");
        }
      } else if (!why.empty()) {
        cache_notes_.push_back(why + ", chosen again");
      }
    }
    if (!forced && opt_.parallel_plan_builds) {  // built meanwhile, timed when done (epilogue_conv)
      e.pending = native::build_epilogue_candidates(spec, device_.index());
      e.run = warmup_run_;
      e.parallel = true;
      return e;
    }
    const auto t_build = std::chrono::steady_clock::now();
    try {
      e.graph = native::make_epilogue_conv(spec);
      e.engine = e.graph->engine();
    } catch (const std::exception& ex) {
      const std::string msg = ex.what();
      e.why = msg.substr(0, msg.find('\n'));
      time_and_remember(layout, e, s, t, x, z, y, padding);
      return e;
    }
    e.build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_build).count();
    grow_workspace(*e.graph, x);
    if (forced) {
      e.use = true;
      e.graph_ms = e.generic_ms = std::numeric_limits<double>::quiet_NaN();
      return e;
    }
    time_and_remember(layout, e, s, t, x, z, y, padding);
    return e;
  }

  // A layout's stored choice: pnp's kernel (where pnp_ok: a kernel of pnp's may take the layout
  // with its option on; epilogue_conv runs the one that does), the generic ops, or the graph with
  // its plan (serialised, or rebuilt at its heuristic position on spec's tensors), the workspace
  // grown for it (like: its device). Throws when cuDNN does not take the plan.
  Epilogue from_cache(const native::PlanChoice& c, native::EpilogueSpec spec, const at::Tensor& like, bool pnp_ok) {
    Epilogue e;
    e.cached = true;
    e.graph_ms = c.graph_ms, e.generic_ms = c.generic_ms, e.engine = c.engine, e.pnp_ms = c.pnp_ms;
    e.pnp = c.pnp && pnp_ok;
    if (!c.graph || e.pnp) return e;  // the generic ops or pnp's kernel, as measured when the entry was written
    if (!c.plan.empty())
      spec.plan = &c.plan;
    else
      spec.index = c.index, spec.engine = c.engine;
    e.graph = native::make_epilogue_conv(spec);
    grow_workspace(*e.graph, like);
    e.use = true;
    return e;
  }

  // The candidates built in parallel (choose_epilogue): waited for, the fastest of them kept,
  // then timed against the two ops. Where none built (e.g. TF32 off bars the first plans), the
  // heuristic order is searched further, as without parallel builds.
  void decide_epilogue(const std::string& layout, Epilogue& e, const PlanStep& s, Bound& t, const at::Tensor& x,
                       const at::Tensor* z, at::Tensor& y, const std::vector<int64_t>& padding) {
    const auto t_wait = std::chrono::steady_clock::now();
    std::vector<native::EpilogueCandidate> built;
    for (native::EpilogueCandidate& c : e.pending.get()) {
      e.build_s = std::max(e.build_s, c.seconds);
      if (c.conv) built.push_back(std::move(c));
    }
    e.wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_wait).count();
    if (built.empty()) {  // the serial search from the start (it also reaches past the candidates)
      try {
        e.graph = native::make_epilogue_conv(epilogue_spec(s, t, x, z, y, padding, 3));
      } catch (const std::exception& ex) {
        const std::string msg = ex.what();
        e.why = msg.substr(0, msg.find('\n'));
        time_and_remember(layout, e, s, t, x, z, y, padding);
        return;
      }
    } else {
      for (const auto& c : built) grow_workspace(*c.conv, x);
      void* ws = ws_.defined() ? ws_.data_ptr() : nullptr;
      std::vector<std::function<void()>> runs;
      for (const auto& c : built)
        runs.push_back([&] { c.conv->run(x, t.w, z ? *z : at::Tensor(), graph_bias(t), y, ws); });
      const std::vector<double> ms = native::time_on_stream_ms(runs);
      e.graph = built[std::min_element(ms.begin(), ms.end()) - ms.begin()].conv;
    }
    e.engine = e.graph->engine();
    grow_workspace(*e.graph, x);
    time_and_remember(layout, e, s, t, x, z, y, padding);
  }

  // The layout's rivals timed (time_rivals), the choice into the plan cache.
  void time_and_remember(const std::string& layout, Epilogue& e, const PlanStep& s, Bound& t, const at::Tensor& x,
                         const at::Tensor* z, at::Tensor& y, const std::vector<int64_t>& padding) {
    time_rivals(e, s, t, x, z, y, padding);
    remember(plan_cache(), layout, e);
  }

  // Which of pnp's kernels may run this layout: one that takes it with its option on (the head
  // and tail kernels before the Hopper kernels, which take no C_in below 32 or C_out below 64),
  // or none.
  PnpKernel pnp_kernel(const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z,
                       const std::vector<int64_t>& padding) const {
    if (t.narrow && native::few_in_conv_applies(x, t.w, s.stride, padding, s.groups, z)) return PnpKernel::few_in;
    if (t.narrow && native::few_out_conv_applies(x, t.w, s.stride, padding, s.groups, z)) return PnpKernel::few_out;
#ifdef PNP_HAVE_WGMMA_CONV
    if (t.wgmma && wgmma_applies(s, t, x, z, padding)) return PnpKernel::hopper;
#endif
    return PnpKernel::none;
  }

  // Runs pnp's kernel `k` (pnp_kernel's answer for this layout) into y.
  void run_pnp(PnpKernel k, const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z, at::Tensor& y,
               const std::vector<int64_t>& padding) const {
    if (k == PnpKernel::few_in) {
      native::few_in_conv(x, t.w, ir_bias(t), z, s.relu, padding, &y);
      return;
    }
    if (k == PnpKernel::few_out) {
      native::few_out_conv(x, t.w, ir_bias(t), z, s.relu, padding, &y);
      return;
    }
#ifdef PNP_HAVE_WGMMA_CONV
    if (k == PnpKernel::hopper) {
      native::wgmma_conv(x, t.w, ir_bias(t), z, s.relu, padding, {}, &y);
      return;
    }
#endif
    throw Error("native executor: no kernel of pnp's for the layout of " + s.name);
  }

  // The rivals for a layout timed on its tensors (y is written), interleaved
  // (time_on_stream_ms): the graph where one was built against the generic ops (generic_conv:
  // cuDNN's fused ops, or the convolution then add_; e.use when the graph is faster), and pnp's
  // kernel where one applies against the faster of those (e.pnp, within pnp_kernel_wins's
  // margin). Without a graph and a kernel of pnp's nothing is timed: the generic ops run.
  void time_rivals(Epilogue& e, const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z, at::Tensor& y,
                const std::vector<int64_t>& padding) {
    e.pnp_kernel = pnp_kernel(s, t, x, z, padding);
    if (!e.graph && e.pnp_kernel == PnpKernel::none) return;
    std::vector<std::function<void()>> runs{[&] { generic_conv(s, t, x, z, padding); }};
    if (e.graph)
      runs.push_back([&] {
        e.graph->run(x, t.w, z ? *z : at::Tensor(), graph_bias(t), y, ws_.defined() ? ws_.data_ptr() : nullptr);
      });
    if (e.pnp_kernel != PnpKernel::none) runs.push_back([&] { run_pnp(e.pnp_kernel, s, t, x, z, y, padding); });
    const std::vector<double> ms = native::time_on_stream_ms(runs);
    e.generic_ms = ms[0];
    if (e.graph) {
      e.graph_ms = ms[1];
      e.use = e.graph_ms < e.generic_ms;
    }
    if (e.pnp_kernel == PnpKernel::none) return;
    e.pnp_ms = ms.back();
    const double cudnn_ms = e.use ? e.graph_ms : e.generic_ms;
    e.pnp = native::pnp_kernel_wins(e.pnp_ms, cudnn_ms, pnp_margin(e.pnp_kernel, t, x, padding));
  }

  // The margin pnp_kernel_wins gives a layout's kernel of pnp's: the rows kernel's is the wider one.
  static double pnp_margin(PnpKernel k, const Bound& t, const at::Tensor& x, const std::vector<int64_t>& padding) {
#ifdef PNP_HAVE_WGMMA_CONV
    if (k == PnpKernel::hopper && native::wgmma_rows_applies(x, t.w, padding)) return native::kRowsKernelMargin;
#endif
    (void)k, (void)t, (void)x, (void)padding;
    return native::kPnpKernelMargin;
  }

  // The plan cache's name for this network's list of layouts: what decides which layouts it
  // meets (the layouts themselves are keyed by everything else, plan_cache.hpp).
  std::string network_key() const {
    return "ir " + g_.hash() + " input " + shape_string(shape_) + " channels_last " + std::to_string(cl_) + " fuse " +
           std::to_string(opt_.fuse) + " fused_bf16 " + std::to_string(opt_.cudnn_fused_bf16) + " graph_convs " +
           std::to_string(opt_.cudnn_graph_convs) + (opt_.upsample_conv ? "" : " no upsample_conv") +
           (opt_.narrow_convs ? " narrow_convs" : "") + (opt_.wgmma_convs ? " wgmma_convs" : "") +
           (opt_.nhwc_kernels ? " nhwc_kernels" : "");
  }

  // Compiled from the plan cache (plan_cache.hpp, the network's list): every layout's choice
  // and plan loaded first, then the forward captured straight away, with no warm-up run (there
  // is nothing to time: without ATen's benchmark mode the generic ops run on cuDNN's
  // heuristics). False, with a note, when the list is missing or stale, an entry does not load,
  // or the capture fails (then the compile warms up as without the list; what did load stays).
  bool capture_from_plan_cache() {
    if (!opt_.cuda_graph || aten_benchmark() || !opt_.cudnn_epilogues) return false;
    native::PlanCache& cache = plan_cache();
    if (!cache.enabled()) return false;
    std::string why;
    const std::optional<native::PlanCache::Layouts> layouts = cache.load_network(network_key(), &why);
    if (!layouts) {
      if (!why.empty()) cache_notes_.push_back(why + ", warmed up instead");
      return false;
    }
    auto refuse = [&](const std::string& reason) {
      cache_notes_.push_back("the network's list " + cache.network_path(network_key()) + " not used (" + reason +
                             "): warmed up instead");
      return false;
    };
    const auto t_load = std::chrono::steady_clock::now();
    std::map<std::string, Epilogue> loaded;
    for (const auto& [shape, layout] : *layouts) {
      std::optional<native::PlanChoice> c = cache.load(layout, &why);
      if (!c) return refuse("layout " + shape + ": " + (why.empty() ? "no entry" : why));
      // (a plan by its heuristic position needs the layout's tensors to rebuild: not here)
      if (c->graph && c->plan.empty()) return refuse("layout " + shape + ": a plan cuDNN cannot serialise");
      try {
        Epilogue e = from_cache(*c, native::EpilogueSpec{}, static_in_, opt_.wgmma_convs || opt_.narrow_convs);
        e.shape = shape;
        loaded.emplace(layout, std::move(e));
      } catch (const std::exception& ex) {
        const std::string msg = ex.what();
        return refuse("layout " + shape + ": " + msg.substr(0, msg.find('\n')));
      }
    }
    epilogues_ = std::move(loaded);
    cache_loaded_ = static_cast<int>(epilogues_.size());
    from_cache_capture_ = true;
    std::string failed;
    const auto t_capture = std::chrono::steady_clock::now();
    const bool ok = capture(&failed);
    const auto t_end = std::chrono::steady_clock::now();
    from_cache_capture_ = false;
    if (!ok) {
      for (auto& t : bound_) t.epilogue_used = false;
      return refuse("the capture stopped: " + failed);
    }
    char buf[96];
    std::snprintf(buf, sizeof buf, " (plans loaded in %.3f s, captured in %.3f s)",
                  std::chrono::duration<double>(t_capture - t_load).count(),
                  std::chrono::duration<double>(t_end - t_capture).count());
    notes_.push_back("compiled from the plan cache: " + std::to_string(cache_loaded_) +
                     " layouts' choices and plans loaded, the forward captured with no warm-up run" + buf);
    return true;
  }

  // After a warm-up that decided every layout and stored each: the network's list of them
  // (not with ATen's benchmark, whose choices no list can hold: such a compile warms up anyway).
  void remember_network() {
    native::PlanCache& cache = plan_cache();
    if (!cache.enabled() || epilogues_.empty() || !captured_ || aten_benchmark()) return;
    native::PlanCache::Layouts layouts;
    for (const auto& [key, e] : epilogues_) {
      if (e.pending.valid()) return;
      layouts.emplace_back(e.shape, key);
    }
    std::string why;
    if (!cache.store_network(network_key(), layouts, &why)) cache_notes_.push_back(why);
  }

  // The graphs' shared workspace, grown to what `graph` needs (in the warm-up, before any capture).
  void grow_workspace(const native::EpilogueConv& graph, const at::Tensor& like) {
    if (graph.workspace_bytes() > (ws_.defined() ? ws_.numel() : 0))
      ws_ = at::empty({graph.workspace_bytes()}, like.options().dtype(at::kByte));
  }

  // A layout's choice into the plan cache (when there is one): the graph with its serialised
  // plan (or its heuristic position where cuDNN cannot serialise it), or the generic ops (also
  // where cuDNN had no plan: not tried again).
  void remember(native::PlanCache& cache, const std::string& layout, const Epilogue& e) {
    if (!cache.enabled()) return;
    native::PlanChoice c;
    c.graph = e.use;
    c.engine = e.graph ? e.engine : "none (" + e.why + ")";
    c.graph_ms = e.graph_ms, c.generic_ms = e.generic_ms;
    c.pnp = e.pnp, c.pnp_ms = e.pnp_ms;
    if (e.use) {
      c.plan = e.graph->serialize();
      c.index = e.graph->index();
      if (c.plan.empty() && c.index < 0) return;  // (a deserialised plan is not stored again)
    }
    std::string why;
    if (cache.store(layout, c, &why))
      ++cache_stored_;
    else
      cache_notes_.push_back(why);
  }

  std::string epilogue_summary() const {
    std::string r;
    char buf[160];
    for (const auto& [key, e] : epilogues_) {
      const std::string from = e.cached ? " (plan cache)" : "";
      if (!e.graph && !e.cached)
        r += "; " + e.shape + ": no cuDNN plan (" + e.why + ")";
      else if (std::isnan(e.graph_ms))
        r += "; " + e.shape + ": " + e.engine + (e.cached ? from : " (forced)");
      else {
        std::snprintf(buf, sizeof buf, ": %s %.3f ms against conv then add_ %.3f ms", e.engine.c_str(), e.graph_ms,
                      e.generic_ms);
        r += "; " + e.shape + buf + (e.use || e.pnp ? "" : ", the two ops run") + from;
      }
      if (!std::isnan(e.pnp_ms)) {
        const double cudnn_ms = e.use ? e.graph_ms : e.generic_ms;
        std::snprintf(buf, sizeof buf, ", pnp's %s kernel %.3f ms%s", pnp_kernel_name(e.pnp_kernel), e.pnp_ms,
                      !e.pnp ? "" : e.pnp_ms < cudnn_ms ? " (runs)" : " (runs: within the margin)");
        r += buf;
      }
      if (!e.cached && e.build_s > 0) {  // the plans' build: the slowest candidate (in parallel) or all (serial)
        std::snprintf(buf, sizeof buf, " (plans built in %.3f s%s, waited %.3f s)", e.build_s,
                      e.parallel ? " in parallel" : "", e.wait_s);
        r += buf;
      }
    }
    return r;
  }
#endif

  // A conv or max_pool step with this padding.
  at::Tensor window(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
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
  at::Tensor window_over_halo(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z) {
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
  at::Tensor transposed(const PlanStep& s, Bound& t, size_t k, const at::Tensor& x, at::Tensor& y) {
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

  at::Tensor run() {
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

  void sync() const {
    if (device_.is_cuda()) c10::impl::getDeviceGuardImpl(device_.type())->synchronizeDevice(device_.index());
  }

  // The warm-up (validation, autotuning) and the capture. On the input in static_in_ (and the
  // sigma set) when `on_input`: the output of its last run is returned (a copy, made before
  // the capture). Otherwise on random input, never zeros: autotuning on real data.
  at::Tensor warm_up_and_capture(bool on_input) {
    warmed_ = true;
    if (!device_.is_cuda()) {
      notes_.push_back("CPU: generic ops (conv, then relu_/add_ in place), no autotuning, no graph capture");
      return on_input ? run().clone(at::MemoryFormat::Contiguous) : at::Tensor();
    }
    auto& ctx = at::globalContext();
    const bool bench_before = ctx.benchmarkCuDNN();
    const int limit_before = ctx.benchmarkLimitCuDNN();
    auto restore = [&] {
      ctx.setBenchmarkCuDNN(bench_before);
      ctx.setBenchmarkLimitCuDNN(limit_before);
    };
    at::Tensor y;
#ifdef PNP_HAVE_CUDNN_FE
    {
      const auto t_capture = std::chrono::steady_clock::now();
      ctx.setBenchmarkCuDNN(false);  // (nothing may be timed inside a capture)
      bool done = false;
      try {
        done = capture_from_plan_cache();
      } catch (...) {
        restore();
        throw;
      }
      restore();
      if (done) {
        if (on_input) {
          compile_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_capture).count();
          graph_->replay();
          y = static_out_.clone(at::MemoryFormat::Contiguous);
        }
        return finish_warm_up(y);
      }
    }
#endif
    if (!on_input) {
      static_in_.uniform_(-1.0, 1.0);
      sigma_.set(0.1);
    }
    if (aten_benchmark()) ctx.setBenchmarkCuDNN(true);
    if (opt_.cudnn_benchmark_limit >= 0) ctx.setBenchmarkLimitCuDNN(opt_.cudnn_benchmark_limit);
    try {
      validating_ = true;
      build_wait_left_s_ = kBuildWaitBudgetS;
      // One more validating run while plans built in parallel are still to be timed (the
      // two ops ran in their place meanwhile).
      for (int i = 0, runs = std::max(1, opt_.warmup_calls); i < runs; ++i) {
        warmup_run_ = i;
        y = run();
        sync();
        bool pending = false;
#ifdef PNP_HAVE_CUDNN_FE
        pending = std::any_of(epilogues_.begin(), epilogues_.end(), [](const auto& kv) { return kv.second.pending.valid(); });
#endif
        if (pending && i + 1 == runs) ++runs;
        validating_ = pending;
      }
      if (on_input) y = y.clone(at::MemoryFormat::Contiguous);
      else y = at::Tensor();
      const auto t_capture = std::chrono::steady_clock::now();
#ifdef PNP_HAVE_CUDA
      if (opt_.cuda_graph) {
        std::string failed;
        if (!capture(&failed)) notes_.push_back("CUDA graph capture failed, running without a graph: " + failed);
      }
#else
      if (opt_.cuda_graph) notes_.push_back("CUDA graph: not built with CUDA support");
#endif
      if (on_input) compile_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_capture).count();
    } catch (...) {
      restore();
      throw;
    }
    restore();
#ifdef PNP_HAVE_CUDNN_FE
    remember_network();
#endif
    return finish_warm_up(y);
  }

  // The warm-up's (or the capture from the plan cache's) memory hand-back and notes; returns y.
  at::Tensor finish_warm_up(const at::Tensor& y) {
#ifdef PNP_HAVE_CUDA
    // cuDNN's benchmark mode tries plans with workspaces up to the free memory; hand the cached
    // (now unused) blocks back so that later non-torch allocations (NCCL, ...) find memory.
    c10::cuda::CUDACachingAllocator::emptyCache();
#endif
    int fused = 0, epilogues = 0, graphs = 0, adds = 0, adds_used = 0, narrow = 0, few_in = 0, few_out = 0, wgmma = 0;
    for (size_t k = 0; k < bound_.size(); ++k) {
      const Bound& t = bound_[k];
      fused += t.cudnn && !t.epilogue_used && !t.narrow_used && !t.few_in_used && !t.few_out_used && !t.wgmma_used;
      narrow += t.narrow_used;
      few_in += t.few_in_used;
      few_out += t.few_out_used;
      wgmma += t.wgmma_used;
      epilogues += t.epilogue, graphs += t.epilogue_used;
      const PlanStep& s = plan_.steps[k];
      if (t.epilogue && s.z >= 0 && !s.relu) ++adds, adds_used += t.epilogue_used;
    }
    (void)epilogues, (void)graphs, (void)adds, (void)adds_used;
    notes_.push_back("CUDA: " + std::to_string(fused) + " convolutions run as cuDNN fused ops");
    if (narrow > 0)
      notes_.push_back("CUDA: " + std::to_string(narrow) +
                       " convolution(s) with one output channel run as pnp's narrow kernel (narrow_conv.hpp)");
    if (few_in > 0)
      notes_.push_back("CUDA: " + std::to_string(few_in) +
                       " convolution(s) with few input channels run as pnp's head kernel (narrow_conv.hpp)");
    if (few_out > 0)
      notes_.push_back("CUDA: " + std::to_string(few_out) +
                       " convolution(s) with few output channels run as pnp's tail kernel (narrow_conv.hpp)");
    if (wgmma > 0)
      notes_.push_back("CUDA: " + std::to_string(wgmma) + " convolution(s) run as pnp's Hopper kernel (wgmma_conv.hpp)");
    if (phase_used_)
      notes_.push_back("CUDA: the ×2 upsample convolutions as convolutions of their four phases, then pnp's shuffle with "
                       "the bias, ReLU and concat (nhwc_ops.hpp)");
    if (pool_used_) notes_.push_back("CUDA: the 2×2 max pools as pnp's kernel (nhwc_ops.hpp)");
    if (add_in_kernel_)
      notes_.push_back("CUDA: the adds folded into their convolution summed as pnp's tail kernel loads its input "
                       "(narrow_conv.hpp)");
    if (stride2_used_)
      notes_.push_back("CUDA: the 2×2, stride-2 transposed convolutions as two cuBLAS products each, written into their "
                       "output (transposed_gemm.hpp)");
#ifdef PNP_HAVE_CUDNN_FE
    if (adds > 0)
      notes_.push_back("CUDA: " + std::to_string(adds_used) + " of " + std::to_string(adds) +
                       " convolutions with a residual add run as cuDNN graphs with the add in their epilogue" +
                       (opt_.cudnn_graph_convs ? std::string() : epilogue_summary()));
    if (opt_.cudnn_graph_convs && epilogues > 0)
      notes_.push_back("CUDA: " + std::to_string(graphs) + " of " + std::to_string(epilogues) +
                       " convolutions run as cuDNN graphs (conv with its bias, residual add and ReLU)" +
                       epilogue_summary());
    if (plan_cache_ && plan_cache_->enabled()) {
      std::string n = "plan cache " + plan_cache_->dir() + ": " + std::to_string(cache_loaded_) + " of " +
                      std::to_string(epilogues_.size()) + " layouts loaded, " + std::to_string(cache_stored_) + " stored";
      for (const auto& c : cache_notes_) n += "; " + c;
      notes_.push_back(n);
    }
#endif
    return y;
  }

#ifdef PNP_HAVE_CUDA
  // The forward captured as one CUDA graph; false (why in `failed`) when the capture failed.
  bool capture(std::string* failed) {
    if (stride2_warm_.valid()) stride2_warm_.get();  // (no other thread's CUDA calls in a capture)
    sync();
    auto side = c10::cuda::getStreamFromPool(false, device_.index());
    graph_ = std::make_unique<at::cuda::CUDAGraph>();
    try {
      c10::cuda::CUDAStreamGuard sg(side);
      graph_->capture_begin();
      try {
        static_out_ = run();
      } catch (...) {
        native::abandon_capture(side);
        throw;
      }
      graph_->capture_end();
      sync();
      captured_ = true;
    } catch (const std::exception& e) {
      captured_ = false;
      static_out_ = at::Tensor();
      graph_.reset();
      const std::string msg = e.what();
      *failed = msg.substr(0, msg.find('\n'));
    }
    return captured_;
  }
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
#endif

  Graph g_;
  at::Device device_;
  at::ScalarType dtype_;
  std::vector<int64_t> shape_;
  NativeOptions opt_;
  bool cl_ = true;
  std::vector<std::vector<int64_t>> shapes_;
  int64_t alignment_ = 1, radius_ = 0;
  native::Plan plan_;
  std::vector<Bound> bound_;  // one per plan step
  std::map<size_t, Bound> phase_;  // by step: a folded upsample's phase convolution (transposed())
  std::map<size_t, at::Tensor> stride2_;  // by step: a 2×2, stride-2 transposed convolution's weight for its products
  std::future<void> stride2_warm_;  // cuBLAS's first-use work for them, beside the compile (joined by capture())
  bool phase_used_ = false, pool_used_ = false, stride2_used_ = false, add_in_kernel_ = false;  // pnp's NHWC paths ran in the warm-up (or the capture)
  std::vector<at::Tensor> slots_, vals_;
  at::Tensor static_in_, static_out_;
  at::Tensor ws_;  // the cuDNN graphs' workspace, grown in the warm-up (before any capture)
#ifdef PNP_HAVE_CUDNN_FE
  std::map<std::string, Epilogue> epilogues_;  // by layout (epilogue_conv)
  std::optional<native::PlanCache> plan_cache_;
  int cache_loaded_ = 0, cache_stored_ = 0;
  std::vector<std::string> cache_notes_;
#endif
  SigmaBuffer sigma_;
  bool captured_ = false, validating_ = false, warmed_ = false;
  bool from_cache_capture_ = false;  // capturing from the plan cache's list (capture_from_plan_cache)
  int warmup_run_ = 0;  // which warm-up run is running (epilogue_conv: parallel builds)
  // What the warm-up may still wait for parallel builds where it meets their layouts
  // (wait_for_builds): DRUNet 4096²'s candidates took 0.004-0.088 s a layout (2026-12-04d).
  static constexpr double kBuildWaitBudgetS = 0.5;
  double build_wait_left_s_ = kBuildWaitBudgetS;
  double compile_s_ = 0;
  std::vector<std::string> notes_;
};

}  // namespace

bool native_has_cudnn_epilogues() {
#ifdef PNP_HAVE_CUDNN_FE
  return true;
#else
  return false;
#endif
}

std::unique_ptr<NativeExecutor> make_native(const Graph& g, const Weights& w, at::Device device, at::ScalarType dtype,
                                            std::vector<int64_t> input_shape, NativeOptions opt) {
  return std::make_unique<NativeImpl>(g, w, device, dtype, std::move(input_shape), opt);
}

}  // namespace pnp::nn
