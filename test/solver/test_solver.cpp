// run_pnp under mpiexec (1 and 2 ranks): with the identity denoiser PnP is gradient descent.
#include "pnp_test.hpp"

#include <cmath>
#include <map>
#include <string>
#include <thread>

#include "pnp/core.hpp"
#include "pnp/device.hpp"
#include "pnp/solver.hpp"

using namespace pnp;

namespace {
int world_rank() { int r; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }
int world_size() { int s; MPI_Comm_size(MPI_COMM_WORLD, &s); return s; }

Config gd_config() {
  Config c;
  c.problem.size = 48;
  c.problem.angles = 30;
  c.problem.noise_sigma = 0.02;
  c.problem.seed = 11;
  c.solver.iterations = 12;
  c.solver.init = "zeros";
  c.solver.clamp = "none";
  c.solver.metrics_every = 1;
  c.solver.stable_window = 3;
  c.denoiser.architecture = "identity";
  c.distributed.device = "cpu";
  c.output.progress = false;
  return c;
}

// gd_config on the Shepp-Logan phantom from FBP, with a shipped trained denoiser at sigma 0.02.
Config trained_config(const std::string& architecture, const std::string& weights) {
  Config c = gd_config();
  c.problem.phantom = "shepp_logan";
  c.solver.init = "fbp";
  c.denoiser.architecture = architecture;
  c.denoiser.weights = weights;
  c.denoiser.sigma = 0.02;
  return c;
}
}  // namespace

TEST_CASE("the simulated problem, each rank its share, equals the whole image simulated on every rank") {
  for (std::string phantom : {"shepp_logan", "ellipses"}) {
    for (std::string decomposition : {"slabs", "grid"}) {
      CAPTURE(phantom);
      CAPTURE(decomposition);
      Config cfg = gd_config();
      cfg.problem.phantom = phantom;
      auto d = plan_decomposition(cfg.problem.size, world_size(), decomposition, {}, 1, 1);
      auto comm = make_communicator("mpi", MPI_COMM_WORLD, at::kCPU, 1, 0);
      const Problem share = setup_problem(cfg, d, world_rank(), at::kCPU, comm.get());
      const Problem whole = setup_problem(cfg, d, world_rank(), at::kCPU);
      // the tile of the truth and its range: the same pixels, exactly
      CHECK(share.truth_own.sizes() == whole.truth_own.sizes());
      CHECK(at::equal(share.truth_own, whole.truth_own));
      CHECK(share.truth_min == whole.truth_min);
      CHECK(share.truth_max == whole.truth_max);
      CHECK(whole.truth_max > whole.truth_min);  // content, not a flat image
      // the sinogram: the tiles' projections summed in float64, then rounded (exact on one rank)
      REQUIRE(share.y.sizes() == whole.y.sizes());
      const double ymax = whole.y.abs().max().item<double>();
      CHECK(ymax > 1.0);
      const double rel = ((share.y - whole.y).norm() / whole.y.norm()).item<double>();
      CHECK(rel <= 1e-7);
      if (world_size() == 1) CHECK(at::equal(share.y, whole.y));
    }
  }
}

TEST_CASE("identity denoiser: PnP is gradient descent, matching a float64 reference loop") {
  Config cfg = gd_config();
  auto d = plan_decomposition(cfg.problem.size, world_size(), "slabs", {}, 1, 1);
  auto comm = make_communicator("mpi", MPI_COMM_WORLD, at::kCPU, 1, 0);
  Problem prob = setup_problem(cfg, d, world_rank(), at::kCPU);
  Denoiser den = make_denoiser(cfg, at::kCPU);
  PnpRecord rec = run_pnp(cfg, d, *comm, prob, den, at::kCPU, 0.0);

  // Residuals fall monotonically (gamma < 2/L makes GD a descent method on ||Ax - y||^2).
  for (size_t i = 1; i < rec.residual.size(); ++i) {
    CAPTURE(i);
    CHECK(rec.residual[i] < rec.residual[i - 1]);
  }
  CHECK(std::isfinite(rec.psnr.back()));
  CHECK(rec.step > 0);
  // the power method behind the step: more than its first iteration, within the cap, converged
  CHECK(rec.power_iterations > 1);
  CHECK(rec.power_iterations <= cfg.solver.power_iterations);
  CHECK(rec.power_converged);
  // its split: the start vector and the first iteration, parts of the step_size set-up part
  CHECK(rec.power_start_s > 0);
  CHECK(rec.power_first_s > 0);
  double step_part = -1;
  for (const auto& [name, s] : rec.setup)
    if (name == "step_size") step_part = s;
  CHECK(rec.power_start_s + rec.power_first_s <= step_part);

  // float64 reference on the whole image, same step.
  auto& g = prob.geom;
  at::Tensor y = prob.y.to(at::kDouble);
  at::Tensor x = at::zeros({g.n, g.n}, at::kDouble);
  for (int64_t k = 0; k < cfg.solver.iterations; ++k)
    x = x - rec.step * physics::adjoint(physics::forward(x, g, g.full_box()) - y, g, g.full_box());
  at::Tensor full = comm->gather_tiles(rec.x_own, d);
  if (world_rank() == 0) {
    double rel = (full.to(at::kDouble) - x).norm().item<double>() / x.norm().item<double>();
    CAPTURE(rel);
    CHECK(rel < 1e-4);
  }
  // The timings cover every iteration and phase.
  REQUIRE(rec.phase.size() == pnp_phases().size());
  for (double t : rec.total) CHECK(t > 0);
  CHECK(rec.first_iteration > 0);
}

TEST_CASE("relaxation alpha = 0 keeps z: the denoiser has no effect") {
  Config cfg = gd_config();
  cfg.solver.iterations = 3;
  cfg.solver.relaxation = 0.0;
  cfg.denoiser.architecture = "dncnn";
  cfg.denoiser.features = {4};
  auto d = plan_decomposition(cfg.problem.size, world_size(), "slabs", {}, 0 + 20, 1);
  auto comm = make_communicator("mpi", MPI_COMM_WORLD, at::kCPU, 1, 0);
  Problem prob = setup_problem(cfg, d, world_rank(), at::kCPU);
  Denoiser den = make_denoiser(cfg, at::kCPU);
  PnpRecord relaxed = run_pnp(cfg, d, *comm, prob, den, at::kCPU, 0.0);
  cfg.denoiser.architecture = "identity";
  cfg.denoiser.features = {};
  Denoiser id = make_denoiser(cfg, at::kCPU);
  PnpRecord plain = run_pnp(cfg, d, *comm, prob, id, at::kCPU, 0.0);
  CHECK(at::allclose(relaxed.x_own, plain.x_own, 1e-6, 1e-7));
  // a given step runs no power method, and says so
  cfg.solver.step = plain.step;
  cfg.solver.iterations = 1;
  PnpRecord given = run_pnp(cfg, d, *comm, prob, id, at::kCPU, 0.0);
  CHECK(given.step == plain.step);
  CHECK(given.power_iterations == 0);
  CHECK_FALSE(given.power_converged);
  CHECK(given.power_start_s == 0);
  // a cap below convergence: stopped at the cap, not converged
  cfg.solver.step = 0;
  cfg.solver.power_iterations = 2;
  PnpRecord capped = run_pnp(cfg, d, *comm, prob, id, at::kCPU, 0.0);
  CHECK(capped.power_iterations == 2);
  CHECK_FALSE(capped.power_converged);
}

TEST_CASE("clamp to the ground truth's range needs a ground truth") {
  Config cfg = gd_config();
  cfg.solver.clamp = "ground_truth";
  auto d = plan_decomposition(cfg.problem.size, world_size(), "slabs", {}, 1, 1);
  auto comm = make_communicator("mpi", MPI_COMM_WORLD, at::kCPU, 1, 0);
  Problem prob = setup_problem(cfg, d, world_rank(), at::kCPU);
  REQUIRE(prob.has_truth());
  CHECK(prob.truth_min == 0.0);
  CHECK(prob.truth_max == 1.0);
  prob.truth_own = at::Tensor();
  Denoiser den = make_denoiser(cfg, at::kCPU);
  // Every rank refuses it together (the same input): a collective input error, no abort.
  bool input_error = false;
  try {
    run_pnp(cfg, d, *comm, prob, den, at::kCPU, 0.0);
  } catch (const CollectiveError& e) {
    input_error = e.input_error;
  }
  CHECK(input_error);
}

TEST_CASE("bf16 denoiser: the solver state stays float32 and the reconstruction follows fp32's") {
  // The shipped DnCNN on the small problem, eager (none) and native (pre), fp32 against bf16.
  Config base = trained_config("dncnn", "dncnn_ct");
  base.solver.relaxation = 0.2;
  auto d = plan_decomposition(base.problem.size, world_size(), "slabs", {}, 1, 1);
  auto comm = make_communicator("mpi", MPI_COMM_WORLD, at::kCPU, 1, 0);
  Problem prob = setup_problem(base, d, world_rank(), at::kCPU);
  for (std::string mode : {"none", "pre"}) {
    CAPTURE(mode);
    std::map<std::string, PnpRecord> rec;
    for (std::string prec : {"fp32", "bf16"}) {
      Config c = base;
      c.compile.mode = *parse_enum<CompileMode>(mode);
      c.denoiser.precision = prec;
      Denoiser den = make_denoiser(c, at::kCPU);
      CHECK((den.dtype == (prec == "bf16" ? at::kBFloat16 : at::kFloat)));
      rec[prec] = run_pnp(c, d, *comm, prob, den, at::kCPU, 0.0);
      CHECK((rec[prec].x_own.scalar_type() == at::kFloat));
    }
    const at::Tensor& a = rec["fp32"].x_own;
    const at::Tensor& b = rec["bf16"].x_own;
    const double rel = (a - b).norm().item<double>() / a.norm().item<double>();
    MESSAGE(mode << ": |x_bf16 - x_fp32| / |x_fp32| = " << rel << ", PSNR fp32 " << rec["fp32"].psnr.back()
                 << " dB, bf16 " << rec["bf16"].psnr.back() << " dB");
    CHECK(rel > 0.0);   // bf16 really ran
    CHECK(rel < 1e-2);  // measured 2.8e-3 to 3.1e-3: the data term pulls both to the same solution
    CHECK(std::abs(rec["fp32"].psnr.back() - rec["bf16"].psnr.back()) < 0.1);
  }
  Config bad = base;
  bad.denoiser.precision = "fp16";
  CHECK_THROWS_AS(make_denoiser(bad, at::kCPU), InputError);
}

namespace {
// The pixels a tiling of both axes computes, over the tile's: what plan_memory minimises.
double computed_over_tile(int64_t size, int64_t patch_r, int64_t patch_c, int64_t overlap, int64_t align) {
  auto sum = [&](int64_t patch) {
    int64_t s = 0;
    for (const auto& r : nn::patch_ranges(size, patch, overlap, align)) s += r.in1 - r.in0;
    return static_cast<double>(s);
  };
  return sum(patch_r) * sum(patch_c) / static_cast<double>(size * size);
}
}  // namespace

TEST_CASE("memory plan: the least redundant patches within denoiser.memory_limit_gb") {
  Config c = gd_config();
  c.problem.size = 1024;
  c.denoiser.architecture = "drunet";
  const nn::Graph g = denoiser_graph(c.denoiser);
  TilePlan tile;
  tile.own = tile.ext = Box{0, 1024, 0, 1024};
  MemoryContext ctx;
  ctx.angles = 100, ctx.detectors = 1449;
  MemoryContext no_truth = ctx;
  no_truth.truth = false;
  for (CompileMode mode : {CompileMode::none, CompileMode::pre}) {
    CAPTURE(to_string(mode));
    c.compile.mode = mode;
    c.denoiser.memory_limit_gb = 0;
    const MemoryPlan whole = plan_memory(c, g, tile, ctx);
    CHECK(whole.patches == 1);
    CHECK(whole.patch_rows == 0);
    CHECK(whole.redundancy == 1);
    CHECK(whole.overlap == nn::receptive_radius(g));
    CHECK(whole.activations > 0);
    CHECK(whole.quality > 0);
    CHECK(plan_memory(c, g, tile, no_truth).quality == 0);  // no truth, no metrics boxes

    // A limit between the smallest patches and the whole tile: the plan fits, and no tiling of
    // the two axes (every aligned patch size along each) that fits computes fewer pixels.
    // (On a GPU, as ctx is, a plan in patches fills at most cuda_plan_bytes(limit, true) of it.)
    c.denoiser.memory_limit_gb = 0.7 * whole.total() / 1e9;
    const double usable = cuda_plan_bytes(c.denoiser.memory_limit_gb, true);
    const MemoryPlan m = plan_memory(c, g, tile, ctx);
    CAPTURE(m.describe());
    REQUIRE(m.patched());
    CHECK(m.total() <= usable);
    CHECK(m.total() > 0.5 * usable);
    CHECK(m.redundancy == doctest::Approx(computed_over_tile(1024, m.patch_rows, m.patch_cols, m.overlap, g.alignment())));
    const int64_t align = g.alignment(), smallest = 2 * ((m.overlap + align - 1) / align * align) + align;
    std::vector<int64_t> sizes{0};
    for (int64_t p = smallest; p < 1024; p += align) sizes.push_back(p);
    double best = 1e300;
    for (int64_t pr : sizes)
      for (int64_t pc : sizes) {
        const MemoryPlan e = estimate_memory(c, g, tile, ctx, pr, pc);
        if (e.total() <= usable) best = std::min(best, e.redundancy);
      }
    CHECK(m.redundancy == doctest::Approx(best));

    // bf16 halves weights and activations: less redundant patches (or the whole tile) fit.
    Config bf = c;
    bf.denoiser.precision = "bf16";
    const MemoryPlan mb = plan_memory(bf, g, tile, ctx);
    CHECK(mb.redundancy < m.redundancy);
    CHECK(whole.weights == doctest::Approx(2 * plan_memory(bf, g, tile, ctx).weights));

    // An explicit patch size is kept, limit or not (square patches).
    Config fixed = c;
    fixed.denoiser.patch_size = 400;
    const MemoryPlan f = plan_memory(fixed, g, tile, ctx);
    CHECK(f.patch_rows == 400);
    CHECK(f.patch_cols == 400);

    // A limit below the smallest patches: a clear error naming the smallest limit that would do,
    // and that limit does.
    c.denoiser.memory_limit_gb = 0.01;
    std::string msg;
    try {
      plan_memory(c, g, tile, ctx);
    } catch (const InputError& e) {
      msg = e.what();
    }
    CAPTURE(msg);
    const std::string key = "The smallest limit that would do is denoiser.memory_limit_gb = ";
    const auto at = msg.find(key);
    REQUIRE(at != std::string::npos);
    CHECK(msg.find("Raise the limit") != std::string::npos);
    c.denoiser.memory_limit_gb = std::stod(msg.substr(at + key.size()));
    CHECK(plan_memory(c, g, tile, ctx).total() <= cuda_plan_bytes(c.denoiser.memory_limit_gb, true));
    // the CPU's plan may fill the whole limit: a limit just above the whole tile's estimate keeps
    // the whole tile there, while a GPU's plan under the same limit is patched
    MemoryContext cpu = ctx;
    cpu.cuda = false;
    Config on_cpu = c;
    on_cpu.denoiser.memory_limit_gb = 0;
    on_cpu.denoiser.memory_limit_gb = 1.0001 * plan_memory(on_cpu, g, tile, cpu).total() / 1e9;
    CHECK_FALSE(plan_memory(on_cpu, g, tile, cpu).patched());
    Config on_gpu = c;
    on_gpu.denoiser.memory_limit_gb = 1.0001 * whole.total() / 1e9;
    CHECK(plan_memory(on_gpu, g, tile, ctx).patched());
    // A whole tile is held to kCudaBudgetShare, captured; within kCudaPatchedShare but not that,
    // the tile runs in (uncaptured) patches, never whole.
    on_gpu.denoiser.memory_limit_gb = whole.total() / (0.5 * (kCudaBudgetShare + kCudaPatchedShare)) / 1e9;
    const MemoryPlan between = plan_memory(on_gpu, g, tile, ctx);
    CHECK(between.patched());
    CHECK(between.total() <= cuda_plan_bytes(on_gpu.denoiser.memory_limit_gb, true));
    on_gpu.denoiser.memory_limit_gb =
        std::max(whole.total() / kCudaBudgetShare, whole.total() + kCudaHeadroomFloor) / 1e9 * 1.0001;
    CHECK_FALSE(plan_memory(on_gpu, g, tile, ctx).patched());
    // rounded up to two significant digits: one unit of the last one less does not do
    c.denoiser.memory_limit_gb -= std::pow(10.0, std::floor(std::log10(c.denoiser.memory_limit_gb)) - 1) * 1.0001;
    CHECK_THROWS_AS(plan_memory(c, g, tile, ctx), InputError);
  }
}

// DRUNet in pre on one whole 16384² tile on a GPU (issue 47's size), 100 angles, under limit_gb.
struct Drunet16384 {
  Config c;
  nn::Graph g;
  TilePlan tile;
  MemoryContext ctx;
  Drunet16384(const std::string& precision, double limit_gb) : c(gd_config()) {
    c.problem.size = 16384;
    c.problem.angles = 100;
    c.denoiser.architecture = "drunet";
    c.denoiser.precision = precision;
    c.compile.mode = CompileMode::pre;
    c.denoiser.memory_limit_gb = limit_gb;
    g = denoiser_graph(c.denoiser);
    tile.own = tile.ext = Box{0, 16384, 0, 16384};
    ctx.angles = 100, ctx.detectors = 23171;
  }
};

TEST_CASE("memory plan: issue 47's case, 16384² DRUNet fp32 under 40 GB on a GPU, in patches of little redundancy") {
  Drunet16384 big("fp32", 40);
  Config& c = big.c;
  const nn::Graph& g = big.g;
  TilePlan& tile = big.tile;
  MemoryContext& ctx = big.ctx;
  const MemoryPlan m = plan_memory(c, g, tile, ctx);
  MESSAGE(m.describe());
  CHECK(m.total() <= cuda_plan_bytes(40, true));
  CHECK(m.patched());
  CHECK(m.patch_shapes == 1);
  // square patches of the largest size that fits (the plan before) computed 2.1x the pixels;
  // with patches' share of 95 %, 3 x 4 patches of 5848 x 4480 fit (at 90 %: 4 x 4 of 4480², 1.196)
  CHECK(m.redundancy < 1.18);
  CHECK(m.patches == 12);
  Decomposition d = plan_decomposition(16384, 1, "slabs", {0, 0}, nn::receptive_radius(g), g.alignment(), false);
  const auto work = denoiser_work(c, d, g, {m});
  MESSAGE("IR-counted patch redundancy " << work[0].patch_redundancy);
  CHECK(work[0].patch_redundancy < 1.25);
  CHECK(work[0].patches == m.patches);

  // The GPU check tier's budget case (scripts/gpu_check.sh, 5.): 8192² under 6 GB is patched and
  // fits; under 1 GB nothing fits.
  c.problem.size = 8192;
  c.denoiser.memory_limit_gb = 6;
  tile.own = tile.ext = Box{0, 8192, 0, 8192};
  ctx.detectors = 11586;
  const MemoryPlan m8 = plan_memory(c, g, tile, ctx);
  MESSAGE(m8.describe());
  CHECK(m8.patched());
  CHECK(m8.total() <= cuda_plan_bytes(6, true));
  c.denoiser.memory_limit_gb = 1;
  CHECK_THROWS_AS(plan_memory(c, g, tile, ctx), InputError);
}

TEST_CASE("memory plan: a GPU's projections stage one image of an aligned tile, two of a misaligned one") {
  // 16384² DRUNet bf16 under 16 GB, the metrics every iteration, in the 28 patches of 4480 x 2728
  // the plan picked on an H200 (2026-12-06, tag h): it peaked at 12.65 GiB, where the projections
  // counted as two images made the estimate 13.93 GiB (10.1 % above; docs/performance.md).
  const Drunet16384 big("bf16", 16);
  const Config& c = big.c;
  const nn::Graph& g = big.g;
  const TilePlan& tile = big.tile;
  const MemoryContext& ctx = big.ctx;
  const MemoryPlan m = estimate_memory(c, g, tile, ctx, 4480, 2728);
  MESSAGE(m.describe());
  const double GiB = 1024.0 * 1024.0 * 1024.0, peak = 12.65 * GiB;
  CHECK(m.total() >= peak);
  CHECK(m.total() <= 1.1 * peak);
  // A tile whose rows are not whole 16-byte pieces is copied aligned first: one image more where
  // the projections' stage is the largest, as it is here with two images.
  TilePlan odd = tile;
  odd.own = Box{0, 16384, 0, 16382};  // the same extended tile for the denoiser
  const MemoryPlan mo = estimate_memory(c, g, odd, ctx, 4480, 2728);
  const double image = 4.0 * 16384 * 16382;
  CHECK(m.other == 0);
  CHECK(mo.other > 0);
  CHECK(mo.total() - m.total() > 0.5 * image);
  CHECK(mo.total() - m.total() < image);
  MESSAGE("the plan under 16 GB: " << plan_memory(c, g, tile, ctx).describe());
}

TEST_CASE("a 3D network's slab in in-plane patches: /decomposition's redundancy and patch count are the plan's") {
  // The 512 x 512² volume under 40 GB on one GPU (H100, 2026-12-06: 2 patches of 512 x 276, the
  // plan's redundancy 1.078; /decomposition said 1 before the 3D branch counted patches).
  Config c = gd_config();
  c.problem.size = 512;
  c.problem.slices = 512;
  c.problem.angles = 90;
  c.denoiser.architecture = "dncnn";
  c.denoiser.dim = 3;
  c.denoiser.features = {32};
  c.denoiser.blocks = 10;
  c.compile.mode = CompileMode::pre;
  c.denoiser.memory_limit_gb = 40;
  const nn::Graph g = denoiser_graph(c.denoiser);
  const at::Device gpu(at::kCUDA, 0);
  const ExecutionPlan plan = plan_execution(c, 1, g, gpu);
  const auto plans = memory_plans(c, plan, g, gpu, 1);
  REQUIRE(plans.size() == 1);
  const MemoryPlan& m = plans[0];
  MESSAGE(m.describe());
  REQUIRE(m.patched());
  const auto work = denoiser_work(c, plan.decomp, g, plans);
  REQUIRE(work.size() == 1);
  MESSAGE("IR-counted patch redundancy " << work[0].patch_redundancy << ", plan's (pixels) " << m.redundancy);
  CHECK(work[0].patches == m.patches);
  CHECK(work[0].patch_redundancy > 1.0);
  // FLOPs per pixel are nearly uniform: the IR's count is the pixels' within a few per cent
  CHECK(work[0].patch_redundancy == doctest::Approx(m.redundancy).epsilon(0.03));
  // without a limit: one call on the whole slab, redundancy 1
  c.denoiser.memory_limit_gb = 0;
  const auto whole = memory_plans(c, plan, g, at::Device(at::kCPU), 1);
  const auto w1 = denoiser_work(c, plan.decomp, g, whole);
  CHECK(w1[0].patches == 1);
  CHECK(w1[0].patch_redundancy == 1.0);
}

TEST_CASE("cuda_plan_bytes: 90 % of a budget (95 % in patches), and at least 512 MiB below a small one") {
  CHECK(cuda_plan_bytes(40) == doctest::Approx(0.9 * 40e9));
  CHECK(cuda_plan_bytes(40, true) == doctest::Approx(0.95 * 40e9));
  CHECK(cuda_plan_bytes(8, true) == doctest::Approx(8e9 - kCudaHeadroomFloor));  // 400 MB would not do
  CHECK(cuda_plan_bytes(8) == doctest::Approx(0.9 * 8e9));  // 800 MB left: the share decides
  CHECK(cuda_plan_bytes(2) == doctest::Approx(2e9 - kCudaHeadroomFloor));  // 200 MB would not do
  CHECK(cuda_plan_bytes(0.1) == 0.0);
}

TEST_CASE("holds_to_plan: float32 without TF32 on a GPU, eager or native, unless memory_hold is off; the held estimates") {
  Config c = gd_config();
  c.problem.size = 1024;
  c.denoiser.architecture = "drunet";
  c.compile.mode = CompileMode::none;
  c.compile.tf32 = false;
  CHECK(holds_to_plan(c, true));
  CHECK_FALSE(holds_to_plan(c, false));  // the CPU: no cuDNN, nothing to hold
  Config v = c;
  v.compile.tf32 = true;  // tensor-core engines: their workspaces fit the plan unheld
  CHECK_FALSE(cudnn_workspaces_unbounded(v, true));
  CHECK_FALSE(holds_to_plan(v, true));
  v = c;
  v.denoiser.precision = "bf16";
  CHECK_FALSE(holds_to_plan(v, true));
  v = c;
  v.denoiser.memory_hold = false;  // the user's choice: engines chosen alike in every mode, unbounded
  CHECK(cudnn_workspaces_unbounded(v, true));
  CHECK_FALSE(holds_to_plan(v, true));
  for (CompileMode m : {CompileMode::pre, CompileMode::post, CompileMode::fused}) {
    v = c;
    v.compile.mode = m;  // the native executor's ATen fallbacks
    CHECK(holds_to_plan(v, true));
    v.compile.backend = CompileBackend::inductor;  // inductor's kernels are its own
    CHECK_FALSE(holds_to_plan(v, true));
  }
  // The held estimates against memory_hold = false (the same configuration unheld): eager's cuDNN
  // workspace term 0.25 of the largest activation where it is 2 unheld; the native executor's
  // 2 largest activations more for its warm-up (kNativeWarmupHeld). The rest of the plan the same.
  const nn::Graph g = denoiser_graph(c.denoiser);
  TilePlan tile;
  tile.own = tile.ext = Box{0, 1024, 0, 1024};
  MemoryContext ctx;
  ctx.cuda = true, ctx.angles = 100, ctx.detectors = 1449;
  const double largest = 4.0 * 64 * 1024 * 1024;  // DRUNet's 64 channels at 1024², float32
  for (CompileMode m : {CompileMode::none, CompileMode::pre}) {
    CAPTURE(to_string(m));
    v = c;
    v.compile.mode = m;
    const MemoryPlan held = plan_memory(v, g, tile, ctx);
    v.denoiser.memory_hold = false;
    const MemoryPlan free = plan_memory(v, g, tile, ctx);
    CHECK(held.workspace > 0);
    if (m == CompileMode::none) {
      CHECK(free.workspace == doctest::Approx(2.0 * largest).epsilon(1e-9));
      CHECK(held.workspace == doctest::Approx(0.25 * largest).epsilon(1e-9));
    } else {
      CHECK(held.workspace - free.workspace == doctest::Approx(2.0 * largest).epsilon(1e-9));
    }
    CHECK(held.activations == free.activations);
    CHECK(held.solver == free.solver);
    CHECK(held.total() - free.total() == doctest::Approx(held.workspace - free.workspace).epsilon(1e-9));
  }
  // A streamed slab's group is held as a resident slab is (its first iteration runs every shape).
  v = c;
  v.compile.mode = CompileMode::pre;
  ctx.slices = 4, ctx.stream = 4;
  const MemoryPlan group = estimate_memory(v, g, tile, ctx, 0, 0);
  v.denoiser.memory_hold = false;
  const MemoryPlan group_free = estimate_memory(v, g, tile, ctx, 0, 0);
  CHECK(group.workspace - group_free.workspace == doctest::Approx(2.0 * largest).epsilon(1e-9));
  CHECK(group.solver == group_free.solver);
  // What the hold allows the allocator to reserve: for a run that captures, the estimate and
  // kHoldSlack more (a graph's pool keeps reserved blocks no tensor holds); for one that does
  // not (a streamed slab, patches: segments that grow in place), the estimate; never past the
  // budget
  CHECK(kHoldSlack > 0);
  CHECK(kHoldSlack <= 0.1);  // within the 10 % of the peak
  CHECK(hold_bytes(2.0e9, 0) == doctest::Approx(2.0e9 * (1 + kHoldSlack)));
  CHECK(hold_bytes(2.0e9, 3.0e9) == doctest::Approx(2.0e9 * (1 + kHoldSlack)));
  CHECK(hold_bytes(2.0e9, 2.05e9) == 2.05e9);  // the budget bounds it
  CHECK(hold_bytes(group.total(), 0) > group.total());
  CHECK(hold_bytes(2.0e9, 0, /*grow_in_place=*/true) == 2.0e9);
  CHECK(hold_bytes(2.0e9, 1.5e9, /*grow_in_place=*/true) == 1.5e9);
  CHECK(hold_bytes(group.total(), 0, /*grow_in_place=*/true) == group.total());
}

TEST_CASE("captures_allowed: a tile in patches runs without CUDA graphs, a whole tile with them") {
  Config c = gd_config();
  c.problem.size = 4096;
  c.denoiser.architecture = "drunet";
  c.compile.mode = CompileMode::fused;
  const nn::Graph g = denoiser_graph(c.denoiser);
  TilePlan tile;
  tile.own = tile.ext = Box{0, 4096, 0, 4096};
  MemoryContext ctx;
  ctx.cuda = true, ctx.angles = 100, ctx.detectors = 5793;
  c.denoiser.memory_limit_gb = 80;  // the whole tile in one call
  const MemoryPlan whole = plan_memory(c, g, tile, ctx);
  CHECK_FALSE(whole.patched());
  CHECK(captures_allowed(whole));
  c.denoiser.memory_limit_gb = 8;  // the H100 matrix's 4096² case: 4 patches
  const MemoryPlan patched = plan_memory(c, g, tile, ctx);
  REQUIRE(patched.patched());
  CHECK(patched.patches > 1);
  CHECK_FALSE(captures_allowed(patched));
  // the plan is what decides: a patch size set by hand counts the same
  c.denoiser.memory_limit_gb = 0;
  c.denoiser.patch_size = 1024;
  CHECK_FALSE(captures_allowed(plan_memory(c, g, tile, ctx)));
  // a slab streamed through the GPU in whole tiles: uncaptured too (the GPU check tier's
  // 32 x 1024² slab under 3 GB: 16 slices a group)
  Config v = c;
  v.denoiser.patch_size = 0;
  v.problem.size = 1024;
  v.compile.tf32 = false;
  v.denoiser.memory_limit_gb = 3;
  const nn::Graph gv = denoiser_graph(v.denoiser);
  TilePlan slice;
  slice.own = slice.ext = Box{0, 1024, 0, 1024};
  MemoryContext vctx;
  vctx.cuda = true, vctx.angles = 100, vctx.detectors = 1449, vctx.slices = 32;
  const MemoryPlan streamed = plan_memory(v, gv, slice, vctx);
  MESSAGE(streamed.describe());
  REQUIRE(streamed.stream > 0);
  CHECK_FALSE(streamed.patched());
  CHECK_FALSE(captures_allowed(streamed));
  v.denoiser.memory_limit_gb = 0;  // resident: captured
  const MemoryPlan resident = plan_memory(v, gv, slice, vctx);
  CHECK(resident.stream == 0);
  CHECK(captures_allowed(resident));
}

TEST_CASE("MemoryStage: the innermost scope names the allocations, and the outer one is back after it") {
  CHECK(std::string(MemoryStage::current()).empty());
  {
    const MemoryStage solver("solver");
    CHECK(std::string(MemoryStage::current()) == "solver");
    {
      const MemoryStage metrics("metrics");
      CHECK(std::string(MemoryStage::current()) == "metrics");
    }
    CHECK(std::string(MemoryStage::current()) == "solver");
  }
  CHECK(std::string(MemoryStage::current()).empty());
  // per thread: another thread starts outside every scope
  const MemoryStage here("denoiser");
  std::string there = "unset";
  std::thread([&] { there = MemoryStage::current(); }).join();
  CHECK(there.empty());
  // on the CPU nothing is recorded and the report is empty
  record_memory_stages(at::kCPU);
  CHECK(device_memory_summary(at::kCPU).empty());
  CHECK(device_memory_at_failure().empty());
}

TEST_CASE("the execution plan: halo width and mode, tiles, executor and capture, decided once") {
  Config c = gd_config();
  c.problem.size = 64;
  c.denoiser.architecture = "drunet";
  const nn::Graph g = denoiser_graph(c.denoiser);
  const ExecutionPlan in = plan_execution(c, 4, g);
  CHECK(in.halo_mode == HaloMode::input);
  CHECK(in.halo == nn::receptive_radius(g));
  CHECK(in.decomp.tiles.size() == 4);
  CHECK(in.decomp.halo == in.halo);
  CHECK_FALSE(in.layer_exchange);
  CHECK(in.executor == DenoiserExecutor::eager);
  c.distributed.halo = 5;
  CHECK(plan_execution(c, 4, g).halo == 5);

  // The layer halo: no input halo, owned tiles on the network's sampling grid.
  c.distributed.halo = 0;
  c.distributed.halo_mode = HaloMode::layer;
  c.compile.mode = CompileMode::pre;
  const ExecutionPlan layer = plan_execution(c, 4, g);
  CHECK(layer.halo == 0);
  CHECK(layer.layer_exchange);
  for (const auto& t : layer.decomp.tiles) CHECK(t.own.r0 % g.alignment() == 0);
  CHECK(layer.executor == DenoiserExecutor::native);
  CHECK_FALSE(layer.executor_graph);  // the exchanges run between the executor's steps
  CHECK_FALSE(plan_execution(c, 4, g, at::Device(at::kCUDA, 0)).executor_graph);
  CHECK(plan_execution(c, 1, g, at::Device(at::kCUDA, 0)).executor_graph);  // one rank: no exchanges
  CHECK_FALSE(plan_execution(c, 1, g).layer_exchange);
  c.compile.backend = CompileBackend::inductor;
  CHECK_THROWS_AS(plan_execution(c, 4, g), InputError);

  // Capture: the executor's own graph in mode pre, the solver's regions in post and fused on CUDA.
  c.distributed.halo_mode = HaloMode::input;
  c.compile.mode = CompileMode::fused;
  const ExecutionPlan fused = plan_execution(c, 2, g);
  CHECK(fused.executor == DenoiserExecutor::inductor);
  CHECK_FALSE(fused.executor_graph);
  CHECK_FALSE(fused.region_graphs);  // on the CPU
  CHECK(plan_execution(c, 2, g, at::Device(at::kCUDA, 0)).region_graphs);
  c.compile.cuda_graphs = false;
  CHECK_FALSE(plan_execution(c, 2, g, at::Device(at::kCUDA, 0)).region_graphs);
  c.denoiser.architecture = "identity";
  CHECK(denoiser_executor(c) == DenoiserExecutor::eager);
}

TEST_CASE("CUDA: run_pnp on the GPU equals the CPU run in every compile mode (TF32 off)" * doctest::skip(!at::hasCUDA())) {
  // A small DnCNN PnP problem, strict fp32 on the GPU (cuDNN TF32 off), eager and native in
  // none, pre, post and fused (post and fused capture CUDA graphs) against the CPU eager run.
  Config base = trained_config("dncnn", "dncnn_ct");
  base.solver.clamp = "ground_truth";
  base.solver.iterations = 4;
  base.compile.autotune = false;
  const bool tf32 = at::globalContext().allowTF32CuDNN();
  at::globalContext().setAllowTF32CuDNN(false);
  auto d = plan_decomposition(base.problem.size, world_size(), "slabs", {}, 40, 1);
  auto cpu_comm = make_communicator("mpi", MPI_COMM_WORLD, at::kCPU, 1, 0);
  Problem cpu_prob = setup_problem(base, d, world_rank(), at::kCPU);
  Denoiser cpu_den = make_denoiser(base, at::kCPU);
  const PnpRecord ref = run_pnp(base, d, *cpu_comm, cpu_prob, cpu_den, at::kCPU, 0.0);
  const at::Device gpu(at::kCUDA, 0);
  auto comm = make_communicator("mpi", MPI_COMM_WORLD, gpu, 1, 1);
  Problem prob = setup_problem(base, d, world_rank(), gpu);
  for (std::string mode : {"none", "pre", "post", "fused"}) {
    CAPTURE(mode);
    Config c = base;
    c.compile.mode = *parse_enum<CompileMode>(mode);
    if (world_size() > 1) c.compile.cuda_graphs = false;  // captured communication needs NCCL (one GPU per rank)
    Denoiser den = make_denoiser(c, gpu);
    const PnpRecord r = run_pnp(c, d, *comm, prob, den, gpu, 0.0);
    CHECK(r.x_own.is_cuda());
    if (world_size() == 1 && (mode == "post" || mode == "fused")) CHECK(r.graphs_captured);
    const at::Tensor x = r.x_own.to(at::kCPU);
    const double rel = (x - ref.x_own).norm().item<double>() / ref.x_own.norm().item<double>();
    MESSAGE(mode << " on CUDA vs CPU: relative difference " << rel << ", PSNR " << r.psnr.back() << " dB (CPU "
                 << ref.psnr.back() << "), SSIM " << r.ssim.back());
    CHECK(rel < 1e-5);
    CHECK(std::abs(r.ssim.back() - ref.ssim.back()) < 1e-5);
    CHECK(ref.x_own.std().item<double>() > 0.05);  // content, not a flattened image
  }
  at::globalContext().setAllowTF32CuDNN(tf32);
}

TEST_CASE("annealed sigma (denoiser.sigma_start): geometric schedule, recorded, the same in every compile mode") {
  Config base = trained_config("drunet", "drunet_ct");  // trained: its output depends on sigma
  base.solver.iterations = 5;
  base.denoiser.sigma_start = 0.16;
  // sigma_k = 0.16 * (0.02 / 0.16)^(k / 4): 0.16, 0.0951, 0.0566, 0.0336, 0.02
  CHECK(sigma_at(base.denoiser, 0, 5) == doctest::Approx(0.16));
  CHECK(sigma_at(base.denoiser, 2, 5) == doctest::Approx(std::sqrt(0.16 * 0.02)));
  CHECK(sigma_at(base.denoiser, 4, 5) == doctest::Approx(0.02));
  Config constant = base;
  constant.denoiser.sigma_start = 0;
  CHECK(sigma_at(constant.denoiser, 3, 5) == 0.02);
  auto d = plan_decomposition(base.problem.size, world_size(), "slabs", {}, 64, 8);
  auto comm = make_communicator("mpi", MPI_COMM_WORLD, at::kCPU, 1, 0);
  Problem prob = setup_problem(base, d, world_rank(), at::kCPU);
  std::map<std::string, PnpRecord> rec;
  for (std::string mode : {"none", "pre", "post", "fused"}) {
    Config c = base;
    c.compile.mode = *parse_enum<CompileMode>(mode);
    Denoiser den = make_denoiser(c, at::kCPU);
    rec[mode] = run_pnp(c, d, *comm, prob, den, at::kCPU, 0.0);
    CHECK(rec[mode].sigma.size() == 5);
    CHECK(rec[mode].sigma.front() == doctest::Approx(0.16));
    CHECK(rec[mode].sigma.back() == doctest::Approx(0.02));
  }
  for (std::string mode : {"pre", "post", "fused"}) {
    CAPTURE(mode);
    const double rel = (rec[mode].x_own - rec["none"].x_own).norm().item<double>() / rec["none"].x_own.norm().item<double>();
    CHECK(rel < 1e-5);  // native (sigma in a device buffer, set per iteration) = eager (sigma map per call)
  }
  Denoiser den = make_denoiser(constant, at::kCPU);
  const PnpRecord c = run_pnp(constant, d, *comm, prob, den, at::kCPU, 0.0);
  const double moved = (c.x_own - rec["none"].x_own).norm().item<double>() / c.x_own.norm().item<double>();
  MESSAGE("annealed vs constant sigma: relative difference " << moved);
  CHECK(moved > 1e-3);  // the schedule changed the result
  for (double s : c.sigma) CHECK(s == 0.02);
}
