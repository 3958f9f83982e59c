#include "pnp/nn/weights.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "pnp/io.hpp"

namespace pnp::nn {

namespace {

constexpr const char* kFormat = "pnp-denoiser-weights/1";

uint64_t key_seed(uint64_t seed, const std::string& key) { return splitmix64(seed ^ splitmix64(fnv1a(key))); }

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

WeightEncoding parse_weight_encoding(const std::string& name) {
  if (name == "float32") return WeightEncoding::float32;
  if (name == "float16") return WeightEncoding::float16;
  if (name == "int8") return WeightEncoding::int8;
  throw InputError("weight encoding: expected \"float32\", \"float16\" or \"int8\", got \"" + name + "\"");
}

const char* to_string(WeightEncoding e) {
  switch (e) {
    case WeightEncoding::float32: return "float32";
    case WeightEncoding::float16: return "float16";
    case WeightEncoding::int8: return "int8";
  }
  return "?";
}

namespace {
constexpr const char* kInt8PerKernel = "int8_per_kernel";
constexpr int64_t kInt8MinElements = 4096;

bool int8_eligible(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return shape.size() >= 3 && n >= kInt8MinElements;
}

// One tensor of a weights file as float32, decoded from its encoding: int8 codes read as
// stored, the decode and the finiteness check plain passes over the values (of drunet_ct's
// 0.52 s load on two cores, HDF5's float16 conversion of the scales took 0.3 s, now
// io::read's own, and ATen's isfinite().all() 0.1 s).
at::Tensor read_tensor(io::H5File& f, const std::string& path, const std::string& key, const std::vector<int64_t>& shape) {
  std::string enc = io::has_attr(f, path, "encoding") ? io::read_attr_string(f, path, "encoding") : "float32";
  if (enc != kInt8PerKernel && enc != "float32" && enc != "float16")
    throw InputError("weights " + key + ": unknown encoding '" + enc + "'");
  at::Tensor t = at::empty(shape, at::kFloat);
  float* out = t.data_ptr<float>();
  const int64_t n = t.numel();
  if (enc == kInt8PerKernel) {  // w = code * scale, one scale per [out, in] kernel
    if (const io::ElementType et = io::element_type_of(f, path); !et.integer || et.bytes != 1)
      throw InputError("weights " + key + " are int8 per kernel (their 'encoding' attribute) but stored as " +
                       std::to_string(8 * et.bytes) + "-bit " + (et.integer ? "integers" : "floats"));
    const auto a = io::read<int8_t>(f, path);  // the codes as stored (a quarter of the bytes)
    if (shape.size() < 2) throw InputError("weights " + key + " are int8 per kernel but have fewer than two axes");
    const std::string sp = "/weight_scales/" + key;
    if (!io::exists(f, sp)) throw InputError("weights " + key + " are int8 but " + sp + " is missing");
    const std::vector<int64_t> want{shape[0], shape[1]};
    if (io::shape_of(f, sp) != want)
      throw InputError(sp + " must have shape " + shape_string(want) + ", has " + shape_string(io::shape_of(f, sp)));
    const auto sc = io::read<float>(f, sp);
    const int64_t k = n == 0 ? 0 : n / (shape[0] * shape[1]);  // elements per kernel
    for (size_t j = 0; j < sc.data.size(); ++j) {
      const float s = sc.data[j];
      const int8_t* code = a.data.data() + static_cast<int64_t>(j) * k;
      float* w = out + static_cast<int64_t>(j) * k;
      for (int64_t i = 0; i < k; ++i) w[i] = static_cast<float>(code[i]) * s;
    }
  } else {
    const auto a = io::read<float>(f, path);
    std::copy(a.data.begin(), a.data.end(), out);
  }
  if (!std::all_of(out, out + n, [](float v) { return std::isfinite(v); }))
    throw InputError("weights " + key + " hold non-finite values (NaN or Inf)");
  return t;
}
}  // namespace

Weights load_weights(const std::string& h5_path, const Graph& g) {
  try {
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
    std::set<std::string> known;
    std::vector<std::pair<const Param*, std::string>> to_read;
    for (const auto* p : g.params()) {
      known.insert(p->key);
      auto it = present.find(p->key);
      if (it == present.end()) {
        mm.missing.push_back(p->key);
        continue;
      }
      auto shape = io::shape_of(f, it->second);  // declared: checked before anything is read
      if (shape != p->shape) {
        mm.misshaped.push_back(p->key + " " + shape_string(shape) + " (expected " + shape_string(p->shape) + ")");
        continue;
      }
      to_read.emplace_back(p, it->second);
    }
    for (const auto& [k, path] : present)
      if (!known.count(k) && !ignored_key(k)) mm.unexpected.push_back(k);
    if (mm.any()) {
      std::string src = "weights file " + h5_path;
      if (!file_arch.empty()) src += " (architecture '" + file_arch + "')";
      throw InputError(mm.message(g, src));
    }
    Weights w;
    for (const auto& [p, path] : to_read) w.emplace(p->key, read_tensor(f, path, p->key, p->shape));
    return w;
  } catch (...) {
    rethrow_with_context("loading denoiser weights " + h5_path);
  }
}

void save_weights(const std::string& h5_path, const Graph& g, const Weights& w, WeightEncoding encoding) {
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
      const std::string path = "/weights/" + p.key;
      const std::string desc = "deepinv state-dict tensor: " + p.role + " of " + std::string(to_string(n.op)) + " " + n.name;
      std::string enc = "float32";
      if (encoding == WeightEncoding::float16) {
        io::write_float16(f, path, t.data_ptr<float>(), p.shape, "1", desc);
        enc = "float16";
      } else if (encoding == WeightEncoding::int8 && int8_eligible(p.shape)) {
        // Per-kernel symmetric scales, rounded to float16 first so that the codes are computed
        // against the scale the reader will use.
        at::Tensor k = t.view({p.shape[0], p.shape[1], -1});
        at::Tensor scale = (std::get<0>(k.abs().max(2)) / 127.0).contiguous();
        float* sp = scale.data_ptr<float>();
        for (int64_t i = 0; i < scale.numel(); ++i) sp[i] = io::round_to_float16(sp[i]);
        if (!at::isfinite(scale).all().item<bool>()) {
          io::write<float>(f, path, t.data_ptr<float>(), p.shape, "1", desc);  // too large for float16 scales
        } else {
          at::Tensor safe = at::where(scale > 0, scale, at::ones_like(scale)).unsqueeze(2);
          at::Tensor codes = at::round(k / safe).clamp(-127, 127).to(at::kChar).contiguous();
          io::write<int8_t>(f, path, codes.data_ptr<int8_t>(), p.shape, "1", desc + " (int8 codes; x /weight_scales/" + p.key + ")");
          io::write_float16(f, "/weight_scales/" + p.key, sp, {p.shape[0], p.shape[1]}, "1",
                            "per-kernel scale of the int8 codes in /weights/" + p.key + ": w = code * scale");
          enc = kInt8PerKernel;
        }
      } else {
        io::write<float>(f, path, t.data_ptr<float>(), p.shape, "1", desc);
      }
      io::write_attr(f, path, "encoding", enc);
    }
  io::write_attr(f, "/", "format", std::string(kFormat));
  io::write_attr(f, "/", "architecture", g.architecture);
  io::write_attr(f, "/", "dim", static_cast<int64_t>(g.dim));
  io::write_attr(f, "/", "in_channels", g.in_channels);
  io::write_attr(f, "/", "out_channels", g.out_channels);
  io::write_attr(f, "/", "ir_hash", g.hash());
  io::write_attr(f, "/", "parameter_count", g.parameter_count());
  io::write_attr(f, "/", "encoding", std::string(to_string(encoding)));
  out.commit();
}

}  // namespace pnp::nn
