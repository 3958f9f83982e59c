// Denoiser training (pnp_train): any IR denoiser, trained with LibTorch autograd and Adam
// under a cosine learning-rate schedule, on images generated on the fly (random CT-like scenes
// from the phantom module, optionally crops of an HDF5 image stack) with Gaussian noise of a
// per-sample sigma (given to sigma-aware networks as their sigma map).
//
// Determinism: every sample (image, crop, noise) is a pure function of (seed, step, index), the
// weights start from nn::init_weights(graph, seed), and the optimiser state is checkpointed, so
// one seed gives one loss curve on the CPU, and resuming from a checkpoint continues it exactly.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "pnp/nn/ir.hpp"
#include "pnp/nn/models.hpp"
#include "pnp/nn/weights.hpp"

namespace pnp::training {

// ---- Configuration: TOML sections [model] [data] [noise] [train] [validation] [output] ----

struct ModelConfig {
  std::string architecture = "dncnn";  // dncnn | drunet | unet
  int64_t dim = 2;                     // 2: images; 3: volumes (3D convolutions on patch^3 crops)
  int64_t channels = 1;                // image channels (1 = grayscale)
  std::vector<int64_t> features;       // empty = architecture default
  int64_t blocks = -1;                 // -1 = architecture default (DnCNN depth, DRUNet nb)
};

struct DataConfig {
  int64_t patch = 64;          // training crops are patch x patch
  int64_t batch = 16;
  int64_t scale_min = 128;     // a crop is cut from a virtual scene of size in [scale_min, scale_max]
  int64_t scale_max = 384;
  int64_t ellipses_min = 2, ellipses_max = 14;
  int64_t polygons_min = 0, polygons_max = 6;
  double texture_probability = 0.7;
  double texture_amplitude = 0.35;
  double contrast_min = 0.15;  // random contrast: value range at least this wide within [0, 1]
  double gamma_max = 1.5;
  bool flips = true;           // random flips and transposes of synthetic crops
  std::string stack;           // optional HDF5 image stack [M, H, W] (or [H, W])
  std::string stack_dataset = "/images";
  double stack_fraction = 0.0; // share of samples cropped from the stack (needs `stack`)
};

struct NoiseConfig {
  double sigma_min = 0.0;  // per-sample sigma ~ U[sigma_min, sigma_max], images in [0, 1]
  double sigma_max = 0.1;
};

struct TrainSettings {
  int64_t steps = 1000;
  double lr = 1e-3;
  double lr_min = 1e-6;          // cosine schedule from lr down to lr_min
  int64_t warmup = 100;          // linear warm-up steps
  double beta1 = 0.9, beta2 = 0.999;
  double weight_decay = 0.0;
  double grad_clip = 0.0;        // clip the global gradient norm to this; 0 = off
  std::string loss = "mse";      // mse | l1
  uint64_t seed = 0;
  std::string device = "auto";   // auto | cpu | cuda
  double time_budget = 0.0;      // s; > 0: after `warmup` steps, cut `steps` to fit this budget
  int64_t stop_after = 0;        // stop (with a checkpoint) after this step; 0 = run to the end
  int64_t threads = 0;           // torch intra-op threads; 0 = default
  // Compute precision of the forward and backward passes: "fp32" (TF32 convolutions on
  // CUDA, as PyTorch's default) or "bf16" (autocast: bf16 convolutions with fp32 weights,
  // Adam state, loss and accumulation). On CUDA the activations are channels-last.
  std::string precision = "fp32";
};

struct ValidationConfig {
  int64_t every = 500;       // validate every this many steps (and at the end); 0 = only at the end
  int64_t images = 8;        // held-out random-ellipse phantoms (random_ellipse_image)
  int64_t size = 128;
  int64_t ellipses = 12;
  double sigma = 0.05;
  uint64_t seed = 1000003;   // phantom seeds seed..seed+images-1, disjoint from training scenes
  double sigma_second = 0.01;  // a second noise level, reported at the end (the study's sigma); 0 = none
};

struct OutputConfig {
  std::string weights = "denoiser.h5";  // final weights (nn::save_weights layout + training attributes)
  std::string encoding = "float32";     // how the final weights are stored: float32 | float16 | int8 (nn::WeightEncoding)
  std::string sidecar;                  // JSON record of the training; empty = weights with .json
  std::string log = "train_log.h5";     // loss, learning rate and validation curves
  std::string checkpoint = "train_checkpoint.h5";
  int64_t checkpoint_every = 1000;      // 0 = only at the end / stop_after
  bool resume = false;                  // continue from `checkpoint` when it exists
  bool force = false;                   // overwrite existing weights, log and sidecar
  bool progress = true;
  int64_t progress_every = 100;
};

struct TrainConfig {
  ModelConfig model;
  DataConfig data;
  NoiseConfig noise;
  TrainSettings train;
  ValidationConfig validation;
  OutputConfig output;
  std::string to_toml() const;  // every key, in schema order; parses back to the same config
};

// Throws InputError("<source>:<line>: <section.key>: ...") for unknown sections and keys (with
// a did-you-mean hint), wrong types and out-of-range values. Relative paths (data.stack and the
// outputs) are resolved against base_dir.
TrainConfig parse_train_config(std::string_view text, const std::string& source, const std::filesystem::path& base_dir);
TrainConfig load_train_config(const std::filesystem::path& path, const std::vector<std::string>& overrides = {});
void apply_train_override(TrainConfig& cfg, std::string_view assignment);  // "section.key=value"
std::string train_config_reference();

nn::DenoiserSpec model_spec(const ModelConfig& m);

// ---- Data ----

struct Batch {
  at::Tensor clean;  // [B, C, P, P] (dim 3: [B, C, P, P, P]) float32, CPU, values in [0, 1]
  at::Tensor noisy;  // clean + sigma_b * n
  at::Tensor sigma;  // [B] float32
};

// The training images of one step: a pure function of (config, seed, step).
class BatchSource {
 public:
  explicit BatchSource(const TrainConfig& cfg);  // loads the image stack, if any
  Batch batch(int64_t step) const;
  std::string describe() const;  // one line for logs and the sidecar

 private:
  TrainConfig cfg_;
  at::Tensor stack_;  // [M, H, W] float32 in [0, 1] (per-image min-max), or undefined
};

// Held-out validation set: random-ellipse phantoms (dim 3: random-ellipsoid volumes,
// random_ellipsoid_volume) with fixed noise of sigma.
struct ValidationSet {
  at::Tensor clean, noisy;  // [M, C, S, S] (dim 3: [M, C, S, S, S])
  double sigma = 0;
  double noisy_psnr = 0;  // mean over images, peak 1
};
ValidationSet make_validation_set(const ValidationConfig& v, int64_t channels, int64_t dim = 2);

// Mean PSNR (peak 1) over the batch of x against reference.
double mean_psnr(const at::Tensor& x, const at::Tensor& reference);

// ---- Model: a differentiable forward over the IR ----

class TrainableModel {
 public:
  // channels_last: conv weights and activations in NHWC (what cuDNN's tensor-core kernels read).
  TrainableModel(nn::Graph g, const nn::Weights& w, at::Device device, bool channels_last = false);
  // x: [B, C, H, W] (3D graphs: [B, C, D, H, W]); sigma: [B] (the sigma map of sigma-aware
  // graphs; ignored otherwise).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& sigma, bool training);
  std::vector<at::Tensor> parameters() const;  // trainable tensors, in graph order
  nn::Weights weights() const;                 // detached CPU copies, keyed as deepinv
  void load(const nn::Weights& w);             // copies values in place
  const nn::Graph& graph() const { return g_; }

 private:
  nn::Graph g_;
  std::vector<std::vector<at::Tensor>> params_;  // per node, in node.params order
  std::vector<int> last_use_;
  bool channels_last_ = false;
};

// ---- Training ----

struct TrainResult {
  int64_t steps_done = 0;     // steps completed (including those before a resume)
  int64_t steps_planned = 0;  // total of the schedule (after any time-budget cut)
  bool finished = false;      // false when stopped by stop_after
  std::vector<double> loss;   // per step, from step 0
  std::vector<double> lr;
  std::vector<int64_t> val_step;
  std::vector<double> val_psnr;
  double noisy_psnr = 0;      // of the validation set
  double seconds = 0;         // training wall time of this invocation
  double total_seconds = 0;   // including the time before a resume
  std::string device;
  int64_t parameter_count = 0;
};

// Runs (or resumes) the training of cfg, writing checkpoints, the log, and at the end the
// weights and sidecar. `out` receives the progress lines.
TrainResult run_training(const TrainConfig& cfg, std::ostream& out);

}  // namespace pnp::training
