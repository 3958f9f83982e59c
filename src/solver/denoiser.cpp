#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>

#include "pnp/core.hpp"
#include "pnp/layer_exchange.hpp"
#include "pnp/nn/fp8.hpp"
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

at::ScalarType denoiser_dtype(const DenoiserConfig& c) {
  if (c.precision == "fp32") return at::kFloat;
  if (c.precision == "bf16") return at::kBFloat16;
  if (c.precision == "fp8") return at::kBFloat16;  // the layers outside FP8, and the values between them
  if (c.precision == "fp8_emulated") return at::kFloat;  // float32 compute on e4m3-rounded values
  throw InputError("denoiser.precision: expected \"fp32\", \"bf16\", \"fp8\" or \"fp8_emulated\", got \"" + c.precision +
                   "\"");
}

at::ScalarType solver_dtype(const SolverConfig& c) { return c.precision == "fp64" ? at::kDouble : at::kFloat; }

at::ScalarType denoiser_dtype(const Config& c) {
  return c.solver.precision == "fp64" ? at::kDouble : denoiser_dtype(c.denoiser);
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
// A compiled backend (native or inductor) built once per input shape (the tile, or each distinct
// patch shape) on first use; compile time (for inductor: the exporter subprocess or the cache
// load) accumulates.
template <class Compiled>
class PerShape final : public nn::Executor {
 public:
  using Factory = std::function<std::unique_ptr<Compiled>(const std::vector<int64_t>&)>;
  PerShape(std::string name, const nn::Graph& g, Factory make)
      : name_(std::move(name)), alignment_(g.alignment()), radius_(nn::receptive_radius(g)), make_(std::move(make)) {}
  at::Tensor forward(const at::Tensor& x, double sigma) override {
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    auto it = compiled_.find(shape);
    const MemoryStage stage("denoiser");  // its buffers, workspaces and graph (the native executor names its warm-up)
    if (it == compiled_.end()) {
      auto ex = make_(shape);
      compile_seconds_ += ex->compile_seconds();
      it = compiled_.emplace(shape, std::move(ex)).first;
    }
    return it->second->forward(x, sigma);
  }
  std::string name() const override { return name_; }
  int64_t alignment() const override { return alignment_; }
  int64_t receptive_radius() const override { return radius_; }
  double compile_seconds() const override { return compile_seconds_; }
  std::vector<std::string> report() const override { return report_(compiled_); }
  void set_sigma(double sigma) override {
    for (auto& [shape, ex] : compiled_) ex->set_sigma(sigma);
  }
  using Report = std::function<std::vector<std::string>(const std::map<std::vector<int64_t>, std::unique_ptr<Compiled>>&)>;
  void set_report(Report r) { report_ = std::move(r); }

 private:
  std::string name_;
  int64_t alignment_, radius_;
  Factory make_;
  std::map<std::vector<int64_t>, std::unique_ptr<Compiled>> compiled_;
  double compile_seconds_ = 0;
  Report report_ = [](const auto&) { return std::vector<std::string>{}; };
};
}  // namespace

Denoiser make_denoiser(const Config& cfg, at::Device device, Communicator* comm, const Decomposition* decomp,
                       Communicator* world) {
  if (const Communicator* all = world ? world : comm; cfg.denoiser.precision == "fp8" && all && all->size() > 1)
    throw InputError("denoiser.precision = \"fp8\" runs on one rank (its activation scales are calibrated on the "
                     "whole image in one call); this run has " + std::to_string(all->size()));
  if (cfg.denoiser.dim == 3) {  // the layer halo across a volume's slabs, over the world's ranks
    if (world && comm && decomp && cfg.distributed.halo_mode == HaloMode::layer &&
        (decomp->z.ranges.size() > 1 || decomp->tiles.size() > 1)) {
      auto ex = std::make_unique<LayerExchange>(*world, *comm, *decomp);
      const auto axes = ex->axes();
      return make_distributed_denoiser(cfg, device, std::move(ex), axes);
    }
    return make_distributed_denoiser(cfg, device, nullptr, {});
  }
  if (comm && decomp && layer_exchanges(cfg.distributed.halo_mode, comm->size())) {
    auto ex = std::make_unique<LayerExchange>(*comm, *decomp);
    const auto axes = ex->axes();
    return make_distributed_denoiser(cfg, device, std::move(ex), axes);
  }
  return make_distributed_denoiser(cfg, device, nullptr, {});
}

Denoiser make_distributed_denoiser(const Config& cfg, at::Device device,
                                   std::unique_ptr<nn::HaloExchanger> layer_exchanger,
                                   const std::vector<nn::AxisNeighbours>& axes) {
  auto t0 = std::chrono::steady_clock::now();
  Denoiser d;
  d.graph = denoiser_graph(cfg.denoiser);
  const nn::Graph whole = d.graph;  // the weights' graph (the halo nodes carry no tensors)
  if (layer_exchanger) {
    d.graph = nn::with_layer_halos(d.graph, axes);
    d.exchanger = std::move(layer_exchanger);
  }
  nn::HaloExchanger* exchanger = d.exchanger.get();
  d.dtype = denoiser_dtype(cfg);
  std::string path = resolve_weights(cfg.denoiser.weights);
  nn::Weights w = path.empty() ? nn::init_weights(whole, static_cast<uint64_t>(cfg.denoiser.seed))
                               : nn::load_weights(path, whole);
  const at::ScalarType dtype = d.dtype;
  const DenoiserExecutor kind = denoiser_executor(cfg);
  if (kind == DenoiserExecutor::eager && cfg.denoiser.precision == "fp8_emulated") {
    if (exchanger) throw InputError("denoiser.precision = \"fp8_emulated\" runs with distributed.halo_mode = \"input\"");
    d.executor = nn::make_fp8_emulated(d.graph, w, device, cfg.denoiser.fp8_keep);
  } else if (kind == DenoiserExecutor::eager) {
    d.executor = nn::make_eager(d.graph, w, device, dtype, exchanger);
  } else if (kind == DenoiserExecutor::inductor) {
    // Mode pre: compiled at the patch / tile shape; post and fused: at the full local tile shape,
    // and the solver captures the region (NCCL calls outside the package, inside the graph) around it.
    nn::InductorOptions opt;
    opt.cache_dir = cfg.compile.cache_dir;
    opt.mode = cfg.compile.inductor_mode;
    auto ex = std::make_unique<PerShape<nn::InductorExecutor>>(
        "inductor", d.graph, [g = d.graph, w = std::move(w), device, dtype, opt](const std::vector<int64_t>& shape) {
          return nn::make_inductor(g, w, device, dtype, shape, opt);
        });
    ex->set_report([mode = opt.mode](const auto& compiled) {
      std::vector<std::string> o;
      for (const auto& [shape, e] : compiled) {
        o.push_back(std::string(e->compiled_here() ? "inductor compiled " : "inductor cache hit ") +
                    nn::shape_string(shape) + " (" + mode + "): " + e->package_path());
        for (const auto& n : e->notes()) o.push_back(n);
      }
      return o;
    });
    d.executor = std::move(ex);
  } else {
    nn::NativeOptions opt;
    opt.autotune = cfg.compile.autotune;
    if (cfg.compile.plan_cache) opt.plan_cache_dir = cfg.compile.cache_dir + "/native";
    // Mode pre: the denoiser's own graph; post and fused: the solver captures the region around it.
    opt.cuda_graph = executor_captures(cfg.compile);
    opt.exchanger = exchanger;  // layer halo: the executor plans halo steps and runs without its own graph
    opt.warm_up_on_first_call = true;  // iteration 1's call is the warm-up (PerShape builds at first use)
    if (cfg.denoiser.precision == "fp8") {
      if (!nn::native_has_fp8(device, opt))
        throw InputError("denoiser.precision = \"fp8\" needs pnp's Hopper kernels on a GPU of compute capability 9.0 "
                         "(an H100 or H200, in a build with the nvidia-cutlass headers, PNP_KERNELS not \"portable\"); " +
                         std::string(device.is_cuda() ? "this device has none" : "the device is the CPU"));
      opt.fp8_convs = nn::fp8_run_convs(d.graph, cfg.denoiser.fp8_keep);
    }
    auto ex = std::make_unique<PerShape<nn::NativeExecutor>>(
        "native", d.graph, [g = d.graph, w = std::move(w), device, dtype, opt](const std::vector<int64_t>& shape) {
          return nn::make_native(g, w, device, dtype, shape, opt);
        });
    // Per compiled shape: its fusions counted by pattern, then the executor's notes (what it ran
    // each layer on, and the timed choices).
    ex->set_report([](const auto& compiled) {
      std::vector<std::string> o;
      for (const auto& [shape, e] : compiled) {
        std::map<std::string, int> patterns;
        for (const std::string& f : e->fusions()) ++patterns[f.substr(0, f.find(':'))];
        std::string line = "native " + nn::shape_string(shape) + ": " + std::to_string(e->fusions().size()) + " fusions";
        const char* sep = " (";
        for (const auto& [p, k] : patterns) line += sep + p + " " + std::to_string(k), sep = ", ";
        o.push_back(line + (patterns.empty() ? "" : ")") + (e->graph_captured() ? ", one CUDA graph" : ""));
        for (const std::string& n : e->notes()) o.push_back(n);
      }
      return o;
    });
    d.executor = std::move(ex);
  }
  d.setup_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return d;
}

}  // namespace pnp
