// pnp_train's TOML schema: one table of fields drives parsing, validation, --set overrides,
// printing back as TOML and the key reference. Every error names the key and the line.
#include <algorithm>
#include <climits>
#include <fstream>
#include <functional>
#include <sstream>

#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include "pnp/config.hpp"  // closest_match
#include "pnp/core.hpp"
#include "pnp/train.hpp"

namespace pnp::train {
namespace fs = std::filesystem;

namespace {

struct Where {
  std::string source;
  int64_t line = 0;  // 0: command line
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

std::string num(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

struct Field {
  std::string section, key, type, constraint, help;
  std::function<void(TrainConfig&, const toml::node&, const Where&)> set;
  std::function<std::string(const TrainConfig&)> show;
  std::string name() const { return section + "." + key; }
};

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

// A member accessor: the field's storage inside TrainConfig.
template <class T>
using Get = std::function<T&(TrainConfig&)>;

template <class I>
Field int_field(const char* sec, const char* key, std::function<I&(TrainConfig&)> get, int64_t lo, int64_t hi,
                const char* help) {
  Field f{sec, key, "integer", "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", help, {}, {}};
  std::string name = f.name();
  f.set = [=](TrainConfig& c, const toml::node& n, const Where& w) {
    auto v = n.value_exact<int64_t>();
    if (!n.is_integer() || !v) bad(w, name, "must be an integer, got " + describe(n));
    if (*v < lo || *v > hi)
      bad(w, name, std::to_string(*v) + " is out of range: must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    get(c) = static_cast<I>(*v);
  };
  f.show = [=](const TrainConfig& c) { return toml_text(static_cast<int64_t>(get(const_cast<TrainConfig&>(c)))); };
  return f;
}

Field float_field(const char* sec, const char* key, Get<double> get, double lo, double hi, const char* help) {
  Field f{sec, key, "float", "in [" + num(lo) + ", " + num(hi) + "]", help, {}, {}};
  std::string name = f.name();
  f.set = [=](TrainConfig& c, const toml::node& n, const Where& w) {
    if (!n.is_floating_point() && !n.is_integer()) bad(w, name, "must be a number, got " + describe(n));
    double v = n.is_integer() ? static_cast<double>(*n.value<int64_t>()) : *n.value<double>();
    if (!(v >= lo && v <= hi)) bad(w, name, num(v) + " is out of range: must be in [" + num(lo) + ", " + num(hi) + "]");
    get(c) = v;
  };
  f.show = [=](const TrainConfig& c) { return toml_text(get(const_cast<TrainConfig&>(c))); };
  return f;
}

Field bool_field(const char* sec, const char* key, Get<bool> get, const char* help) {
  Field f{sec, key, "boolean", "true or false", help, {}, {}};
  std::string name = f.name();
  f.set = [=](TrainConfig& c, const toml::node& n, const Where& w) {
    if (!n.is_boolean()) bad(w, name, "must be true or false, got " + describe(n));
    get(c) = *n.value<bool>();
  };
  f.show = [=](const TrainConfig& c) { return toml_text(get(const_cast<TrainConfig&>(c))); };
  return f;
}

const std::string& as_string(const toml::node& n, const Where& w, const std::string& name) {
  if (!n.is_string()) bad(w, name, "must be a string, got " + describe(n));
  return n.as_string()->get();
}

Field choice_field(const char* sec, const char* key, Get<std::string> get, std::vector<std::string> choices,
                   const char* help) {
  Field f{sec, key, "string", "one of: " + join(choices, ", "), help, {}, {}};
  std::string name = f.name();
  f.set = [=](TrainConfig& c, const toml::node& n, const Where& w) {
    const std::string& v = as_string(n, w, name);
    if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
      std::string hint = closest_match(v, choices);
      bad(w, name, "\"" + v + "\" is not one of: " + join(choices, ", ") + (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)"));
    }
    get(c) = v;
  };
  f.show = [=](const TrainConfig& c) { return toml_text(get(const_cast<TrainConfig&>(c))); };
  return f;
}

// path: resolved against the config's directory; must_exist: an input file.
Field path_field(const char* sec, const char* key, Get<std::string> get, bool must_exist, const char* help) {
  Field f{sec, key, "string", must_exist ? "existing file, or empty" : "file path", help, {}, {}};
  std::string name = f.name();
  f.set = [=](TrainConfig& c, const toml::node& n, const Where& w) {
    std::string v = as_string(n, w, name);
    if (!v.empty()) {
      fs::path p(v);
      if (p.is_relative()) p = w.base_dir / p;
      p = p.lexically_normal();
      if (must_exist && !fs::is_regular_file(p)) bad(w, name, "file not found: " + p.string());
      v = p.string();
    }
    get(c) = v;
  };
  f.show = [=](const TrainConfig& c) { return toml_text(get(const_cast<TrainConfig&>(c))); };
  return f;
}

Field text_field(const char* sec, const char* key, Get<std::string> get, const char* help) {
  Field f{sec, key, "string", "any text", help, {}, {}};
  std::string name = f.name();
  f.set = [=](TrainConfig& c, const toml::node& n, const Where& w) { get(c) = as_string(n, w, name); };
  f.show = [=](const TrainConfig& c) { return toml_text(get(const_cast<TrainConfig&>(c))); };
  return f;
}

Field int_list_field(const char* sec, const char* key, Get<std::vector<int64_t>> get, size_t max_len, int64_t lo,
                     int64_t hi, const char* help) {
  std::string constraint = "0 to " + std::to_string(max_len) + " entries in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  Field f{sec, key, "array of integers", constraint, help, {}, {}};
  std::string name = f.name();
  f.set = [=](TrainConfig& c, const toml::node& n, const Where& w) {
    const toml::array* a = n.as_array();
    if (!a) bad(w, name, "must be an array of integers, got " + describe(n));
    std::vector<int64_t> v;
    for (const auto& e : *a) {
      if (!e.is_integer()) bad(w, name, "must be an array of integers, got an element " + describe(e));
      int64_t x = *e.value<int64_t>();
      if (x < lo || x > hi) bad(w, name, "element " + std::to_string(x) + " is out of range: " + constraint);
      v.push_back(x);
    }
    if (v.size() > max_len) bad(w, name, "has " + std::to_string(v.size()) + " entries: " + constraint);
    get(c) = v;
  };
  f.show = [=](const TrainConfig& c) { return toml_text(get(const_cast<TrainConfig&>(c))); };
  return f;
}

const std::vector<std::string> kSections = {"model", "data", "noise", "train", "validation", "output"};

#define M(expr) [](TrainConfig& c) -> auto& { return c.expr; }

const std::vector<Field>& schema() {
  static const std::vector<Field> fields = {
      choice_field("model", "architecture", M(model.architecture), {"dncnn", "drunet", "unet"}, "denoiser network to train"),
      int_field<int64_t>("model", "channels", M(model.channels), 1, 64, "image channels (1 = grayscale)"),
      int_list_field("model", "features", M(model.features), 8, 1, 4096, "feature counts per scale; [] = architecture default (DnCNN [64], DRUNet [64,128,256,512])"),
      int_field<int64_t>("model", "blocks", M(model.blocks), -1, 256, "DnCNN depth (conv layers) or DRUNet ResBlocks per stage; -1 = default"),

      int_field<int64_t>("data", "patch", M(data.patch), 8, 4096, "training crops are patch x patch (a multiple of the network's alignment)"),
      int_field<int64_t>("data", "batch", M(data.batch), 1, 65536, "crops per step"),
      int_field<int64_t>("data", "scale_min", M(data.scale_min), 8, 1 << 16, "smallest virtual scene a crop is cut from (>= patch)"),
      int_field<int64_t>("data", "scale_max", M(data.scale_max), 8, 1 << 16, "largest virtual scene a crop is cut from"),
      int_field<int64_t>("data", "ellipses_min", M(data.ellipses_min), 0, 1000, "fewest interior ellipses per scene"),
      int_field<int64_t>("data", "ellipses_max", M(data.ellipses_max), 0, 1000, "most interior ellipses per scene"),
      int_field<int64_t>("data", "polygons_min", M(data.polygons_min), 0, 1000, "fewest random polygons per scene"),
      int_field<int64_t>("data", "polygons_max", M(data.polygons_max), 0, 1000, "most random polygons per scene"),
      float_field("data", "texture_probability", M(data.texture_probability), 0.0, 1.0, "share of scenes with a smooth texture"),
      float_field("data", "texture_amplitude", M(data.texture_amplitude), 0.0, 10.0, "largest texture amplitude (body value 1)"),
      float_field("data", "contrast_min", M(data.contrast_min), 0.0, 1.0, "random contrast: narrowest value range of a scene within [0, 1]"),
      float_field("data", "gamma_max", M(data.gamma_max), 1.0, 10.0, "random contrast: gamma in [1/gamma_max, gamma_max]"),
      bool_field("data", "flips", M(data.flips), "random flips and transposes of the crops"),
      path_field("data", "stack", M(data.stack), true, "optional HDF5 image stack [M, H, W] to crop from"),
      text_field("data", "stack_dataset", M(data.stack_dataset), "dataset of the image stack"),
      float_field("data", "stack_fraction", M(data.stack_fraction), 0.0, 1.0, "share of crops taken from the stack"),

      float_field("noise", "sigma_min", M(noise.sigma_min), 0.0, 10.0, "smallest per-sample noise sigma (images in [0, 1])"),
      float_field("noise", "sigma_max", M(noise.sigma_max), 0.0, 10.0, "largest per-sample noise sigma"),

      int_field<int64_t>("train", "steps", M(train.steps), 1, 1LL << 40, "optimiser steps (the cosine schedule's length)"),
      float_field("train", "lr", M(train.lr), 0.0, 10.0, "peak Adam learning rate"),
      float_field("train", "lr_min", M(train.lr_min), 0.0, 10.0, "final learning rate of the cosine schedule"),
      int_field<int64_t>("train", "warmup", M(train.warmup), 0, 1LL << 40, "linear warm-up steps"),
      float_field("train", "beta1", M(train.beta1), 0.0, 0.999999, "Adam beta1"),
      float_field("train", "beta2", M(train.beta2), 0.0, 0.999999999, "Adam beta2"),
      float_field("train", "weight_decay", M(train.weight_decay), 0.0, 1.0, "Adam (L2) weight decay"),
      float_field("train", "grad_clip", M(train.grad_clip), 0.0, 1e30, "clip the global gradient norm; 0 = off"),
      choice_field("train", "loss", M(train.loss), {"mse", "l1"}, "training loss"),
      int_field<uint64_t>("train", "seed", M(train.seed), 0, INT64_MAX, "seed of the weights and of every sample"),
      choice_field("train", "device", M(train.device), {"auto", "cpu", "cuda"}, "compute device; auto = CUDA when available"),
      float_field("train", "time_budget", M(train.time_budget), 0.0, 1e9, "seconds; > 0: after the warm-up, cut steps to fit (recorded)"),
      int_field<int64_t>("train", "stop_after", M(train.stop_after), 0, 1LL << 40, "stop with a checkpoint after this step; 0 = run to the end"),
      int_field<int64_t>("train", "threads", M(train.threads), 0, 4096, "torch intra-op threads; 0 = default"),

      int_field<int64_t>("validation", "every", M(validation.every), 0, 1LL << 40, "validate every this many steps (and at the end)"),
      int_field<int64_t>("validation", "images", M(validation.images), 1, 100000, "held-out random-ellipse phantoms"),
      int_field<int64_t>("validation", "size", M(validation.size), 8, 1 << 14, "phantom size (a multiple of the network's alignment)"),
      int_field<int64_t>("validation", "ellipses", M(validation.ellipses), 1, 1000, "ellipses per phantom"),
      float_field("validation", "sigma", M(validation.sigma), 0.0, 10.0, "noise sigma of the validation set"),
      int_field<uint64_t>("validation", "seed", M(validation.seed), 0, INT64_MAX, "seed of the phantoms and their noise"),

      path_field("output", "weights", M(output.weights), false, "final weights (HDF5, nn weights layout)"),
      path_field("output", "sidecar", M(output.sidecar), false, "JSON record of the training; empty = weights path with .json"),
      path_field("output", "log", M(output.log), false, "HDF5 log: loss, learning rate, validation PSNR"),
      path_field("output", "checkpoint", M(output.checkpoint), false, "checkpoint (weights, Adam state, curves), replaced atomically"),
      int_field<int64_t>("output", "checkpoint_every", M(output.checkpoint_every), 0, 1LL << 40, "checkpoint every this many steps; 0 = only at the end"),
      bool_field("output", "resume", M(output.resume), "continue from the checkpoint when it exists"),
      bool_field("output", "force", M(output.force), "overwrite existing weights, sidecar and log"),
      bool_field("output", "progress", M(output.progress), "print progress lines"),
      int_field<int64_t>("output", "progress_every", M(output.progress_every), 1, 1LL << 40, "steps between progress lines (and loss fetches)"),
  };
  return fields;
}
#undef M

std::vector<std::string> keys_of(const std::string& section) {
  std::vector<std::string> out;
  for (const auto& f : schema())
    if (f.section == section) out.push_back(f.key);
  return out;
}

void check_section(const std::string& section, const Where& w) {
  if (std::find(kSections.begin(), kSections.end(), section) != kSections.end()) return;
  std::string hint = closest_match(section, kSections);
  throw InputError(w.prefix() + "unknown section [" + section + "]" + (hint.empty() ? "" : " (did you mean [" + hint + "]?)") +
                   "; sections are: " + join(kSections, ", "));
}

const Field& field_or_throw(const std::string& section, const std::string& key, const Where& w) {
  check_section(section, w);
  for (const auto& f : schema())
    if (f.section == section && f.key == key) return f;
  std::string hint = closest_match(key, keys_of(section));
  throw InputError(w.prefix() + "unknown key '" + section + "." + key + "'" +
                   (hint.empty() ? "" : " (did you mean '" + section + "." + hint + "'?)"));
}

void validate(const TrainConfig& c, const std::string& source) {
  auto fail = [&](const std::string& m) { throw InputError(source + ": " + m); };
  if (c.data.scale_min < c.data.patch) fail("data.scale_min must be at least data.patch");
  if (c.data.scale_max < c.data.scale_min) fail("data.scale_max must be at least data.scale_min");
  if (c.data.ellipses_max < c.data.ellipses_min) fail("data.ellipses_max must be at least data.ellipses_min");
  if (c.data.polygons_max < c.data.polygons_min) fail("data.polygons_max must be at least data.polygons_min");
  if (c.data.stack_fraction > 0 && c.data.stack.empty()) fail("data.stack_fraction > 0 needs data.stack");
  if (c.noise.sigma_max < c.noise.sigma_min) fail("noise.sigma_max must be at least noise.sigma_min");
  if (c.train.lr_min > c.train.lr) fail("train.lr_min must not exceed train.lr");
  if (c.output.weights.empty()) fail("output.weights must not be empty");
  if (c.output.checkpoint.empty()) fail("output.checkpoint must not be empty");
  if (c.output.log.empty()) fail("output.log must not be empty");
  // The network must accept the crops and the validation images without padding.
  nn::Graph g = nn::build(model_spec(c.model));
  const int64_t a = g.alignment();
  if (c.data.patch % a != 0)
    fail("data.patch = " + std::to_string(c.data.patch) + " must be a multiple of the network's alignment " + std::to_string(a));
  if (c.validation.size % a != 0)
    fail("validation.size = " + std::to_string(c.validation.size) + " must be a multiple of the network's alignment " + std::to_string(a));
}

int64_t line_of(const toml::node& n) { return static_cast<int64_t>(n.source().begin.line); }

}  // namespace

nn::DenoiserSpec model_spec(const ModelConfig& m) {
  nn::DenoiserSpec s;
  s.architecture = m.architecture;
  s.dim = 2;
  s.in_channels = static_cast<int>(m.channels);
  s.out_channels = static_cast<int>(m.channels);
  s.features = m.features;
  s.blocks = static_cast<int>(m.blocks);
  s.pad = true;
  return s;
}

TrainConfig parse_train_config(std::string_view text, const std::string& source, const fs::path& base_dir) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InputError(source + ":" + std::to_string(e.source().begin.line) + ": TOML syntax error: " + std::string(e.description()));
  }
  TrainConfig cfg;
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

void apply_train_override(TrainConfig& cfg, std::string_view assignment) {
  std::string a(assignment);
  Where w{"--set " + a, 0, fs::current_path()};
  size_t eq = a.find('='), dot = a.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq) throw InputError(w.prefix() + "expected section.key=value");
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    return s;
  };
  std::string section = trim(a.substr(0, dot)), key = trim(a.substr(dot + 1, eq - dot - 1)), value = trim(a.substr(eq + 1));
  const Field& f = field_or_throw(section, key, w);
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    toml::table t;  // bare words are strings: --set train.device=cpu
    t.insert("v", value);
    parsed = std::move(t);
  }
  f.set(cfg, *parsed.get("v"), w);
  validate(cfg, w.source);
}

TrainConfig load_train_config(const fs::path& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot read config file " + path.string() + (fs::exists(path) ? "" : ": file not found"));
  std::stringstream ss;
  ss << in.rdbuf();
  fs::path base = path.has_parent_path() ? path.parent_path() : fs::path(".");
  TrainConfig cfg = parse_train_config(ss.str(), path.string(), base);
  for (const auto& o : overrides) apply_train_override(cfg, o);
  return cfg;
}

std::string TrainConfig::to_toml() const {
  std::ostringstream os;
  for (const auto& section : kSections) {
    os << "[" << section << "]\n";
    for (const auto& f : schema())
      if (f.section == section) os << f.key << " = " << f.show(*this) << "\n";
    os << "\n";
  }
  return os.str();
}

std::string train_config_reference() {
  std::ostringstream os;
  TrainConfig defaults;
  for (const auto& section : kSections) {
    os << "[" << section << "]\n";
    for (const auto& f : schema()) {
      if (f.section != section) continue;
      os << "  " << f.key << " = " << f.show(defaults) << "\n      " << f.help << "\n      (" << f.type << ", " << f.constraint << ")\n";
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace pnp::train
