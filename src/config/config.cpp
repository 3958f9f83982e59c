#include "pnp/config.hpp"

#include "pnp/config/toml_schema.hpp"

namespace pnp {
namespace fs = std::filesystem;
using namespace toml_schema;

const std::vector<std::string>& enum_names(CompileMode) {
  static const std::vector<std::string> names = {"none", "pre", "post", "fused"};
  return names;
}
const std::vector<std::string>& enum_names(CompileBackend) {
  static const std::vector<std::string> names = {"native", "inductor"};
  return names;
}
const std::vector<std::string>& enum_names(HaloMode) {
  static const std::vector<std::string> names = {"input", "layer"};
  return names;
}

namespace {

// Cross-key rules that no single key can check.
void validate(const Config& c, const std::string& source) {
  if (c.solver.clamp == "fixed" && !(c.solver.clamp_min < c.solver.clamp_max))
    throw InputError(source + ": solver.clamp_min must be below solver.clamp_max with clamp = \"fixed\"");
  if (c.denoiser.patch_size > 0 && c.denoiser.patch_overlap * 2 >= c.denoiser.patch_size)
    throw InputError(source + ": denoiser.patch_overlap must be less than half of denoiser.patch_size");
  // The solver reconstructs 2D single-channel CT images: other denoisers would fail inside the
  // loop, so they are refused here (they run in pnp_denoise and pnp_bench).
  if (c.denoiser.dim != 2 && c.problem.slices == 0 && c.problem.sinogram.empty())
    throw InputError(source + ": denoiser.dim = " + std::to_string(c.denoiser.dim) +
                     ": a 3D denoiser needs a volume (problem.slices > 0, or a 3D problem.sinogram); one image "
                     "takes a 2D one");
  if (c.problem.slices > 0 && c.problem.sinogram.empty() && c.problem.phantom != "shepp_logan")
    throw InputError(source + ": problem.slices needs problem.phantom = \"shepp_logan\" (pnp's 3D Shepp-Logan), got \"" +
                     c.problem.phantom + "\"");
  if (c.problem.slices == 0 && c.problem.sinogram.empty() && c.distributed.plane_ranks != 1)
    throw InputError(source + ": distributed.plane_ranks splits the ranks of a volume (problem.slices > 0); a 2D image's "
                     "ranks all share its plane, so leave it at 1");
  if (c.solver.precision == "fp64") {
    auto refuse = [&](const std::string& what) {
      throw InputError(source + ": solver.precision = \"fp64\" is the CPU reference in float64, " + what);
    };
    if (c.distributed.device != "cpu" && c.distributed.device != "auto")
      refuse("so it needs distributed.device = \"cpu\"");
    if (c.compile.mode != CompileMode::none) refuse("eager only: set compile.mode = \"none\"");
    if (c.denoiser.precision != "fp32") refuse("its denoiser the fp32 network read in float64: leave denoiser.precision = \"fp32\"");
    if (c.denoiser.memory_limit_gb > 0) refuse("without a memory limit (its plan counts float32)");
    if (c.output.resume || c.output.checkpoint_every > 0 || c.output.stop_after > 0)
      refuse("without checkpoints (they hold float32)");
  }
  if (c.denoiser.precision == "fp8") {
    auto refuse = [&](const std::string& what) {
      throw InputError(source + ": denoiser.precision = \"fp8\" runs pnp's FP8 convolutions on a Hopper GPU, " + what +
                       " (denoiser.precision = \"fp8_emulated\" is its reference, on any device)");
    };
    if (c.compile.mode == CompileMode::none || c.compile.backend != CompileBackend::native)
      refuse("in the native executor: set compile.mode = \"pre\", \"post\" or \"fused\" and compile.backend = \"native\"");
    if (c.distributed.device == "cpu") refuse("so it needs distributed.device = \"cuda\" (or \"auto\" on a GPU)");
    if (c.denoiser.dim != 2 || c.problem.slices > 0) refuse("on 2D images with a 2D network (problem.slices = 0, denoiser.dim = 2)");
    // its activation scales are calibrated on the executor's first call: one call on the whole
    // image, so that every part of it is quantised alike
    if (c.denoiser.patch_size > 0 || c.denoiser.memory_limit_gb > 0 || c.distributed.halo_mode == HaloMode::layer)
      refuse("on the whole image in one denoiser call, its activation scales calibrated on it: unset "
             "denoiser.patch_size and denoiser.memory_limit_gb, and keep distributed.halo_mode = \"input\"");
    if (c.solver.precision != "fp32") refuse("with solver.precision = \"fp32\"");
  }
  if (c.denoiser.precision == "fp8_emulated" && c.compile.mode != CompileMode::none)
    throw InputError(source + ": denoiser.precision = \"fp8_emulated\" is the eager reference of FP8: set compile.mode = "
                     "\"none\" (the compiled FP8 path is denoiser.precision = \"fp8\")");
  if (c.denoiser.channels != 1)
    throw InputError(source + ": denoiser.channels = " + std::to_string(c.denoiser.channels) +
                     ": a CT image has one channel, so the denoiser must take 1");
  if (c.distributed.halo_mode == HaloMode::layer) {
    // The denoiser runs distributed, one whole tile per rank, exchanging at every layer.
    if (!layer_halo_supported(c.compile))
      throw InputError(source + ": distributed.halo_mode = \"layer\" needs compile.backend = \"native\" (or "
                       "compile.mode = \"none\"): an AOTInductor package is one opaque call with no place for "
                       "the exchanges between its layers");
    if (c.denoiser.patch_size > 0 || c.denoiser.memory_limit_gb > 0)
      throw InputError(source + ": distributed.halo_mode = \"layer\" denoises each rank's tile whole; unset "
                       "denoiser.patch_size and denoiser.memory_limit_gb (add ranks to cut the memory per rank)");
    if (c.distributed.halo > 0)
      throw InputError(source + ": distributed.halo sets the input halo; with halo_mode = \"layer\" there is "
                       "none (each layer exchanges its own), so leave it at 0");
  }
}

const std::vector<std::string> kSections = {"problem", "solver", "denoiser", "compile", "distributed", "output"};

const Schema<Config>& schema() {
  using C = Config;
  static const Schema<Config> s(kSections, {
      int_field<C>("problem", "size", PNP_MEMBER(C, problem.size), 8, 65536, "image size N (N x N unit pixels)"),
      int_field<C>("problem", "slices", PNP_MEMBER(C, problem.slices), 0, 1 << 20, "a volume of this many slices of N x N (parallel beam: each slice its own 2D problem, the slices split over the ranks in slabs along z); 0 = one 2D image. With a sinogram file, its data's dimensions decide (a 3D [angles, slices, detector] data set is a volume)"),
      int_field<C>("problem", "angles", PNP_MEMBER(C, problem.angles), 1, 100000, "number of projection angles K, spread over [0, 180) deg"),
      int_field<C>("problem", "detector", PNP_MEMBER(C, problem.detector), 0, 200000, "detector bins D; 0 = ceil(sqrt(2) N)"),
      choice_field<C>("problem", "phantom", PNP_MEMBER(C, problem.phantom), {"shepp_logan", "ellipses"}, "phantom generated when no sinogram file is given"),
      float_field<C>("problem", "noise_sigma", PNP_MEMBER(C, problem.noise_sigma), 0.0, 10.0, "Gaussian noise std on the generated sinogram, relative to max |Ax|"),
      int_field<C>("problem", "seed", PNP_MEMBER(C, problem.seed), 0, INT64_MAX, "seed of the noise and of random phantoms"),
      string_field<C>("problem", "sinogram", PNP_MEMBER(C, problem.sinogram), PathKind::file, "DXchange HDF5 sinogram; empty = generate the phantom in memory"),
      string_field<C>("problem", "data_path", PNP_MEMBER(C, problem.data_path), PathKind::text, "dataset of the sinogram [angles, detector]"),
      string_field<C>("problem", "theta_path", PNP_MEMBER(C, problem.theta_path), PathKind::text, "dataset of the angles in degrees"),
      string_field<C>("problem", "ground_truth_path", PNP_MEMBER(C, problem.ground_truth_path), PathKind::text, "dataset of the optional ground truth [N, N]"),

      int_field<C>("solver", "iterations", PNP_MEMBER(C, solver.iterations), 1, 1000000, "PnP iterations"),
      float_field<C>("solver", "step", PNP_MEMBER(C, solver.step), 0.0, 1e30, "step gamma; 0 = step_scale / ||A^T A|| (power method)"),
      float_field<C>("solver", "step_scale", PNP_MEMBER(C, solver.step_scale), 1e-6, 2.0, "gamma = step_scale / ||A^T A|| when step = 0 (study: 0.99)"),
      choice_field<C>("solver", "init", PNP_MEMBER(C, solver.init), {"zeros", "backprojection", "fbp"}, "initial image"),
      choice_field<C>("solver", "precision", PNP_MEMBER(C, solver.precision), {"fp32", "fp64"}, "the solver's state, physics and denoiser: fp64 is the CPU reference (device cpu, compile.mode = \"none\", denoiser.precision = \"fp32\" read as float64, no memory limit or checkpoint), for distributed runs that must equal the one-rank run to 1e-12; it also writes /reconstruction_float64"),
      choice_field<C>("solver", "fbp_filter", PNP_MEMBER(C, solver.fbp_filter), {"ramp", "shepp_logan", "cosine"}, "filter of the FBP initial image"),
      choice_field<C>("solver", "clamp", PNP_MEMBER(C, solver.clamp), {"ground_truth", "fixed", "none"}, "clamp bounds: the ground truth's [min, max] (study), [clamp_min, clamp_max], or none"),
      float_field<C>("solver", "clamp_min", PNP_MEMBER(C, solver.clamp_min), -1e30, 1e30, "lower bound with clamp = \"fixed\""),
      float_field<C>("solver", "clamp_max", PNP_MEMBER(C, solver.clamp_max), -1e30, 1e30, "upper bound with clamp = \"fixed\""),
      float_field<C>("solver", "relaxation", PNP_MEMBER(C, solver.relaxation), 0.0, 1.0, "alpha in x = (1 - alpha) z + alpha D(z); 1 = plain PnP-PGD"),
      int_field<C>("solver", "metrics_every", PNP_MEMBER(C, solver.metrics_every), 0, 1000000, "compute PSNR and residual every this many iterations (0 = never)"),
      int_field<C>("solver", "power_iterations", PNP_MEMBER(C, solver.power_iterations), 1, 100000, "maximum power-method iterations for ||A^T A||"),
      float_field<C>("solver", "power_tol", PNP_MEMBER(C, solver.power_tol), 0.0, 1.0, "relative tolerance of the power method"),
      int_field<C>("solver", "stable_window", PNP_MEMBER(C, solver.stable_window), 1, 1000000, "stable iteration time = mean of the last this many iterations"),

      choice_field<C>("denoiser", "architecture", PNP_MEMBER(C, denoiser.architecture), {"drunet", "dncnn", "unet", "identity"}, "denoiser network (identity = plain gradient descent)"),
      int_field<C>("denoiser", "dim", PNP_MEMBER(C, denoiser.dim), 2, 3, "2D or 3D network"),
      int_field<C>("denoiser", "channels", PNP_MEMBER(C, denoiser.channels), 1, 64, "image channels"),
      float_field<C>("denoiser", "sigma", PNP_MEMBER(C, denoiser.sigma), 0.0, 10.0, "noise level given to the denoiser (study: 0.01); with sigma_start, the last iteration's"),
      float_field<C>("denoiser", "sigma_start", PNP_MEMBER(C, denoiser.sigma_start), 0.0, 10.0, "annealed sigma (DPIR's schedule): the first iteration's noise level, falling geometrically to denoiser.sigma at the last; 0 = sigma in every iteration"),
      string_field<C>("denoiser", "weights", PNP_MEMBER(C, denoiser.weights), PathKind::file_or_name, "HDF5 weights file or shipped model name; empty = seeded random init"),
      int_field<C>("denoiser", "seed", PNP_MEMBER(C, denoiser.seed), 0, INT64_MAX, "seed of the random weight init"),
      choice_field<C>("denoiser", "precision", PNP_MEMBER(C, denoiser.precision), {"fp32", "bf16", "fp8", "fp8_emulated"}, "activation and weight precision (bf16 accumulates in fp32); fp8 (experimental: with fp8_keep = \"native_deep\" 4 % faster than bf16 on DRUNet 4096² and 0.02 dB below fp32 in input/quality_4096.toml, H100; on every candidate layer slower than bf16 and 0.94 dB below fp32, docs/quality.md): the 64- to 512-channel stride-1 convolutions in e4m3 on pnp's Hopper kernel (weights per output channel, activations per tensor calibrated on the first call, the FP8 tensor cores' accumulation; the other layers bf16; native backend, one rank, the whole image in one call); fp8_emulated: the eager reference of FP8 (e4m3 weights per output channel, activations per tensor calibrated on the first call, fp32 compute; compile.mode = \"none\"), for the quality an FP8 path would give"),
      choice_field<C>("denoiser", "fp8_keep", PNP_MEMBER(C, denoiser.fp8_keep), {"none", "head", "tail", "head_tail", "native", "native_wide", "native_deep"}, "precision = \"fp8_emulated\": the convolutions kept in fp32 (the first, the last, both, none; native: all but the stride-1 64- to 512-channel ones, the layers that \"fp8\" runs in FP8; native_wide: native's and the 64-channel ones, FP8 on 128 to 512 channels only; native_deep: native's and those below 256 channels, FP8 on 256 and 512 only, where pnp's FP8 kernel beats bf16 on an H100); \"fp8\": kept in bf16"),
      int_field<C>("denoiser", "patch_size", PNP_MEMBER(C, denoiser.patch_size), 0, 1 << 20, "denoise in patches of this size; 0 = whole tile"),
      int_field<C>("denoiser", "patch_overlap", PNP_MEMBER(C, denoiser.patch_overlap), 0, 1 << 20, "patch overlap; 0 = receptive radius (exact)"),
      float_field<C>("denoiser", "memory_limit_gb", PNP_MEMBER(C, denoiser.memory_limit_gb), 0.0, 1e6, "per-rank device memory budget in GB (10^9 bytes), held in the CUDA allocator: the denoiser runs in the patches whose estimated total fits with the least repeated work; a volume's slab that does not fit streams through the device from host memory, a group of slices at a time; on a GPU the plan fills at most 90 % of it (95 % for a tile in patches, run without CUDA graphs) and stays 512 MiB below it; 0 = no limit (a volume on a GPU: 90 % of its memory)"),
      bool_field<C>("denoiser", "memory_hold", PNP_MEMBER(C, denoiser.memory_hold), "float32 without TF32 on a GPU (compile.tf32 = false; eager or native): hold the CUDA allocator to the memory plan until the first iteration has run, so that cuDNN's convolutions, whose strict-float32 engines may ask for tens of GB of workspace, choose within the plan. cuDNN then takes the first engine that fits the free memory, so compile modes may choose different engines and differ in rounding (about 1e-5, relative); false: every mode chooses alike, and the plan does not bound the peak"),
      int_list_field<C>("denoiser", "features", PNP_MEMBER(C, denoiser.features), 0, 8, 1, 4096, "feature counts per scale; [] = architecture default"),
      int_field<C>("denoiser", "blocks", PNP_MEMBER(C, denoiser.blocks), -1, 64, "blocks per scale (DRUNet nb); -1 = architecture default"),

      enum_field<C>("compile", "mode", PNP_MEMBER(C, compile.mode), "where compilation is applied: none, pre (inner denoiser), post (distributed regions), fused (whole step)"),
      enum_field<C>("compile", "backend", PNP_MEMBER(C, compile.backend), "how it is compiled: native (cuDNN fusions, channels-last, CUDA graphs) or inductor (AOTInductor)"),
      bool_field<C>("compile", "cuda_graphs", PNP_MEMBER(C, compile.cuda_graphs), "capture compiled regions as CUDA graphs (GPU only)"),
      bool_field<C>("compile", "autotune", PNP_MEMBER(C, compile.autotune), "autotune cuDNN algorithms at compile time"),
      bool_field<C>("compile", "tf32", PNP_MEMBER(C, compile.tf32), "TF32 tensor-core convolutions and matrix products on CUDA (PyTorch's default for convolutions); false = strict fp32 everywhere (exact comparisons)"),
      string_field<C>("compile", "cache_dir", PNP_MEMBER(C, compile.cache_dir), PathKind::text, "directory of the inductor package cache (and of the native plan cache, compile.plan_cache)"),
      bool_field<C>("compile", "plan_cache", PNP_MEMBER(C, compile.plan_cache), "native backend with autotune: keep its measured choices (cuDNN graph epilogue or not, and the plan) in <cache_dir>/native, so that a later run loads them instead of timing (DRUNet 4096² on one H200, fp32: a compile of 2.29-2.62 s cold, 0.30-0.35 s cached, where the cached one loads every plan and captures with no warm-up run)"),
      choice_field<C>("compile", "inductor_mode", PNP_MEMBER(C, compile.inductor_mode), {"max-autotune", "default"}, "inductor compile mode"),

      choice_field<C>("distributed", "decomposition", PNP_MEMBER(C, distributed.decomposition), {"slabs", "grid"}, "tiles: row slabs or a 2D grid"),
      int_list_field<C>("distributed", "grid", PNP_MEMBER(C, distributed.grid), 2, 2, 0, 65536, "[rows, cols] of the rank grid; 0 = choose"),
      int_field<C>("distributed", "halo", PNP_MEMBER(C, distributed.halo), 0, 65536, "ghost width in pixels; 0 = the denoiser's receptive radius (exact)"),
      enum_field<C>("distributed", "halo_mode", PNP_MEMBER(C, distributed.halo_mode), "input: each rank denoises its tile plus a ghost halo of the receptive radius (recomputing its neighbours' borders); layer: the denoiser runs distributed, exchanging each conv's 1-px halo with the neighbours at every layer (no redundant work; native or eager only)"),
      choice_field<C>("distributed", "comm", PNP_MEMBER(C, distributed.comm), {"auto", "nccl", "mpi"}, "communication backend; auto = NCCL for one GPU per rank, else MPI"),
      choice_field<C>("distributed", "device", PNP_MEMBER(C, distributed.device), {"auto", "cpu", "cuda"}, "compute device; auto = CUDA when available"),
      int_field<C>("distributed", "plane_ranks", PNP_MEMBER(C, distributed.plane_ranks), 1, 65536, "volumes: the ranks sharing each slab of slices, which split its plane into tiles (decomposition, grid, halo as for one image); the ranks / plane_ranks slabs split the slices along z. 2D images: must stay 1"),
      float_field<C>("distributed", "timeout_s", PNP_MEMBER(C, distributed.timeout_s), 0.0, 1e7, "watchdog: end every rank when one sees no progress for this many seconds (a stopped or dead rank, a hung device); keep it above the longest compile; 0 = off"),

      string_field<C>("output", "file", PNP_MEMBER(C, output.file), PathKind::text, "output HDF5 file (written atomically by rank 0)"),
      bool_field<C>("output", "force", PNP_MEMBER(C, output.force), "overwrite an existing output file"),
      bool_field<C>("output", "progress", PNP_MEMBER(C, output.progress), "print a progress line per iteration"),
      string_field<C>("output", "checkpoint", PNP_MEMBER(C, output.checkpoint), PathKind::output, "checkpoint file (the image, the iteration, the metrics and timings so far); empty = <output.file>.checkpoint.h5"),
      int_field<C>("output", "checkpoint_every", PNP_MEMBER(C, output.checkpoint_every), 0, 1000000, "write the checkpoint (atomically) every this many iterations; 0 = only on SIGTERM/SIGUSR1 or output.stop_after"),
      bool_field<C>("output", "resume", PNP_MEMBER(C, output.resume), "continue from the checkpoint when it exists (pnp_recon --resume); it must come from the same configuration"),
      int_field<C>("output", "stop_after", PNP_MEMBER(C, output.stop_after), 0, 1000000, "write the checkpoint and stop (exit code 75) after this iteration, as a signal would; 0 = run to the end"),
  }, validate);
  return s;
}

}  // namespace

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  return toml_schema::closest_match(word, candidates);
}

Config parse_config(std::string_view text, const std::string& source, const fs::path& base_dir) {
  return schema().parse(text, source, base_dir);
}

void apply_override(Config& cfg, std::string_view assignment) { schema().apply_override(cfg, assignment); }

Config load_config(const fs::path& path, const std::vector<std::string>& overrides) {
  return schema().load(path, overrides);
}

std::string Config::to_toml() const { return schema().to_toml(*this); }

std::string config_reference() { return schema().reference(); }

}  // namespace pnp
