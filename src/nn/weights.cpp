#include "pnp/nn/weights.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstring>
#include <set>

#include "pnp/io.hpp"

namespace pnp::nn {

namespace {

constexpr const char* kFormat = "pnp-denoiser-weights/1";

uint64_t mix(uint64_t z) {  // splitmix64 finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t key_seed(uint64_t seed, const std::string& key) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return mix(seed ^ mix(h));
}

// PyTorch's _calculate_fan_in_and_fan_out: fan_in = size(1) * receptive field.
int64_t fan_in(const std::vector<int64_t>& shape) {
  int64_t f = shape.size() > 1 ? shape[1] : shape[0];
  for (size_t i = 2; i < shape.size(); ++i) f *= shape[i];
  return f;
}

at::Tensor orthogonal(const std::vector<int64_t>& shape, double gain, at::Generator& gen) {
  const int64_t rows = shape[0];
  int64_t numel = 1;
  for (auto s : shape) numel *= s;
  const int64_t cols = numel / rows;
  auto flat = at::empty({rows, cols}, at::kFloat).normal_(0.0, 1.0, gen);
  if (rows < cols) flat = flat.t();
  auto [q, r] = at::linalg_qr(flat);
  q = q * at::sign(at::diagonal(r, 0, -2, -1));
  if (rows < cols) q = q.t();
  return (q.contiguous() * gain).reshape(shape);
}

std::string list(const std::vector<std::string>& v) {
  std::string o;
  const size_t show = std::min<size_t>(v.size(), 12);
  for (size_t i = 0; i < show; ++i) o += (i ? ", " : "") + v[i];
  if (v.size() > show) o += ", ... and " + std::to_string(v.size() - show) + " more";
  return o;
}

std::string graph_label(const Graph& g) {
  return g.architecture + " (" + std::to_string(g.dim) + "D, " + std::to_string(g.in_channels) + "->" +
         std::to_string(g.out_channels) + " channels, " + std::to_string(g.parameter_count()) + " parameters)";
}

struct Mismatch {
  std::vector<std::string> missing, unexpected, misshaped;
  bool any() const { return !missing.empty() || !unexpected.empty() || !misshaped.empty(); }
  std::string message(const Graph& g, const std::string& source) const {
    std::string m = source + " does not match the " + graph_label(g) + " denoiser:";
    if (!missing.empty()) m += " missing keys (" + std::to_string(missing.size()) + "): " + list(missing) + ";";
    if (!unexpected.empty())
      m += " unexpected keys (" + std::to_string(unexpected.size()) + "): " + list(unexpected) + ";";
    if (!misshaped.empty())
      m += " mis-shaped keys (" + std::to_string(misshaped.size()) + "): " + list(misshaped) + ";";
    m.pop_back();
    return m;
  }
};

bool ignored_key(const std::string& k) {
  const std::string suffix = ".num_batches_tracked";
  return k.size() >= suffix.size() && k.compare(k.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Weights init_weights(const Graph& g, uint64_t seed) {
  Weights w;
  for (const auto& n : g.nodes) {
    for (const auto& p : n.params) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(key_seed(seed, p.key));
      at::Tensor t;
      const bool is_conv = n.op == OpKind::conv || n.op == OpKind::conv_transpose;
      if (is_conv && p.role == "weight") {
        if (g.architecture == "drunet") {
          t = orthogonal(p.shape, 0.2, gen);  // weights_init_drunet
        } else if (g.architecture == "dncnn") {
          const double std = std::sqrt(2.0) / std::sqrt(static_cast<double>(fan_in(p.shape)));
          t = at::empty(p.shape, at::kFloat).normal_(0.0, std, gen);  // weights_init_kaiming
        } else {
          const double b = 1.0 / std::sqrt(static_cast<double>(fan_in(p.shape)));
          t = at::empty(p.shape, at::kFloat).uniform_(-b, b, gen);  // kaiming_uniform_(a=sqrt(5))
        }
      } else if (is_conv && p.role == "bias") {
        const double b = 1.0 / std::sqrt(static_cast<double>(fan_in(n.param("weight")->shape)));
        t = at::empty(p.shape, at::kFloat).uniform_(-b, b, gen);
      } else if (p.role == "weight" || p.role == "running_var") {
        t = at::ones(p.shape, at::kFloat);
      } else {
        t = at::zeros(p.shape, at::kFloat);
      }
      w.emplace(p.key, t.contiguous());
    }
  }
  return w;
}

void check_weights(const Graph& g, const Weights& w, const std::string& source) {
  Mismatch mm;
  std::set<std::string> known;
  for (const auto* p : g.params()) {
    known.insert(p->key);
    auto it = w.find(p->key);
    if (it == w.end()) {
      mm.missing.push_back(p->key);
    } else if (it->second.sizes().vec() != p->shape) {
      mm.misshaped.push_back(p->key + " " + shape_string(it->second.sizes().vec()) + " (expected " +
                             shape_string(p->shape) + ")");
    }
  }
  for (const auto& [k, v] : w)
    if (!known.count(k) && !ignored_key(k)) mm.unexpected.push_back(k);
  if (mm.any()) throw InputError(mm.message(g, source));
}

Weights load_weights(const std::string& h5_path, const Graph& g) {
  auto f = io::H5File::open(h5_path);
  if (!io::exists(f, "/weights"))
    throw InputError("weights file " + h5_path +
                     " has no /weights group (convert deepinv .pth files with "
                     "python3 -m pnp_postprocess.deepinv_convert)");
  std::string file_arch;
  if (io::has_attr(f, "/", "architecture")) file_arch = io::read_attr_string(f, "/", "architecture");
  const std::string prefix = "/weights/";
  std::map<std::string, std::string> present;  // key -> dataset path
  for (const auto& d : io::list_datasets(f, "/weights")) {
    std::string key = d.rfind(prefix, 0) == 0 ? d.substr(prefix.size()) : d;
    present.emplace(key, d);
  }
  Mismatch mm;
  Weights w;
  std::set<std::string> known;
  for (const auto* p : g.params()) {
    known.insert(p->key);
    auto it = present.find(p->key);
    if (it == present.end()) {
      mm.missing.push_back(p->key);
      continue;
    }
    auto a = io::read<float>(f, it->second);
    if (a.shape != p->shape) {
      mm.misshaped.push_back(p->key + " " + shape_string(a.shape) + " (expected " + shape_string(p->shape) + ")");
      continue;
    }
    auto t = at::empty(p->shape, at::kFloat);
    std::memcpy(t.data_ptr<float>(), a.data.data(), a.data.size() * sizeof(float));
    w.emplace(p->key, t);
  }
  for (const auto& [k, path] : present)
    if (!known.count(k) && !ignored_key(k)) mm.unexpected.push_back(k);
  if (mm.any()) {
    std::string src = "weights file " + h5_path;
    if (!file_arch.empty()) src += " (architecture '" + file_arch + "')";
    throw InputError(mm.message(g, src));
  }
  return w;
}

void save_weights(const std::string& h5_path, const Graph& g, const Weights& w) {
  try {
    check_weights(g, w, "weights to save");
  } catch (const InputError& e) {
    throw Error(e.what());
  }
  io::AtomicOutput out(h5_path, /*overwrite=*/true);
  auto& f = out.file();
  for (const auto& n : g.nodes)
    for (const auto& p : n.params) {
      auto t = w.at(p.key).detach().to(at::kCPU, at::kFloat).contiguous();
      io::write<float>(f, "/weights/" + p.key, t.data_ptr<float>(), p.shape, "1",
                       "deepinv state-dict tensor: " + p.role + " of " + std::string(to_string(n.op)) + " " + n.name);
    }
  io::write_attr(f, "/", "format", std::string(kFormat));
  io::write_attr(f, "/", "architecture", g.architecture);
  io::write_attr(f, "/", "dim", static_cast<int64_t>(g.dim));
  io::write_attr(f, "/", "in_channels", g.in_channels);
  io::write_attr(f, "/", "out_channels", g.out_channels);
  io::write_attr(f, "/", "ir_hash", g.hash());
  io::write_attr(f, "/", "parameter_count", g.parameter_count());
  out.commit();
}

}  // namespace pnp::nn
