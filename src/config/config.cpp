#include "pnp/config.hpp"

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include "pnp/core.hpp"

namespace pnp {
namespace fs = std::filesystem;

namespace {

struct Where {
  std::string source;
  int64_t line = 0;  // 0: no line (command line)
  fs::path base_dir;
  std::string prefix() const { return line > 0 ? source + ":" + std::to_string(line) + ": " : source + ": "; }
};

[[noreturn]] void bad(const Where& w, const std::string& key, const std::string& msg) {
  throw InputError(w.prefix() + key + ": " + msg);
}

std::string describe(const toml::node& n) {
  std::ostringstream os;
  os << n.type();
  if (n.is_value()) {
    os << ' ';
    n.visit([&](auto&& v) { os << v; });
  }
  return os.str();
}

template <class T>
std::string toml_text(const T& v) {
  std::ostringstream os;
  if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    toml::array a;
    for (auto x : v) a.push_back(x);
    os << a;
  } else {
    os << toml::value<T>(v);
  }
  return os.str();
}

struct Field {
  std::string section, key, type, constraint, help;
  std::function<void(Config&, const toml::node&, const Where&)> set;
  std::function<std::string(const Config&)> show;
  std::string name() const { return section + "." + key; }
};

template <class S>
using Sec = S Config::*;

template <class S>
Field int_field(const char* sec_name, const char* key, Sec<S> sec, int64_t S::*m, int64_t lo, int64_t hi,
                const char* help) {
  Field f{sec_name, key, "integer", "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", help, {}, {}};
  std::string name = f.name();
  f.set = [=](Config& c, const toml::node& n, const Where& w) {
    auto v = n.value_exact<int64_t>();
    if (!n.is_integer() || !v) bad(w, name, "must be an integer, got " + describe(n));
    if (*v < lo || *v > hi)
      bad(w, name, std::to_string(*v) + " is out of range: must be in [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "]");
    (c.*sec).*m = *v;
  };
  f.show = [=](const Config& c) { return toml_text((c.*sec).*m); };
  return f;
}

std::string num(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

template <class S>
Field float_field(const char* sec_name, const char* key, Sec<S> sec, double S::*m, double lo, double hi,
                  const char* help) {
  Field f{sec_name, key, "float", "in [" + num(lo) + ", " + num(hi) + "]", help, {}, {}};
  std::string name = f.name();
  f.set = [=](Config& c, const toml::node& n, const Where& w) {
    if (!n.is_floating_point() && !n.is_integer()) bad(w, name, "must be a number, got " + describe(n));
    double v = n.is_integer() ? static_cast<double>(*n.value<int64_t>()) : *n.value<double>();
    if (!(v >= lo && v <= hi)) bad(w, name, num(v) + " is out of range: must be in [" + num(lo) + ", " + num(hi) + "]");
    (c.*sec).*m = v;
  };
  f.show = [=](const Config& c) { return toml_text((c.*sec).*m); };
  return f;
}

template <class S>
Field bool_field(const char* sec_name, const char* key, Sec<S> sec, bool S::*m, const char* help) {
  Field f{sec_name, key, "boolean", "true or false", help, {}, {}};
  std::string name = f.name();
  f.set = [=](Config& c, const toml::node& n, const Where& w) {
    if (!n.is_boolean()) bad(w, name, "must be true or false, got " + describe(n));
    (c.*sec).*m = *n.value<bool>();
  };
  f.show = [=](const Config& c) { return toml_text((c.*sec).*m); };
  return f;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

const std::string& as_string(const toml::node& n, const Where& w, const std::string& name) {
  if (!n.is_string()) bad(w, name, "must be a string, got " + describe(n));
  return n.as_string()->get();
}

template <class S>
Field choice_field(const char* sec_name, const char* key, Sec<S> sec, std::string S::*m,
                   std::vector<std::string> choices, const char* help) {
  Field f{sec_name, key, "string", "one of: " + join(choices, ", "), help, {}, {}};
  std::string name = f.name();
  f.set = [=](Config& c, const toml::node& n, const Where& w) {
    const std::string& v = as_string(n, w, name);
    if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
      std::string hint = closest_match(v, choices);
      bad(w, name, "\"" + v + "\" is not one of: " + join(choices, ", ") +
                       (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)"));
    }
    (c.*sec).*m = v;
  };
  f.show = [=](const Config& c) { return toml_text((c.*sec).*m); };
  return f;
}

enum class PathKind { text, file, file_or_name };

template <class S>
Field string_field(const char* sec_name, const char* key, Sec<S> sec, std::string S::*m, PathKind kind,
                   const char* help) {
  const char* constraint = kind == PathKind::file           ? "existing file, or empty"
                           : kind == PathKind::file_or_name ? "existing .h5 file, model name, or empty"
                                                            : "any text";
  Field f{sec_name, key, "string", constraint, help, {}, {}};
  std::string name = f.name();
  f.set = [=](Config& c, const toml::node& n, const Where& w) {
    std::string v = as_string(n, w, name);
    bool is_path = kind == PathKind::file ||
                   (kind == PathKind::file_or_name && (v.find('/') != std::string::npos || fs::path(v).has_extension()));
    if (!v.empty() && is_path) {
      fs::path p(v);
      if (p.is_relative()) p = w.base_dir / p;
      p = p.lexically_normal();
      if (!fs::is_regular_file(p)) bad(w, name, "file not found: " + p.string());
      v = p.string();
    }
    (c.*sec).*m = v;
  };
  f.show = [=](const Config& c) { return toml_text((c.*sec).*m); };
  return f;
}

template <class S>
Field int_list_field(const char* sec_name, const char* key, Sec<S> sec, std::vector<int64_t> S::*m, size_t min_len,
                     size_t max_len, int64_t lo, int64_t hi, const char* help) {
  Field f{sec_name, key, "array of integers",
          std::to_string(min_len) + " to " + std::to_string(max_len) + " entries in [" + std::to_string(lo) + ", " +
              std::to_string(hi) + "]",
          help, {}, {}};
  std::string name = f.name();
  std::string constraint = f.constraint;
  f.set = [=](Config& c, const toml::node& n, const Where& w) {
    const toml::array* a = n.as_array();
    if (!a) bad(w, name, "must be an array of integers, got " + describe(n));
    std::vector<int64_t> v;
    for (const auto& e : *a) {
      if (!e.is_integer()) bad(w, name, "must be an array of integers, got an element " + describe(e));
      int64_t x = *e.value<int64_t>();
      if (x < lo || x > hi) bad(w, name, "element " + std::to_string(x) + " is out of range: " + constraint);
      v.push_back(x);
    }
    if (v.size() < min_len || v.size() > max_len) bad(w, name, "has " + std::to_string(v.size()) + " entries: " + constraint);
    (c.*sec).*m = v;
  };
  f.show = [=](const Config& c) { return toml_text((c.*sec).*m); };
  return f;
}

const std::vector<std::string> kSections = {"problem", "solver", "denoiser", "compile", "distributed", "output"};

const std::vector<Field>& schema() {
  using C = Config;
  using P = ProblemConfig;
  using S = SolverConfig;
  using D = DenoiserConfig;
  using K = CompileConfig;
  using X = DistributedConfig;
  using O = OutputConfig;
  static const std::vector<Field> fields = {
      int_field<P>("problem", "size", &C::problem, &P::size, 8, 65536, "image size N (N x N unit pixels)"),
      int_field<P>("problem", "angles", &C::problem, &P::angles, 1, 100000, "number of projection angles K, spread over [0, 180) deg"),
      int_field<P>("problem", "detector", &C::problem, &P::detector, 0, 200000, "detector bins D; 0 = ceil(sqrt(2) N)"),
      choice_field<P>("problem", "phantom", &C::problem, &P::phantom, {"shepp_logan", "ellipses"}, "phantom generated when no sinogram file is given"),
      float_field<P>("problem", "noise_sigma", &C::problem, &P::noise_sigma, 0.0, 10.0, "Gaussian noise std on the generated sinogram, relative to max |Ax|"),
      int_field<P>("problem", "seed", &C::problem, &P::seed, 0, INT64_MAX, "seed of the noise and of random phantoms"),
      string_field<P>("problem", "sinogram", &C::problem, &P::sinogram, PathKind::file, "DXchange HDF5 sinogram; empty = generate the phantom in memory"),
      string_field<P>("problem", "data_path", &C::problem, &P::data_path, PathKind::text, "dataset of the sinogram [angles, detector]"),
      string_field<P>("problem", "theta_path", &C::problem, &P::theta_path, PathKind::text, "dataset of the angles in degrees"),
      string_field<P>("problem", "ground_truth_path", &C::problem, &P::ground_truth_path, PathKind::text, "dataset of the optional ground truth [N, N]"),

      int_field<S>("solver", "iterations", &C::solver, &S::iterations, 1, 1000000, "PnP iterations"),
      float_field<S>("solver", "step", &C::solver, &S::step, 0.0, 1e30, "step gamma; 0 = step_scale / ||A^T A|| (power method)"),
      float_field<S>("solver", "step_scale", &C::solver, &S::step_scale, 1e-6, 2.0, "gamma = step_scale / ||A^T A|| when step = 0 (study: 0.99)"),
      choice_field<S>("solver", "init", &C::solver, &S::init, {"zeros", "backprojection", "fbp"}, "initial image"),
      choice_field<S>("solver", "fbp_filter", &C::solver, &S::fbp_filter, {"ramp", "shepp_logan", "cosine"}, "filter of the FBP initial image"),
      choice_field<S>("solver", "clamp", &C::solver, &S::clamp, {"ground_truth", "fixed", "none"}, "clamp bounds: the ground truth's [min, max] (study), [clamp_min, clamp_max], or none"),
      float_field<S>("solver", "clamp_min", &C::solver, &S::clamp_min, -1e30, 1e30, "lower bound with clamp = \"fixed\""),
      float_field<S>("solver", "clamp_max", &C::solver, &S::clamp_max, -1e30, 1e30, "upper bound with clamp = \"fixed\""),
      float_field<S>("solver", "relaxation", &C::solver, &S::relaxation, 0.0, 1.0, "alpha in x = (1 - alpha) z + alpha D(z); 1 = plain PnP-PGD"),
      int_field<S>("solver", "metrics_every", &C::solver, &S::metrics_every, 0, 1000000, "compute PSNR and residual every this many iterations (0 = never)"),
      int_field<S>("solver", "power_iterations", &C::solver, &S::power_iterations, 1, 100000, "maximum power-method iterations for ||A^T A||"),
      float_field<S>("solver", "power_tol", &C::solver, &S::power_tol, 0.0, 1.0, "relative tolerance of the power method"),
      int_field<S>("solver", "stable_window", &C::solver, &S::stable_window, 1, 1000000, "stable iteration time = mean of the last this many iterations"),

      choice_field<D>("denoiser", "architecture", &C::denoiser, &D::architecture, {"drunet", "dncnn", "unet", "identity"}, "denoiser network (identity = plain gradient descent)"),
      int_field<D>("denoiser", "dim", &C::denoiser, &D::dim, 2, 3, "2D or 3D network"),
      int_field<D>("denoiser", "channels", &C::denoiser, &D::channels, 1, 64, "image channels"),
      float_field<D>("denoiser", "sigma", &C::denoiser, &D::sigma, 0.0, 10.0, "noise level given to the denoiser (study: 0.01)"),
      string_field<D>("denoiser", "weights", &C::denoiser, &D::weights, PathKind::file_or_name, "HDF5 weights file or shipped model name; empty = seeded random init"),
      int_field<D>("denoiser", "seed", &C::denoiser, &D::seed, 0, INT64_MAX, "seed of the random weight init"),
      choice_field<D>("denoiser", "precision", &C::denoiser, &D::precision, {"fp32", "bf16"}, "activation and weight precision (bf16 accumulates in fp32)"),
      int_field<D>("denoiser", "patch_size", &C::denoiser, &D::patch_size, 0, 1 << 20, "denoise in patches of this size; 0 = whole tile"),
      int_field<D>("denoiser", "patch_overlap", &C::denoiser, &D::patch_overlap, 0, 1 << 20, "patch overlap; 0 = receptive radius (exact)"),
      float_field<D>("denoiser", "memory_limit_gb", &C::denoiser, &D::memory_limit_gb, 0.0, 1e6, "device memory budget for choosing the patch size; 0 = none"),
      int_list_field<D>("denoiser", "features", &C::denoiser, &D::features, 0, 8, 1, 4096, "feature counts per scale; [] = architecture default"),
      int_field<D>("denoiser", "blocks", &C::denoiser, &D::blocks, -1, 64, "blocks per scale (DRUNet nb); -1 = architecture default"),

      choice_field<K>("compile", "mode", &C::compile, &K::mode, {"none", "pre", "post", "fused"}, "where compilation is applied: none, pre (inner denoiser), post (distributed regions), fused (whole step)"),
      choice_field<K>("compile", "backend", &C::compile, &K::backend, {"native", "inductor"}, "how it is compiled: native (cuDNN fusions, channels-last, CUDA graphs) or inductor (AOTInductor)"),
      bool_field<K>("compile", "cuda_graphs", &C::compile, &K::cuda_graphs, "capture compiled regions as CUDA graphs (GPU only)"),
      bool_field<K>("compile", "autotune", &C::compile, &K::autotune, "autotune cuDNN algorithms at compile time"),
      string_field<K>("compile", "cache_dir", &C::compile, &K::cache_dir, PathKind::text, "directory of the inductor package cache"),
      choice_field<K>("compile", "inductor_mode", &C::compile, &K::inductor_mode, {"max-autotune", "default"}, "inductor compile mode"),

      choice_field<X>("distributed", "decomposition", &C::distributed, &X::decomposition, {"slabs", "grid"}, "tiles: row slabs or a 2D grid"),
      int_list_field<X>("distributed", "grid", &C::distributed, &X::grid, 2, 2, 0, 65536, "[rows, cols] of the rank grid; 0 = choose"),
      int_field<X>("distributed", "halo", &C::distributed, &X::halo, 0, 65536, "ghost width in pixels; 0 = the denoiser's receptive radius (exact)"),
      choice_field<X>("distributed", "comm", &C::distributed, &X::comm, {"auto", "nccl", "mpi"}, "communication backend; auto = NCCL for one GPU per rank, else MPI"),
      choice_field<X>("distributed", "device", &C::distributed, &X::device, {"auto", "cpu", "cuda"}, "compute device; auto = CUDA when available"),

      string_field<O>("output", "file", &C::output, &O::file, PathKind::text, "output HDF5 file (written atomically by rank 0)"),
      bool_field<O>("output", "force", &C::output, &O::force, "overwrite an existing output file"),
      bool_field<O>("output", "progress", &C::output, &O::progress, "print a progress line per iteration"),
  };
  return fields;
}

std::vector<std::string> keys_of(const std::string& section) {
  std::vector<std::string> out;
  for (const auto& f : schema())
    if (f.section == section) out.push_back(f.key);
  return out;
}

const Field* find_field(const std::string& section, const std::string& key) {
  for (const auto& f : schema())
    if (f.section == section && f.key == key) return &f;
  return nullptr;
}

int64_t line_of(const toml::node& n) { return static_cast<int64_t>(n.source().begin.line); }

void check_section(const std::string& section, const Where& w) {
  if (std::find(kSections.begin(), kSections.end(), section) != kSections.end()) return;
  std::string hint = closest_match(section, kSections);
  throw InputError(w.prefix() + "unknown section [" + section + "]" +
                   (hint.empty() ? "" : " (did you mean [" + hint + "]?)") + "; sections are: " + join(kSections, ", "));
}

const Field& field_or_throw(const std::string& section, const std::string& key, const Where& w) {
  check_section(section, w);
  if (const Field* f = find_field(section, key)) return *f;
  std::string hint = closest_match(key, keys_of(section));
  throw InputError(w.prefix() + "unknown key '" + section + "." + key + "'" +
                   (hint.empty() ? "" : " (did you mean '" + section + "." + hint + "'?)"));
}

// Cross-key rules that no single key can check.
void validate(const Config& c, const std::string& source) {
  if (c.solver.clamp == "fixed" && !(c.solver.clamp_min < c.solver.clamp_max))
    throw InputError(source + ": solver.clamp_min must be below solver.clamp_max with clamp = \"fixed\"");
  if (c.denoiser.patch_size > 0 && c.denoiser.patch_overlap * 2 >= c.denoiser.patch_size)
    throw InputError(source + ": denoiser.patch_overlap must be less than half of denoiser.patch_size");
  if (c.denoiser.dim == 3 && c.distributed.decomposition == "grid")
    throw InputError(source + ": distributed.decomposition = \"grid\" needs a 2D denoiser (denoiser.dim = 2)");
}

}  // namespace

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    size_t d = distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  size_t limit = std::max<size_t>(1, word.size() / 3);
  return best_d <= limit ? best : std::string();
}

Config parse_config(std::string_view text, const std::string& source, const fs::path& base_dir) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InputError(source + ":" + std::to_string(e.source().begin.line) + ": TOML syntax error: " +
                     std::string(e.description()));
  }
  Config cfg;
  for (const auto& [sec_key, sec_node] : root) {
    std::string section(sec_key.str());
    Where w{source, line_of(sec_node), base_dir};
    check_section(section, w);
    const toml::table* tbl = sec_node.as_table();
    if (!tbl) throw InputError(w.prefix() + "'" + section + "' must be a table [" + section + "]");
    for (const auto& [key, node] : *tbl) {
      Where kw{source, line_of(node), base_dir};
      field_or_throw(section, std::string(key.str()), kw).set(cfg, node, kw);
    }
  }
  validate(cfg, source);
  return cfg;
}

void apply_override(Config& cfg, std::string_view assignment) {
  std::string a(assignment);
  Where w{"--set " + a, 0, fs::current_path()};
  size_t eq = a.find('=');
  size_t dot = a.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    throw InputError(w.prefix() + "expected section.key=value");
  std::string section = a.substr(0, dot), key = a.substr(dot + 1, eq - dot - 1), value = a.substr(eq + 1);
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    return s;
  };
  section = trim(section), key = trim(key), value = trim(value);
  const Field& f = field_or_throw(section, key, w);
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    // Bare words are strings: --set compile.mode=pre
    toml::table t;
    t.insert("v", value);
    parsed = std::move(t);
  }
  f.set(cfg, *parsed.get("v"), w);
  validate(cfg, w.source);
}

Config load_config(const fs::path& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot read config file " + path.string() + (fs::exists(path) ? "" : ": file not found"));
  std::stringstream ss;
  ss << in.rdbuf();
  fs::path base = path.has_parent_path() ? path.parent_path() : fs::path(".");
  Config cfg = parse_config(ss.str(), path.string(), base);
  for (const auto& o : overrides) apply_override(cfg, o);
  return cfg;
}

std::string Config::to_toml() const {
  std::ostringstream os;
  for (const auto& section : kSections) {
    os << "[" << section << "]\n";
    for (const auto& f : schema())
      if (f.section == section) os << f.key << " = " << f.show(*this) << "\n";
    os << "\n";
  }
  return os.str();
}

std::string config_reference() {
  std::ostringstream os;
  Config defaults;
  for (const auto& section : kSections) {
    os << "[" << section << "]\n";
    for (const auto& f : schema()) {
      if (f.section != section) continue;
      os << "  " << f.key << " = " << f.show(defaults) << "\n      " << f.help << "\n      (" << f.type << ", "
         << f.constraint << ")\n";
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace pnp
