// pnp_train's TOML schema (pnp/config/toml_schema.hpp): one table of fields drives parsing,
// validation, --set overrides, printing back as TOML and the key reference. Every error
// names the key and the line.
#include "pnp/config/toml_schema.hpp"
#include "pnp/training.hpp"

namespace pnp::training {
namespace fs = std::filesystem;
using namespace toml_schema;

nn::DenoiserSpec model_spec(const ModelConfig& m);

namespace {

void validate(const TrainConfig& c, const std::string& source) {
  auto fail = [&](const std::string& m) { throw InputError(source + ": " + m); };
  if (c.data.scale_min < c.data.patch) fail("data.scale_min must be at least data.patch");
  if (c.data.scale_max < c.data.scale_min) fail("data.scale_max must be at least data.scale_min");
  if (c.data.ellipses_max < c.data.ellipses_min) fail("data.ellipses_max must be at least data.ellipses_min");
  if (c.data.polygons_max < c.data.polygons_min) fail("data.polygons_max must be at least data.polygons_min");
  if (c.data.stack_fraction > 0 && c.data.stack.empty()) fail("data.stack_fraction > 0 needs data.stack");
  if (c.noise.sigma_max < c.noise.sigma_min) fail("noise.sigma_max must be at least noise.sigma_min");
  if (c.train.lr_min > c.train.lr) fail("train.lr_min must not exceed train.lr");
  if (c.model.dim == 3 && !c.data.stack.empty()) fail("data.stack holds 2D images: a 3D model (model.dim = 3) trains on random volumes only");
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

const std::vector<std::string> kSections = {"model", "data", "noise", "train", "validation", "output"};

#define M(expr) PNP_MEMBER(TrainConfig, expr)

const Schema<TrainConfig>& schema() {
  static const Schema<TrainConfig> s(kSections, {
      choice_field<TrainConfig>("model", "architecture", M(model.architecture), {"dncnn", "drunet", "unet"}, "denoiser network to train"),
      int_field<TrainConfig>("model", "dim", M(model.dim), 2, 3, "2: images; 3: volumes (3D convolutions, patch^3 crops of random CT-like volumes, held-out random-ellipsoid volumes; pnp_recon's denoiser.dim = 3)"),
      int_field<TrainConfig>("model", "channels", M(model.channels), 1, 64, "image channels (1 = grayscale)"),
      int_list_field<TrainConfig>("model", "features", M(model.features), 0, 8, 1, 4096, "feature counts per scale; [] = architecture default (DnCNN [64], DRUNet [64,128,256,512])"),
      int_field<TrainConfig>("model", "blocks", M(model.blocks), -1, 256, "DnCNN depth (conv layers) or DRUNet ResBlocks per stage; -1 = default"),

      int_field<TrainConfig>("data", "patch", M(data.patch), 8, 4096, "training crops are patch x patch (a multiple of the network's alignment)"),
      int_field<TrainConfig>("data", "batch", M(data.batch), 1, 65536, "crops per step"),
      int_field<TrainConfig>("data", "scale_min", M(data.scale_min), 8, 1 << 16, "smallest virtual scene a crop is cut from (>= patch)"),
      int_field<TrainConfig>("data", "scale_max", M(data.scale_max), 8, 1 << 16, "largest virtual scene a crop is cut from"),
      int_field<TrainConfig>("data", "ellipses_min", M(data.ellipses_min), 0, 1000, "fewest interior ellipses per scene"),
      int_field<TrainConfig>("data", "ellipses_max", M(data.ellipses_max), 0, 1000, "most interior ellipses per scene"),
      int_field<TrainConfig>("data", "polygons_min", M(data.polygons_min), 0, 1000, "fewest random polygons per scene"),
      int_field<TrainConfig>("data", "polygons_max", M(data.polygons_max), 0, 1000, "most random polygons per scene"),
      float_field<TrainConfig>("data", "texture_probability", M(data.texture_probability), 0.0, 1.0, "share of scenes with a smooth texture"),
      float_field<TrainConfig>("data", "texture_amplitude", M(data.texture_amplitude), 0.0, 10.0, "largest texture amplitude (body value 1)"),
      float_field<TrainConfig>("data", "contrast_min", M(data.contrast_min), 0.0, 1.0, "random contrast: narrowest value range of a scene within [0, 1]"),
      float_field<TrainConfig>("data", "gamma_max", M(data.gamma_max), 1.0, 10.0, "random contrast: gamma in [1/gamma_max, gamma_max]"),
      bool_field<TrainConfig>("data", "flips", M(data.flips), "random flips and transposes of the crops"),
      string_field<TrainConfig>("data", "stack", M(data.stack), PathKind::file, "optional HDF5 image stack [M, H, W] to crop from"),
      string_field<TrainConfig>("data", "stack_dataset", M(data.stack_dataset), PathKind::text, "dataset of the image stack"),
      float_field<TrainConfig>("data", "stack_fraction", M(data.stack_fraction), 0.0, 1.0, "share of crops taken from the stack"),

      float_field<TrainConfig>("noise", "sigma_min", M(noise.sigma_min), 0.0, 10.0, "smallest per-sample noise sigma (images in [0, 1])"),
      float_field<TrainConfig>("noise", "sigma_max", M(noise.sigma_max), 0.0, 10.0, "largest per-sample noise sigma"),

      int_field<TrainConfig>("train", "steps", M(train.steps), 1, 1LL << 40, "optimiser steps (the cosine schedule's length)"),
      float_field<TrainConfig>("train", "lr", M(train.lr), 0.0, 10.0, "peak Adam learning rate"),
      float_field<TrainConfig>("train", "lr_min", M(train.lr_min), 0.0, 10.0, "final learning rate of the cosine schedule"),
      int_field<TrainConfig>("train", "warmup", M(train.warmup), 0, 1LL << 40, "linear warm-up steps"),
      float_field<TrainConfig>("train", "beta1", M(train.beta1), 0.0, 0.999999, "Adam beta1"),
      float_field<TrainConfig>("train", "beta2", M(train.beta2), 0.0, 0.999999999, "Adam beta2"),
      float_field<TrainConfig>("train", "weight_decay", M(train.weight_decay), 0.0, 1.0, "Adam (L2) weight decay"),
      float_field<TrainConfig>("train", "grad_clip", M(train.grad_clip), 0.0, 1e30, "clip the global gradient norm; 0 = off"),
      choice_field<TrainConfig>("train", "loss", M(train.loss), {"mse", "l1"}, "training loss"),
      int_field<TrainConfig>("train", "seed", M(train.seed), 0, INT64_MAX, "seed of the weights and of every sample"),
      choice_field<TrainConfig>("train", "device", M(train.device), {"auto", "cpu", "cuda"}, "compute device; auto = CUDA when available"),
      float_field<TrainConfig>("train", "time_budget", M(train.time_budget), 0.0, 1e9, "seconds; > 0: after the warm-up, cut steps to fit (recorded)"),
      int_field<TrainConfig>("train", "stop_after", M(train.stop_after), 0, 1LL << 40, "stop with a checkpoint after this step; 0 = run to the end"),
      int_field<TrainConfig>("train", "threads", M(train.threads), 0, 4096, "torch intra-op threads; 0 = default"),
      choice_field<TrainConfig>("train", "precision", M(train.precision), {"fp32", "bf16"}, "forward/backward precision: fp32 (TF32 convolutions on CUDA) or bf16 autocast (fp32 weights, Adam and loss)"),

      int_field<TrainConfig>("validation", "every", M(validation.every), 0, 1LL << 40, "validate every this many steps (and at the end)"),
      int_field<TrainConfig>("validation", "images", M(validation.images), 1, 100000, "held-out random-ellipse phantoms"),
      int_field<TrainConfig>("validation", "size", M(validation.size), 8, 1 << 14, "phantom size (a multiple of the network's alignment)"),
      int_field<TrainConfig>("validation", "ellipses", M(validation.ellipses), 1, 1000, "ellipses per phantom"),
      float_field<TrainConfig>("validation", "sigma", M(validation.sigma), 0.0, 10.0, "noise sigma of the validation set"),
      int_field<TrainConfig>("validation", "seed", M(validation.seed), 0, INT64_MAX, "seed of the phantoms and their noise"),
      float_field<TrainConfig>("validation", "sigma_second", M(validation.sigma_second), 0.0, 10.0, "a second noise sigma, reported for the final weights (the study's 0.01); 0 = none"),

      string_field<TrainConfig>("output", "weights", M(output.weights), PathKind::output, "final weights (HDF5, nn weights layout)"),
      choice_field<TrainConfig>("output", "encoding", M(output.encoding), {"float32", "float16", "int8"}, "storage of the final weights: float32, float16 (half the size) or int8 (per-kernel scales, a quarter); checkpoints stay float32"),
      string_field<TrainConfig>("output", "sidecar", M(output.sidecar), PathKind::output, "JSON record of the training; empty = weights path with .json"),
      string_field<TrainConfig>("output", "log", M(output.log), PathKind::output, "HDF5 log: loss, learning rate, validation PSNR"),
      string_field<TrainConfig>("output", "checkpoint", M(output.checkpoint), PathKind::output, "checkpoint (weights, Adam state, curves), replaced atomically"),
      int_field<TrainConfig>("output", "checkpoint_every", M(output.checkpoint_every), 0, 1LL << 40, "checkpoint every this many steps; 0 = only at the end"),
      bool_field<TrainConfig>("output", "resume", M(output.resume), "continue from the checkpoint when it exists"),
      bool_field<TrainConfig>("output", "force", M(output.force), "overwrite existing weights, sidecar and log"),
      bool_field<TrainConfig>("output", "progress", M(output.progress), "print progress lines"),
      int_field<TrainConfig>("output", "progress_every", M(output.progress_every), 1, 1LL << 40, "steps between progress lines (and loss fetches)"),
  }, validate);
  return s;
}
#undef M

}  // namespace

nn::DenoiserSpec model_spec(const ModelConfig& m) {
  nn::DenoiserSpec s;
  s.architecture = m.architecture;
  s.dim = static_cast<int>(m.dim);
  s.in_channels = static_cast<int>(m.channels);
  s.out_channels = static_cast<int>(m.channels);
  s.features = m.features;
  s.blocks = static_cast<int>(m.blocks);
  s.pad = true;
  return s;
}

TrainConfig parse_train_config(std::string_view text, const std::string& source, const fs::path& base_dir) {
  return schema().parse(text, source, base_dir);
}

void apply_train_override(TrainConfig& cfg, std::string_view assignment) { schema().apply_override(cfg, assignment); }

TrainConfig load_train_config(const fs::path& path, const std::vector<std::string>& overrides) {
  return schema().load(path, overrides);
}

std::string TrainConfig::to_toml() const { return schema().to_toml(*this); }

std::string train_config_reference() { return schema().reference(); }

}  // namespace pnp::training
