#include <chrono>
#include <cstdlib>
#include <filesystem>

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

Denoiser make_denoiser(const Config& cfg, at::Device device) {
  auto t0 = std::chrono::steady_clock::now();
  Denoiser d;
  d.graph = denoiser_graph(cfg.denoiser);
  if (cfg.compile.mode != "none")
    throw InputError("compile.mode = \"" + cfg.compile.mode + "\" (backend \"" + cfg.compile.backend +
                     "\") is not available in this build yet; use compile.mode = \"none\"");
  if (cfg.denoiser.precision != "fp32")
    throw InputError("denoiser.precision = \"" + cfg.denoiser.precision + "\" is not available in this build yet");
  std::string path = resolve_weights(cfg.denoiser.weights);
  nn::Weights w = path.empty() ? nn::init_weights(d.graph, static_cast<uint64_t>(cfg.denoiser.seed))
                               : nn::load_weights(path, d.graph);
  d.executor = nn::make_eager(d.graph, w, device, at::kFloat);
  d.setup_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return d;
}

}  // namespace pnp
