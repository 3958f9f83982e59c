#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "pnp/nn/inductor.hpp"
#include "pnp/nn/native.hpp"
#include "pnp/solver.hpp"

namespace pnp {
namespace fs = std::filesystem;

nn::Graph denoiser_graph(const DenoiserConfig& c) {
  nn::DenoiserSpec spec;
  spec.architecture = c.architecture;
  spec.dim = static_cast<int>(c.dim);
  spec.in_channels = static_cast<int>(c.channels);
  spec.out_channels = static_cast<int>(c.channels);
  spec.features = c.features;
  spec.blocks = static_cast<int>(c.blocks);
  return nn::build(spec);
}

std::string resolve_weights(const std::string& weights) {
  fs::path p(weights);
  if (weights.empty() || p.has_extension() || weights.find('/') != std::string::npos) return weights;
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("PNP_MODELS_DIR")) dirs.emplace_back(env);
  dirs.emplace_back(PNP_INSTALLED_MODELS_DIR);
  dirs.emplace_back(PNP_SOURCE_MODELS_DIR);
  std::string searched;
  for (const auto& d : dirs) {
    fs::path candidate = d / (weights + ".h5");
    if (fs::is_regular_file(candidate)) return candidate.string();
    searched += (searched.empty() ? "" : ", ") + d.string();
  }
  throw InputError("denoiser.weights: no shipped model named '" + weights + "' (searched " + searched +
                   "; set PNP_MODELS_DIR or give a path to an .h5 file)");
}

namespace {
// The native backend compiled once per input shape (tile, or each distinct patch shape), on
// first use; compile time accumulates.
class PerShapeNative final : public nn::Executor {
 public:
  PerShapeNative(nn::Graph g, nn::Weights w, at::Device dev, nn::NativeOptions opt)
      : graph_(std::move(g)), weights_(std::move(w)), device_(dev), opt_(opt) {}
  at::Tensor forward(const at::Tensor& x, double sigma) override {
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    auto it = compiled_.find(shape);
    if (it == compiled_.end()) {
      auto ex = nn::make_native(graph_, weights_, device_, at::kFloat, shape, opt_);
      compile_seconds_ += ex->compile_seconds();
      it = compiled_.emplace(shape, std::move(ex)).first;
    }
    return it->second->forward(x, sigma);
  }
  std::string name() const override { return "native"; }
  int64_t alignment() const override { return graph_.alignment(); }
  int64_t receptive_radius() const override { return nn::receptive_radius(graph_); }
  double compile_seconds() const { return compile_seconds_; }
  std::vector<std::string> fusions() const {
    return compiled_.empty() ? std::vector<std::string>{} : compiled_.begin()->second->fusions();
  }

 private:
  nn::Graph graph_;
  nn::Weights weights_;
  at::Device device_;
  nn::NativeOptions opt_;
  std::map<std::vector<int64_t>, std::unique_ptr<nn::NativeExecutor>> compiled_;
  double compile_seconds_ = 0;
};

// The inductor backend loaded (or compiled, on a cache miss) once per input shape, on first use;
// compile time (exporter subprocess or cache load) accumulates.
class PerShapeInductor final : public nn::Executor {
 public:
  PerShapeInductor(nn::Graph g, nn::Weights w, at::Device dev, nn::InductorOptions opt)
      : graph_(std::move(g)), weights_(std::move(w)), device_(dev), opt_(std::move(opt)) {}
  at::Tensor forward(const at::Tensor& x, double sigma) override {
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    auto it = compiled_.find(shape);
    if (it == compiled_.end()) {
      auto ex = nn::make_inductor(graph_, weights_, device_, at::kFloat, shape, opt_);
      compile_seconds_ += ex->compile_seconds();
      it = compiled_.emplace(shape, std::move(ex)).first;
    }
    return it->second->forward(x, sigma);
  }
  std::string name() const override { return "inductor"; }
  int64_t alignment() const override { return graph_.alignment(); }
  int64_t receptive_radius() const override { return nn::receptive_radius(graph_); }
  double compile_seconds() const { return compile_seconds_; }
  std::vector<std::string> notes() const {
    std::vector<std::string> o;
    for (const auto& [shape, ex] : compiled_) {
      o.push_back(std::string(ex->compiled_here() ? "inductor compiled " : "inductor cache hit ") +
                  nn::shape_string(shape) + " (" + opt_.mode + "): " + ex->package_path());
      for (const auto& n : ex->notes()) o.push_back(n);
    }
    return o;
  }

 private:
  nn::Graph graph_;
  nn::Weights weights_;
  at::Device device_;
  nn::InductorOptions opt_;
  std::map<std::vector<int64_t>, std::unique_ptr<nn::InductorExecutor>> compiled_;
  double compile_seconds_ = 0;
};
}  // namespace

Denoiser make_denoiser(const Config& cfg, at::Device device) {
  auto t0 = std::chrono::steady_clock::now();
  Denoiser d;
  d.graph = denoiser_graph(cfg.denoiser);
  if (cfg.denoiser.precision != "fp32")
    throw InputError("denoiser.precision = \"" + cfg.denoiser.precision + "\" is not available in this build yet");
  if (cfg.compile.mode != "none" && cfg.compile.backend != "native" && cfg.compile.backend != "inductor")
    throw InputError("compile.backend = \"" + cfg.compile.backend +
                     "\" is not available in this build yet; use compile.backend = \"native\" or \"inductor\"");
  std::string path = resolve_weights(cfg.denoiser.weights);
  nn::Weights w = path.empty() ? nn::init_weights(d.graph, static_cast<uint64_t>(cfg.denoiser.seed))
                               : nn::load_weights(path, d.graph);
  if (cfg.compile.mode == "none" || cfg.denoiser.architecture == "identity") {
    d.executor = nn::make_eager(d.graph, w, device, at::kFloat);
  } else if (cfg.compile.backend == "inductor") {
    // pre: compiled at the patch / tile shape; post/fused: at the full local tile shape, and the
    // solver captures the region (NCCL calls outside the package, inside the graph) around it.
    nn::InductorOptions opt;
    opt.cache_dir = cfg.compile.cache_dir;
    opt.mode = cfg.compile.inductor_mode;
    auto ex = std::make_unique<PerShapeInductor>(d.graph, std::move(w), device, opt);
    PerShapeInductor* raw = ex.get();
    d.compile_seconds = [raw] { return raw->compile_seconds(); };
    d.fusions = [raw] { return raw->notes(); };
    d.executor = std::move(ex);
  } else {
    nn::NativeOptions opt;
    opt.autotune = cfg.compile.autotune;
    // pre: the denoiser's own graph; post/fused: the solver captures the region around it.
    opt.cuda_graph = cfg.compile.cuda_graphs && cfg.compile.mode == "pre";
    auto ex = std::make_unique<PerShapeNative>(d.graph, std::move(w), device, opt);
    PerShapeNative* raw = ex.get();
    d.compile_seconds = [raw] { return raw->compile_seconds(); };
    d.fusions = [raw] { return raw->fusions(); };
    d.executor = std::move(ex);
  }
  d.setup_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return d;
}

}  // namespace pnp
