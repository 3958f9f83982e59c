// pnp_bench: the denoiser sweep (docs/design.md, "Study settings" and "Files").
// Architecture x shape x backend, one forward per call (x <- D(x, sigma)), warm-up calls then
// timed calls each synchronised and timed with device events (host clock on CPU); stable = mean
// of the last `stable` timed calls. One HDF5 row per configuration (docs/output_schema.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "pnp/config.hpp"
#include "pnp/core.hpp"
#include "pnp/nn/inductor.hpp"
#include "pnp/nn/native.hpp"

namespace pnp::benchmark {

struct ModelOverride {
  std::vector<int64_t> features;  // empty: the architecture's default
  int blocks = -1;                // -1: default
};

// The sweep TOML (input/sweep.toml). Sections and keys:
//   [sweep]   architectures, channels, batch, shapes (spatial sizes, 2 or 3 entries each),
//             backends, warmup, timed, stable, device, dtype, sigma, seed
//   [native]  channels_last, fuse, autotune, cuda_graph, warmup_calls, cudnn_fused_bf16, cudnn_epilogues,
//             cudnn_graph_convs, cudnn_benchmark, upsample_conv, narrow_convs, wgmma_convs, nhwc_kernels, parallel_plan_builds, plan_cache
//   [models.<architecture>]  features, blocks   (e.g. smaller networks for CI)
//   [output]  file, force
// Unknown keys, wrong types and out-of-range values throw InputError naming the key and line.
struct SweepConfig {
  std::vector<std::string> architectures{"dncnn", "drunet", "unet"};
  int64_t channels = 3;
  int64_t batch = 1;
  std::vector<std::vector<int64_t>> shapes{{512, 512},      {1024, 1024},  {2048, 2048},
                                           {128, 128, 128}, {8, 512, 512}, {16, 512, 512}};
  std::vector<std::string> backends{"eager", "native"};
  int64_t warmup = 5;   // calls before the timed ones; the first of them includes the compile
  int64_t timed = 10;
  int64_t stable = 5;   // stable = mean of the last `stable` timed calls
  std::string device = "cuda";
  std::string dtype = "float32";
  double sigma = 0.1;
  int64_t seed = 0;
  nn::NativeOptions native;
  // [native] plan_cache: the native plan cache (NativeOptions::plan_cache_dir) in
  // <inductor cache_dir>/native; off by default: the sweep measures cold compiles.
  bool native_plan_cache = false;
  // [inductor]: mode, cache_dir, and how many packages compile at once before the timing
  // starts ($PNP_INDUCTOR_MODE and $PNP_CACHE_DIR, when set, override mode and cache_dir).
  nn::InductorOptions inductor;
  int64_t compile_jobs = 4;
  // [torch_compile]: the peer arms (backends "torch_compile" and "torch_compile_max_autotune":
  // deepinv's own module under torch.compile, python -m pnp_peer): the time cap of one row's
  // subprocess, compile and timing together; a row that hits it is skipped with that reason.
  double torch_compile_timeout_s = 600;
  std::map<std::string, ModelOverride> models;
  std::string output = "pnp_bench.h5";
  bool force = false;
  std::string to_toml() const;  // the effective configuration
};

SweepConfig parse_sweep(const std::string& toml_text, const std::string& source);
SweepConfig load_sweep(const std::filesystem::path& path);
// Replaces the grid by a tiny CPU one for CI (seconds on two cores): small networks, 32x32 and
// 8x16x16 inputs, float32; keeps backends, timing counts, output and native options.
void make_quick(SweepConfig& c);

struct Row {
  std::string architecture;
  int64_t dim = 2;
  std::string shape;    // "1x3x512x512"
  std::string backend;  // eager, native, inductor, torch_compile, torch_compile_max_autotune
  std::string mode;     // none (eager) or pre (a compiled denoiser for one shape)
  std::string gpu;      // device name ("NVIDIA H200", "cpu")
  std::string status = "ok";  // ok or skipped
  std::string reason;
  double first_call_s = std::numeric_limits<double>::quiet_NaN();
  double compile_s = std::numeric_limits<double>::quiet_NaN();
  // inductor: the exporter's wall time when this run compiled the package (compile_jobs of them
  // in parallel), 0 on a cache hit; NaN for other backends. compile_s includes it.
  double export_s = std::numeric_limits<double>::quiet_NaN();
  double stable_s = std::numeric_limits<double>::quiet_NaN();
  int64_t peak_memory_bytes = 0;
  bool cuda_graph = false;  // the arm replays a CUDA graph (native with cuda_graph; torch.compile max-autotune)
  std::string module;       // torch_compile arms: the peer's module and versions
  std::string notes;        // native and inductor arms: the executor's notes, one a line
  double flops = 0, bytes = 0, intensity = 0;  // roofline, study conventions
  bool failed = false;  // skipped because of an error other than out-of-memory / unavailable
};

// Runs every configuration, printing one progress line per row to `progress`; on_row (if set)
// is called with the rows so far after each one.
std::vector<Row> run_sweep(const SweepConfig& c, std::ostream& progress,
                           const std::function<void(const std::vector<Row>&)>& on_row = {});
// Writes c.output atomically; replaces an existing file when `overwrite` or c.force.
void write_results(const SweepConfig& c, const std::vector<Row>& rows, bool overwrite = false);

// The machine's measured ceilings (docs/design.md, "Roofline"): what the data-sheet roofs of roofline.hpp are
// on this device. Copy bandwidth (a device-to-device copy; bytes read + written), dense matrix
// products in TF32, plain FP32 and BF16 (2 m n k FLOP), and the DRUNet-shaped convolution
// (64 -> 64 channels, 3x3, channels-last) in TF32, FP32 and BF16 (TF32 rows on CUDA only).
// Each kernel runs `warmup` times, then `timed` times, each call synchronised and timed alone
// (device events on CUDA); the median is reported. Inputs are random; the preallocated outputs
// (copy, matmul) are poisoned with NaN first, and a sample of every output is checked against
// float64 after the timed calls.
struct Ceiling {
  std::string name;   // copy, matmul_{tf32,fp32,bf16,fp8} (fp8: GPU only), conv3x3_{tf32,fp32,bf16}
  std::string shape;  // e.g. "536870912" (elements), "8192x8192x8192" (m x n x k), "1x64x4096x4096"
  double seconds = 0;  // median of the timed calls
  double rate = 0;     // GB/s (copy) or TFLOP/s
  std::string unit;    // "GB/s" or "TFLOP/s"
  double error = 0;    // relative error of the checked sample against float64 (0 for copy: exact)
};
struct CeilingOptions {
  std::string device = "cuda";
  bool quick = false;  // small sizes (CI on CPU; seconds)
  int warmup = 3, timed = 10;
};
std::vector<Ceiling> measure_ceilings(const CeilingOptions& o, std::ostream& progress);
// The provenance of every pnp_bench file: program, version, commit, date, host, torch and CUDA.
Provenance bench_provenance();
// /ceilings/<column> datasets (one row per kernel) and the provenance attributes.
void write_ceilings(const std::string& path, const std::vector<Ceiling>& rows, const std::string& device,
                    bool overwrite);

// ---- The scaling model (pnp_bench --scaling CONFIG; docs/performance.md#scaling) ---------
// Predicts a PnP iteration's time and parallel efficiency at R ranks for a pnp_recon
// configuration, for row slabs and grids and both halo modes, from
//  - compute measured on this device: one rank standing in for the busiest rank of R (the most
//    counted denoiser FLOPs, then the most messages) runs that rank's real workload: the
//    gradient region (FP, BP and the step on its owned tile, all angles) and one denoiser call
//    (input halo: the extended tile; layer halo: the owned tile through the graph with halo
//    nodes, the halos filled locally with zeros instead of exchanged);
//  - communication from the exact plans (the sinogram allreduce; the input HaloPlan's boxes or
//    every halo node's strips, nn::layer_halo_traffic) through an α-β model: a ring allreduce
//    2 (R-1)/R bytes / β + 2 α, an exchange phases * α + phase bytes / β, within a node
//    (R <= gpus_per_node) at the intra-node link's α, β, else at the inter-node link's.
// T(R) = gradient + allreduce + denoise + halo; efficiency = T(1) / (R T(R)), T(1) of the same
// halo mode's 1-rank row.
struct LinkModel {
  int gpus_per_node = 8;
  // NVLink 4 on H100/H200 SXM: 900 GB/s per GPU, both directions together (NVIDIA's H100
  // data sheet), so 450 GB/s each way; a few microseconds per NCCL point-to-point call.
  double intra_gb_per_s = 450, intra_latency_us = 5;
  // InfiniBand NDR, one 400 Gb/s HCA per GPU (DGX H100 layout): 50 GB/s; ~5 us per message.
  double inter_gb_per_s = 50, inter_latency_us = 8;
};
struct ScalingOptions {
  std::vector<int> ranks = {1, 2, 4, 8, 16, 32, 64};
  std::vector<std::string> layouts = {"slabs", "grid"};
  std::vector<HaloMode> modes = {HaloMode::input, HaloMode::layer};
  int warmup = 2, timed = 5;  // per measured workload; the median of the timed calls
  LinkModel link;
};
struct ScalingRow {
  int ranks = 1;
  std::string layout;
  HaloMode mode = HaloMode::input;
  std::string status = "ok", reason;
  int stand_in = 0;           // the rank whose workload was measured
  std::string tile;           // its denoiser input shape
  double gradient_s = 0, denoise_s = 0, allreduce_s = 0, halo_s = 0, iteration_s = 0, efficiency = 0;
  double redundancy = 0;      // counted denoiser FLOPs over the ideal share (the stand-in's)
  double halo_bytes = 0, halo_messages = 0;  // sent by the stand-in per denoiser call
  int64_t denoiser_bytes = 0;  // peak device memory of its denoiser (0 on CPU)
};
std::vector<ScalingRow> run_scaling(const Config& cfg, const ScalingOptions& o, std::ostream& progress);
// /scaling/<column> datasets, the link model as attributes of /scaling, the configuration and
// the provenance.
void write_scaling(const std::string& path, const Config& cfg, const ScalingOptions& o,
                   const std::vector<ScalingRow>& rows, bool overwrite);

}  // namespace pnp::benchmark
