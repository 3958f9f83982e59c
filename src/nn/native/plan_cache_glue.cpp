// The native executor's use of the plan cache (impl.hpp, plan_cache.hpp): the cache made at
// the first layout, each layout's choice stored, the network's list of layouts stored after a
// warm-up, and a compile from that list that captures the forward with no warm-up run.
#include "impl.hpp"

namespace pnp::nn::native {

// The plan cache (NativeOptions::plan_cache_dir), made at the first layout it is asked for.
native::PlanCache& NativeImpl::plan_cache() {
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

// The FP8 convolutions' part of network_key (empty without them).
std::string NativeImpl::fp8_key() const {
  std::string k;
  for (int id : opt_.fp8_convs) k += (k.empty() ? " fp8" : ",") + std::to_string(id);
  return k;
}

// The plan cache's name for this network's list of layouts: what decides which layouts it
// meets (the layouts themselves are keyed by everything else, plan_cache.hpp).
std::string NativeImpl::network_key() const {
  return "ir " + g_.hash() + " input " + shape_string(shape_) + " channels_last " + std::to_string(cl_) + " fuse " +
         std::to_string(opt_.fuse) + " fused_bf16 " + std::to_string(opt_.cudnn_fused_bf16) + " graph_convs " +
         std::to_string(opt_.cudnn_graph_convs) + (opt_.upsample_conv ? "" : " no upsample_conv") +
         (opt_.narrow_convs ? " narrow_convs" : "") + (opt_.wgmma_convs ? " wgmma_convs" : "") +
         (opt_.nhwc_kernels ? " nhwc_kernels" : "") + fp8_key();
}

// Compiled from the plan cache (plan_cache.hpp, the network's list): every layout's choice
// and plan loaded first, then the forward captured straight away, with no warm-up run (there
// is nothing to time: without ATen's benchmark mode the generic ops run on cuDNN's
// heuristics). False, with a note, when the list is missing or stale, an entry does not load,
// or the capture fails (then the compile warms up as without the list; what did load stays).
bool NativeImpl::capture_from_plan_cache() {
  // (FP8 calibrates its scales in a warm-up run)
  if (!opt_.cuda_graph || aten_benchmark() || !opt_.cudnn_epilogues || !opt_.fp8_convs.empty()) return false;
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
void NativeImpl::remember_network() {
  native::PlanCache& cache = plan_cache();
  if (!cache.enabled() || epilogues_.empty() || !captured_ || aten_benchmark() || !opt_.fp8_convs.empty()) return;
  native::PlanCache::Layouts layouts;
  for (const auto& [key, e] : epilogues_) {
    if (e.pending.valid()) return;
    layouts.emplace_back(e.shape, key);
  }
  std::string why;
  if (!cache.store_network(network_key(), layouts, &why)) cache_notes_.push_back(why);
}

// A layout's choice into the plan cache (when there is one): the graph with its serialised
// plan (or its heuristic position where cuDNN cannot serialise it), or the generic ops (also
// where cuDNN had no plan: not tried again).
void NativeImpl::remember(native::PlanCache& cache, const std::string& layout, const Epilogue& e) {
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

}  // namespace pnp::nn::native
