// The execution plan (include/pnp/solver.hpp, plan_execution): what a configuration decides on
// R ranks (decomposition, halo width and mode, executor and CUDA-graph capture), in one place.
#include "pnp/solver.hpp"

namespace pnp {

DenoiserExecutor denoiser_executor(const Config& cfg) {
  if (cfg.compile.mode == CompileMode::none || cfg.denoiser.architecture == "identity") return DenoiserExecutor::eager;
  return cfg.compile.backend == CompileBackend::inductor ? DenoiserExecutor::inductor : DenoiserExecutor::native;
}

bool layer_exchanges(HaloMode mode, int ranks) { return mode == HaloMode::layer && ranks > 1; }

bool executor_captures(const CompileConfig& c) { return c.cuda_graphs && c.mode == CompileMode::pre; }

bool solver_captures(CompileMode mode, bool cuda_graphs, at::Device device) {
  return device.is_cuda() && cuda_graphs && (mode == CompileMode::post || mode == CompileMode::fused);
}

bool captures_allowed(const MemoryPlan& m) { return m.patches <= 1 && m.stream == 0; }

bool cudnn_workspaces_unbounded(const Config& cfg, bool cuda) {
  return cuda && !cfg.compile.tf32 && denoiser_dtype(cfg) == at::kFloat && denoiser_executor(cfg) != DenoiserExecutor::inductor;
}

bool holds_to_plan(const Config& cfg, bool cuda) { return cudnn_workspaces_unbounded(cfg, cuda) && cfg.denoiser.memory_hold; }

ExecutionPlan plan_execution(const Config& cfg, int ranks, const nn::Graph& graph, at::Device device) {
  const DistributedConfig& dc = cfg.distributed;
  ExecutionPlan p;
  p.halo_mode = dc.halo_mode;
  const bool layer = dc.halo_mode == HaloMode::layer;
  // A configuration file is refused at parse time (config.cpp); this catches the halo mode set
  // after it, as pnp_bench --scaling does for each row.
  if (layer && !layer_halo_supported(cfg.compile))
    throw InputError("the layer halo runs with the native backend or eager, not inductor");
  // A volume's slabs; each plane is split over its plane_ranks ranks as one image over all.
  const SlabSplit z = plan_slabs(cfg.problem.slices, ranks, static_cast<int>(dc.plane_ranks));
  ranks = z.plane_ranks;
  p.layer_exchange = layer_exchanges(dc.halo_mode, ranks);
  // The layer halo has no input halo, and its tile boundaries lie on the network's sampling grid.
  p.halo = layer ? 0 : dc.halo > 0 ? dc.halo : nn::receptive_radius(graph);
  p.decomp = plan_decomposition(cfg.problem.size, ranks, dc.decomposition, dc.grid, p.halo, graph.alignment(), layer);
  p.decomp.z = z;
  if (graph.dim == 3) {  // a 3D denoiser: its slabs exchange a z-halo of its receptive radius, or every layer's strips
    if (!z.volume())
      throw InputError("denoiser.dim = 3 needs a volume (problem.slices > 0, or a 3D problem.sinogram)");
    if (layer) {
      // The layer halo across z: no z-halo, each layer exchanges its own; the slab boundaries on
      // the network's sampling grid (as the in-plane tiles' are).
      try {
        p.decomp.z.ranges = aligned_ranges(z.slices, static_cast<int>(z.ranges.size()), graph.alignment());
      } catch (const InputError&) {
        throw InputError("distributed.halo_mode = \"layer\" with a 3D denoiser puts the slab boundaries on the "
                         "network's grid of " + std::to_string(graph.alignment()) + " slices, and " +
                         std::to_string(z.slices) + " slices do not split into " + std::to_string(z.ranges.size()) +
                         " slabs there (multiples of " + std::to_string(graph.alignment()) +
                         "): use fewer ranks, or halo_mode = \"input\"");
      }
      p.layer_exchange = z.ranges.size() > 1 || z.plane_ranks > 1;
    } else {
      p.decomp.z.halo = dc.halo > 0 ? dc.halo : nn::receptive_radius(graph);
      p.decomp.z.align = graph.alignment();
    }
  }
  p.executor = denoiser_executor(cfg);
  // The native executor captures its forward on a GPU, except where the layer halo's exchanges
  // run between its steps (they belong to the solver's capture, post and fused).
  p.executor_graph = device.is_cuda() && p.executor == DenoiserExecutor::native && executor_captures(cfg.compile) &&
                     !p.layer_exchange;
  p.region_graphs = solver_captures(cfg.compile.mode, cfg.compile.cuda_graphs, device);
  if (p.region_graphs && graph.dim == 3 && p.decomp.z.ranges.size() > 1)
    throw InputError("compile.mode = \"" + to_string(cfg.compile.mode) + "\" captures the step in a CUDA graph, but a 3D "
                     "denoiser's exchanges between slabs go through MPI: use compile.mode = \"pre\" or "
                     "compile.cuda_graphs = false");
  return p;
}

}  // namespace pnp
