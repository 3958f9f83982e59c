// The inductor backend (include/pnp/nn/inductor.hpp: make_inductor) and its loader: an
// AOTInductor package in the cache, loaded with torch::inductor::AOTIModelPackageLoader, fed the
// weights as constants, run on the current stream. A cached package that cannot be loaded
// (truncated, corrupt) is removed and compiled again, once, with a warning.
#include "internal.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <cstdio>
#include <limits>
#include <unordered_map>

#ifdef PNP_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "pnp/timing.hpp"

namespace pnp::nn {

using namespace inductor_detail;

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

class InductorImpl final : public InductorExecutor {
 public:
  InductorImpl(const Graph& g, const Weights& w, at::Device device, at::ScalarType dtype, std::vector<int64_t> shape,
               const InductorOptions& opt)
      : g_(g), device_(concrete_device(device)), dtype_(dtype), shape_(std::move(shape)) {
    const auto t0 = Clock::now();
    prepare(g, w, opt);
    auto t1 = Clock::now();
    try {
      load(w);
    } catch (const std::exception& e) {
      if (compiled_here_) throw;
      // A cached package that does not load (truncated, corrupt, from another build): remove
      // it and compile again, once.
      const auto* c10e = dynamic_cast<const c10::Error*>(&e);
      const std::string why = first_line(c10e ? c10e->what_without_backtrace() : e.what());
      std::fprintf(stderr, "warning: inductor cache: %s could not be used (%s); removing it and compiling again\n",
                   package_.c_str(), why.c_str());
      discard_package(package_);
      std::vector<std::string> before = notes_;
      loader_.reset();
      prepare(g, w, opt);
      notes_.insert(notes_.begin(), before.begin(), before.end());
      notes_.push_back("rebuilt after the cached package could not be used: " + why);
      t1 = Clock::now();
      load(w);
    }
    load_seconds_ = since(t1);
    compile_seconds_ = since(t0);
  }

  std::string name() const override { return "inductor"; }
  int64_t alignment() const override { return g_.alignment(); }
  int64_t receptive_radius() const override { return nn::receptive_radius(g_); }
  double compile_seconds() const override { return compile_seconds_; }
  double exporter_seconds() const override { return exporter_seconds_; }
  double load_seconds() const override { return load_seconds_; }
  bool cache_hit() const override { return !compiled_here_; }
  bool compiled_here() const override { return compiled_here_; }
  const std::string& package_path() const override { return package_; }
  const std::string& cache_key() const override { return key_; }
  const std::vector<int64_t>& input_shape() const override { return shape_; }
  std::vector<std::string> notes() const override { return notes_; }

  void set_sigma(double sigma) override { sigma_.set(sigma); }  // (SigmaBuffer: only when it changes)

  at::Tensor forward(const at::Tensor& x, double sigma) override {
    if (x.sizes().vec() != shape_)
      throw InputError("inductor executor compiled for " + shape_string(shape_) + " called with " +
                       shape_string(x.sizes().vec()));
    at::NoGradGuard no_grad;
    c10::OptionalDeviceGuard guard(device_);
    static_in_.copy_(x);
    set_sigma(sigma);
    return run();
  }

 private:
  void prepare(const Graph& g, const Weights& w, const InductorOptions& opt) {
    InductorPackage pkg = prepare_inductor_package(g, w, device_, dtype_, shape_, opt);
    key_ = std::move(pkg.key);
    package_ = std::move(pkg.path);
    exporter_seconds_ = pkg.exporter_seconds;
    compiled_here_ = pkg.compiled_here;
    notes_ = std::move(pkg.notes);
  }

  at::Tensor run() {
    std::vector<at::Tensor> in{static_in_};
    if (sigma_.value.defined()) in.push_back(sigma_.value);
    void* stream = nullptr;
#ifdef PNP_HAVE_CUDA
    if (device_.is_cuda()) stream = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
#endif
    auto out = loader_->run(in, stream);
    if (out.size() != 1) throw Error("inductor package " + package_ + " returned " + std::to_string(out.size()) + " outputs");
    return out[0];
  }

  void load(const Weights& w) {
    at::NoGradGuard no_grad;
    c10::OptionalDeviceGuard guard(device_);
    try {
      loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
          package_, "model", /*run_single_threaded=*/true, /*num_runners=*/1,
          device_.is_cuda() ? device_.index() : c10::DeviceIndex(-1));
    } catch (const c10::Error& e) {
      throw Error("inductor backend: cannot load " + package_ + ": " + first_line(e.what_without_backtrace()));
    } catch (const std::exception& e) {
      throw Error("inductor backend: cannot load " + package_ + ": " + first_line(e.what()));
    }
    auto meta = loader_->get_metadata();
    if (meta["pnp.ir_hash"] != g_.hash())
      throw Error("inductor backend: " + package_ + " was compiled from IR " + meta["pnp.ir_hash"] + ", not " + g_.hash());
    // Weights: every constant of the package is an IR parameter (named by its deepinv key) and
    // every parameter must be a constant -- otherwise the package would not serve other weights.
    std::unordered_map<std::string, at::Tensor> constants;
    std::vector<std::string> fqns = loader_->get_constant_fqns();
    for (const auto& k : fqns) {
      auto it = w.find(k);
      if (it == w.end()) throw Error("inductor backend: " + package_ + " has a constant '" + k + "' that is no IR parameter");
      constants[k] = it->second.detach().to(device_, dtype_).contiguous();
    }
    for (const auto* p : g_.params())
      if (!constants.count(p->key))
        throw Error("inductor backend: parameter '" + p->key + "' was compiled into " + package_ +
                    " (not a loadable constant); recompile with the current exporter");
    loader_->load_constants(constants, /*use_inactive=*/false, /*check_full_update=*/true, /*user_managed=*/false);
    auto opts = at::TensorOptions().device(device_).dtype(dtype_);
    static_in_ = at::zeros(shape_, opts);
    if (meta["pnp.inputs"] == "x,sigma") sigma_.value = at::full({}, 0.1, opts);
    run();  // warm-up: lazy kernel loading and workspace allocation happen before any capture
#ifdef PNP_HAVE_CUDA
    if (device_.is_cuda()) at::cuda::getCurrentCUDAStream(device_.index()).synchronize();
#endif
  }

  Graph g_;
  at::Device device_;
  at::ScalarType dtype_;
  std::vector<int64_t> shape_;
  std::string key_, package_;
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
  at::Tensor static_in_;
  SigmaBuffer sigma_;
  double compile_seconds_ = 0, exporter_seconds_ = 0, load_seconds_ = 0;
  bool compiled_here_ = false;
  std::vector<std::string> notes_;
};

}  // namespace

std::unique_ptr<InductorExecutor> make_inductor(const Graph& g, const Weights& w, at::Device device,
                                                at::ScalarType dtype, std::vector<int64_t> input_shape,
                                                InductorOptions opt) {
  return std::make_unique<InductorImpl>(g, w, device, dtype, std::move(input_shape), opt);
}

}  // namespace pnp::nn
