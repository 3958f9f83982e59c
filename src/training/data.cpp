// Training and validation data: random CT-like scenes (phantom module) or crops of an HDF5
// image stack, with Gaussian noise of a per-sample sigma. Every sample is a pure function of
// (seed, step, index): its own generator, no shared state, so threads cannot change it.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <sstream>

#include "pnp/io.hpp"
#include "pnp/validate.hpp"
#include "pnp/synthetic.hpp"
#include "pnp/training.hpp"

namespace pnp::training {

namespace {

uint64_t mix(uint64_t a, uint64_t b, uint64_t c) { return splitmix64(splitmix64(splitmix64(a) ^ b) ^ c); }

// Uniform in [0, 1) and standard normal (Box-Muller) from a 64-bit generator: portable, so a
// seed gives the same data with any standard library.
struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  double uniform() { return static_cast<double>(g() >> 11) * 0x1.0p-53; }
  int64_t below(int64_t n) { return static_cast<int64_t>(uniform() * static_cast<double>(n)); }
  bool have = false;
  double spare = 0;
  double normal() {
    if (have) {
      have = false;
      return spare;
    }
    double u1 = 1.0 - uniform(), u2 = uniform();
    double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * std::numbers::pi * u2;
    spare = r * std::sin(t);
    have = true;
    return r * std::cos(t);
  }
};

// In-place dihedral transform of a p x p image: bit 0 flips rows, bit 1 flips columns, bit 2 transposes.
void dihedral(std::vector<float>& img, int64_t p, int code) {
  std::vector<float> out(img.size());
  for (int64_t i = 0; i < p; ++i)
    for (int64_t j = 0; j < p; ++j) {
      int64_t si = (code & 1) ? p - 1 - i : i, sj = (code & 2) ? p - 1 - j : j;
      if (code & 4) std::swap(si, sj);
      out[static_cast<size_t>(i * p + j)] = img[static_cast<size_t>(si * p + sj)];
    }
  img.swap(out);
}

// In-place flips of a p^3 volume [z, y, x]: bits 0-2 as dihedral in every slice, bit 3 reverses z.
void flip_volume(std::vector<float>& vol, int64_t p, int code) {
  const size_t plane = static_cast<size_t>(p * p);
  for (int64_t z = 0; z < p; ++z) {
    std::vector<float> img(vol.begin() + static_cast<std::ptrdiff_t>(z * p * p),
                           vol.begin() + static_cast<std::ptrdiff_t>((z + 1) * p * p));
    dihedral(img, p, code & 7);
    std::copy(img.begin(), img.end(), vol.begin() + static_cast<std::ptrdiff_t>(z * p * p));
  }
  if (code & 8)
    for (int64_t z = 0; z < p / 2; ++z)
      std::swap_ranges(vol.begin() + static_cast<std::ptrdiff_t>(z * plane), vol.begin() + static_cast<std::ptrdiff_t>((z + 1) * plane),
                       vol.begin() + static_cast<std::ptrdiff_t>((p - 1 - z) * plane));
}

}  // namespace

BatchSource::BatchSource(const TrainConfig& cfg) : cfg_(cfg) {
  const auto& d = cfg_.data;
  if (d.stack.empty()) return;
  try {
    auto f = io::H5File::open(d.stack);
    double elements = 1;
    for (int64_t v : io::shape_of(f, d.stack_dataset)) elements *= static_cast<double>(v);
    validate::require_fits_memory("'" + d.stack_dataset + "' declares " + std::to_string(static_cast<int64_t>(elements)) +
                                      " values: reading and normalising them needs",
                                  8.0 * elements);  // the values and their normalised copy
    auto a = io::read<float>(f, d.stack_dataset);
    validate::require_finite(a.data.data(), a.shape, "'" + d.stack_dataset + "'");
    std::vector<int64_t> shape = a.shape;
    if (shape.size() == 2) shape.insert(shape.begin(), 1);
    if (shape.size() != 3) throw InputError("must be [M, H, W] or [H, W], got " + nn::shape_string(a.shape));
    if (shape[1] < d.patch || shape[2] < d.patch)
      throw InputError("images of " + std::to_string(shape[1]) + " x " + std::to_string(shape[2]) +
                       " are smaller than data.patch = " + std::to_string(d.patch));
    at::Tensor t = at::from_blob(a.data.data(), shape, at::kFloat).clone();
    // Per-image min-max normalisation to [0, 1] (random contrast is applied per crop).
    auto flat = t.view({shape[0], -1});
    auto lo = std::get<0>(flat.min(1, true)), hi = std::get<0>(flat.max(1, true));
    flat.sub_(lo).div_((hi - lo).clamp_min(1e-12));
    stack_ = t.contiguous();
  } catch (...) {
    rethrow_with_context("data.stack " + d.stack + " (" + d.stack_dataset + ")");
  }
}

std::string BatchSource::describe() const {
  const auto& d = cfg_.data;
  std::ostringstream os;
  const bool volume = cfg_.model.dim == 3;
  os << (volume ? "random volumes (body ellipsoid, " : "random scenes (body ellipse, ") << d.ellipses_min << "-"
     << d.ellipses_max << (volume ? " ellipsoids, " : " ellipses, ") << d.polygons_min << "-" << d.polygons_max
     << (volume ? " prisms" : " polygons") << ", texture p=" << d.texture_probability << " amplitude<=" << d.texture_amplitude
     << ", contrast range>=" << d.contrast_min << ", gamma<=" << d.gamma_max << ") of size " << d.scale_min << "-"
     << d.scale_max << (volume ? "^3, " : ", ") << d.patch << (volume ? "^3" : "x" + std::to_string(d.patch)) << " crops"
     << (d.flips ? " with flips" : "") << ", batch " << d.batch;
  if (stack_.defined())
    os << "; " << d.stack_fraction * 100 << "% crops of " << d.stack << ":" << d.stack_dataset << " (" << stack_.size(0)
       << " images)";
  os << "; Gaussian noise sigma ~ U[" << cfg_.noise.sigma_min << ", " << cfg_.noise.sigma_max << "]";
  return os.str();
}

Batch BatchSource::batch(int64_t step) const {
  const auto& d = cfg_.data;
  const int64_t B = d.batch, P = d.patch, C = cfg_.model.channels;
  const bool volume = cfg_.model.dim == 3;
  const int64_t V = volume ? P * P * P : P * P;  // values per sample and channel
  std::vector<int64_t> shape = {B, C, P, P};
  if (volume) shape.push_back(P);
  Batch b;
  b.clean = at::empty(shape, at::kFloat);
  b.noisy = at::empty(shape, at::kFloat);
  b.sigma = at::empty({B}, at::kFloat);
  float* clean = b.clean.data_ptr<float>();
  float* noisy = b.noisy.data_ptr<float>();
  float* sig = b.sigma.data_ptr<float>();
  SceneOptions so;
  so.ellipses_min = static_cast<int>(d.ellipses_min), so.ellipses_max = static_cast<int>(d.ellipses_max);
  so.polygons_min = static_cast<int>(d.polygons_min), so.polygons_max = static_cast<int>(d.polygons_max);
  so.texture_probability = d.texture_probability, so.texture_max_amplitude = d.texture_amplitude;
  so.contrast_min = d.contrast_min, so.gamma_max = d.gamma_max;
  const float* stack = stack_.defined() ? stack_.data_ptr<float>() : nullptr;
  at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      Rng rng(mix(cfg_.train.seed, static_cast<uint64_t>(step), static_cast<uint64_t>(i)));
      std::vector<float> img;
      if (stack && rng.uniform() < d.stack_fraction) {
        const int64_t m = rng.below(stack_.size(0)), H = stack_.size(1), W = stack_.size(2);
        const int64_t r0 = rng.below(H - P + 1), c0 = rng.below(W - P + 1);
        img.resize(static_cast<size_t>(P * P));
        const float* src = stack + m * H * W;
        for (int64_t r = 0; r < P; ++r)
          for (int64_t c = 0; c < P; ++c) img[static_cast<size_t>(r * P + c)] = src[(r0 + r) * W + c0 + c];
        // Random contrast, as for scenes: an affine map into a sub-range of [0, 1].
        const double range = d.contrast_min + (1.0 - d.contrast_min) * rng.uniform();
        const double lo = (1.0 - range) * rng.uniform();
        for (auto& v : img) v = static_cast<float>(lo + range * v);
      } else if (volume) {  // a P^3 crop of a random n^3 volume, flipped in the plane and along z
        const int64_t n = d.scale_min + rng.below(d.scale_max - d.scale_min + 1);
        const int64_t r0 = rng.below(n - P + 1), c0 = rng.below(n - P + 1), z0 = rng.below(n - P + 1);
        img = random_scene_volume(n, rng.g(), so, Window{r0, c0, P, P}, z0, P);
        if (d.flips) flip_volume(img, P, static_cast<int>(rng.below(16)));
      } else {
        const int64_t n = d.scale_min + rng.below(d.scale_max - d.scale_min + 1);
        const int64_t r0 = rng.below(n - P + 1), c0 = rng.below(n - P + 1);
        img = random_scene(n, rng.g(), so, Window{r0, c0, P, P});
      }
      if (d.flips && !volume) dihedral(img, P, static_cast<int>(rng.below(8)));
      const double s = cfg_.noise.sigma_min + (cfg_.noise.sigma_max - cfg_.noise.sigma_min) * rng.uniform();
      sig[i] = static_cast<float>(s);
      for (int64_t c = 0; c < C; ++c) {
        float* cl = clean + (i * C + c) * V;
        float* no = noisy + (i * C + c) * V;
        for (int64_t k = 0; k < V; ++k) {
          cl[k] = img[static_cast<size_t>(k)];
          no[k] = static_cast<float>(cl[k] + s * rng.normal());
        }
      }
    }
  });
  return b;
}

ValidationSet make_validation_set(const ValidationConfig& v, int64_t channels, int64_t dim) {
  ValidationSet vs;
  const int64_t M = v.images, S = v.size, C = channels, V = dim == 3 ? S * S * S : S * S;
  std::vector<int64_t> shape = {M, C, S, S};
  if (dim == 3) shape.push_back(S);
  vs.sigma = v.sigma;
  vs.clean = at::empty(shape, at::kFloat);
  vs.noisy = at::empty(shape, at::kFloat);
  for (int64_t m = 0; m < M; ++m) {
    const uint64_t seed = v.seed + static_cast<uint64_t>(m);
    auto img = dim == 3 ? random_ellipsoid_volume(S, static_cast<int>(v.ellipses), seed)
                        : random_ellipse_image(S, static_cast<int>(v.ellipses), seed);
    Rng rng(mix(v.seed, 0x76616c6964ull, static_cast<uint64_t>(m)));  // "valid"
    for (int64_t c = 0; c < C; ++c) {
      float* cl = vs.clean.data_ptr<float>() + (m * C + c) * V;
      float* no = vs.noisy.data_ptr<float>() + (m * C + c) * V;
      for (int64_t k = 0; k < V; ++k) {
        cl[k] = img[static_cast<size_t>(k)];
        no[k] = static_cast<float>(cl[k] + v.sigma * rng.normal());
      }
    }
  }
  vs.noisy_psnr = mean_psnr(vs.noisy, vs.clean);
  return vs;
}

double mean_psnr(const at::Tensor& x, const at::Tensor& reference) {
  at::Tensor d = (x.to(at::kCPU, at::kDouble) - reference.to(at::kCPU, at::kDouble)).reshape({x.size(0), -1});
  at::Tensor mse = d.square().mean(1);
  return (-10.0 * at::log10(mse.clamp_min(1e-20))).mean().item<double>();
}

}  // namespace pnp::training
