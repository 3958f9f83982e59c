// The native backend (include/pnp/nn/native.hpp): plan, fold, fuse, allocate, autotune, capture.
#include "pnp/nn/native.hpp"
#include "pnp/timing.hpp"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#ifdef PNP_HAVE_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace pnp::nn {

namespace {

enum class Kind { sigma, conv, conv_transpose, batch_norm, relu, add, concat, max_pool, upsample, pad, crop };

struct Step {
  Kind kind = Kind::conv;
  int out = 0;             // the node whose value this step produces (the tail of a fused group)
  std::string name;        // the IR node name of the group's head (the conv for fused groups)
  std::vector<int> in;     // values read (node ids)
  std::vector<int64_t> shape;  // output shape
  // conv / conv_transpose
  at::Tensor w, b;         // b undefined when absent (after BN folding it is defined)
  int z = -1;              // residual added to the conv output (conv+add[+relu])
  bool relu = false;       // ReLU after the conv (and after the add when z >= 0)
  bool cudnn = false;      // use at::cudnn_convolution_relu / _add_relu
  std::vector<int64_t> stride, padding, output_padding, kernel;
  int64_t groups = 1;
  // batch_norm (standalone)
  at::Tensor mean, var;
  double eps = 1e-5;
  // upsample / pad
  std::vector<double> scales;
  std::vector<int64_t> pads;  // replication pad, last axis first: (0, p) pairs
  // memory
  int inplace = -1;  // the value whose buffer this step overwrites (relu_, add_)
  int slot = -1;     // preallocated slot the output is written to (-1: none)
  bool alias = false;  // the output is a view of an input (crop, no-op pad, sigma view)
  std::vector<int> release;  // values dead after this step
};

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

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (auto v : s) n *= v;
  return n;
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
    plan(w);
    assign_slots();
    allocate();
    warm_up_and_capture();
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
  std::vector<std::string> fusions() const override { return fusions_; }
  bool graph_captured() const override { return captured_; }
  std::vector<std::string> notes() const override { return notes_; }
  const std::vector<int64_t>& input_shape() const override { return shape_; }
  int64_t slot_bytes() const override { return slot_bytes_; }
  int slot_count() const override { return static_cast<int>(slots_.size()); }

  at::Tensor forward(const at::Tensor& x, double sigma) override {
    if (x.sizes().vec() != shape_)
      throw InputError("native executor: compiled for input shape " + shape_string(shape_) + ", got " +
                       shape_string(x.sizes().vec()) + " (compile another executor for that shape)");
    c10::DeviceGuard guard(device_);
    at::NoGradGuard no_grad;
    static_in_.copy_(x);
    if (sigma_buf_.defined()) sigma_buf_.fill_(sigma);
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
  // ---- planning ---------------------------------------------------------------------------
  void plan(const Weights& w) {
    const int n = static_cast<int>(g_.nodes.size());
    std::vector<std::vector<int>> readers(n);
    for (const auto& nd : g_.nodes)
      for (int i : nd.inputs) readers[i].push_back(nd.id);
    auto single = [&](int id, OpKind op) -> int {
      if (id == g_.output() || readers[id].size() != 1) return -1;
      const int r = readers[id][0];
      return g_.nodes[r].op == op ? r : -1;
    };
    const bool cuda_fused =
        device_.is_cuda() && (dtype_ == at::kFloat || (dtype_ == at::kBFloat16 && opt_.cudnn_fused_bf16));
    std::vector<int> absorbed(n, 0);
    const int dim = g_.dim;
    auto param = [&](const Node& nd, const char* role) -> at::Tensor {
      const Param* p = nd.param(role);
      return p ? w.at(p->key).detach().to(at::kCPU, at::kDouble) : at::Tensor();
    };
    auto to_dev = [&](const at::Tensor& t, bool weight) {
      at::Tensor r = t.to(device_, dtype_);
      return weight && cl_ ? r.contiguous(cl_format(dim)) : r.contiguous();
    };

    for (const auto& nd : g_.nodes) {
      if (nd.id == 0 || absorbed[nd.id]) continue;
      Step s;
      s.name = nd.name;
      const auto& a = nd.attrs;
      switch (nd.op) {
        case OpKind::input:
          break;
        case OpKind::sigma_channel:
          s.kind = Kind::sigma;
          s.alias = true;
          uses_sigma_ = true;
          break;
        case OpKind::conv: {
          s.kind = Kind::conv;
          at::Tensor W = param(nd, "weight"), B = param(nd, "bias");
          std::string pattern = "conv";
          if (B.defined()) pattern += "+bias";
          int tail = nd.id;
          std::vector<int> group{nd.id};
          if (int bn = single(tail, OpKind::batch_norm); bn >= 0) {  // fold BN (always)
            const Node& bnn = g_.nodes[bn];
            at::Tensor gamma = param(bnn, "weight"), beta = param(bnn, "bias"), mu = param(bnn, "running_mean"),
                       var = param(bnn, "running_var");
            at::Tensor scale = gamma / at::sqrt(var + bnn.attrs.eps);
            std::vector<int64_t> vs(static_cast<size_t>(W.dim()), 1);
            vs[0] = -1;
            W = W * scale.view(vs);
            B = ((B.defined() ? B : at::zeros_like(mu)) - mu) * scale + beta;
            group.push_back(tail = bn);
            pattern = "conv+bn";
          }
          if (opt_.fuse) {
            if (int r = single(tail, OpKind::relu); r >= 0) {
              group.push_back(tail = r);
              s.relu = true;
              pattern += "+relu";
            } else if (int ad = single(tail, OpKind::add); ad >= 0) {
              const auto& ins = g_.nodes[ad].inputs;
              // The residual must already exist where the fused step runs (the conv's place).
              const int zz = ins.size() == 2 ? (ins[0] == tail ? ins[1] : ins[0]) : -1;
              if (ins.size() == 2 && (ins[0] == tail) != (ins[1] == tail) && zz < nd.id) {
                s.z = zz;
                group.push_back(tail = ad);
                pattern += "+add";
                if (int r2 = single(ad, OpKind::relu); r2 >= 0) {
                  group.push_back(tail = r2);
                  s.relu = true;
                  pattern += "+relu";
                }
              }
            }
          }
          for (int id : group)  // the rest of the group runs in this step
            if (id != nd.id) absorbed[id] = 1;
          if (group.size() > 1) fusions_.push_back(pattern + ":" + nd.name);
          s.w = to_dev(W, true);
          if (B.defined()) s.b = to_dev(B, false);
          s.stride = a.stride;
          s.padding = a.padding;
          s.groups = a.groups;
          s.cudnn = cuda_fused && s.relu;
          // cuDNN's fused ops otherwise allocate and fill a zero bias on every call
          if (s.cudnn && !s.b.defined()) s.b = at::zeros({a.out_channels}, at::TensorOptions().dtype(dtype_).device(device_));
          s.out = tail;
          break;
        }
        case OpKind::conv_transpose: {
          s.kind = Kind::conv_transpose;
          s.w = to_dev(param(nd, "weight"), true);
          if (nd.param("bias")) s.b = to_dev(param(nd, "bias"), false);
          s.stride = a.stride;
          s.padding = a.padding;
          s.output_padding = a.output_padding;
          s.groups = a.groups;
          break;
        }
        case OpKind::batch_norm:
          s.kind = Kind::batch_norm;
          s.w = to_dev(param(nd, "weight"), false);
          s.b = to_dev(param(nd, "bias"), false);
          s.mean = to_dev(param(nd, "running_mean"), false);
          s.var = to_dev(param(nd, "running_var"), false);
          s.eps = a.eps;
          break;
        case OpKind::relu:
          s.kind = Kind::relu;
          break;
        case OpKind::add:
          s.kind = Kind::add;
          break;
        case OpKind::concat:
          s.kind = Kind::concat;
          break;
        case OpKind::max_pool:
          s.kind = Kind::max_pool;
          s.kernel = a.kernel;
          s.stride = a.stride;
          s.padding = a.padding;
          break;
        case OpKind::upsample_nearest:
          s.kind = Kind::upsample;
          s.scales.assign(a.scale.begin(), a.scale.end());
          break;
        case OpKind::pad: {
          s.kind = Kind::pad;
          const auto& in = shapes_[nd.inputs[0]];
          bool any = false;
          for (int d = dim - 1; d >= 0; --d) {
            const int64_t sz = in[2 + d], p = (sz + a.multiple - 1) / a.multiple * a.multiple - sz;
            s.pads.push_back(0);
            s.pads.push_back(p);
            any = any || p > 0;
          }
          s.alias = !any;
          break;
        }
        case OpKind::crop:
          s.kind = Kind::crop;
          s.alias = true;
          break;
      }
      if (nd.op != OpKind::conv) s.out = nd.id;
      // Inputs: for a fused group, the head's inputs plus the residual.
      s.in = nd.inputs;
      if (s.z >= 0) s.in.push_back(s.z);
      s.shape = shapes_[s.out];
      steps_.push_back(std::move(s));
    }
    // Liveness over the step order: the step index of each value's last reader.
    last_use_.assign(n, -1);
    for (size_t i = 0; i < steps_.size(); ++i)
      for (int v : steps_[i].in) last_use_[v] = std::max(last_use_[v], static_cast<int>(i));
    last_use_[g_.output()] = static_cast<int>(steps_.size());  // the output lives on
    last_use_[0] = static_cast<int>(steps_.size());            // the static input too
    for (size_t i = 0; i < steps_.size(); ++i)
      for (int v : steps_[i].in)
        if (last_use_[v] == static_cast<int>(i) &&
            std::find(steps_[i].release.begin(), steps_[i].release.end(), v) == steps_[i].release.end())
          steps_[i].release.push_back(v);
  }

  // Values a step may overwrite: produced by a step that owns its buffer (not the input, not a view).
  bool owned(int v) const { return v != 0 && !alias_value_[v]; }

  void assign_slots() {
    const int n = static_cast<int>(g_.nodes.size());
    alias_value_.assign(n, 0);
    alias_value_[0] = 1;
    std::vector<int> slot_of(n, -1);
    std::vector<int> slot_users;  // live values per slot
    std::vector<int64_t> slot_need;
    const int64_t esize = at::elementSize(dtype_);
    auto free_slot = [&](int64_t bytes) {
      int best = -1;
      for (size_t k = 0; k < slot_users.size(); ++k)
        if (slot_users[k] == 0) {
          // best fit: the smallest that holds it, else the largest (it grows)
          if (best < 0) { best = static_cast<int>(k); continue; }
          const int64_t a = slot_need[k], b = slot_need[static_cast<size_t>(best)];
          const bool fa = a >= bytes, fb = b >= bytes;
          if ((fa && (!fb || a < b)) || (!fa && !fb && a > b)) best = static_cast<int>(k);
        }
      if (best < 0) {
        slot_users.push_back(0);
        slot_need.push_back(0);
        best = static_cast<int>(slot_users.size()) - 1;
      }
      slot_need[static_cast<size_t>(best)] = std::max(slot_need[static_cast<size_t>(best)], bytes);
      return best;
    };
    for (size_t i = 0; i < steps_.size(); ++i) {
      Step& s = steps_[i];
      if (s.alias) alias_value_[s.out] = 1;
      auto dies_here = [&](int v) { return last_use_[v] == static_cast<int>(i) && owned(v); };
      if (s.kind == Kind::relu && dies_here(s.in[0])) {
        s.inplace = s.in[0];
      } else if (s.kind == Kind::add) {
        if (dies_here(s.in[0])) s.inplace = s.in[0];
        else if (dies_here(s.in[1])) s.inplace = s.in[1];
      }
      if (s.inplace >= 0) {
        slot_of[s.out] = slot_of[s.inplace];
        if (slot_of[s.out] >= 0) ++slot_users[static_cast<size_t>(slot_of[s.out])];
      } else if (s.kind == Kind::relu || s.kind == Kind::add || s.kind == Kind::concat || s.kind == Kind::upsample ||
                 (s.kind == Kind::pad && !s.alias)) {
        s.slot = free_slot(numel_of(s.shape) * esize);
        slot_of[s.out] = s.slot;
        ++slot_users[static_cast<size_t>(s.slot)];
      } else if (s.alias) {
        // a view keeps its source's slot alive: count it as a user of that slot
        const int src = s.kind == Kind::sigma ? -1 : s.in[0];
        if (src >= 0 && slot_of[src] >= 0) {
          slot_of[s.out] = slot_of[src];
          ++slot_users[static_cast<size_t>(slot_of[s.out])];
        }
      }
      for (int v : s.release)
        if (slot_of[v] >= 0) --slot_users[static_cast<size_t>(slot_of[v])];
    }
    slot_need_ = slot_need;
  }

  void allocate() {
    auto opts = at::TensorOptions().dtype(dtype_).device(device_);
    const int64_t esize = at::elementSize(dtype_);
    for (int64_t bytes : slot_need_) {
      slots_.push_back(at::empty({(bytes + esize - 1) / esize}, opts));
      slot_bytes_ += bytes;
    }
    static_in_ = at::empty_strided(shape_, strides_for(shape_, cl_), opts);
    if (uses_sigma_) sigma_buf_ = at::zeros({1}, opts);
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

  at::Tensor slot_view(const Step& s) const {
    return slots_[static_cast<size_t>(s.slot)].as_strided(s.shape, strides_for(s.shape, cl_));
  }

  // ---- execution --------------------------------------------------------------------------
  at::Tensor conv(const Step& s, const at::Tensor& x, const at::Tensor* z) {
    const std::vector<int64_t> dil(s.stride.size(), 1);
    std::optional<at::Tensor> b;
    if (s.b.defined()) b = s.b;
#ifdef PNP_HAVE_CUDA
    if (s.cudnn) {
      try {
        if (z) return at::cudnn_convolution_add_relu(x, s.w, *z, at::Scalar(1.0), b, s.stride, s.padding, dil, s.groups);
        return at::cudnn_convolution_relu(x, s.w, b, s.stride, s.padding, dil, s.groups);
      } catch (const c10::Error& e) {
        if (!validating_) throw;
        // The fused kernel is not available for this configuration: use generic ops.
        const_cast<Step&>(s).cudnn = false;
        std::string msg = e.what_without_backtrace();
        notes_.push_back("cuDNN fused op unavailable for " + s.name + ", generic ops used: " +
                         msg.substr(0, msg.find('\n')));
      }
    }
#endif
    at::Tensor y = at::convolution(x, s.w, b, s.stride, s.padding, dil, false, std::vector<int64_t>(s.stride.size(), 0),
                                   s.groups);
    if (z) y.add_(*z);
    if (s.relu) y.relu_();
    return y;
  }

  at::Tensor run() {
    const int dim = g_.dim;
    std::vector<at::Tensor>& v = vals_;
    v.assign(g_.nodes.size(), at::Tensor());
    v[0] = static_in_;
    for (const Step& s : steps_) {
      const at::Tensor& in = s.in.empty() ? v[0] : v[s.in[0]];
      at::Tensor y;
      switch (s.kind) {
        case Kind::sigma: {
          std::vector<int64_t> ones(s.shape.size(), 1);
          y = sigma_buf_.view(ones).expand(s.shape);
          break;
        }
        case Kind::conv:
          y = conv(s, in, s.z >= 0 ? &v[s.z] : nullptr);
          break;
        case Kind::conv_transpose: {
          std::optional<at::Tensor> b;
          if (s.b.defined()) b = s.b;
          const std::vector<int64_t> dil(s.stride.size(), 1);
          y = at::convolution(in, s.w, b, s.stride, s.padding, dil, true, s.output_padding, s.groups);
          break;
        }
        case Kind::batch_norm:
          y = at::batch_norm(in, s.w, s.b, s.mean, s.var, false, 0.1, s.eps, true);
          break;
        case Kind::relu:
          if (s.inplace >= 0) {
            y = v[s.inplace];
            y.relu_();
          } else {
            y = slot_view(s);
            at::relu_out(y, in);
          }
          break;
        case Kind::add:
          if (s.inplace >= 0) {
            y = v[s.inplace];
            y.add_(v[s.inplace == s.in[0] ? s.in[1] : s.in[0]]);
          } else {
            y = slot_view(s);
            at::add_out(y, in, v[s.in[1]]);
          }
          break;
        case Kind::concat: {
          std::vector<at::Tensor> parts;
          for (int i : s.in) parts.push_back(v[i]);
          y = slot_view(s);
          at::cat_out(y, parts, 1);
          break;
        }
        case Kind::max_pool: {
          const std::vector<int64_t> dil(static_cast<size_t>(dim), 1);
          y = dim == 2 ? at::max_pool2d(in, s.kernel, s.stride, s.padding, dil, false)
                       : at::max_pool3d(in, s.kernel, s.stride, s.padding, dil, false);
          break;
        }
        case Kind::upsample: {
          y = slot_view(s);
          if (!upsample_by_copy(y, in)) {
            std::vector<int64_t> os(s.shape.begin() + 2, s.shape.end());
            if (dim == 2)
              at::upsample_nearest2d_out(y, in, os, s.scales[0], s.scales[1]);
            else
              at::upsample_nearest3d_out(y, in, os, s.scales[0], s.scales[1], s.scales[2]);
          }
          break;
        }
        case Kind::pad:
          if (s.alias) {
            y = in;
          } else {
            y = slot_view(s);
            if (dim == 2)
              at::replication_pad2d_out(y, in, s.pads);
            else
              at::replication_pad3d_out(y, in, s.pads);
          }
          break;
        case Kind::crop:
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

  void warm_up_and_capture() {
    if (!device_.is_cuda()) {
      notes_.push_back("CPU: generic ops (conv, then relu_/add_ in place), no autotuning, no graph capture");
      return;
    }
    // Random input (never zeros) for the warm-up: autotuning on real data.
    static_in_.uniform_(-1.0, 1.0);
    if (sigma_buf_.defined()) sigma_buf_.fill_(0.1);
    auto& ctx = at::globalContext();
    const bool bench_before = ctx.benchmarkCuDNN();
    if (opt_.autotune) ctx.setBenchmarkCuDNN(true);
    try {
      validating_ = true;
      for (int i = 0; i < std::max(1, opt_.warmup_calls); ++i) {
        run();
        sync();
        validating_ = false;
      }
      validating_ = false;
#ifdef PNP_HAVE_CUDA
      if (opt_.cuda_graph) capture();
#else
      if (opt_.cuda_graph) notes_.push_back("CUDA graph: not built with CUDA support");
#endif
    } catch (...) {
      ctx.setBenchmarkCuDNN(bench_before);
      throw;
    }
    ctx.setBenchmarkCuDNN(bench_before);
#ifdef PNP_HAVE_CUDA
    // cuDNN's benchmark mode tries plans with workspaces up to the free memory; hand the cached
    // (now unused) blocks back so that later non-torch allocations (NCCL, ...) find memory.
    c10::cuda::CUDACachingAllocator::emptyCache();
#endif
    int fused = 0;
    for (const auto& s : steps_) fused += s.cudnn;
    notes_.push_back("CUDA: " + std::to_string(fused) + " convolutions run as cuDNN fused ops");
  }

#ifdef PNP_HAVE_CUDA
  void capture() {
    sync();
    auto side = c10::cuda::getStreamFromPool(false, device_.index());
    graph_ = std::make_unique<at::cuda::CUDAGraph>();
    try {
      c10::cuda::CUDAStreamGuard sg(side);
      graph_->capture_begin();
      try {
        static_out_ = run();
      } catch (...) {
        cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
        if (cudaStreamIsCapturing(side.stream(), &st) == cudaSuccess && st != cudaStreamCaptureStatusNone) {
          cudaGraph_t dead = nullptr;
          cudaStreamEndCapture(side.stream(), &dead);
          if (dead) cudaGraphDestroy(dead);
        }
        (void)cudaGetLastError();
        throw;
      }
      graph_->capture_end();
      sync();
      captured_ = true;
    } catch (const std::exception& e) {
      captured_ = false;
      static_out_ = at::Tensor();
      graph_.reset();
      std::string msg = e.what();
      notes_.push_back("CUDA graph capture failed, running without a graph: " + msg.substr(0, msg.find('\n')));
    }
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
  std::vector<Step> steps_;
  std::vector<int> last_use_, alias_value_;
  std::vector<int64_t> slot_need_;
  std::vector<at::Tensor> slots_, vals_;
  int64_t slot_bytes_ = 0;
  at::Tensor static_in_, static_out_, sigma_buf_;
  bool uses_sigma_ = false, captured_ = false, validating_ = false;
  double compile_s_ = 0;
  std::vector<std::string> fusions_, notes_;
};

}  // namespace

std::unique_ptr<NativeExecutor> make_native(const Graph& g, const Weights& w, at::Device device, at::ScalarType dtype,
                                            std::vector<int64_t> input_shape, NativeOptions opt) {
  return std::make_unique<NativeImpl>(g, w, device, dtype, std::move(input_shape), opt);
}

}  // namespace pnp::nn
