// Device memory estimate of one rank and the patch size for denoiser.memory_limit_gb
// (include/pnp/solver.hpp, plan_memory).
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "pnp/nn/patch.hpp"
#include "pnp/roofline.hpp"
#include "pnp/solver.hpp"

namespace pnp {

std::string MemoryPlan::describe() const {
  std::string o = "about " + human_bytes(total()) + " (solver " + human_bytes(solver) + ", weights " +
                  human_bytes(weights) + ", denoiser activations " + human_bytes(activations) + ", workspace " +
                  human_bytes(workspace) + ")";
  if (patch > 0)
    o += ", patches of " + std::to_string(patch) + " px (overlap " + std::to_string(overlap) + ", " +
         std::to_string(patch_shapes) + " shape" + (patch_shapes > 1 ? "s" : "") + ")";
  else
    o += ", whole tile";
  return o;
}

MemoryPlan plan_memory(const Config& cfg, const nn::Graph& g, const Box& ext, int64_t angles, int64_t detectors) {
  const auto& dc = cfg.denoiser;
  const int64_t eb = at::elementSize(denoiser_dtype(dc));
  // Inductor's buffer plan is its own: estimated as eager's.
  const bool eager = denoiser_executor(cfg) != DenoiserExecutor::native || g.architecture == "identity";
  const auto style = eager ? roofline::ExecutorStyle::eager : roofline::ExecutorStyle::native;
  const int64_t align = g.alignment();
  const double pixels = static_cast<double>(ext.size());

  MemoryPlan base;
  base.overlap = dc.patch_overlap > 0 ? dc.patch_overlap : nn::receptive_radius(g);
  // float32 solver state: x, gradient, truth (owned, bounded by the extended tile), z and z
  // extended, the denoised tile; data, partial and full projections.
  base.solver = 4.0 * pixels * 6 + 4.0 * static_cast<double>(angles * detectors) * 3;

  // The walk per distinct patch shape, once: the search below revisits the same extents.
  std::map<std::pair<int64_t, int64_t>, roofline::ActivationMemory> walks;
  auto walk = [&](int64_t h, int64_t w) -> const roofline::ActivationMemory& {
    auto it = walks.find({h, w});
    if (it == walks.end()) it = walks.emplace(std::make_pair(h, w), roofline::activation_memory(g, {1, dc.channels, h, w}, eb, style)).first;
    return it->second;
  };
  auto estimate = [&](int64_t patch) {
    MemoryPlan m = base;
    m.patch = patch;
    std::set<int64_t> rows, cols;
    const auto rr = nn::patch_ranges(ext.rows(), patch, m.overlap, align);
    const auto rc = nn::patch_ranges(ext.cols(), patch, m.overlap, align);
    for (const auto& r : rr) rows.insert(r.in1 - r.in0);
    for (const auto& r : rc) cols.insert(r.in1 - r.in0);
    if (rr.size() * rc.size() == 1) m.patch = 0;  // one call on the whole tile
    m.patch_shapes = static_cast<int>(rows.size() * cols.size());
    double largest = 0;
    for (int64_t h : rows)
      for (int64_t w : cols) {
        const auto& a = walk(h, w);
        m.activations = eager ? std::max(m.activations, a.peak_bytes) : m.activations + a.peak_bytes;
        m.weights = a.weights_bytes;
        largest = std::max(largest, a.largest_bytes);
      }
    m.workspace = eager ? 2 * largest : 0.1 * m.activations;
    if (m.patch > 0) m.solver += static_cast<double>(eb) * pixels;  // the patched output
    return m;
  };

  if (dc.patch_size > 0) return estimate(dc.patch_size);
  MemoryPlan whole = estimate(0);
  const double limit = dc.memory_limit_gb * 1e9;
  if (limit <= 0 || whole.total() <= limit) return whole;
  const int64_t ov = (base.overlap + align - 1) / align * align;
  const int64_t smallest = 2 * ov + align;
  const int64_t longest = std::max(ext.rows(), ext.cols());
  for (int64_t p = (longest - 1) / align * align; p >= smallest; p -= align) {
    MemoryPlan m = estimate(p);
    if (m.total() <= limit) return m;
  }
  const MemoryPlan least = estimate(std::min(smallest, longest));
  throw InputError("denoiser.memory_limit_gb = " + std::to_string(dc.memory_limit_gb) + " GB is too small for tile " +
                   to_string(ext) + ": the whole tile needs " + whole.describe() + "; the smallest patch (" +
                   std::to_string(smallest) + " px = 2 x overlap " + std::to_string(ov) + " + alignment " +
                   std::to_string(align) + ") still needs " + human_bytes(least.total()) +
                   ". Raise the limit, use more ranks, or denoiser.precision = \"bf16\"");
}

std::pair<int64_t, int64_t> sinogram_dims(const Config& cfg) {
  const int64_t n = cfg.problem.size;
  return {cfg.problem.angles,
          cfg.problem.detector ? cfg.problem.detector : static_cast<int64_t>(std::ceil(std::sqrt(2.0) * double(n)))};
}

std::vector<MemoryPlan> memory_plans(const Config& cfg, const ExecutionPlan& plan, const nn::Graph& g) {
  const auto [k, det] = sinogram_dims(cfg);
  std::vector<MemoryPlan> plans;
  for (const auto& t : plan.decomp.tiles) plans.push_back(plan_memory(cfg, g, t.ext, k, det));
  return plans;
}

}  // namespace pnp
