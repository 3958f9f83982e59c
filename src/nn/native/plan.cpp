// The native backend's planner (plan.hpp): fusion groups, steps, liveness, in-place and slots.
#include "plan.hpp"

#include <algorithm>

namespace pnp::nn::native {

int64_t Plan::total_slot_bytes() const {
  int64_t t = 0;
  for (int64_t b : slot_bytes) t += b;
  return t;
}

namespace {

// The sliding-window attributes every windowed op records: channels, stride, padding, groups.
void set_window(PlanStep& s, const Attrs& a) {
  s.out_channels = a.out_channels;
  s.stride = a.stride;
  s.padding = a.padding;
  s.groups = a.groups;
}

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (auto v : s) n *= v;
  return n;
}

std::string key_of(const Node& nd, const char* role) {
  const Param* p = nd.param(role);
  return p ? p->key : std::string();
}

BatchNormKeys bn_keys_of(const Node& bn) {
  return {key_of(bn, "weight"), key_of(bn, "bias"), key_of(bn, "running_mean"), key_of(bn, "running_var"),
          bn.attrs.eps};
}

// A halo node its only reader can grow itself (plan.hpp, "copy-free halos"): a conv or
// max_pool reading it first, whose own padding gives the same output on the bare tile.
bool deferrable(const Graph& g, const std::vector<std::vector<int>>& readers, const Node& h) {
  if (h.id == g.output() || readers[h.id].size() != 1) return false;
  const Node& r = g.nodes[readers[h.id][0]];
  if ((r.op != OpKind::conv && r.op != OpKind::max_pool) || r.inputs.empty() || r.inputs[0] != h.id) return false;
  const auto& a = h.attrs;
  for (size_t d = 0; d < a.halo_lo.size(); ++d) {
    if (a.halo_lo[d] == 0 && a.halo_hi[d] == 0) continue;
    const int64_t k = a.kernel[d], st = a.stride[d], p = a.padding[d];
    if (a.halo_lo[d] != p || a.halo_hi[d] != k - st - p || k - st > 2 * p || 2 * p >= k) return false;
  }
  return true;
}

int64_t neighbour_sides(const Attrs& a) {
  int64_t n = 0;
  for (size_t d = 0; d < a.halo_lo.size(); ++d)
    n += (a.halo_peer_lo[d] && a.halo_lo[d] > 0 ? 1 : 0) + (a.halo_peer_hi[d] && a.halo_hi[d] > 0 ? 1 : 0);
  return n;
}

// A conv / max_pool step reading a deferred halo: which, and its padding on the bare tile (the
// halo's axes get back the op's own padding, which the halo pass had set to 0).
void read_halo(const Graph& g, const std::vector<int>& deferred, const Node& nd, PlanStep& s) {
  if (nd.inputs.empty() || !deferred[nd.inputs[0]]) return;
  const Node& h = g.nodes[nd.inputs[0]];
  s.halo = h.id;
  s.tile_padding = s.padding;
  for (size_t d = 0; d < h.attrs.halo_lo.size(); ++d)
    if (h.attrs.halo_lo[d] > 0 || h.attrs.halo_hi[d] > 0) s.tile_padding[d] = h.attrs.padding[d];
}

// A ×2 nearest upsample the conv reading it can absorb (plan.hpp, PlanStep::from_upsample):
// the conv's kernel 3, stride 1, padding 1 on every axis and groups 1, the scale 2 on every axis.
bool upsample_conv_applies(const Node& up, const Node& conv) {
  auto all = [](const std::vector<int64_t>& v, int64_t x) {
    return !v.empty() && std::all_of(v.begin(), v.end(), [x](int64_t e) { return e == x; });
  };
  const Attrs &u = up.attrs, &c = conv.attrs;
  return c.groups == 1 && all(u.scale, 2) && all(c.kernel, 3) && all(c.stride, 1) && all(c.padding, 1) &&
         u.scale.size() == c.kernel.size() && conv.inputs.size() == 1;
}

// What make_steps knows while it walks the graph: each value's readers, the nodes a step has
// absorbed, the deferred halos, and the folds found (by conv).
struct StepContext {
  const Graph& g;
  const PlanOptions& opt;
  std::vector<std::vector<int>> readers;
  std::vector<int> absorbed, deferred;
  std::vector<int> add_of;       // conv -> the add of two values it reads (PlanStep::x2)
  std::vector<int> upsample_of;  // conv -> the upsample it absorbs
  // The only reader of `id` when it is an `op` node (never for the graph output), else -1.
  int single(int id, OpKind op) const {
    if (id == g.output() || readers[id].size() != 1) return -1;
    const int r = readers[id][0];
    return g.nodes[r].op == op ? r : -1;
  }
};

// A conv step's epilogue with fuse on: a ReLU, or an add of an earlier residual (then maybe a
// ReLU), folded into the group ending at `tail`.
void fuse_epilogue(const StepContext& c, const Node& nd, PlanStep& s, int& tail, std::vector<int>& group,
                   std::string& pattern) {
  const Graph& g = c.g;
  if (int r = c.single(tail, OpKind::relu); r >= 0) {
    group.push_back(tail = r);
    s.relu = true;
    pattern += "+relu";
  } else if (int ad = c.single(tail, OpKind::add); ad >= 0) {
    const auto& ins = g.nodes[ad].inputs;
    // The residual must already exist where the fused step runs (the conv's place).
    const int zz = ins.size() == 2 ? (ins[0] == tail ? ins[1] : ins[0]) : -1;
    if (ins.size() == 2 && (ins[0] == tail) != (ins[1] == tail) && zz < nd.id) {
      s.z = zz;
      group.push_back(tail = ad);
      pattern += "+add";
      if (int r2 = c.single(ad, OpKind::relu); r2 >= 0) {
        group.push_back(tail = r2);
        s.relu = true;
        pattern += "+relu";
      }
    }
  }
}

// A conv node's step: its BN folded (always), its epilogue (fuse_epilogue), a ×2 upsample before
// it and a concat after it (upsample_conv), as one group.
void conv_step(StepContext& c, const Node& nd, PlanStep& s, Plan& p) {
  const Graph& g = c.g;
  const auto& a = nd.attrs;
  const auto& add_of = c.add_of;
  const auto& upsample_of = c.upsample_of;
  s.kind = StepKind::conv;
  s.weight_key = key_of(nd, "weight");
  s.bias_key = key_of(nd, "bias");
  std::string pattern = add_of[nd.id] >= 0 ? "add+conv" : "conv";
  if (!s.bias_key.empty()) pattern += "+bias";
  int tail = nd.id;
  std::vector<int> group{nd.id};
  if (int bn = c.single(tail, OpKind::batch_norm); bn >= 0) {  // fold BN (always)
    s.bn = bn;
    s.bn_keys = bn_keys_of(g.nodes[bn]);
    group.push_back(tail = bn);
    pattern = add_of[nd.id] >= 0 ? "add+conv+bn" : "conv+bn";
  }
  if (c.opt.fuse) fuse_epilogue(c, nd, s, tail, group, pattern);
  if (upsample_of[nd.id] >= 0)  // the concat reading the upsample conv (plan.hpp: cat_other)
    if (int ct = c.single(tail, OpKind::concat); ct >= 0) {
      const auto& ins = g.nodes[ct].inputs;
      const int other = ins.size() == 2 ? (ins[0] == tail ? ins[1] : ins[0]) : -1;
      if (ins.size() == 2 && (ins[0] == tail) != (ins[1] == tail) && other < nd.id) {
        s.cat_other = other;
        s.cat_first = ins[0] == tail;
        group.push_back(tail = ct);
        pattern += "+concat";
      }
    }
  for (int id : group)  // the rest of the group runs in this step
    if (id != nd.id) c.absorbed[id] = 1;
  set_window(s, a);
  read_halo(g, c.deferred, nd, s);
  s.out = tail;
  if (upsample_of[nd.id] >= 0) {  // the upsample and this conv as one transposed conv
    s.kind = StepKind::conv_transpose;
    s.from_upsample = true;
    s.stride.assign(a.stride.size(), 2);
    s.output_padding.assign(a.stride.size(), 0);
    pattern = "upsample+" + pattern;
  }
  if (group.size() > 1 || s.from_upsample || add_of[nd.id] >= 0) p.fusions.push_back(pattern + ":" + nd.name);
}

// A node's step (every op; conv_step for a conv) before its inputs and shape are set.
void node_step(StepContext& c, const std::vector<std::vector<int64_t>>& shapes, const Node& nd, PlanStep& s, Plan& p) {
  const Graph& g = c.g;
  const PlanOptions& opt = c.opt;
  const auto& a = nd.attrs;
  switch (nd.op) {
    case OpKind::input:
      break;
    case OpKind::sigma_channel:
      s.kind = StepKind::sigma;
      s.alias = true;
      p.uses_sigma = true;
      break;
    case OpKind::conv:
      conv_step(c, nd, s, p);
      break;
    case OpKind::conv_transpose:
      s.kind = StepKind::conv_transpose;
      s.weight_key = key_of(nd, "weight");
      s.bias_key = key_of(nd, "bias");
      set_window(s, a);
      s.output_padding = a.output_padding;
      break;
    case OpKind::batch_norm:
      s.kind = StepKind::batch_norm;
      s.bn_keys = bn_keys_of(nd);
      break;
    case OpKind::relu:
      s.kind = StepKind::relu;
      break;
    case OpKind::add:
      s.kind = StepKind::add;
      break;
    case OpKind::concat:
      s.kind = StepKind::concat;
      break;
    case OpKind::max_pool:
      s.kind = StepKind::max_pool;
      set_window(s, a);
      s.kernel = a.kernel;
      read_halo(g, c.deferred, nd, s);
      break;
    case OpKind::upsample_nearest:
      s.kind = StepKind::upsample;
      s.scales.assign(a.scale.begin(), a.scale.end());
      break;
    case OpKind::pad: {
      s.kind = StepKind::pad;
      const auto& in = shapes[nd.inputs[0]];
      bool any = false;
      for (int d = g.dim - 1; d >= 0; --d) {
        const int64_t sz = in[2 + d], pd = (sz + a.multiple - 1) / a.multiple * a.multiple - sz;
        s.pads.push_back(0);
        s.pads.push_back(pd);
        any = any || pd > 0;
      }
      s.alias = !any;  // nothing to pad: the input itself
      break;
    }
    case OpKind::crop:
      s.kind = StepKind::crop;
      s.alias = true;
      break;
    case OpKind::halo:
      s.kind = StepKind::halo;
      if (opt.copy_free_halo && deferrable(g, c.readers, nd) &&
          numel_of(shapes[nd.inputs[0]]) * opt.element_bytes >= opt.copy_free_min_bytes * neighbour_sides(a)) {
        s.deferred = s.alias = true;  // the value is the tile: the reader grows what it needs
        c.deferred[nd.id] = 1;
      }
      break;
  }
}

// The step list: one per fusion group (see plan.hpp) or unfused node, in topological order.
void make_steps(const Graph& g, const std::vector<std::vector<int64_t>>& shapes, const PlanOptions& opt, Plan& p) {
  const int n = static_cast<int>(g.nodes.size());
  StepContext c{g, opt, std::vector<std::vector<int>>(n), std::vector<int>(n, 0), std::vector<int>(n, 0),
                std::vector<int>(n, -1), std::vector<int>(n, -1)};
  for (const auto& nd : g.nodes)
    for (int i : nd.inputs) c.readers[i].push_back(nd.id);
  p.step_of.assign(n, -1);
  if (opt.fuse && opt.upsample_conv)
    for (const auto& nd : g.nodes)
      if (nd.op == OpKind::upsample_nearest)
        if (int cv = c.single(nd.id, OpKind::conv); cv >= 0 && upsample_conv_applies(nd, g.nodes[cv])) {
          c.upsample_of[cv] = nd.id;
          c.absorbed[nd.id] = 1;
        }
  const auto& add_of = c.add_of;
  for (const auto& nd : g.nodes) {
    if (nd.id == 0 || c.absorbed[nd.id]) continue;
    // an add no conv took as its epilogue (that conv came before it, and absorbed it then),
    // read only by a conv: into that conv, which reads the sum
    if (opt.fuse && nd.op == OpKind::add && nd.inputs.size() == 2 && nd.inputs[0] != nd.inputs[1])
      if (int cv = c.single(nd.id, OpKind::conv); cv >= 0 && g.nodes[cv].inputs.size() == 1) {
        c.add_of[cv] = nd.id;
        c.absorbed[nd.id] = 1;
        continue;
      }
    PlanStep s;
    s.head = s.out = nd.id;
    s.name = nd.name;
    node_step(c, shapes, nd, s, p);
    // Inputs: for a fused group, the head's inputs plus the residual (a folded upsample's input;
    // a folded add's two inputs).
    s.in = s.from_upsample || (nd.op == OpKind::conv && add_of[nd.id] >= 0) ? g.nodes[static_cast<size_t>(nd.inputs[0])].inputs
                                                                            : nd.inputs;
    if (nd.op == OpKind::conv && add_of[nd.id] >= 0) s.x2 = s.in[1];
    if (s.z >= 0) s.in.push_back(s.z);
    if (s.cat_other >= 0) s.in.push_back(s.cat_other);
    s.shape = s.deferred ? shapes[nd.inputs[0]] : shapes[s.out];
    p.step_of[s.out] = static_cast<int>(p.steps.size());
    p.steps.push_back(std::move(s));
  }
}

// Liveness over the step order: each value's last reader, and the release lists.
void liveness(const Graph& g, Plan& p) {
  const int ns = static_cast<int>(p.steps.size());
  p.last_use.assign(g.nodes.size(), -1);
  for (int i = 0; i < ns; ++i)
    for (int v : p.steps[i].in) p.last_use[v] = std::max(p.last_use[v], i);
  p.last_use[g.output()] = ns;  // the output lives on
  p.last_use[0] = ns;           // the static input too
  for (int i = 0; i < ns; ++i) {
    auto& rel = p.steps[i].release;
    for (int v : p.steps[i].in)
      if (p.last_use[v] == i && std::find(rel.begin(), rel.end(), v) == rel.end()) rel.push_back(v);
  }
}

// In-place decisions and slot assignment, in step order (see plan.hpp).
void assign_memory(const Graph& g, const PlanOptions& opt, Plan& p) {
  const int n = static_cast<int>(g.nodes.size());
  std::vector<int> alias_value(n, 0);  // views: never overwritten
  alias_value[0] = 1;                  // nor is the graph input
  p.buffer_of.assign(n, -1);
  p.buffer_of[0] = 0;
  p.slot_of.assign(n, -1);
  std::vector<int> slot_users;  // live values per slot
  auto& slot_need = p.slot_bytes;
  auto free_slot = [&](int64_t bytes) {
    int best = -1;
    for (size_t k = 0; k < slot_users.size(); ++k)
      if (slot_users[k] == 0) {
        // best fit: the smallest that holds it, else the largest (it grows)
        if (best < 0) {
          best = static_cast<int>(k);
          continue;
        }
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
  for (int i = 0; i < static_cast<int>(p.steps.size()); ++i) {
    PlanStep& s = p.steps[static_cast<size_t>(i)];
    if (s.alias) alias_value[s.out] = 1;
    // Another value in v's storage that is read at this step or later (a live view of v).
    auto shares_live = [&](int v) {
      for (int u = 0; u < n; ++u)
        if (u != v && p.buffer_of[u] == p.buffer_of[v] && p.last_use[u] >= i) return true;
      return false;
    };
    auto overwritable = [&](int v) {
      return p.last_use[v] == i && v != 0 && !alias_value[v] && !shares_live(v);
    };
    if (s.kind == StepKind::relu && overwritable(s.in[0])) {
      s.inplace = s.in[0];
    } else if (s.kind == StepKind::add) {
      if (overwritable(s.in[0])) s.inplace = s.in[0];
      else if (overwritable(s.in[1])) s.inplace = s.in[1];
    }
    p.buffer_of[s.out] = s.out;
    if (s.inplace >= 0) {
      p.buffer_of[s.out] = p.buffer_of[s.inplace];
      p.slot_of[s.out] = p.slot_of[s.inplace];
      if (p.slot_of[s.out] >= 0) ++slot_users[static_cast<size_t>(p.slot_of[s.out])];
    } else if (s.kind == StepKind::relu || s.kind == StepKind::add || s.kind == StepKind::concat ||
               s.kind == StepKind::upsample || (s.kind == StepKind::pad && !s.alias) || s.cat_other >= 0) {
      s.slot = free_slot(numel_of(s.shape) * opt.element_bytes);
      p.slot_of[s.out] = s.slot;
      ++slot_users[static_cast<size_t>(s.slot)];
    } else if (s.alias && s.kind != StepKind::sigma) {
      // a view shares its source's storage and keeps its source's slot alive (one more user)
      const int src = s.in[0];
      p.buffer_of[s.out] = p.buffer_of[src];
      if (p.slot_of[src] >= 0) {
        p.slot_of[s.out] = p.slot_of[src];
        ++slot_users[static_cast<size_t>(p.slot_of[s.out])];
      }
    }
    for (int v : s.release)
      if (p.slot_of[v] >= 0) --slot_users[static_cast<size_t>(p.slot_of[v])];
  }
}

}  // namespace

Plan make_plan(const Graph& g, const std::vector<std::vector<int64_t>>& shapes, const PlanOptions& opt) {
  if (shapes.size() != g.nodes.size()) throw Error("native plan: one shape per node expected");
  Plan p;
  make_steps(g, shapes, opt, p);
  liveness(g, p);
  assign_memory(g, opt, p);
  return p;
}

}  // namespace pnp::nn::native
