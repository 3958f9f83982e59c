// The native backend's planner (src/nn/native/plan.hpp), without tensors: fusion groups and the
// param keys they record, on hand-built graphs and the DnCNN / DRUNet / UNet builders; and, by
// simulating every plan step by step, that each value is released right after its last reader,
// that a slot is written only when every value in it is dead, and that an in-place step only
// overwrites a value that dies there, owns its buffer and is not aliased by a live view.
#include "pnp_test.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "native/plan.hpp"
#include "nn_test_util.hpp"
#include "pnp/nn/models.hpp"

using namespace pnp;
using namespace pnp::nn;
using native::Plan;
using native::PlanStep;
using native::StepKind;

namespace {

Plan plan_for(const Graph& g, const std::vector<int64_t>& shape, bool fuse = true, int64_t element_bytes = 4) {
  return native::make_plan(g, infer_shapes(g, shape), {fuse, element_bytes});
}

// The step whose head is the node `name` (fails the test when there is none).
const PlanStep& step(const Graph& g, const Plan& p, const std::string& name) {
  const int id = g.node(name).id;
  for (const auto& s : p.steps)
    if (s.head == id) return s;
  FAIL("no step starts at " << name);
  return p.steps.front();
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

int64_t numel(const std::vector<int64_t>& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); }

// Small graphs: x [B, c, H, W] and 3x3 convolutions keeping 2 channels.
Graph small(int c = 2) {
  Graph g;
  g.architecture = "test";
  g.in_channels = g.out_channels = c;
  g.add("x", OpKind::input, {});
  return g;
}
int conv(Graph& g, const std::string& name, int x, bool bias = false) {
  Attrs a;
  a.in_channels = a.out_channels = 2;
  a.kernel = {3, 3};
  a.stride = a.padding = {1, 1};
  a.bias = bias;
  std::vector<Param> ps{{"weight", name + ".weight", {2, 2, 3, 3}, true}};
  if (bias) ps.push_back({"bias", name + ".bias", {2}, true});
  return g.add(name, OpKind::conv, {x}, a, ps).id;
}
int bn(Graph& g, const std::string& name, int x) {
  Attrs a;
  a.in_channels = a.out_channels = 2;
  a.eps = 1e-3;
  return g.add(name, OpKind::batch_norm, {x}, a,
               {{"weight", name + ".weight", {2}, true}, {"bias", name + ".bias", {2}, true},
                {"running_mean", name + ".running_mean", {2}, false}, {"running_var", name + ".running_var", {2}, false}})
      .id;
}
int op(Graph& g, const std::string& name, OpKind k, std::vector<int> in) { return g.add(name, k, std::move(in)).id; }
int noop_pad(Graph& g, const std::string& name, int x) {  // multiple 4 on 8 x 8: a view
  Attrs a;
  a.multiple = 4;
  a.mode = "replicate";
  return g.add(name, OpKind::pad, {x}, a).id;
}

// Replays the plan step by step over a model of the memory: every value is a (storage, version)
// pair; a slot is one storage; a view shares its source's storage; a write (into a slot, or in
// place) bumps the storage's version. Checks every property the executor relies on.
void check_plan(const Graph& g, const std::vector<std::vector<int64_t>>& shapes, const Plan& p, int64_t eb) {
  const int n = static_cast<int>(g.nodes.size()), ns = static_cast<int>(p.steps.size());
  const int out = g.output();
  // Views, from the IR alone: crop, sigma, and a pad that pads nothing.
  auto is_view = [&](const PlanStep& s) {
    const Node& nd = g.nodes[s.head];
    return nd.op == OpKind::crop || nd.op == OpKind::sigma_channel ||
           (nd.op == OpKind::pad && shapes[nd.inputs[0]] == shapes[nd.id]);
  };
  auto out_kernel = [](const PlanStep& s) {  // ops written into a slot unless in place
    const StepKind k = s.kind;
    return k == StepKind::relu || k == StepKind::add || k == StepKind::concat || k == StepKind::upsample ||
           k == StepKind::pad || s.cat_other >= 0;
  };
  std::vector<int> last(n, -1), released(n, 0);
  for (int i = 0; i < ns; ++i)
    for (int v : p.steps[i].in) last[v] = i;  // steps are in order: the last assignment is the max
  struct Val { bool live = false, view = false; int storage = -1, version = -1, slot = -1; };
  std::vector<Val> val(n);
  std::vector<int> version{0};  // storage 0: the static input
  std::map<int, int> slot_storage;
  std::map<int, int64_t> slot_max;
  auto fresh = [&] {  // a new storage
    version.push_back(0);
    return static_cast<int>(version.size()) - 1;
  };
  val[0] = {true, true, 0, 0, -1};  // the input is never overwritten: as good as a view
  for (int i = 0; i < ns; ++i) {
    const PlanStep& s = p.steps[i];
    CAPTURE(s.name);
    CHECK(s.shape == shapes[s.out]);
    CHECK(s.alias == is_view(s));
    for (int v : s.in) {
      REQUIRE(val[v].live);                                 // produced, not yet released
      CHECK(version[val[v].storage] == val[v].version);     // and not overwritten since
    }
    Val o{true};
    if (s.inplace >= 0) {
      const int v = s.inplace;
      CAPTURE(v);
      REQUIRE(std::count(s.in.begin(), s.in.end(), v) > 0);
      CHECK((s.kind == StepKind::relu || s.kind == StepKind::add));
      CHECK(last[v] == i);        // dies here
      CHECK_FALSE(val[v].view);   // owned: not the input, not a view
      for (int u = 0; u < n; ++u)  // aliased by no other live value (a view of it)
        if (u != v && val[u].live && val[u].storage == val[v].storage) FAIL_CHECK("live alias " << u << " of " << v);
      CHECK(s.slot == -1);
      o.storage = val[v].storage;
      o.slot = val[v].slot;
      o.version = ++version[o.storage];
    } else if (s.slot >= 0) {
      CHECK(out_kernel(s));
      CHECK_FALSE(s.alias);
      REQUIRE(s.slot < static_cast<int>(p.slot_bytes.size()));
      for (int u = 0; u < n; ++u)  // the slot holds no live value
        if (val[u].live && val[u].slot == s.slot) FAIL_CHECK("slot " << s.slot << " still holds " << u);
      const int64_t bytes = numel(s.shape) * eb;
      CHECK(p.slot_bytes[s.slot] >= bytes);
      slot_max[s.slot] = std::max(slot_max[s.slot], bytes);
      o.storage = slot_storage.count(s.slot) ? slot_storage[s.slot] : (slot_storage[s.slot] = fresh());
      o.slot = s.slot;
      o.version = ++version[o.storage];
    } else if (s.alias && s.kind != StepKind::sigma) {
      o = val[s.in[0]];  // same storage, same contents
      o.view = true;
    } else {
      // every out= op has a slot unless it is in place or a view
      CHECK((!out_kernel(s) || s.alias));
      o.view = s.alias;  // the sigma view
      o.storage = fresh();
      o.version = 0;
    }
    CHECK(p.slot_of[s.out] == o.slot);
    val[s.out] = o;
    // Releases: exactly the inputs read for the last time here (never the input or the output).
    std::set<int> expect;
    for (int v : s.in)
      if (last[v] == i && v != 0 && v != out) expect.insert(v);
    CHECK(std::set<int>(s.release.begin(), s.release.end()) == expect);
    CHECK(s.release.size() == expect.size());  // no duplicates
    for (int r : s.release) {
      ++released[r];
      val[r].live = false;
    }
  }
  for (const auto& nd : g.nodes) {  // every value dies once, after its last reader; x and y live on
    CAPTURE(nd.name);
    if (nd.id == 0 || nd.id == out) CHECK((released[nd.id] == 0 && val[nd.id].live));
    else CHECK(released[nd.id] == (last[nd.id] >= 0 ? 1 : 0));
    if (last[nd.id] >= 0 && nd.id != 0 && nd.id != out) CHECK(p.last_use[nd.id] == last[nd.id]);
  }
  CHECK(p.last_use[out] == ns);
  CHECK(version[val[out].storage] == val[out].version);
  for (const auto& [k, b] : slot_max) CHECK(p.slot_bytes[k] == b);  // slots are as large as needed, no more
  CHECK(slot_max.size() == p.slot_bytes.size());
}

void check_plan(const Graph& g, const std::vector<int64_t>& shape, bool fuse = true, int64_t eb = 4) {
  CAPTURE(shape_string(shape));
  CAPTURE(fuse);
  CAPTURE(eb);
  const auto shapes = infer_shapes(g, shape);
  check_plan(g, shapes, native::make_plan(g, shapes, {fuse, eb}), eb);
}

}  // namespace

TEST_CASE("native plan: conv fusion groups and the keys they record (hand-built graphs)") {
  // conv(bias) -> relu; conv -> bn -> relu; conv -> add(., x) -> relu
  Graph g = small();
  int h = op(g, "r1", OpKind::relu, {conv(g, "c1", 0, true)});
  h = op(g, "r2", OpKind::relu, {bn(g, "b2", conv(g, "c2", h))});
  op(g, "r3", OpKind::relu, {op(g, "s3", OpKind::add, {conv(g, "c3", h, true), 0})});
  Plan p = plan_for(g, {1, 2, 8, 8});
  CHECK(p.fusions == std::vector<std::string>{"conv+bias+relu:c1", "conv+bn+relu:c2", "conv+bias+add+relu:c3"});
  REQUIRE(p.steps.size() == 3);
  const PlanStep &s1 = p.steps[0], &s2 = p.steps[1], &s3 = p.steps[2];
  CHECK((s1.kind == StepKind::conv && s1.relu && s1.z == -1 && s1.bn == -1));
  CHECK((s1.weight_key == "c1.weight" && s1.bias_key == "c1.bias" && s1.out == g.node("r1").id));
  CHECK((s2.bn == g.node("b2").id && s2.relu && s2.bias_key.empty()));
  CHECK((s2.bn_keys.weight == "b2.weight" && s2.bn_keys.bias == "b2.bias"));
  CHECK((s2.bn_keys.mean == "b2.running_mean" && s2.bn_keys.var == "b2.running_var" && s2.bn_keys.eps == 1e-3));
  CHECK((s3.z == 0 && s3.relu && s3.out == g.output()));
  CHECK(s3.in == std::vector<int>{g.node("r2").id, 0});
  CHECK(p.step_of[g.node("r2").id] == 1);
  CHECK(p.step_of[g.node("b2").id] == -1);  // inside a group
  check_plan(g, {1, 2, 8, 8});

  // fuse off: BN is still folded, the ReLUs run in place and the add overwrites the conv output.
  Plan q = plan_for(g, {1, 2, 8, 8}, false);
  CHECK(q.fusions == std::vector<std::string>{"conv+bn:c2"});
  CHECK(q.steps.size() == 7);
  CHECK(step(g, q, "r2").inplace == g.node("b2").id);
  CHECK(step(g, q, "s3").inplace == g.node("c3").id);
  CHECK(q.slot_bytes.empty());
  check_plan(g, {1, 2, 8, 8}, false);
}

TEST_CASE("native plan: an add read only by a conv folds into it (add+conv), unless a conv took it first") {
  // r1 = relu(conv(x)), r2 = relu(conv(x)); s = r1 + r2 read only by c3 (bias, BN, ReLU): the
  // conv reads the sum. t = c3's value + r1 is read by c4 and c5: not folded. u = conv(t) + t is
  // c4's epilogue (conv+add), so c6, u's only reader, does not take it.
  Graph g = small();
  const int r1 = op(g, "r1", OpKind::relu, {conv(g, "c1", 0)});
  const int r2 = op(g, "r2", OpKind::relu, {conv(g, "c2", 0)});
  const int s = op(g, "s", OpKind::add, {r1, r2});
  const int h = op(g, "r3", OpKind::relu, {bn(g, "b3", conv(g, "c3", s, true))});
  const int t = op(g, "t", OpKind::add, {h, r1});
  const int u = op(g, "u", OpKind::add, {conv(g, "c4", t), t});
  op(g, "y", OpKind::add, {conv(g, "c6", u), conv(g, "c5", t)});
  Plan p = plan_for(g, {1, 2, 8, 8});
  CHECK(has(p.fusions, "add+conv+bn+relu:c3"));  // (the pattern names the BN, its bias folded in)
  const PlanStep& c3 = step(g, p, "c3");
  CHECK(c3.in == std::vector<int>{r1, r2});
  CHECK(c3.x2 == r2);
  CHECK(p.step_of[s] == -1);
  CHECK(step(g, p, "t").kind == StepKind::add);  // two readers
  CHECK(has(p.fusions, "conv+add:c4"));
  CHECK(step(g, p, "c4").out == u);
  CHECK(step(g, p, "c6").x2 == -1);  // u is a conv's epilogue, not an add step
  CHECK(step(g, p, "c5").x2 == -1);
  CHECK(p.last_use[r1] == p.step_of[t]);  // r1 read by c3 (through the sum) and by t
  check_plan(g, {1, 2, 8, 8});
  // fuse off: the add is a step of its own
  Plan q = plan_for(g, {1, 2, 8, 8}, false);
  CHECK(step(g, q, "s").kind == StepKind::add);
  CHECK(step(g, q, "c3").x2 == -1);
  check_plan(g, {1, 2, 8, 8}, false);
}

TEST_CASE("native plan: a ×2 upsample folds only into a lone 3×3, stride-1, padding-1 conv reader") {
  Graph g = small();
  Attrs up;
  up.scale = {2, 2};
  const int u1 = g.add("u1", OpKind::upsample_nearest, {0}, up).id;
  const int c1 = conv(g, "c1", u1, true);  // folds: conv+bias
  const int u2 = g.add("u2", OpKind::upsample_nearest, {c1}, up).id;
  const int c2 = conv(g, "c2", u2);  // u2 has a second reader (the add): not folded
  const int s = op(g, "s", OpKind::add, {c2, u2});
  up.scale = {2, 1};
  const int u3 = g.add("u3", OpKind::upsample_nearest, {s}, up).id;
  op(g, "r3", OpKind::relu, {conv(g, "c3", u3)});  // scale 2 x 1: not folded
  Plan p = plan_for(g, {1, 2, 3, 5});
  CHECK(p.fusions == std::vector<std::string>{"upsample+conv+bias:c1", "conv+add:c2", "conv+relu:c3"});
  CHECK((step(g, p, "c1").kind == StepKind::conv_transpose && step(g, p, "c1").in == std::vector<int>{0}));
  CHECK((step(g, p, "c2").kind == StepKind::conv && step(g, p, "u2").kind == StepKind::upsample));
  CHECK((step(g, p, "c3").kind == StepKind::conv && step(g, p, "u3").kind == StepKind::upsample));
  CHECK(p.step_of[u1] == -1);
  check_plan(g, {1, 2, 3, 5});
  // fuse off: nothing folds
  Plan q = plan_for(g, {1, 2, 3, 5}, false);
  CHECK(step(g, q, "u1").kind == StepKind::upsample);
  check_plan(g, {1, 2, 3, 5}, false);
}

TEST_CASE("native plan: no fusion through a value with two readers, nor before the residual exists") {
  Graph g = small();
  const int c1 = conv(g, "c1", 0);
  const int c2 = conv(g, "c2", 0);
  const int s = op(g, "s", OpKind::add, {c1, c2});  // c1 cannot take the add (c2 is computed after it); c2 can
  const int c3 = conv(g, "c3", s);
  const int r3 = op(g, "r3", OpKind::relu, {c3});  // c3 has two readers: r3 and y
  op(g, "y", OpKind::add, {c3, r3});
  Plan p = plan_for(g, {1, 2, 8, 8});
  CHECK(p.fusions == std::vector<std::string>{"conv+add:c2"});
  CHECK((step(g, p, "c1").z == -1 && step(g, p, "c1").out == c1));
  CHECK((step(g, p, "c2").z == c1 && step(g, p, "c2").out == s));
  CHECK(step(g, p, "c2").in == std::vector<int>{0, c1});
  CHECK(step(g, p, "c3").out == c3);
  // r3 cannot run in place (c3 is read later), so it writes a slot; y overwrites c3 (its last reader).
  CHECK((step(g, p, "r3").inplace == -1 && step(g, p, "r3").slot == 0));
  CHECK(step(g, p, "y").inplace == c3);
  CHECK(p.slot_bytes == std::vector<int64_t>{2 * 8 * 8 * 4});
  check_plan(g, {1, 2, 8, 8});
}

TEST_CASE("native plan: DnCNN, DRUNet and UNet get their fusion groups") {
  {
    Graph g = test::make("dncnn", 2, 3, 3, {6}, 4);
    Plan p = plan_for(g, {2, 3, 13, 10});
    CHECK(p.fusions == std::vector<std::string>{"conv+bias+relu:in_conv", "conv+bias+relu:conv_list.0",
                                                "conv+bias+relu:conv_list.1", "conv+bias+add:out_conv"});
    const PlanStep& o = step(g, p, "out_conv");
    CHECK((o.z == 0 && !o.relu && o.out == g.output()));
    CHECK(p.slot_bytes.empty());  // convolutions only
  }
  {
    Graph g = test::make("drunet", 2, 3, 3, {2, 3, 4, 5}, 1);
    Plan p = plan_for(g, {1, 3, 13, 10});
    CHECK(p.fusions.size() == 15);
    CHECK(p.uses_sigma);
    for (std::string b : {"m_down1.0", "m_down2.0", "m_down3.0", "m_body", "m_up3.1", "m_up2.1", "m_up1.1"}) {
      CAPTURE(b);
      // ResBlock x + conv(relu(conv(x))): conv+relu, then conv+add with the block input as z.
      CHECK(has(p.fusions, "conv+relu:" + b + ".res.0"));
      CHECK(has(p.fusions, "conv+add:" + b + ".res.2"));
      const PlanStep& r0 = step(g, p, b + ".res.0");
      const PlanStep& r2 = step(g, p, b + ".res.2");
      CHECK((r0.relu && r0.out == g.node(b + ".res.1").id));
      CHECK((r2.z == g.node(b + ".res.0").inputs[0] && !r2.relu && r2.out == g.node(b).id));
    }
    for (std::string a : {"m_up3.skip", "m_up2.skip", "m_up1.skip"})
      CHECK(step(g, p, a).kind == StepKind::add);  // read by a transposed conv: not fused
    // the last skip add (x + x1) folds into the tail, its only reader: the conv reads the sum
    CHECK(has(p.fusions, "add+conv:m_tail"));
    const Node& skip = g.node("m_tail.skip");
    const PlanStep& tail = step(g, p, "m_tail");
    CHECK(tail.in == skip.inputs);
    CHECK(tail.x2 == skip.inputs[1]);
    CHECK(p.step_of[skip.id] == -1);
    for (const auto& s : p.steps) CHECK(s.head != skip.id);
    // x1 (the head's output) lives until the tail reads it
    CHECK(p.last_use[skip.inputs[1]] == p.step_of[tail.out]);
    CHECK(step(g, p, "sigma").alias);
    CHECK(step(g, p, "crop").alias);
    CHECK_FALSE(step(g, p, "pad").alias);  // 13 x 10 is padded to 16 x 16
    CHECK(step(g, p, "pad").pads == std::vector<int64_t>{0, 6, 0, 3});
    CHECK(plan_for(g, {1, 3, 16, 8}).steps[2].alias);  // already aligned: the pad is a view
  }
  {
    Graph g = test::make("unet", 2, 3, 3, {3, 4});
    Plan p = plan_for(g, {2, 3, 7, 9});
    CHECK(p.fusions.size() == 8);
    for (std::string c : {"Conv1.0", "Conv1.3", "Conv2.0", "Conv2.3", "Up_conv2.0", "Up_conv2.3"}) {
      CAPTURE(c);
      CHECK(has(p.fusions, "conv+bn+relu:" + c));
      const PlanStep& s = step(g, p, c);
      const Node& b = g.nodes[g.node(c).id + 1];  // the BN right after the conv
      CHECK((s.bn == b.id && s.relu && s.z == -1));
      CHECK((s.bn_keys.mean == b.name + ".running_mean" && s.bn_keys.eps == 1e-5));
      CHECK(s.weight_key == c + ".weight");
    }
    CHECK(has(p.fusions, "conv+bias+add:Conv_1x1"));
    CHECK(step(g, p, "Conv_1x1").z == g.node("pad").id);
    // the ×2 upsample folds into Up2.1: one transposed conv (stride 2, padding 1) on its input,
    // and the concat reading it (cat2: the skip Conv1's output first) into the same step
    CHECK(has(p.fusions, "upsample+conv+bn+relu+concat:Up2.1"));
    const PlanStep& u = step(g, p, "Up2.1");
    CHECK((u.kind == StepKind::conv_transpose && u.from_upsample && u.relu && u.bn == g.node("Up2.2").id));
    const int skip = g.node("Conv1.5").id, cat = g.node("cat2").id;
    CHECK((u.cat_other == skip && !u.cat_first && u.out == cat && u.slot >= 0));
    CHECK(u.in == std::vector<int>{g.node("Up2.0").inputs[0], skip});
    CHECK((u.stride == std::vector<int64_t>{2, 2} && u.padding == std::vector<int64_t>{1, 1}));
    CHECK(u.output_padding == std::vector<int64_t>{0, 0});
    const auto shapes = infer_shapes(g, {2, 3, 7, 9});
    CHECK(u.shape == shapes[static_cast<size_t>(cat)]);
    CHECK(p.step_of[g.node("Up2.0").id] == -1);  // no upsample step
    CHECK(p.step_of[cat] == static_cast<int>(&u - p.steps.data()));  // nor a concat step
    for (const auto& s : p.steps) CHECK((s.kind != StepKind::upsample && s.kind != StepKind::concat));
    // upsample_conv off: the upsample and the concat are steps of their own again
    const Plan o = native::make_plan(g, shapes, {true, 4, true, int64_t{128} << 20, false});
    CHECK(has(o.fusions, "conv+bn+relu:Up2.1"));
    CHECK(step(g, o, "Up2.0").kind == StepKind::upsample);
    CHECK((step(g, o, "Up2.1").kind == StepKind::conv && step(g, o, "Up2.1").cat_other == -1));
    CHECK(step(g, o, "cat2").kind == StepKind::concat);
    // fuse off: only the BN folds
    Plan q = plan_for(g, {2, 3, 7, 9}, false);
    CHECK(q.fusions.size() == 7);
    for (const auto& f : q.fusions) CHECK(f.rfind("conv+bn:", 0) == 0);
    CHECK(step(g, q, "Conv1.2").inplace == g.node("Conv1.1").id);
  }
}

TEST_CASE("native plan: liveness, slots and in-place on the reference builders") {
  struct C { std::string arch; int dim, cin, cout; std::vector<int64_t> f; int blocks; bool pad; std::vector<int64_t> shape; };
  const std::vector<C> cases = {
      {"dncnn", 2, 3, 3, {6}, 4, true, {2, 3, 13, 10}},        {"dncnn", 3, 1, 1, {4}, 3, true, {1, 1, 7, 6, 5}},
      {"drunet", 2, 3, 3, {2, 3, 4, 5}, 1, true, {1, 3, 13, 10}}, {"drunet", 2, 1, 1, {2, 3, 4, 5}, 2, true, {1, 1, 16, 16}},
      {"drunet", 2, 1, 1, {2, 3, 4, 5}, 1, false, {1, 1, 16, 8}}, {"drunet", 3, 1, 1, {2, 3, 3, 4}, 1, true, {1, 1, 9, 8, 10}},
      {"unet", 2, 3, 3, {3, 4}, -1, true, {2, 3, 7, 9}},       {"unet", 2, 1, 1, {3, 4, 5}, -1, true, {1, 1, 16, 16}},
      {"unet", 2, 1, 1, {3, 4, 5}, -1, true, {1, 1, 13, 11}},  {"unet", 2, 1, 2, {3, 4}, -1, true, {1, 1, 7, 9}},
      {"unet", 2, 1, 1, {3, 4}, -1, false, {1, 1, 8, 8}},      {"unet", 3, 1, 1, {2, 3}, -1, true, {1, 1, 5, 6, 4}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.arch);
    Graph g = test::make(c.arch, c.dim, c.cin, c.cout, c.f, c.blocks, c.pad);
    for (bool fuse : {true, false})
      for (int64_t eb : {2, 4, 8}) check_plan(g, c.shape, fuse, eb);
  }
  // UNet 3 scales: the slot-written values (pad, 2 upsamples, 2 concats) share fewer than 5 slots.
  Graph g = test::make("unet", 2, 1, 1, {3, 4, 5});
  Plan p = plan_for(g, {1, 1, 16, 16});
  CHECK((p.slot_bytes.size() >= 1 && p.slot_bytes.size() < 5));
  CHECK(p.total_slot_bytes() == plan_for(g, {1, 1, 16, 16}, true, 8).total_slot_bytes() / 2);
}

TEST_CASE("native plan: slots are reused only when empty, sized for their largest value") {
  {  // u (2 x 32 x 32) leaves slot 0 to the smaller concat (4 x 8 x 8): the slot keeps u's size
    Graph g = small();
    Attrs up, mp;
    up.scale = {4, 4};
    mp.kernel = mp.stride = {4, 4};
    mp.padding = {0, 0};
    const int u = g.add("u", OpKind::upsample_nearest, {0}, up).id;
    const int m = g.add("m", OpKind::max_pool, {u}, mp).id;
    op(g, "cat", OpKind::concat, {m, 0});
    Plan p = plan_for(g, {1, 2, 8, 8});
    CHECK(step(g, p, "u").slot == 0);
    CHECK(step(g, p, "m").slot == -1);  // pooling writes where ATen puts it
    CHECK(step(g, p, "cat").slot == 0);
    CHECK(p.slot_bytes == std::vector<int64_t>{2 * 32 * 32 * 4});
    check_plan(g, {1, 2, 8, 8});
  }
  {  // a view keeps its source's slot: the add may not take slot 0 while the view of cat lives
    Graph g = small();
    const int cat = op(g, "cat", OpKind::concat, {0, 0});
    const int v = noop_pad(g, "view", cat);  // cat dies here; its view lives on
    const int a = op(g, "a", OpKind::add, {0, 0});
    op(g, "y", OpKind::concat, {v, a});
    Plan p = plan_for(g, {1, 2, 8, 8});
    CHECK(step(g, p, "cat").slot == 0);
    CHECK(p.slot_of[v] == 0);
    CHECK(step(g, p, "a").slot == 1);
    CHECK(p.slot_bytes.size() == 3);
    check_plan(g, {1, 2, 8, 8});
  }
}

TEST_CASE("native plan: in-place reuse only of owned values that no live view aliases") {
  // x -> c1 -> view (crop to x, or a no-op pad) ; s = c1 + x ; y = s + view.
  // c1's last direct reader is s, but its view is read after s: s must not overwrite c1.
  for (bool crop : {true, false}) {
    CAPTURE(crop);
    Graph g = small();
    const int c1 = conv(g, "c1", 0);
    const int v = crop ? g.add("view", OpKind::crop, {c1, 0}).id : noop_pad(g, "view", c1);
    const int s = op(g, "s", OpKind::add, {c1, 0});
    op(g, "y", OpKind::add, {s, v});
    Plan p = plan_for(g, {1, 2, 8, 8});
    CHECK(p.fusions.empty());  // c1 has two readers
    CHECK(step(g, p, "view").alias);
    CHECK((step(g, p, "s").inplace == -1 && step(g, p, "s").slot >= 0));  // not c1 (live view), not x (input)
    CHECK(step(g, p, "y").inplace == s);   // s is owned and dies at y; the view may not be overwritten
    check_plan(g, {1, 2, 8, 8});

    // The same with the view read before the add: it is dead by then, and c1 is overwritten.
    Graph h = small();
    const int d1 = conv(h, "c1", 0);
    const int w = crop ? h.add("view", OpKind::crop, {d1, 0}).id : noop_pad(h, "view", d1);
    const int r = op(h, "r", OpKind::relu, {w});  // a view is never overwritten: r writes a slot
    op(h, "s", OpKind::add, {d1, r});
    Plan q = plan_for(h, {1, 2, 8, 8});
    CHECK(step(h, q, "r").inplace == -1);
    CHECK(step(h, q, "s").inplace == d1);
    check_plan(h, {1, 2, 8, 8});
  }
  {  // a ReLU and a view of a view (crop of a no-op pad): still refused while the outer view lives
    Graph g = small();
    const int c1 = conv(g, "c1", 0);
    const int v2 = g.add("view2", OpKind::crop, {noop_pad(g, "view1", c1), 0}).id;
    const int r = op(g, "r", OpKind::relu, {c1});
    op(g, "y", OpKind::add, {r, v2});
    Plan p = plan_for(g, {1, 2, 8, 8});
    CHECK((step(g, p, "r").inplace == -1 && step(g, p, "r").slot >= 0));
    CHECK(p.buffer_of[v2] == c1);
    check_plan(g, {1, 2, 8, 8});
  }
  {  // the input, the sigma view and a no-op pad of the input are never overwritten
    Graph g = small(1);
    const int sg = g.add("sigma", OpKind::sigma_channel, {0}).id;
    const int a = op(g, "a", OpKind::add, {0, sg});
    op(g, "b", OpKind::add, {noop_pad(g, "p", 0), a});
    Plan p = plan_for(g, {1, 1, 8, 8});
    CHECK(p.uses_sigma);
    CHECK((step(g, p, "a").inplace == -1 && step(g, p, "a").slot >= 0));
    CHECK(step(g, p, "b").inplace == a);  // the only owned input
    check_plan(g, {1, 1, 8, 8});
  }
}

TEST_CASE("native plan: copy-free halos are deferred into their one conv or max_pool reader") {
  const std::map<std::string, Graph> nets{{"dncnn", test::make("dncnn", 2, 1, 1, {6}, 3)},
                                           {"drunet", test::make("drunet", 2, 1, 1, {2, 3, 4, 5}, 1)},
                                           {"unet", test::make("unet", 2, 1, 1, {3, 4, 5})}};
  for (const auto& [arch, g0] : nets) {
    CAPTURE(arch);
    // a middle slab of three: neighbours on both sides of axis 0
    const Graph g = with_layer_halos(g0, {{true, true, true}, {false, false, false}});
    const std::vector<int64_t> shape{1, 1, 16, 24};
    const auto shapes = infer_shapes(g, shape);
    const Plan p = native::make_plan(g, shapes, {true, 4, true, 0});
    const Plan q = native::make_plan(g, shapes, {true, 4, false, 0});
    // a threshold of just over half the 1-channel input tile's bytes per side (2 sides): halos
    // of 1-channel values grow a copy, those of wider values stay copy-free
    const Plan big = native::make_plan(g, shapes, {true, 4, true, 16 * 24 * 4 / 2 + 1});
    for (const PlanStep& s : big.steps)
      if (s.kind == StepKind::halo) {
        const auto& in = shapes[g.nodes[static_cast<size_t>(s.head)].inputs[0]];
        CHECK(s.deferred == (in[1] * in[2] * in[3] * 4 >= 2 * (16 * 24 * 4 / 2 + 1)));
      }
    int halos = 0, deferred = 0;
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const PlanStep& s = p.steps[i];
      if (s.kind != StepKind::halo) {
        if (s.halo >= 0) {  // its reader: the op's own padding back on axis 0, the halo's on axis 1
          const Node& h = g.nodes[static_cast<size_t>(s.halo)];
          CHECK(p.steps[static_cast<size_t>(p.step_of[h.id])].deferred);
          CHECK(s.tile_padding[0] == h.attrs.padding[0]);
          CHECK(s.padding[0] == 0);
          CHECK(s.tile_padding[1] == s.padding[1]);
        }
        continue;
      }
      ++halos;
      CHECK_FALSE(q.steps[i].deferred);  // off: every halo grows a copy
      if (!s.deferred) continue;
      ++deferred;
      CHECK(s.alias);
      CHECK(s.shape == shapes[g.nodes[static_cast<size_t>(s.head)].inputs[0]]);  // its value is the tile
      // exactly one step reads it, and that step grows it
      int readers = 0;
      for (const PlanStep& r : p.steps)
        if (std::find(r.in.begin(), r.in.end(), s.out) != r.in.end()) {
          ++readers;
          CHECK(r.halo == s.out);
          CHECK((r.kind == StepKind::conv || r.kind == StepKind::max_pool));
        }
      CHECK(readers == 1);
    }
    CHECK(halos > 0);
    CHECK(deferred == halos);  // every 3x3 stride-1 window of these networks qualifies
  }
}
