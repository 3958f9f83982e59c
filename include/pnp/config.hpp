// The run configuration: TOML with sections [problem] [solver] [denoiser] [compile]
// [distributed] [output], loaded into typed structs with defaults. One schema table
// drives parsing, validation, `--set` overrides, printing back as TOML and the key
// reference of `--help-config`. Every error names the key and the line.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace pnp {

// The modes and backends, parsed once from their TOML strings (the schema's enum fields); the
// rest of the program compares enumerators and writes to_string's text into its outputs.
enum class CompileMode { none, pre, post, fused };  // where compilation is applied
enum class CompileBackend { native, inductor };      // how the compiled parts are compiled
enum class HaloMode { input, layer };                // how a distributed denoiser sees its neighbours

// Every value's text, in enumerator order: the schema's choices and what outputs record.
const std::vector<std::string>& enum_names(CompileMode);
const std::vector<std::string>& enum_names(CompileBackend);
const std::vector<std::string>& enum_names(HaloMode);
template <class E>
const std::string& to_string(E value) requires std::is_enum_v<E> && requires { enum_names(E{}); } {
  return enum_names(E{})[static_cast<size_t>(value)];
}
// The value whose name is `text` (parse_enum<HaloMode>(text)); nullopt for any other text.
template <class E>
std::optional<E> parse_enum(std::string_view text) {
  const std::vector<std::string>& names = enum_names(E{});
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

struct ProblemConfig {
  int64_t size = 256;                 // N: image is N x N
  int64_t slices = 0;                 // S > 0: a volume of S slices of N x N (z-slabs over the ranks); 0 = one image
  int64_t angles = 180;               // K
  int64_t detector = 0;               // D; 0 = ceil(sqrt(2) N)
  std::string phantom = "shepp_logan";  // shepp_logan | ellipses
  double noise_sigma = 0.01;          // Gaussian noise on the sinogram, relative to max |Ax|
  int64_t seed = 0;
  std::string sinogram;               // DXchange HDF5 input; empty = generate in memory
  std::string data_path = "/exchange/data";
  std::string theta_path = "/exchange/theta";
  std::string ground_truth_path = "/exchange/ground_truth";
};

struct SolverConfig {
  int64_t iterations = 10;
  double step = 0.0;                  // gamma; 0 = step_scale / ||A^T A||
  double step_scale = 0.99;
  std::string init = "zeros";         // zeros | backprojection | fbp
  std::string fbp_filter = "ramp";    // ramp | shepp_logan | cosine
  std::string clamp = "ground_truth";  // ground_truth | fixed | none
  double clamp_min = 0.0;
  double clamp_max = 1.0;
  double relaxation = 1.0;            // alpha: x = (1 - alpha) z + alpha D(z)
  int64_t metrics_every = 1;          // 0 = never
  int64_t power_iterations = 100;
  double power_tol = 1e-6;
  int64_t stable_window = 5;          // stable iteration = mean of the last this many
  std::string precision = "fp32";     // fp32 | fp64 (the CPU reference: state, physics and denoiser in float64)
};

struct DenoiserConfig {
  std::string architecture = "drunet";  // drunet | dncnn | unet | identity
  int64_t dim = 2;
  int64_t channels = 1;
  double sigma = 0.01;
  double sigma_start = 0.0;           // > 0: sigma falls geometrically from this (iteration 1) to `sigma` (the last)
  std::string weights;                // HDF5 path or shipped model name; empty = seeded random init
  int64_t seed = 0;
  std::string precision = "fp32";     // fp32 | bf16 | fp8 (pnp's FP8 kernel) | fp8_emulated (the eager FP8 reference, pnp/nn/fp8.hpp)
  std::string fp8_keep = "head_tail";  // fp8_emulated: the convolutions kept in fp32 (none | head | tail | head_tail | native | native_wide | native_deep); fp8: in bf16
  int64_t patch_size = 0;             // 0 = whole tile
  int64_t patch_overlap = 0;          // 0 = receptive radius
  double memory_limit_gb = 0.0;       // 0 = no limit
  bool memory_hold = true;            // float32 without TF32 on a GPU: cuDNN chooses within the plan (holds_to_plan)
  std::vector<int64_t> features;      // empty = architecture default
  int64_t blocks = -1;                // -1 = architecture default
};

struct CompileConfig {
  CompileMode mode = CompileMode::none;
  CompileBackend backend = CompileBackend::native;
  bool cuda_graphs = true;
  bool autotune = true;
  bool tf32 = true;                   // TF32 convolutions and matmuls on CUDA (PyTorch's default for cuDNN); false = strict fp32
  std::string cache_dir = ".pnp_cache";
  bool plan_cache = true;             // native with autotune: the plan cache in <cache_dir>/native
  std::string inductor_mode = "max-autotune";  // max-autotune | default
};

struct DistributedConfig {
  std::string decomposition = "slabs";  // slabs | grid
  std::vector<int64_t> grid = {0, 0};   // rows x cols of ranks for grid; 0 = choose
  int64_t halo = 0;                     // 0 = receptive radius (exact)
  HaloMode halo_mode = HaloMode::input;  // layer: include/pnp/nn/ir.hpp, with_layer_halos
  std::string comm = "auto";            // auto | nccl | mpi
  std::string device = "auto";          // auto | cpu | cuda
  // Volumes: the ranks that share one slab of slices, splitting its plane into tiles (decomposition,
  // grid); the ranks / plane_ranks slabs split the slices along z.
  int64_t plane_ranks = 1;
  double timeout_s = 1200;              // watchdog: end the job after this long without progress; 0 = off
};

// Whether distributed.halo_mode = layer can run with this compile section: the exchanges sit
// between the layers, so the executor must be eager (mode none) or native; an AOTInductor
// package is one opaque call with no place for them.
inline bool layer_halo_supported(const CompileConfig& c) {
  return c.mode == CompileMode::none || c.backend == CompileBackend::native;
}

struct OutputConfig {
  std::string file = "pnp_recon.h5";
  bool force = false;
  bool progress = true;
  std::string checkpoint;             // checkpoint file; empty = <file>.checkpoint.h5
  int64_t checkpoint_every = 0;       // write the checkpoint every this many iterations; 0 = only on a signal
  bool resume = false;                // continue from the checkpoint when it exists
  int64_t stop_after = 0;             // checkpoint and stop (exit 75) after this iteration; 0 = run to the end
  std::string checkpoint_path() const { return checkpoint.empty() ? file + ".checkpoint.h5" : checkpoint; }
};

struct Config {
  ProblemConfig problem;
  SolverConfig solver;
  DenoiserConfig denoiser;
  CompileConfig compile;
  DistributedConfig distributed;
  OutputConfig output;
  // The keys the file or a --set gave ("problem.size", ...); the others hold their defaults.
  std::set<std::string> given;
  bool is_given(const std::string& key) const { return given.count(key) > 0; }

  // The effective configuration as TOML text (every key, in schema order); parsing it
  // back gives the same Config.
  std::string to_toml() const;
};

// Parses TOML text. `source` names it in messages; relative paths in it are resolved
// against `base_dir`. Throws InputError("<source>:<line>: <key>: ...").
Config parse_config(std::string_view text, const std::string& source, const std::filesystem::path& base_dir);
// Loads a file, then applies the overrides ("section.key=value", TOML value syntax, bare
// words taken as strings), each validated like the file.
Config load_config(const std::filesystem::path& path, const std::vector<std::string>& overrides = {});
void apply_override(Config& cfg, std::string_view assignment);

// A reference of every key: section, name, type, default, constraint and meaning.
std::string config_reference();

// Closest name by edit distance, for did-you-mean hints; empty if nothing is close.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace pnp
