// pnp_recon's output file (docs/output_schema.md), written by rank 0 atomically, and the plan
// --dry-run prints.
#include "output.hpp"

#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "pnp/device.hpp"

namespace pnp::recon {

namespace {
// What each /timings/setup/<part> measured (PnpRecord::setup).
std::string setup_description(const std::string& part) {
  static const std::map<std::string, std::string> d{
      {"mpi", "wall time from program start to MPI started (MPI_Init), per rank"},
      {"configuration", "the command line and the configuration file read, the input files probed, per rank"},
      {"plan", "the plan: device, decomposition, memory plans, output checks (after waiting for the CUDA context, "
               "made on a thread from the program's start, concurrently with MPI_Init), per rank"},
      {"communicator", "making the communicator (MPI, NCCL), per rank"},
      {"data", "reading the sinogram, or simulating it (phantom, forward projection, noise), per rank"},
      {"denoiser", "building the denoiser: graph and weights (native and inductor compile at their first call, "
                   "in iteration 1), per rank"},
      {"resume", "reading the checkpoint (output.resume; ~0 otherwise), per rank"},
      {"data_check", "the ranks' agreement on the data (a hash of the sinogram), per rank"},
      {"step_size", "the step size: the distributed power method for ||A^T A|| (or the checkpoint's), per rank"},
      {"initial_image", "the initial image (solver.init, or the checkpoint's), device synchronised, per rank"}};
  auto it = d.find(part);
  return it != d.end() ? it->second : "set-up part " + part + ", per rank";
}
}  // namespace

std::string hold_note(const Config& cfg, at::Device dev) {
  if (!cudnn_workspaces_unbounded(cfg, dev.is_cuda())) return "";
  return holds_to_plan(cfg, true) ? "float32 without TF32: cuDNN's convolutions choose within the memory plan until the "
                                    "first iteration has run (denoiser.memory_hold)"
                                  : "denoiser.memory_hold = false: cuDNN's float32 convolutions choose their workspaces "
                                    "unbounded, and the memory plan does not bound the peak";
}

std::string plan_text(const ReconstructionPlan& plan, int ranks, const std::string& comm_kind) {
  const Config& cfg = plan.cfg;
  const Decomposition& d = plan.exec.decomp;
  const nn::Graph& g = plan.graph;
  const at::Device dev = plan.device;
  std::ostringstream os;
  const int64_t n = cfg.problem.size;
  const auto [k, det] = sinogram_dims(cfg);
  os << "problem      ";
  if (d.z.volume()) os << d.z.slices << " slices of ";
  os << n << " x " << n << (d.z.volume() ? " (a volume, each slice its own parallel-beam problem), " : " image, ") << k
     << " angles, " << det << " detector bins, "
     << (cfg.problem.sinogram.empty() ? "phantom " + cfg.problem.phantom + " generated in memory"
                                      : "sinogram " + cfg.problem.sinogram)
     << "\n";
  os << "solver       " << cfg.solver.iterations << " iterations, init " << cfg.solver.init << ", step ";
  if (cfg.solver.step > 0)
    os << cfg.solver.step;
  else
    os << cfg.solver.step_scale << "/L";
  os << ", clamp " << cfg.solver.clamp << ", relaxation " << cfg.solver.relaxation << "\n";
  os << "denoiser     " << g.architecture << " (" << g.dim << "D, " << g.parameter_count() << " parameters, receptive radius "
     << nn::receptive_radius(g) << " px, alignment " << g.alignment() << "), sigma ";
  if (cfg.denoiser.sigma_start > 0)
    os << cfg.denoiser.sigma_start << " -> " << cfg.denoiser.sigma << " (annealed)";
  else
    os << cfg.denoiser.sigma;
  os << ", "
     << cfg.denoiser.precision << ", weights "
     << (cfg.denoiser.weights.empty() ? "seeded random init" : cfg.denoiser.weights) << "\n";
  const ExecutionPlan& ex = plan.exec;
  static const char* const kExecutor[] = {"eager", "native", "inductor"};
  const bool patched = std::any_of(plan.memory.begin(), plan.memory.end(), [](const MemoryPlan& m) { return !captures_allowed(m); });
  os << "compile      mode " << to_string(cfg.compile.mode) << ", backend " << to_string(cfg.compile.backend)
     << "; the denoiser runs " << kExecutor[static_cast<int>(ex.executor)]
     << (ex.executor_graph && !patched ? " as one CUDA graph per call" : "")
     << (ex.region_graphs && !patched ? ", the solver's regions as CUDA graphs" : "")
     << (patched && (ex.executor_graph || ex.region_graphs) ? " (in patches: no CUDA graphs, captures_allowed)" : "") << "\n";
  os << "ranks        " << ranks << " on " << (dev.is_cuda() ? "CUDA" : "CPU") << ", communication " << comm_kind << "\n";
  os << "decomposition " << d.describe();
  const auto& plans = plan.memory;
  if (cfg.denoiser.memory_limit_gb > 0)
    os << "memory limit " << cfg.denoiser.memory_limit_gb << " GB per rank (denoiser.memory_limit_gb)\n";
  for (size_t r = 0; r < plans.size(); ++r) os << "memory       rank " << r << ": " << plans[r].describe() << "\n";
  if (const std::string note = hold_note(cfg, dev); !note.empty()) os << "             " << note << "\n";
  os << "denoiser work (halo_mode " << to_string(cfg.distributed.halo_mode)
     << (d.z.volume() ? ", per iteration over the rank's slab)\n" : ", per call)\n");
  for (size_t r = 0; r < plan.work.size(); ++r) {
    const DenoiserWork& w = plan.work[r];
    char line[200];
    std::snprintf(line, sizeof line, "             rank %zu: %.4g GFLOP, %.3fx the ideal share; sends %s in %lld messages over %lld exchange(s)",
                  r, w.flops / 1e9, w.redundancy(), human_bytes(double(w.exchange_bytes)).c_str(), (long long)w.messages,
                  (long long)w.exchanges);
    os << line;
    if (w.patches > 1) {
      std::snprintf(line, sizeof line, "; %lld patches, %.3fx one call on the whole tile", (long long)w.patches,
                    w.patch_redundancy);
      os << line;
    }
    os << "\n";
  }
  return os.str();
}

namespace {
// A gathered per-rank count (bytes, calls) as [ranks] int64.
void write_counts(io::H5File& f, const std::string& path, const std::vector<double>& v, int64_t ranks,
                  const std::string& unit, const std::string& doc) {
  const std::vector<int64_t> n(v.begin(), v.end());
  io::write(f, path, n.data(), {ranks}, unit, doc);
}

// /memory: every rank's peaks (whole run, set-up, metrics, each phase), estimate and patches.
void write_memory(io::H5File& f, const Config& cfg, const GatheredRecord& g, int64_t ranks, at::Device dev) {
  write_counts(f, "/memory/peak_bytes", g.peak, ranks, "B",
               "peak memory allocated by each rank over the whole run (CUDA: the caching allocator's; CPU: "
               "LibTorch's CPU allocator's, counted)");
  write_counts(f, "/memory/setup_peak_bytes", g.setup_peak, ranks, "B",
               "peak memory allocated by each rank before the loop (data, step size, buffers)");
  write_counts(f, "/memory/metrics_peak_bytes", g.metrics_peak, ranks, "B",
               "peak memory allocated by each rank while measuring the quality metrics (0: none measured)");
  write_counts(f, "/memory/reserved_peak_bytes", g.reserved_peak, ranks, "B",
               "CUDA: peak memory the caching allocator of each rank held (allocated bytes and the free pieces "
               "between them: what a budget bounds); 0 on the CPU");
  write_counts(f, "/memory/allocator_retries", g.allocator_retries, ranks, "1",
               "CUDA: times the caching allocator of each rank freed its cache and synchronised to make room "
               "(a run close to its budget pays for them in time); 0 on the CPU");
  write_counts(f, "/memory/estimated_bytes", g.estimate, ranks, "B",
               "memory estimated before the run for each rank: the largest of its stages (solver state, metrics, "
               "weights, denoiser activations, workspace, patching, set-up; pnp::plan_memory)");
  std::vector<int64_t> shape, patches;
  for (const MemoryPlan& m : g.memory) shape.insert(shape.end(), {m.patch_rows, m.patch_cols}), patches.push_back(m.patches);
  io::write(f, "/memory/patch_shape", shape.data(), {ranks, 2}, "px",
            "input rows and columns of one denoiser patch on each rank (0, 0 = the whole extended tile): "
            "denoiser.patch_size, or chosen within denoiser.memory_limit_gb for the least redundant work");
  io::write(f, "/memory/patches", patches.data(), {ranks}, "1", "denoiser calls per iteration on each rank");
  if (cfg.problem.slices > 0) {  // a volume's slab: its slices per call
    std::vector<int64_t> batch, batches;
    for (const MemoryPlan& m : g.memory) batch.push_back(m.batch), batches.push_back(m.batches);
    io::write(f, "/memory/batch", batch.data(), {ranks}, "slice",
              "a volume's slices per denoiser call on each rank (the most of its slab that fit the budget)");
    io::write(f, "/memory/batches", batches.data(), {ranks}, "1",
              "denoiser calls per patch over each rank's slab in one iteration (patches is per call)");
    std::vector<int64_t> stream, groups;
    for (const MemoryPlan& m : g.memory) stream.push_back(m.stream), groups.push_back(m.stream_groups);
    io::write(f, "/memory/stream", stream.data(), {ranks}, "slice",
              "a streamed slab's slices on the device at once on each rank (0: the slab resident); its slab "
              "stays in host memory and passes through the device a group at a time");
    io::write(f, "/memory/stream_groups", groups.data(), {ranks}, "1",
              "groups per iteration of each rank's streamed slab (0: the slab resident)");
  }
  io::write_attr(f, "/memory", "limit_gb", cfg.denoiser.memory_limit_gb);
  io::write_attr(f, "/memory", "held", int64_t{holds_to_plan(cfg, dev.is_cuda()) ? 1 : 0});
  for (size_t i = 0; i + 1 < pnp_phases().size(); ++i)
    write_counts(f, "/memory/phase_peak_bytes/" + pnp_phases()[i], g.phase_peak[i], ranks, "B",
                 "peak device memory allocated during the phase, over all iterations, per rank (on the CPU: "
                 "LibTorch's CPU allocator, counted)");
}
// /reconstruction and /ground_truth: one image, or a volume chunked by slice and compressed, so
// that a notebook reads a slice without the rest.
void write_images(io::H5File& f, const Decomposition& d, const GatheredRecord& g) {
  if (g.image64.defined()) {  // solver.precision = "fp64": the iterate as computed, beside the float32 one
    const at::Tensor x = g.image64.contiguous();
    io::write(f, "/reconstruction_float64", x.data_ptr<double>(), x.sizes().vec(), "attenuation per pixel",
              "final PnP iterate x in float64 (solver.precision = \"fp64\"), gathered from all tiles and slabs");
  }
  if (!d.z.volume()) {
    at::Tensor img = g.image.contiguous();
    io::write(f, "/reconstruction", img.data_ptr<float>(), {d.n, d.n}, "attenuation per pixel",
              "final PnP iterate x, gathered from all tiles");
    if (g.truth.defined()) {
      at::Tensor gt = g.truth.contiguous();
      io::write(f, "/ground_truth", gt.data_ptr<float>(), {d.n, d.n}, "attenuation per pixel", "ground-truth image");
    }
    return;
  }
  io::write_attr(f, "/", "slices", d.z.slices);
  auto volume = [&](const std::string& path, const at::Tensor& v, const char* what) {
    const at::Tensor c = v.contiguous();
    io::create_chunked(f, path, {d.z.slices, d.n, d.n}, {1, d.n, d.n}, 1, "attenuation per pixel", what);
    io::write_hyperslab(f, path, {0, 0, 0}, {d.z.slices, d.n, d.n}, c.data_ptr<float>());
  };
  volume("/reconstruction", g.image, "final PnP iterate x [slices, N, N], gathered from every rank's slab and tile");
  if (g.truth.defined()) volume("/ground_truth", g.truth, "ground-truth volume [slices, N, N]");
}
}  // namespace

void write_output(const Config& cfg, const Decomposition& d, const Communicator& comm,
                  const PnpRecord& rec, const GatheredRecord& g, at::Device dev, const Problem& prob,
                  const std::vector<std::string>& denoiser_notes) {
  const std::string& angles = prob.angles_source;
  io::AtomicOutput out(cfg.output.file, cfg.output.force);
  io::H5File& f = out.file();
  Provenance p = basic_provenance("pnp_recon");
  p.torch_version = TORCH_VERSION;
  p.cuda_version = cuda_version();
  p.nccl_version = nccl_version();
  io::write_provenance(f, p);
  io::write_attr(f, "/", "ranks", int64_t{comm.size()});
  if (!angles.empty()) io::write_attr(f, "/", "angles", angles);
  if (prob.volume() && !cfg.problem.sinogram.empty()) {  // the counts' normalisation, over the volume
    io::write_attr(f, "/", "clipped_transmissions", prob.clipped);
    io::write_attr(f, "/", "dead_bins", prob.dead_bins);
  }
  io::write_attr(f, "/", "gpu_names", g.gpu_names);
  io::write_attr(f, "/", "config", cfg.to_toml());
  io::write_attr(f, "/", "compile_mode", to_string(cfg.compile.mode));
  io::write_attr(f, "/", "compile_backend", to_string(cfg.compile.backend));
  io::write_attr(f, "/", "architecture", cfg.denoiser.architecture);
  io::write_attr(f, "/", "device", dev.is_cuda() ? std::string("cuda") : std::string("cpu"));
  io::write_attr(f, "/", "comm_backend", comm.backend());
  io::write_attr(f, "/", "step", rec.step);
  io::write_attr(f, "/", "power_iterations", rec.power_iterations);
  io::write_attr(f, "/", "power_converged", int64_t{rec.power_converged});
  io::write_attr(f, "/", "tf32", int64_t{cfg.compile.tf32});
  write_images(f, d, g);
  const int64_t iters = static_cast<int64_t>(rec.total.size()), ranks = comm.size();
  for (size_t i = 0; i < pnp_phases().size(); ++i)
    io::write(f, "/timings/" + pnp_phases()[i], g.phase[i].data(), {iters, ranks}, "s",
              pnp_phases()[i] == "total" ? "device time of each iteration, begin to end event, per rank"
                                         : "device-event time of the phase, per iteration and rank; NaN in "
                                           "iterations replayed as a captured graph (post, fused)");
  io::write(f, "/timings/wall", g.wall.data(), {iters, ranks}, "s", "host wall time of each iteration, per rank");
  io::write(f, "/timings/region_gradient", g.region_gradient.data(), {iters, ranks}, "s",
            "forward_projection + allreduce + backprojection + step as one region (the post-mode graph); NaN inside a fused graph");
  io::write(f, "/timings/region_denoise", g.region_denoise.data(), {iters, ranks}, "s",
            "halo_exchange + denoise + clamp as one region (the post-mode graph); NaN inside a fused graph");
  io::write_attr(f, "/", "graphs_captured", int64_t{rec.graphs_captured});
  io::write_scalar(f, "/timings/first_iteration", g.first, "s",
                   "wall time from program start to the end of iteration 1, incl. setup and compile (max over ranks)");
  io::write_scalar(f, "/timings/stable_iteration", g.stable, "s",
                   "mean device time of the last solver.stable_window iterations (max over ranks)");
  io::write_scalar(f, "/timings/compile", g.compile, "s", "compile cost alone (max over ranks)");
  for (const auto& [name, v] : g.setup)
    io::write(f, "/timings/setup/" + name, v.data(), {ranks}, "s", setup_description(name));
  write_memory(f, cfg, g, ranks, dev);
  std::vector<double> per_it(g.sent.size());
  for (size_t q = 0; q < g.sent.size(); ++q) per_it[q] = g.sent[q] / double(iters);
  io::write(f, "/communication/bytes_per_iteration", per_it.data(), {ranks}, "B",
            "halo-exchange and allreduce payload sent by each rank per iteration (mean over iterations; a "
            "replayed CUDA graph counts what its capture recorded; metrics excluded)");
  io::write(f, "/communication/bytes", g.bytes.data(), {iters, ranks}, "B",
            "halo-exchange and allreduce payload sent by each rank in each iteration (metrics excluded)");
  io::write(f, "/metrics/psnr", rec.psnr.data(), {iters}, "dB",
            "PSNR of the iterate after each iteration against the ground truth (data range); NaN where not computed");
  io::write_strings(f, "/provenance/segments", rec.segments,
                    "the runs that made the iterations (a resumed run adds one line per segment)");
  if (!denoiser_notes.empty())
    io::write_strings(f, "/provenance/denoiser_compile", denoiser_notes,
                      "what rank 0's denoiser compile chose: fusions, kernels and the timed choices per layer "
                      "(the native backend), or the package (inductor); none for eager");
  io::write(f, "/metrics/sigma", rec.sigma.data(), {iters}, "1",
            "the denoiser's sigma in each iteration (denoiser.sigma, or annealed from denoiser.sigma_start)");
  io::write(f, "/metrics/ssim", rec.ssim.data(), {iters}, "1",
            "SSIM of the iterate after each iteration against the ground truth (Gaussian window 11, sigma 1.5, "
            "data range of the truth, as skimage.metrics.structural_similarity); NaN where not computed");
  {
    double fp = std::nan(""), fs = std::nan("");
    for (int64_t i = iters - 1; i >= 0; --i)
      if (!std::isnan(rec.psnr[size_t(i)])) {
        fp = rec.psnr[size_t(i)], fs = rec.ssim[size_t(i)];
        break;
      }
    io::write_attr(f, "/metrics", "final_psnr", fp);
    io::write_attr(f, "/metrics", "final_ssim", fs);
  }
  io::write(f, "/metrics/residual", rec.residual.data(), {iters}, "1",
            "||A x - y|| / ||y|| of the iterate entering each iteration; NaN where not computed");
  std::vector<int64_t> boxes, slabs;
  for (int q = 0; q < ranks; ++q) {
    const Box& b = d.tile_of(q).own;
    boxes.insert(boxes.end(), {b.r0, b.r1, b.c0, b.c1});
    if (d.z.volume()) slabs.insert(slabs.end(), {d.z.range(q).first, d.z.range(q).second});
  }
  io::write(f, "/decomposition/boxes", boxes.data(), {ranks, 4}, "px", "owned tile of each rank: r0, r1, c0, c1 (half-open)");
  if (d.z.volume()) {
    io::write(f, "/decomposition/slabs", slabs.data(), {ranks, 2}, "slice",
              "the slices of each rank's slab: z0, z1 (half-open); distributed.plane_ranks ranks share each");
    io::write_attr(f, "/decomposition", "plane_ranks", int64_t{d.z.plane_ranks});
  }
  io::write_scalar<int64_t>(f, "/decomposition/halo", d.halo, "px", "halo width used (halo = 0 resolved to the receptive radius)");
  io::write_attr(f, "/decomposition", "kind", d.kind);
  io::write_attr(f, "/decomposition", "halo_mode", to_string(cfg.distributed.halo_mode));
  {
    const auto work = denoiser_work(cfg, d, denoiser_graph(cfg.denoiser), g.memory);
    std::vector<double> flops, red, bytes, msgs, patch_red;
    for (const auto& w : work)
      flops.push_back(w.flops), red.push_back(w.redundancy()), bytes.push_back(double(w.exchange_bytes)),
          msgs.push_back(double(w.messages)), patch_red.push_back(w.patch_redundancy);
    io::write(f, "/decomposition/patch_redundancy", patch_red.data(), {ranks}, "1",
              "the denoiser patches' FLOPs over one call on the rank's whole extended tile (1: not patched; "
              "denoiser_flops and redundancy include it)");
    io::write(f, "/decomposition/denoiser_flops", flops.data(), {ranks}, "FLOP",
              "conv FLOPs of one denoiser call on each rank, counted on the IR (input halo: the extended tile, or "
              "the sum over its patches; layer halo: the owned tile with its per-layer halos)");
    io::write(f, "/decomposition/redundancy", red.data(), {ranks}, "1",
              "denoiser_flops over the ideal share (the whole image's FLOPs / ranks): the work a rank repeats");
    io::write(f, "/decomposition/denoiser_exchange_bytes", bytes.data(), {ranks}, "B",
              "bytes each rank sends for one denoiser call (input halo: the ghost boxes; layer halo: every layer's)");
    io::write(f, "/decomposition/denoiser_messages", msgs.data(), {ranks}, "1",
              "messages each rank sends for one denoiser call");
  }
  out.commit();
}

}  // namespace pnp::recon
