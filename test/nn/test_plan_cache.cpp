// The native backend's persistent plan cache (src/nn/native/plan_cache.hpp), its file layer on
// the CPU: a stored choice reads back exactly (plan bytes included); an entry written for another
// GPU / version or another layout is a miss; damaged entries (truncated, trailing bytes, bad
// header, a graph with neither its plan nor its heuristic position) are misses with a reason, never errors; an unwritable
// directory is a store that fails with a reason; no temporary file is left behind; a network's
// list of layouts reads back in order and is a miss when foreign or damaged. (On a GPU,
// test_native's cuDNN graph case checks that a cached plan runs and gives the same output, and
// that a compile from the network's list captures without a warm-up run.)
#include "pnp_test.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "native/plan_cache.hpp"
#include "nn_test_util.hpp"

using pnp::nn::native::PlanCache;
using pnp::nn::native::PlanChoice;
using pnp::nn::test::remove_tree;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("pnp_plan_cache_" + std::to_string(::getpid()));
  TempDir() { remove_tree(path); }
  ~TempDir() { remove_tree(path); }
};

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

PlanChoice graph_choice() {
  PlanChoice c;
  c.graph = true;
  c.engine = "eng4_k24=3 k2=1";
  c.graph_ms = 6.317, c.generic_ms = 8.320;
  for (int i = 0; i < 3000; ++i) c.plan.push_back(static_cast<uint8_t>((i * 37 + 11) & 0xff));  // every byte value, '\n' too
  return c;
}

}  // namespace

TEST_CASE("plan cache: a stored choice reads back exactly, keyed by environment and layout") {
  TempDir t;
  const std::string env = "gpu=NVIDIA H200 sm90 cudnn=91900 cudnn_frontend=13200 torch=2.11.0 dtype=Float tf32=1";
  const std::string layout = "[1, 64, 4096, 4096][...] stride[1, 1] padding[1, 1]";
  const PlanCache cache((t.path / "native").string(), env);
  REQUIRE(cache.enabled());
  std::string why = "unset";
  CHECK_FALSE(cache.load(layout, &why).has_value());
  CHECK(why.empty());  // a plain miss: no entry yet
  const PlanChoice c = graph_choice();
  REQUIRE(cache.store(layout, c, &why));
  const auto r = cache.load(layout, &why);
  REQUIRE(r.has_value());
  CHECK(r->graph);
  CHECK(r->engine == c.engine);
  CHECK(r->graph_ms == c.graph_ms);  // 17 digits: the same double
  CHECK(r->generic_ms == c.generic_ms);
  CHECK(r->plan == c.plan);
  CHECK_FALSE(r->pnp);
  CHECK(std::isnan(r->pnp_ms));
  // pnp's kernel chosen over cuDNN's side (here the graph, whose plan is kept for executors
  // without the kernel)
  PlanChoice with_pnp = c;
  with_pnp.pnp = true, with_pnp.pnp_ms = 4.125;
  REQUIRE(cache.store(layout + " pnp", with_pnp));
  const auto wp = cache.load(layout + " pnp");
  REQUIRE(wp.has_value());
  CHECK(wp->pnp);
  CHECK(wp->pnp_ms == 4.125);
  CHECK(wp->graph);
  CHECK(wp->plan == c.plan);
  // the generic ops, with NaN times (a layout cuDNN had no plan for)
  PlanChoice ops;
  ops.engine = "none (no plan builds)";
  REQUIRE(cache.store(layout + " bias", ops));
  const auto o = cache.load(layout + " bias");
  REQUIRE(o.has_value());
  CHECK_FALSE(o->graph);
  CHECK(std::isnan(o->graph_ms));
  CHECK(o->plan.empty());
  // a graph whose plan cuDNN could not serialise: its heuristic position instead
  PlanChoice by_index = c;
  by_index.plan.clear();
  by_index.index = 2;
  REQUIRE(cache.store(layout + " index", by_index));
  const auto bi = cache.load(layout + " index");
  REQUIRE(bi.has_value());
  CHECK(bi->graph);
  CHECK(bi->index == 2);
  CHECK(bi->plan.empty());
  CHECK(r->index == -1);
  // another GPU or version, another layout: misses
  CHECK_FALSE(PlanCache(cache.dir(), env + " other").load(layout).has_value());
  CHECK_FALSE(cache.load(layout + " stride[2, 2]").has_value());
  // the same file under another environment's name (a collision, or a copied file) is refused
  const PlanCache other(cache.dir(), "gpu=NVIDIA A100 sm80");
  fs::copy_file(cache.path(layout), other.path(layout), fs::copy_options::overwrite_existing);
  CHECK_FALSE(other.load(layout, &why).has_value());
  CHECK(why.find("another GPU") != std::string::npos);
  // no temporary file left behind
  for (const auto& e : fs::directory_iterator(cache.dir())) CHECK(e.path().extension() == ".plan");
  // a store replaces the entry
  PlanChoice c2 = c;
  c2.plan.resize(10);
  c2.engine = "eng0";
  REQUIRE(cache.store(layout, c2));
  CHECK(cache.load(layout)->plan.size() == 10);
  CHECK(cache.load(layout)->engine == "eng0");
}

TEST_CASE("plan cache: damaged entries are misses with a reason; an unwritable directory fails to store") {
  TempDir t;
  const PlanCache cache((t.path / "native").string(), "env");
  const std::string layout = "layout";
  REQUIRE(cache.store(layout, graph_choice()));
  const std::string good = slurp(cache.path(layout));
  auto miss_with = [&](const std::string& text, const std::string& reason) {
    spit(cache.path(layout), text);
    std::string why;
    CHECK_FALSE(cache.load(layout, &why).has_value());
    CHECK_MESSAGE(why.find(reason) != std::string::npos, why);
  };
  miss_with(good.substr(0, good.size() - 1), "truncated");
  miss_with(good + "x", "trailing");
  miss_with("", "not a plan cache entry");
  miss_with("garbage\n", "not a plan cache entry");
  // an entry of the first format (no pnp arm) is a miss: chosen again
  std::string v1 = good;
  v1.replace(0, v1.find('\n'), "pnp-native-plan 1");
  miss_with(v1, "not a plan cache entry of this version");
  std::string bad_pnp = good;
  bad_pnp.replace(bad_pnp.find("\npnp no"), 7, "\npnp 17");
  miss_with(bad_pnp, "damaged header (pnp)");
  miss_with(good.substr(0, good.find("\nuse ")) + "\n", "damaged header");
  std::string bad_use = good;
  bad_use.replace(bad_use.find("\nuse graph"), 10, "\nuse maybe");
  miss_with(bad_use, "damaged header (use)");
  std::string bad_n = good;
  bad_n.replace(bad_n.find("plan_bytes "), 11, "plan_bytes x");
  miss_with(bad_n, "numbers");
  std::string huge = good;
  huge.replace(huge.find("plan_bytes "), 11, "plan_bytes 99999999999");
  miss_with(huge, "plan_bytes");
  // a graph choice whose plan is missing
  std::string noplan = good.substr(0, good.find("plan_bytes ")) + "plan_bytes 0\n";
  miss_with(noplan, "without its plan");
  // the directory cannot be made (a file in its place): store fails, with a reason, no throw
  spit((t.path / "blocker").string(), "x");
  const PlanCache blocked((t.path / "blocker" / "native").string(), "env");
  std::string why;
  CHECK_FALSE(blocked.store(layout, graph_choice(), &why));
  CHECK(why.find("cannot create") != std::string::npos);
  CHECK_FALSE(blocked.load(layout).has_value());
  // a disabled cache stores nothing
  CHECK_FALSE(PlanCache().enabled());
  CHECK_FALSE(PlanCache().store(layout, graph_choice()));
}

TEST_CASE("plan cache: a network's list of layouts reads back in order; foreign or damaged lists are misses") {
  TempDir t;
  const PlanCache cache((t.path / "native").string(), "env A");
  const std::string net = "ir 0123456789abcdef input [1, 1, 64, 64] channels_last 1";
  std::string why = "unset";
  CHECK_FALSE(cache.load_network(net, &why).has_value());
  CHECK(why.empty());  // no list yet
  const PlanCache::Layouts layouts{{"[1, 64, 64, 64]", "relu [1, 1, 64, 64][...] stride[1, 1] padding[1, 1]"},
                                   {"[1, 64, 64, 64]", "[1, 64, 64, 64][...] stride[1, 1] padding[1, 1]"},
                                   {"[1, 128, 32, 32]", "no-residual [1, 64, 64, 64][...] stride[2, 2] padding[0, 0]"}};
  REQUIRE(cache.store_network(net, layouts, &why));
  const auto r = cache.load_network(net, &why);
  REQUIRE(r.has_value());
  CHECK(*r == layouts);
  // its own file, beside the layouts' (which it does not replace)
  CHECK(cache.network_path(net) != cache.path(net));
  CHECK(fs::path(cache.network_path(net)).extension() == ".net");
  // another network, another environment: misses; a copied file is refused
  CHECK_FALSE(cache.load_network(net + " fuse 0").has_value());
  const PlanCache other(cache.dir(), "env B");
  CHECK_FALSE(other.load_network(net).has_value());
  fs::copy_file(cache.network_path(net), other.network_path(net), fs::copy_options::overwrite_existing);
  CHECK_FALSE(other.load_network(net, &why).has_value());
  CHECK(why.find("another GPU") != std::string::npos);
  // damaged lists
  const std::string good = slurp(cache.network_path(net));
  auto miss_with = [&](const std::string& text, const std::string& reason) {
    spit(cache.network_path(net), text);
    std::string w;
    CHECK_FALSE(cache.load_network(net, &w).has_value());
    CHECK_MESSAGE(w.find(reason) != std::string::npos, w);
  };
  miss_with(good.substr(0, good.rfind("layout ")), "truncated");
  miss_with(good + "shape x\n", "trailing");
  miss_with("pnp-native-plan 1\n", "not a network entry");
  std::string bad_n = good;
  bad_n.replace(bad_n.find("\nlayouts 3"), 10, "\nlayouts -3");
  miss_with(bad_n, "damaged header (layouts)");
  // an empty list is a list
  REQUIRE(cache.store_network(net, {}));
  CHECK(cache.load_network(net)->empty());
  for (const auto& e : fs::directory_iterator(cache.dir())) CHECK(e.path().string().find(".tmp.") == std::string::npos);
}
