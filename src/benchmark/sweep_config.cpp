// The sweep TOML (include/pnp/benchmark.hpp): its own small schema, errors name key and line.
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "pnp/benchmark.hpp"
#include "pnp/config/toml_schema.hpp"
#include "pnp/core.hpp"

namespace pnp::benchmark {

namespace {

struct Ctx {
  std::string source;
  [[noreturn]] void bad(const toml::node& n, const std::string& key, const std::string& msg) const {
    throw InputError(source + ":" + std::to_string(n.source().begin.line) + ": " + key + ": " + msg);
  }
};

// Typed reads through the shared schema converters (pnp/config/toml_schema.hpp), located at the node.
int64_t get_int(const Ctx& c, const toml::node& n, const std::string& key, int64_t lo, int64_t hi) {
  return toml_schema::to_int(n, toml_schema::where_of(n, c.source), key, lo, hi);
}
double get_float(const Ctx& c, const toml::node& n, const std::string& key, double lo, double hi) {
  return toml_schema::to_float(n, toml_schema::where_of(n, c.source), key, lo, hi);
}
bool get_bool(const Ctx& c, const toml::node& n, const std::string& key) {
  return toml_schema::to_bool(n, toml_schema::where_of(n, c.source), key);
}
std::string get_string(const Ctx& c, const toml::node& n, const std::string& key, const std::vector<std::string>& choices = {}) {
  auto w = toml_schema::where_of(n, c.source);
  return choices.empty() ? toml_schema::as_string(n, w, key) : toml_schema::to_choice(n, w, key, choices);
}
std::vector<std::string> get_strings(const Ctx& c, const toml::node& n, const std::string& key,
                                     const std::vector<std::string>& choices = {}) {
  return toml_schema::to_choices(n, toml_schema::where_of(n, c.source), key, choices);
}
std::vector<int64_t> get_ints(const Ctx& c, const toml::node& n, const std::string& key, size_t min_len, size_t max_len,
                              int64_t lo, int64_t hi) {
  return toml_schema::to_ints(n, toml_schema::where_of(n, c.source), key, min_len, max_len, lo, hi);
}
using toml_schema::describe;
using toml_schema::join;

const std::vector<std::string> kArchitectures{"dncnn", "drunet", "unet", "identity"};

// Walks a table: each present key is handed to its setter; unknown keys are errors.
void walk(const Ctx& c, const toml::table& t, const std::string& section,
          const std::map<std::string, std::function<void(const toml::node&, const std::string&)>>& keys) {
  std::vector<std::string> known;
  for (const auto& [k, f] : keys) known.push_back(k);
  for (const auto& [k, node] : t) {
    const std::string key = section + "." + std::string(k.str());
    auto it = keys.find(std::string(k.str()));
    if (it == keys.end()) c.bad(node, key, "unknown key (known keys in [" + section + "]: " + join(known) + ")");
    it->second(node, key);
  }
}

std::string toml_list(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", \"" : "\"") + v[i] + "\"";
  return s + "]";
}
std::string toml_ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}
const char* tf(bool b) { return b ? "true" : "false"; }

}  // namespace

SweepConfig parse_sweep(const std::string& text, const std::string& source) {
  Ctx c{source};
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InputError(source + ":" + std::to_string(e.source().begin.line) + ": TOML syntax error: " +
                     std::string(e.description()));
  }
  SweepConfig s;
  using Setter = std::function<void(const toml::node&, const std::string&)>;
  std::map<std::string, Setter> sections;
  sections["sweep"] = [&](const toml::node& n, const std::string& key) {
    if (!n.is_table()) c.bad(n, key, "must be a table");
    walk(c, *n.as_table(), "sweep",
         {{"architectures", [&](const toml::node& v, const std::string& k) { s.architectures = get_strings(c, v, k, kArchitectures); }},
          {"channels", [&](const toml::node& v, const std::string& k) { s.channels = get_int(c, v, k, 1, 64); }},
          {"batch", [&](const toml::node& v, const std::string& k) { s.batch = get_int(c, v, k, 1, 1024); }},
          {"shapes",
           [&](const toml::node& v, const std::string& k) {
             const toml::array* a = v.as_array();
             if (!a) c.bad(v, k, "must be an array of spatial shapes like [[512, 512], [128, 128, 128]], got " + describe(v));
             if (a->empty()) c.bad(v, k, "must not be empty");
             s.shapes.clear();
             for (const auto& e : *a) s.shapes.push_back(get_ints(c, e, k, 2, 3, 1, int64_t{1} << 20));
           }},
          {"backends", [&](const toml::node& v, const std::string& k) { s.backends = get_strings(c, v, k); }},
          {"warmup", [&](const toml::node& v, const std::string& k) { s.warmup = get_int(c, v, k, 1, 1000); }},
          {"timed", [&](const toml::node& v, const std::string& k) { s.timed = get_int(c, v, k, 1, 10000); }},
          {"stable", [&](const toml::node& v, const std::string& k) { s.stable = get_int(c, v, k, 1, 10000); }},
          {"device",
           [&](const toml::node& v, const std::string& k) {
             s.device = get_string(c, v, k);
             if (s.device != "cpu" && s.device != "cuda" && s.device.rfind("cuda:", 0) != 0)
               c.bad(v, k, "\"" + s.device + "\" is not one of: cpu, cuda, cuda:N");
           }},
          {"dtype", [&](const toml::node& v, const std::string& k) { s.dtype = get_string(c, v, k, {"float32", "float64", "bfloat16"}); }},
          {"sigma", [&](const toml::node& v, const std::string& k) { s.sigma = get_float(c, v, k, 0.0, 1e3); }},
          {"seed", [&](const toml::node& v, const std::string& k) { s.seed = get_int(c, v, k, 0, INT64_MAX); }}});
    if (s.stable > s.timed) c.bad(n, "sweep.stable", std::to_string(s.stable) + " is larger than sweep.timed = " + std::to_string(s.timed));
  };
  sections["native"] = [&](const toml::node& n, const std::string& key) {
    if (!n.is_table()) c.bad(n, key, "must be a table");
    walk(c, *n.as_table(), "native",
         {{"channels_last", [&](const toml::node& v, const std::string& k) { s.native.channels_last = get_bool(c, v, k); }},
          {"fuse", [&](const toml::node& v, const std::string& k) { s.native.fuse = get_bool(c, v, k); }},
          {"autotune", [&](const toml::node& v, const std::string& k) { s.native.autotune = get_bool(c, v, k); }},
          {"cuda_graph", [&](const toml::node& v, const std::string& k) { s.native.cuda_graph = get_bool(c, v, k); }},
          {"warmup_calls",
           [&](const toml::node& v, const std::string& k) { s.native.warmup_calls = static_cast<int>(get_int(c, v, k, 1, 100)); }},
          {"cudnn_fused_bf16", [&](const toml::node& v, const std::string& k) { s.native.cudnn_fused_bf16 = get_bool(c, v, k); }},
          {"cudnn_epilogues", [&](const toml::node& v, const std::string& k) { s.native.cudnn_epilogues = get_bool(c, v, k); }},
          {"cudnn_graph_convs",
           [&](const toml::node& v, const std::string& k) { s.native.cudnn_graph_convs = get_bool(c, v, k); }},
          {"cudnn_benchmark", [&](const toml::node& v, const std::string& k) { s.native.cudnn_benchmark = get_bool(c, v, k); }},
          {"upsample_conv", [&](const toml::node& v, const std::string& k) { s.native.upsample_conv = get_bool(c, v, k); }},
          {"narrow_convs", [&](const toml::node& v, const std::string& k) { s.native.narrow_convs = get_bool(c, v, k); }},
          {"wgmma_convs", [&](const toml::node& v, const std::string& k) { s.native.wgmma_convs = get_bool(c, v, k); }},
          {"nhwc_kernels", [&](const toml::node& v, const std::string& k) { s.native.nhwc_kernels = get_bool(c, v, k); }},
          {"parallel_plan_builds",
           [&](const toml::node& v, const std::string& k) { s.native.parallel_plan_builds = get_bool(c, v, k); }},
          {"plan_cache", [&](const toml::node& v, const std::string& k) { s.native_plan_cache = get_bool(c, v, k); }}});
  };
  sections["inductor"] = [&](const toml::node& n, const std::string& key) {
    if (!n.is_table()) c.bad(n, key, "must be a table");
    walk(c, *n.as_table(), "inductor",
         {{"mode", [&](const toml::node& v, const std::string& k) { s.inductor.mode = get_string(c, v, k, {"max-autotune", "default"}); }},
          {"cache_dir",
           [&](const toml::node& v, const std::string& k) {
             s.inductor.cache_dir = get_string(c, v, k);
             if (s.inductor.cache_dir.empty()) c.bad(v, k, "must not be empty");
           }},
          {"compile_jobs", [&](const toml::node& v, const std::string& k) { s.compile_jobs = get_int(c, v, k, 1, 256); }}});
  };
  sections["torch_compile"] = [&](const toml::node& n, const std::string& key) {
    if (!n.is_table()) c.bad(n, key, "must be a table");
    walk(c, *n.as_table(), "torch_compile",
         {{"timeout_s", [&](const toml::node& v, const std::string& k) { s.torch_compile_timeout_s = get_float(c, v, k, 1.0, 1e6); }}});
  };
  sections["output"] = [&](const toml::node& n, const std::string& key) {
    if (!n.is_table()) c.bad(n, key, "must be a table");
    walk(c, *n.as_table(), "output",
         {{"file",
           [&](const toml::node& v, const std::string& k) {
             s.output = get_string(c, v, k);
             if (s.output.empty()) c.bad(v, k, "must not be empty");
           }},
          {"force", [&](const toml::node& v, const std::string& k) { s.force = get_bool(c, v, k); }}});
  };
  sections["models"] = [&](const toml::node& n, const std::string& key) {
    if (!n.is_table()) c.bad(n, key, "must be a table of [models.<architecture>] tables");
    for (const auto& [arch, node] : *n.as_table()) {
      const std::string a(arch.str()), k = "models." + a;
      if (std::find(kArchitectures.begin(), kArchitectures.end(), a) == kArchitectures.end())
        c.bad(node, k, "unknown architecture (known: " + join(kArchitectures) + ")");
      if (!node.is_table()) c.bad(node, k, "must be a table with features and/or blocks");
      ModelOverride m;
      walk(c, *node.as_table(), k,
           {{"features", [&](const toml::node& v, const std::string& kk) { m.features = get_ints(c, v, kk, 1, 8, 1, 4096); }},
            {"blocks", [&](const toml::node& v, const std::string& kk) { m.blocks = static_cast<int>(get_int(c, v, kk, 1, 100)); }}});
      s.models[a] = m;
    }
  };
  std::vector<std::string> known;
  for (const auto& [k, f] : sections) known.push_back(k);
  for (const auto& [k, node] : root) {
    auto it = sections.find(std::string(k.str()));
    if (it == sections.end()) c.bad(node, std::string(k.str()), "unknown section (known: " + join(known) + ")");
    it->second(node, std::string(k.str()));
  }
  return s;
}

SweepConfig load_sweep(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot open sweep configuration " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_sweep(ss.str(), path.string());
}

void make_quick(SweepConfig& c) {
  c.architectures = {"dncnn", "drunet", "unet"};
  c.shapes = {{32, 32}, {8, 16, 16}};
  c.batch = 1;
  c.device = "cpu";
  c.dtype = "float32";
  c.models["dncnn"] = {{8}, 5};
  c.models["drunet"] = {{4, 8, 8, 16}, 1};
  c.models["unet"] = {{4, 8, 16}, -1};
}

std::string SweepConfig::to_toml() const {
  std::ostringstream os;
  os << "[sweep]\narchitectures = " << toml_list(architectures) << "\nchannels = " << channels << "\nbatch = " << batch
     << "\nshapes = [";
  for (size_t i = 0; i < shapes.size(); ++i) os << (i ? ", " : "") << toml_ints(shapes[i]);
  os << "]\nbackends = " << toml_list(backends) << "\nwarmup = " << warmup << "\ntimed = " << timed
     << "\nstable = " << stable << "\ndevice = \"" << device << "\"\ndtype = \"" << dtype << "\"\nsigma = " << sigma
     << "\nseed = " << seed << "\n\n[native]\nchannels_last = " << tf(native.channels_last)
     << "\nfuse = " << tf(native.fuse) << "\nautotune = " << tf(native.autotune) << "\ncuda_graph = "
     << tf(native.cuda_graph) << "\nwarmup_calls = " << native.warmup_calls
     << "\ncudnn_fused_bf16 = " << tf(native.cudnn_fused_bf16) << "\ncudnn_epilogues = " << tf(native.cudnn_epilogues)
     << "\ncudnn_graph_convs = " << tf(native.cudnn_graph_convs) << "\ncudnn_benchmark = " << tf(native.cudnn_benchmark)
     << "\nupsample_conv = " << tf(native.upsample_conv) << "\nnarrow_convs = " << tf(native.narrow_convs)
     << "\nwgmma_convs = " << tf(native.wgmma_convs) << "\nnhwc_kernels = " << tf(native.nhwc_kernels)
     << "\nparallel_plan_builds = " << tf(native.parallel_plan_builds) << "\nplan_cache = " << tf(native_plan_cache) << "\n\n[inductor]\nmode = \"" << inductor.mode
     << "\"\ncache_dir = \"" << inductor.cache_dir << "\"\ncompile_jobs = " << compile_jobs
     << "\n\n[torch_compile]\ntimeout_s = " << torch_compile_timeout_s << "\n";
  for (const auto& [a, m] : models) {
    os << "\n[models." << a << "]\n";
    if (!m.features.empty()) os << "features = " << toml_ints(m.features) << "\n";
    if (m.blocks >= 0) os << "blocks = " << m.blocks << "\n";
  }
  os << "\n[output]\nfile = \"" << output << "\"\nforce = " << tf(force) << "\n";
  return os.str();
}

}  // namespace pnp::benchmark
