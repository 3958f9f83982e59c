// The distributed PnP-PGD solver as a library: the execution plan, the problem, the denoiser,
// the memory plan, the loop and one call that sets up, runs and gathers a whole reconstruction
// (what pnp_recon, the tests and any embedding program call). One iteration on rank r:
//   FP    p_r = A_r x_r            partial sinogram of the owned pixels
//   COMM  p   = allreduce_sum(p_r)
//   BP    g_r = A_r^T (p - y)
//   STEP  z_r = x_r - gamma g_r
//   COMM  halo exchange of z
//   DEN   x_r = clamp((1 - alpha) z_r + alpha D(z_r (+) halo)|T_r)
// The two regions (gradient: FP..STEP; denoise: halo..clamp) are objects in src/solver/regions.hpp
// with their capture policy; docs/architecture.md maps every step to its file.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pnp/comm.hpp"
#include "pnp/config.hpp"
#include "pnp/decomposition.hpp"
#include "pnp/io.hpp"
#include "pnp/layer_exchange.hpp"
#include "pnp/nn/nn.hpp"
#include "pnp/physics.hpp"

namespace pnp {

// ---- The execution plan: what a configuration decides -----------------------------------

// Which executor runs the denoiser: the eager one (compile.mode = none, and the identity, which
// has nothing to compile), else compile.backend's (docs/design.md, "Compile placement and backend").
enum class DenoiserExecutor { eager, native, inductor };
DenoiserExecutor denoiser_executor(const Config& cfg);
// Whether the denoiser runs distributed, exchanging at every layer: halo_mode = layer on more
// than one rank (on one rank the layer halo is the whole image's graph).
bool layer_exchanges(HaloMode mode, int ranks);
// Whether the native executor captures its own CUDA graph: compile.mode = pre with
// compile.cuda_graphs (with post and fused the solver captures the region around it).
bool executor_captures(const CompileConfig& c);
// Whether the solver captures its regions as CUDA graphs: compile.mode = post or fused with
// compile.cuda_graphs, on a CUDA device (docs/design.md, "Compile placement and backend").
bool solver_captures(CompileMode mode, bool cuda_graphs, at::Device device);
struct MemoryPlan;
// Whether the run may capture CUDA graphs (the executor's own in pre, the solver's regions in post
// and fused): not when the plan cuts the tile into patches. A graph keeps the pool it allocated
// from for good, and a pool that served patch after patch holds their fragments too: on an H100
// up to 1.2 GiB over the plan at 8192² under 8 GB (pre), a capture of 6 patches out of memory at
// 16384² under 40 GB (fused), and with the gradient region alone captured (its capture hands the
// cache back first) 3 of 10 fused runs out of memory against none of the same plans in pre.
// Nor when a slab is streamed through the GPU: a 32 x 1024² slab under 3 GB, held to its
// 2.26 GiB estimate, ran out of memory asking 20 MiB of the general pool while the executor's
// graph pool kept 1.4 GiB reserved with 36 MiB of it live (H200, 2026-12-06; with 5 % more room,
// 1.47 GiB kept, out of memory again).
// Uncaptured, the allocator reuses and hands back its blocks between the stages; a patch's
// hundreds of milliseconds hide the step's launches.
bool captures_allowed(const MemoryPlan& m);
// Whether LibTorch's cuDNN convolutions may ask for workspaces past any plan: float32 without TF32
// on a GPU, the eager or the native executor (the native one's ATen fallbacks). Left free there,
// cuDNN's heuristics took FFT engines with workspaces of tens of GB (a 6 x 512² slab planned at
// 1.9 GB: 35 GB, and 7.5 s a denoise, eager). With TF32 or in bf16 they choose tensor-core engines
// whose workspaces the plan holds. (Inductor's kernels are its own.)
bool cudnn_workspaces_unbounded(const Config& cfg, bool cuda);
// Whether a run's convolutions choose their algorithms held to the memory plan
// (hold_memory_to_plan): where cudnn_workspaces_unbounded, unless denoiser.memory_hold = false.
// Held, the eager slab above ran in 0.237 s an iteration, and the native one at 0.98 of its plan.
// cuDNN then takes the first engine whose workspace it can allocate, so the choice depends on the
// free memory: compile modes (and a run captured or not) may choose different engines and differ
// in rounding (up to 1.1e-5 relative at 1024², H100, 2026-12-06); unheld, they choose alike.
bool holds_to_plan(const Config& cfg, bool cuda);

// The decisions a configuration makes on `ranks` ranks before any data, communicator or
// executor exists, made here once: pnp_recon's plan (and --dry-run), pnp_bench --scaling and
// the memory estimate read them; make_denoiser and the solver's regions apply the same rules.
struct ExecutionPlan {
  HaloMode halo_mode = HaloMode::input;  // docs/design.md, "Halo modes"
  bool layer_exchange = false;  // layer_exchanges(halo_mode, ranks)
  // The input halo's width: 0 with halo_mode = layer (each layer exchanges its own), else
  // distributed.halo, or the denoiser's receptive radius (exact) when that is 0.
  int64_t halo = 0;
  // distributed.decomposition and grid over the ranks; with halo_mode = layer the owned tiles
  // start on the network's sampling grid (plan_decomposition's align_owned).
  Decomposition decomp;
  DenoiserExecutor executor = DenoiserExecutor::eager;
  bool executor_graph = false;  // the native executor on a GPU, with executor_captures, no layer exchanges
  bool region_graphs = false;   // solver_captures on `device`
};
// InputError when the halo mode cannot run with compile.backend (layer_halo_supported) or no
// decomposition fits.
ExecutionPlan plan_execution(const Config& cfg, int ranks, const nn::Graph& graph, at::Device device = at::kCPU);

// ---- Problem ----------------------------------------------------------------------------

// The measured data and what is known of the truth, as one rank sees it.
// A volume (slices > 0): the sinograms and truth of this rank's slab, slices [z0, z0 + y.size(0)).
struct Problem {
  physics::Geometry geom;
  at::Tensor y;               // [K, D] float32 on the compute device, the same on every rank of a plane
                              // (a volume: [slab slices, K, D])
  at::Tensor truth_own;       // owned tile of the ground truth (device; a volume: [slab slices, rows,
                              // cols]), undefined if none
  double truth_min = 0, truth_max = 0;  // over the whole image (volume)
  int64_t slices = 0, z0 = 0;  // a volume's slices in all, and the first of this rank's slab
  // A volume of raw counts: transmissions clipped at 1e-6 and dead detector bins (flat <= dark)
  // set to 0 while normalising (io::read_volume_slab), over the whole volume after set-up.
  int64_t clipped = 0, dead_bins = 0;
  bool volume() const { return slices > 0; }
  bool has_truth() const { return truth_own.defined(); }
  // Where the angles come from ("read from ...", "simulated: ...", "assumed: ..."); assumed when
  // the sinogram file holds none. A warning when they look like radians, else "".
  std::string angles_source, angles_warning;
  bool angles_assumed = false;
};

// Simulates the study's data, y = A x + noise_sigma * max|Ax| * n, each rank its share: the
// phantom over the rank's owned box (rasterised on the host), its forward projection, the
// ranks' partial sinograms summed by `comm` (none: one process, `own` the whole image); then
// the same noise on every rank (a host generator of problem.seed). The ground truth's range,
// and the ellipses' normalisation by it, are reduced over the ranks too.
Problem simulate_problem(const ProblemConfig& p, const Box& own, at::Device device, Communicator* comm);
// The data of a simulated problem: A truth (the pixels of `own`, on their device) in float64,
// summed over the ranks of `comm` when given, rounded to float32 once, plus Gaussian noise of
// noise_sigma x max |A truth| from a host generator of `seed` (the same on every rank): [K, n_det].
at::Tensor noisy_projection(const at::Tensor& truth_own, const physics::Geometry& geom, const Box& own,
                            double noise_sigma, int64_t seed, Communicator* comm = nullptr);
// The same on one process, the whole image: the sinogram and the ground truth on the host.
io::Sinogram simulate_sinogram(const ProblemConfig& p, at::Device device);
// With a problem.sinogram: problem.size, angles and detector (and a volume's slices, when its
// data is 3D: [angles, slices, detector]) from the file's declared shapes
// where the configuration leaves them open (Config::given), checked where it gives them
// (InputError naming both). Reads no data.
void resolve_problem_sizes(Config& cfg);
// Loads (problem.sinogram) or simulates the data; identical on every rank. The file's declared
// shapes are checked against cfg and the host memory before anything is read, and every value
// must be finite. Simulated with `comm`: each rank its share (simulate_problem); without: every
// rank the whole image, keeping its tile of the truth.
// A volume (d.z.volume()): world rank `rank`'s slab, `comm` its plane's communicator and `world`
// every rank's (the truth's range). Simulated: pnp's 3D Shepp-Logan, slice s projected as its own
// 2D problem with noise seed problem.seed + 1000003 s (as pnp_phantom --slices writes it); read:
// the slab's sinograms alone (io::read_volume_slab: flat and dark fields, -log) and its tile of
// the ground truth. host_resident (a streamed slab, MemoryPlan::stream): the slab's data and
// truth stay in host memory (host_store), made a slice at a time on the device.
Problem setup_problem(const Config& cfg, const Decomposition& d, int rank, at::Device device,
                      Communicator* comm = nullptr, Communicator* world = nullptr, bool host_resident = false);

// ---- Denoiser ---------------------------------------------------------------------------

// The denoiser as configured: graph, weights (file, shipped name or seeded init) and the
// executor the compile placement asks for:
//   none        the eager executor (one ATen call per IR node, NCHW);
//   pre         the native (or inductor) backend, compiled per input shape on first use (tile
//               or patch shape), with its own CUDA graph;
//   post/fused  the same backend without its own graph: the solver captures the whole region
//               around it (src/solver/regions.hpp).
struct Denoiser {
  nn::Graph graph;  // what the executor runs: with halo nodes when it runs distributed
  // distributed.halo_mode = layer on more than one rank: the exchanges of the halo nodes
  // (declared before the executor, which calls it, so that it is destroyed after it).
  std::unique_ptr<nn::HaloExchanger> exchanger;
  std::unique_ptr<nn::Executor> executor;
  at::ScalarType dtype = at::kFloat;  // denoiser.precision: kFloat (fp32) or kBFloat16 (bf16)
  double setup_seconds = 0;           // weights and executor construction
  // Seconds spent compiling so far (native and inductor: per shape, on first use; 0 for eager).
  double compile_seconds() const { return executor ? executor->compile_seconds() : 0.0; }
  // What the backend did: fusions, cache hits and packages, notes.
  std::vector<std::string> report() const { return executor ? executor->report() : std::vector<std::string>{}; }
};
nn::Graph denoiser_graph(const DenoiserConfig& c);
// denoiser.precision as the executors' compute dtype: "fp32" -> kFloat, "bf16" -> kBFloat16.
// The solver's own state stays float32; the denoiser casts its input and the solver its output.
at::ScalarType denoiser_dtype(const DenoiserConfig& c);
// The solver's state and physics: float32, or float64 with solver.precision = "fp64" (whose
// denoiser then runs in float64 too: denoiser_dtype(Config)).
at::ScalarType solver_dtype(const SolverConfig& c);
at::ScalarType denoiser_dtype(const Config& c);
// With distributed.halo_mode = layer, a communicator of more than one rank and its
// decomposition (planned with align_owned), the graph gets halo nodes (nn::with_layer_halos)
// and the executor exchanges at every layer; otherwise comm and d are not used. A 3D denoiser's
// layer halo crosses the volume's slabs (d.z) over `world`, the ranks' communicator, and its
// in-plane tiles over comm (the slab's).
Denoiser make_denoiser(const Config& cfg, at::Device device, Communicator* comm = nullptr,
                       const Decomposition* d = nullptr, Communicator* world = nullptr);
// The same with a given exchanger for a rank whose view of the split is `axes` (the layer
// halo's graph, nn::with_layer_halos; pnp_bench --scaling passes one that only fills the halos,
// to time one rank's share without its neighbours). A null exchanger: the whole-image graph.
Denoiser make_distributed_denoiser(const Config& cfg, at::Device device, std::unique_ptr<nn::HaloExchanger> exchanger,
                                   const std::vector<nn::AxisNeighbours>& axes);
// ---- Denoiser work per rank ---------------------------------------------------------------

// layer_neighbours(d, rank), the rank's view of the split: pnp/layer_exchange.hpp.

// What one denoiser call costs each rank, counted on the IR (roofline::count): its conv FLOPs
// against the ideal share (the whole image's FLOPs / ranks), and what it exchanges. With
// halo_mode = input, the graph on the extended tile (the receptive-radius halo recomputes the neighbours'
// borders), exchanging the HaloPlan's boxes once (float32); with halo_mode = layer, the graph with halo nodes on
// the owned tile, exchanging at every halo node (nn::layer_halo_traffic, at the denoiser's
// precision). Patched runs count as one call on the whole tile: MemoryPlan::redundancy is their extra work.
struct DenoiserWork {
  double flops = 0;          // this rank's
  double ideal = 0;          // the whole image's / ranks
  int64_t exchange_bytes = 0, messages = 0;  // sent by this rank per call
  int64_t exchanges = 0;     // halo exchanges per call (input: 1 when the rank has neighbours)
  double patch_redundancy = 1;  // the patches' FLOPs over one call on the whole tile (1: unpatched)
  int64_t patches = 1;          // calls per iteration
  double redundancy() const { return ideal > 0 ? flops / ideal : 0; }
};
struct MemoryPlan;
// `memory` (one plan per rank, or empty): the patches each rank runs, counted in flops.
std::vector<DenoiserWork> denoiser_work(const Config& cfg, const Decomposition& d, const nn::Graph& whole,
                                        const std::vector<MemoryPlan>& memory = {});

// Path of a shipped model name ("dncnn_ct" -> <models dir>/dncnn_ct.h5), or the path itself.
std::string resolve_weights(const std::string& weights);
// Removes the checkpoint at `path` only when this run wrote it or resumed from it (its run_id
// attribute, pnp::run_id() or the resumed checkpoint's): "" when removed, "absent" when there is
// no file, else why it was kept.
std::string remove_own_checkpoint(const std::string& path);

// ---- Memory -----------------------------------------------------------------------------

// Device memory of one rank, and the denoiser patches that keep it within
// denoiser.memory_limit_gb. The estimate is the largest of the run's stages, each the memory it
// holds at once, in bytes:
//   solver       the loop's float32 images, resident (x, gradient, truth, extended z) and
//                sinograms (data, projection), and 256 KiB of small tensors;
//   quality      the quality monitor's two boxes (the tile grown by the SSIM window), when the
//                problem has a ground truth;
//   weights      every parameter and buffer at the denoiser's precision;
//   activations  roofline::activation_memory of the executor's style (eager for the eager
//                executor and for inductor, whose buffer plan is its own; native otherwise;
//                denoiser_executor decides which runs). The native executor keeps its buffers
//                between calls, one set per distinct patch shape: their peaks add up, and they
//                stay resident through the other stages;
//   workspace    convolution workspaces and allocator rounding (eager: 2 x the largest
//                activation; native: a fraction of its activations, measured on the GPU);
//   patching     a patched call's gathered output (the extended tile) and one patch's input
//                and output copies; the whole tile's output otherwise;
//   other        what the other stages hold beyond the denoiser's: the set-up (the data's
//                float64 projection, the power method), the projections' staging copies and
//                the metrics' strips (metrics::strip_workspace_bytes);
//   margin       on the CPU only, 3 % of the rest.
// A volume's slab multiplies the solver's and the quality monitor's terms by its slices, and the
// denoiser's by the slices of one call: the most that fit the limit (or MemoryContext::capacity),
// whole tiles first; patches only when one slice's whole tile does not fit. A slab (2D
// denoiser) that does not fit even so, under the limit or on a GPU its memory, is streamed: the
// largest group of slices that fits (staging for the next group's upload and the last one's
// download counted) is resident, the slab in host memory; a limit not even one slice meets is
// refused with the streamed minimum.
// On a GPU a plan fills at most cuda_plan_bytes(memory_limit_gb): kCudaBudgetShare of it
// (kCudaPatchedShare in patches), and at least kCudaHeadroomFloor below it (the rest is the CUDA
// caching allocator's: the free pieces between its live blocks, and CUDA graph pools that cannot
// reuse them, count against the bound too, and they do not shrink with the budget).
// With memory_limit_gb > 0 and patch_size = 0 the patches are chosen to fit the limit with the
// least redundant work: the whole tile when it fits, else the rows x cols counts of patches
// whose computed pixels are fewest (rectangular patches, every one of the same extent where
// the alignment allows). An explicit patch_size gives square patches of that size. InputError,
// naming the smallest limit that would do, when no choice fits.
// Measured on one H100 (docs/performance.md#memory-budget), in pre: every run whose estimate was
// at most 90.2 % of its budget ran; of the 9 at 92.6-99.3 %, 4 ran out of memory (up to 1.1 GiB,
// 15 % of the budget, reserved but unallocated), while every allocated peak stayed at 0.91-0.94
// of the estimate.
inline constexpr double kCudaBudgetShare = 0.90;
// A tile in patches runs without CUDA graphs (captures_allowed), and under a limit the allocator
// maps its segments as they grow (limit_device_memory: expandable segments), so little of the
// limit is reserved but unallocated: 16384² in 16 patches under 40 GB reserved 27.3 GiB for a
// 26.7 GiB allocated peak (H100, 2026-12-06, before expandable segments). Its patches may fill
// kCudaPatchedShare of the limit (at least kCudaHeadroomFloor below it): fewer, larger patches.
inline constexpr double kCudaPatchedShare = 0.95;
// A 32 x 1024² slab streamed under 2 GB (H100, d5d9c35) ran out of memory with 278 MiB of the
// allocator's fragments, more than the 10 % share leaves there (190 MiB).
inline constexpr double kCudaHeadroomFloor = 512.0 * 1024 * 1024;
// The bytes a GPU plan may fill under a limit of limit_gb (> 0): a whole tile's, or one in patches.
double cuda_plan_bytes(double limit_gb, bool patched = false);
struct MemoryPlan {
  int64_t patch_rows = 0, patch_cols = 0;  // input extent of one patch (0 = the whole extended tile)
  int64_t patches = 1;                     // denoiser calls per iteration
  int64_t overlap = 0;  // patch overlap in pixels (the receptive radius unless configured)
  int patch_shapes = 1;
  // A volume's slab: slices per denoiser call (the most that fit), in `batches` calls of nearly
  // equal size per patch; 1 and 1 for one image.
  int64_t batch = 1, batches = 1;
  // A volume's slab larger than the device's budget, streamed: its slices in `stream_groups`
  // groups of `stream` slices on the device at once, the slab in host memory (0 and 0: resident).
  int64_t stream = 0, stream_groups = 0;
  double redundancy = 1;  // pixels the patches compute / pixels of the extended tile (1: whole tile)
  double solver = 0, quality = 0, weights = 0, activations = 0, workspace = 0, patching = 0, other = 0;
  double margin = 0;  // on the CPU, 3 % of the rest: oneDNN's buffers vary with the instruction set
  bool patched() const { return patches > 1; }
  double total() const { return solver + quality + weights + activations + workspace + patching + other + margin; }
  std::string describe() const;  // one line
};
// What the estimate needs besides the configuration and the tile.
struct MemoryContext {
  int64_t angles = 0, detectors = 0;  // the sinogram
  bool truth = true;                  // a ground truth: the quality monitor's boxes are allocated
  bool cuda = true;                   // the device (the eager executor's workspaces differ)
  int64_t slices = 1;                 // a volume's slab on this rank (1: one image)
  int64_t depth = 0;                  // a 3D denoiser's slices per call: the z-extended slab (0: 2D)
  int64_t stream = 0;                 // estimate_memory: `slices` are a streamed slab's group (plan_memory decides)
  // A volume without denoiser.memory_limit_gb: its denoiser batch fits this many bytes (the
  // device's memory); 0 = the whole slab in one call.
  double capacity = 0;
};
MemoryPlan plan_memory(const Config& cfg, const nn::Graph& g, const TilePlan& tile, const MemoryContext& ctx);
// The estimate for given patches: patch_rows x patch_cols as nn::denoise_patched takes them
// (0 = that axis whole), whatever the limit.
MemoryPlan estimate_memory(const Config& cfg, const nn::Graph& g, const TilePlan& tile, const MemoryContext& ctx,
                           int64_t patch_rows, int64_t patch_cols);
// The plan of every rank of the execution plan's decomposition (computed identically on all),
// so that a limit too small for some tile fails on every rank before any work. A volume's: every
// world rank's, its batch within the device's memory (the host's share of `local_size` ranks).
std::vector<MemoryPlan> memory_plans(const Config& cfg, const ExecutionPlan& plan, const nn::Graph& g,
                                     at::Device device, int local_size = 1);
// Angles and detector bins of the configured geometry.
std::pair<int64_t, int64_t> sinogram_dims(const Config& cfg);

// ---- The loop ---------------------------------------------------------------------------

// The timed phases of one iteration, in loop order (the list is defined here once).
enum class Phase : int { forward_projection, allreduce, backprojection, step, halo_exchange, denoise, clamp };
inline constexpr int kPhaseCount = 7;
const char* phase_name(Phase p);
// The phase names in loop order, then "total".
const std::vector<std::string>& pnp_phases();

struct PnpRecord {
  at::Tensor x_own;                        // final owned tile (device)
  std::vector<std::vector<double>> phase;  // [phase][iteration] seconds, this rank ("total" last)
  std::vector<double> total, wall;         // [iteration], this rank
  std::vector<double> region_gradient;     // [iteration] FP..STEP as one region; NaN inside a fused graph
  std::vector<double> region_denoise;      // [iteration] HALO..CLAMP as one region; NaN inside a fused graph
  bool graphs_captured = false;            // post/fused on CUDA: regions replayed as CUDA graphs
  std::vector<double> psnr, ssim, residual;  // [iteration], NaN where not computed (same on all ranks)
  std::vector<double> sigma;               // [iteration] the denoiser's sigma (denoiser.sigma_start: annealed)
  double first_iteration = 0;              // wall seconds incl. setup, step-size estimate and iteration 1
  double compile_seconds = 0;              // native compile (all shapes) + region capture
  double step = 0;
  // The power method behind step: its iterations (0 when solver.step was given or the step came
  // from a checkpoint) and whether it met solver.power_tol within solver.power_iterations.
  int64_t power_iterations = 0;
  bool power_converged = false;
  double power_start_s = 0, power_first_s = 0;  // its start vector and its first iteration (host wall, s)
  double clamp_lo = 0, clamp_hi = 0;
  int64_t peak_bytes = 0;                  // the whole run's (set-up, loop and metrics)
  int64_t setup_peak_bytes = 0;            // before the loop: data, power method, buffers
  int64_t metrics_peak_bytes = 0;          // during the metrics (quality monitor) of any iteration
  int64_t reserved_peak_bytes = 0;         // CUDA: the allocator's reserved peak (0 elsewhere)
  int64_t allocator_retries = 0;           // CUDA: its retries, each a cache flush (0 elsewhere)
  std::vector<int64_t> phase_peak_bytes;   // [phase], peak device memory during the phase ("total" last)
  int64_t bytes_sent = 0;                  // halo + allreduce payload sent by this rank in the loop
  // [iteration] bytes this rank's loop communication sent in each iteration (metrics excluded);
  // a replayed graph sends what its capture recorded.
  std::vector<double> bytes_per_iteration;
  MemoryPlan memory;                       // the estimate, and the patch size the denoiser ran with
  // Checkpoint/restart: the run stopped early with a checkpoint (a signal, output.stop_after)
  // after `done` iterations; `segments` lists the runs that made the iterations so far.
  bool stopped = false;
  int64_t done = 0;
  int stop_signal = 0;
  std::vector<std::string> segments;
  // The set-up before iteration 1, part by part, wall seconds on this rank (/timings/setup/*):
  // Reconstruction::setup's "mpi" (program start to MPI started), "configuration" (command
  // line, configuration file, input probes), "plan" (device, decomposition, memory plans,
  // output checks), "communicator", "data" (read, or the phantom simulated and projected), "denoiser"
  // (built and compiled), "resume" (the checkpoint read), "data_check" (the ranks' agreement on
  // the data); then run_pnp's "step_size" (power method) and "initial_image".
  std::vector<std::pair<std::string, double>> setup;
};

struct Checkpoint;  // src/solver/checkpoint.hpp

// The denoiser's sigma in iteration it (0-based) of `iterations`: denoiser.sigma, or, with
// denoiser.sigma_start > 0, sigma_start * (sigma / sigma_start)^(it / (iterations - 1)).
double sigma_at(const DenoiserConfig& c, int64_t it, int64_t iterations);

// Runs the PnP loop on this rank. `setup_seconds` is the time spent before the call (it is
// part of the first iteration's wall time).
// With `resume`, continues from a checkpoint read at set-up (Reconstruction does this for
// output.resume): the same iterations follow, bitwise the same on the CPU.
// A volume: `comm` holds every rank, `plane` the ranks of this rank's plane (the sinograms'
// allreduce, the halos; null: comm, as for one image). `memory`: this rank's plan (null: planned
// here for the slab, without a device capacity).
PnpRecord run_pnp(const Config& cfg, const Decomposition& d, Communicator& comm, const Problem& prob,
                  Denoiser& den, at::Device device, double setup_seconds, const Checkpoint* resume = nullptr,
                  Communicator* plane = nullptr, const MemoryPlan* memory = nullptr);

// ---- A whole reconstruction -------------------------------------------------------------

// What rank 0 writes: the record of every rank, gathered (empty vectors on other ranks).
struct GatheredRecord {
  at::Tensor image;                        // [n, n] float32 CPU, the final iterate
  at::Tensor image64;                      // the same in float64 (solver.precision = "fp64"; else undefined)
  at::Tensor truth;                        // [n, n] float32 CPU, the ground truth (undefined: none)
  std::vector<std::vector<double>> phase;  // [phase] -> [iterations x ranks]
  std::vector<double> wall, region_gradient, region_denoise, bytes;  // [iterations x ranks]
  std::vector<double> peak, sent, estimate, setup_peak, metrics_peak;  // [ranks]
  std::vector<double> reserved_peak, allocator_retries;               // [ranks]
  std::vector<MemoryPlan> memory;          // [ranks]: each rank's patches (patch fields only)
  std::vector<std::vector<double>> phase_peak;                       // [phase] -> [ranks]
  double first = 0, stable = 0, compile = 0;  // max over ranks
  std::vector<std::pair<std::string, std::vector<double>>> setup;  // part -> [ranks] seconds
  std::string gpu_names;                   // comma-separated, one per rank
  // The phase table: per phase and region, the stable-window mean of each rank, reduced.
  struct Row {
    std::string name;
    double max = 0, min = 0, mean = 0;  // NaN inside a captured graph
  };
  std::vector<Row> table;
};

// Device choice of a rank: distributed.device ("auto" = CUDA when present), local rank -> GPU.
at::Device choose_device(const std::string& want, int local_rank);

// The first stage of a set-up, which needs neither data nor a communicator (what --dry-run
// prints): the device, the denoiser's graph, the decomposition and every rank's memory plan.
struct ReconstructionPlan {
  Config cfg;
  at::Device device = at::kCPU;
  nn::Graph graph;
  ExecutionPlan exec;              // the decomposition, halo and executor (plan_execution)
  std::vector<MemoryPlan> memory;  // one per rank
  std::vector<DenoiserWork> work;  // one per rank
};

// Set-up, run and record of one reconstruction. Every call is collective over the ranks of
// `world`: a failure on any rank throws CollectiveError on all of them during set-up, and an
// error inside run() ends every rank (abort_job), so that no rank is left waiting.
class Reconstruction {
 public:
  // Stage 1: device, graph, decomposition and memory plans, validated (InputError when a
  // memory limit cannot be met, a tile is impossible, ...).
  // First, every rank must hold the same configuration and see the same input files (agree()).
  static ReconstructionPlan plan(const Config& cfg, MPI_Comm world, int local_rank, int local_size);
  // When the program started, and when it finished MPI's start and the configuration (with
  // the input probes): the first iteration's wall time counts from `program`, and the set-up
  // record's "mpi", "configuration" and "plan" parts are the intervals up to Stage 2.
  struct StartMarks {
    std::chrono::steady_clock::time_point program, mpi, configuration;
  };
  // Stage 2: the communicator, the data and the denoiser.
  static Reconstruction setup(ReconstructionPlan plan, MPI_Comm world, int local_size, StartMarks marks);
  static Reconstruction setup(ReconstructionPlan plan, MPI_Comm world, int local_size) {
    const auto now = std::chrono::steady_clock::now();
    return setup(std::move(plan), world, local_size, StartMarks{now, now, now});
  }
  PnpRecord run();
  GatheredRecord gather(const PnpRecord& rec);

  const Config& config() const { return cfg_; }
  const Decomposition& decomposition() const { return decomp_; }
  Communicator& comm() { return *comm_; }
  // The ranks of this rank's plane: a volume's slab (its sinograms' allreduce, its halos); one
  // image's: comm().
  Communicator& plane() { return plane_ ? *plane_ : *comm_; }
  at::Device device() const { return device_; }
  const Problem& problem() const { return prob_; }
  Denoiser& denoiser() { return den_; }
  double setup_seconds() const { return setup_seconds_; }
  const std::vector<std::pair<std::string, double>>& setup_times() const { return setup_; }

 private:
  Reconstruction() = default;
  Config cfg_;
  at::Device device_ = at::kCPU;
  Decomposition decomp_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Communicator> plane_;  // a volume's (null: one image)
  MemoryPlan memory_;                    // this rank's plan
  Problem prob_;
  Denoiser den_;
  std::shared_ptr<Checkpoint> resume_;  // output.resume with an existing checkpoint
  double setup_seconds_ = 0;
  std::vector<std::pair<std::string, double>> setup_;  // the set-up's parts on this rank
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace pnp
