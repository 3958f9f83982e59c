// The native executor's epilogue autotuner (impl.hpp): each convolution layout (shapes,
// strides, padding, epilogue) decided once, in the warm-up, by timing cuDNN's graph with the
// epilogue against the generic ops and pnp's kernel where one applies (or from the plan cache).
#include "impl.hpp"

namespace pnp::nn::native {

const char* pnp_kernel_name(PnpKernel k) {
  return k == PnpKernel::few_in ? "head" : k == PnpKernel::few_out ? "tail" : "Hopper";
}

// The conv with its epilogue (+ z, + bias, ReLU: what the step has) as one cuDNN graph;
// undefined when the generic ops run instead. Each layout (shapes, strides, padding,
// epilogue: the same for a network level's convolutions) is decided once, in the warm-up:
// cuDNN's first three plans are timed and the fastest is timed against the generic ops
// (NativeOptions::cudnn_epilogues_forced: the heuristics' first plan, not timed). Undefined
// too for a layout cuDNN has no engine for, and for one first met outside the warm-up
// (nothing is built or timed inside a capture; in a capture from the plan cache's list, such
// a layout ends the capture).
at::Tensor NativeImpl::epilogue_conv(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
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

// The bias a step's cuDNN graph adds: the IR's, else the zero bias of a graph with an epilogue
// (Bound::zero_b).
const at::Tensor* NativeImpl::graph_bias(const Bound& t) {
  if (t.has_bias) return &t.b;
  return t.zero_b.defined() ? &t.zero_b : nullptr;
}

// A layout's key (the plan cache's too): the epilogue (a zero bias where the graph adds one,
// Bound::zero_b), the tensors' sizes and strides, stride, padding.
std::string NativeImpl::layout_key(const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z,
                                   const at::Tensor& y, const std::vector<int64_t>& padding) {
  std::string key = t.has_bias ? "bias " : graph_bias(t) ? "zero-bias " : "";
  if (!z) key += "no-residual ";
  if (s.relu) key += "relu ";
  for (const at::Tensor* a : std::initializer_list<const at::Tensor*>{&x, &t.w, z, &y})
    if (a) key += shape_string(a->sizes().vec()) + shape_string(a->strides().vec());
  return key + " stride" + shape_string(s.stride) + " padding" + shape_string(padding);
}

// In the warm-up run that met the layout: waits for its candidates' builds while the warm-up's
// budget for such waits lasts (kBuildWaitBudgetS), so that precompiled plans (built in
// milliseconds) are timed and run at once. The two ops that would run meanwhile allocate their
// own outputs outside the memory plan: DRUNet 1 ch 4096² fp32's cold compile peaked at 22.0 GB
// with them, 17.9 GB with serial builds (docs/performance.md#compile-time-and-the-plan-cache). The budget
// bounds what runtime-compiled plans (0.35-1.2 s each) can add to a compile.
bool NativeImpl::wait_for_builds(Epilogue& e) {
  if (build_wait_left_s_ <= 0) return false;
  const auto t0 = std::chrono::steady_clock::now();
  const bool ready = e.pending.wait_for(std::chrono::duration<double>(build_wait_left_s_)) == std::future_status::ready;
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  build_wait_left_s_ -= waited;
  e.wait_s += waited;  // (the note's "waited")
  return ready;
}

// What cuDNN builds for this step: conv(x, w) (+ z) (+ b) (ReLU) into y.
native::EpilogueSpec NativeImpl::epilogue_spec(const PlanStep& s, const Bound& t, const at::Tensor& x,
                                               const at::Tensor* z, const at::Tensor& y,
                                               const std::vector<int64_t>& padding, int candidates) const {
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

NativeImpl::Epilogue NativeImpl::choose_epilogue(const std::string& layout, const PlanStep& s, Bound& t,
                                                 const at::Tensor& x, const at::Tensor* z, at::Tensor& y,
                                                 const std::vector<int64_t>& padding) {
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
NativeImpl::Epilogue NativeImpl::from_cache(const native::PlanChoice& c, native::EpilogueSpec spec,
                                            const at::Tensor& like, bool pnp_ok) {
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
void NativeImpl::decide_epilogue(const std::string& layout, Epilogue& e, const PlanStep& s, Bound& t,
                                 const at::Tensor& x, const at::Tensor* z, at::Tensor& y,
                                 const std::vector<int64_t>& padding) {
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
void NativeImpl::time_and_remember(const std::string& layout, Epilogue& e, const PlanStep& s, Bound& t,
                                   const at::Tensor& x, const at::Tensor* z, at::Tensor& y,
                                   const std::vector<int64_t>& padding) {
  time_rivals(e, s, t, x, z, y, padding);
  remember(plan_cache(), layout, e);
}

// Which of pnp's kernels may run this layout: one that takes it with its option on (the head
// and tail kernels before the Hopper kernels, which take no C_in below 32 or C_out below 64),
// or none.
PnpKernel NativeImpl::pnp_kernel(const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z,
                                 const std::vector<int64_t>& padding) const {
  if (t.narrow && native::few_in_conv_applies(x, t.w, s.stride, padding, s.groups, z)) return PnpKernel::few_in;
  if (t.narrow && native::few_out_conv_applies(x, t.w, s.stride, padding, s.groups, z)) return PnpKernel::few_out;
#ifdef PNP_HAVE_WGMMA_CONV
  if (t.wgmma && wgmma_applies(s, t, x, z, padding)) return PnpKernel::hopper;
#endif
  return PnpKernel::none;
}

// Runs pnp's kernel `k` (pnp_kernel's answer for this layout) into y.
void NativeImpl::run_pnp(PnpKernel k, const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z,
                         at::Tensor& y, const std::vector<int64_t>& padding) const {
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
void NativeImpl::time_rivals(Epilogue& e, const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
                             at::Tensor& y, const std::vector<int64_t>& padding) {
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
double NativeImpl::pnp_margin(PnpKernel k, const Bound& t, const at::Tensor& x, const std::vector<int64_t>& padding) {
#ifdef PNP_HAVE_WGMMA_CONV
  if (k == PnpKernel::hopper && native::wgmma_rows_applies(x, t.w, padding)) return native::kRowsKernelMargin;
#endif
  (void)k, (void)t, (void)x, (void)padding;
  return native::kPnpKernelMargin;
}

// The graphs' shared workspace, grown to what `graph` needs (in the warm-up, before any capture).
void NativeImpl::grow_workspace(const native::EpilogueConv& graph, const at::Tensor& like) {
  if (graph.workspace_bytes() > (ws_.defined() ? ws_.numel() : 0))
    ws_ = at::empty({graph.workspace_bytes()}, like.options().dtype(at::kByte));
}

std::string NativeImpl::epilogue_summary() const {
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

}  // namespace pnp::nn::native
