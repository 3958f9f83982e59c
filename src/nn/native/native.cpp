// The native backend's executor (include/pnp/nn/native.hpp; the class in impl.hpp): its
// construction (the plan, then materialise, allocate and, unless deferred to the first call, the
// warm-up and capture), the forward, and make_native.
#include <cstdlib>

#include "impl.hpp"

#include <cstdio>

namespace pnp::nn {

namespace native {

NativeImpl::NativeImpl(const Graph& g, const Weights& w, at::Device device, at::ScalarType dtype,
                       std::vector<int64_t> shape, NativeOptions opt)
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
      // The exchanges run between the compiled steps (compile.mode = pre); a graph of the
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

NativeImpl::~NativeImpl() {
#ifdef PNP_HAVE_CUDA
  graph_.reset();
#endif
}

at::Tensor NativeImpl::forward(const at::Tensor& x, double sigma) {
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

}  // namespace native

bool hopper_kernels_default() {
  const char* v = std::getenv("PNP_KERNELS");
  const std::string k = v ? v : "";
  if (k.empty() || k == "hopper") return true;
  if (k == "portable") return false;
  throw InputError("PNP_KERNELS = \"" + k + "\": expected \"portable\" (no sm_90-only kernels) or \"hopper\"");
}

bool native_has_fp8(at::Device device, const NativeOptions& opt) {
#ifdef PNP_HAVE_WGMMA_CONV
  if (!device.is_cuda() || !opt.wgmma_convs || !opt.channels_last) return false;
  c10::DeviceGuard guard(concrete_device(device));
  return native::kernels::wgmma_conv_fp8_supported(64, 64, 3, 3);
#else
  (void)device, (void)opt;
  return false;
#endif
}

std::vector<int> fp8_conv_candidates(const Graph& g) {
  std::vector<int> out;
  if (g.dim != 2) return out;
  for (const Node& n : g.nodes) {
    const Attrs& a = n.attrs;
    if (n.op != OpKind::conv || a.groups != 1 || a.kernel.size() != 2 || a.stride != std::vector<int64_t>{1, 1}) continue;
    if (a.in_channels <= 0 || a.out_channels <= 0 || a.in_channels % 64 || a.out_channels % 64) continue;
    if (a.kernel[0] > 9 || a.kernel[1] > 9) continue;
    out.push_back(n.id);
  }
  return out;
}

int64_t native_slot_bytes(const Graph& g, const std::vector<int64_t>& input_shape, int64_t element_bytes) {
  const NativeOptions o;
  return native::make_plan(g, infer_shapes(g, input_shape),
                           {o.fuse, element_bytes, o.copy_free_halo, o.copy_free_min_bytes, o.upsample_conv})
      .total_slot_bytes();
}

bool native_has_cudnn_epilogues() {
#ifdef PNP_HAVE_CUDNN_FE
  return true;
#else
  return false;
#endif
}

std::unique_ptr<NativeExecutor> make_native(const Graph& g, const Weights& w, at::Device device, at::ScalarType dtype,
                                            std::vector<int64_t> input_shape, NativeOptions opt) {
  return std::make_unique<native::NativeImpl>(g, w, device, dtype, std::move(input_shape), opt);
}

}  // namespace pnp::nn
