// Reconstruction: the collective set-up of one reconstruction (device, decomposition, memory
// plans, communicator, data, denoiser), its run, and the record of every rank gathered for output.
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <sys/stat.h>

#include <filesystem>

#include "checkpoint.hpp"
#include "pnp/core.hpp"
#include "pnp/device.hpp"
#include "pnp/solver.hpp"
#include "pnp/timing.hpp"
#include "pnp/watchdog.hpp"

namespace pnp {

namespace {

double stable_mean(const std::vector<double>& v, int64_t window) {
  const size_t w = std::min<size_t>(v.size(), static_cast<size_t>(window));
  if (w == 0) return 0;
  return std::accumulate(v.end() - static_cast<long>(w), v.end(), 0.0) / double(w);
}

// Mean over the last `window` iterations of the finite values (NaN when there are none).
double stable_mean_finite(const std::vector<double>& v, int64_t window) {
  const size_t w = std::min<size_t>(v.size(), static_cast<size_t>(window));
  double sum = 0;
  int n = 0;
  for (size_t i = v.size() - w; i < v.size(); ++i)
    if (std::isfinite(v[i])) sum += v[i], ++n;
  return n ? sum / n : std::nan("");
}

// Per phase (and region), this rank's stable-window mean, then max/min/mean over ranks.
std::vector<GatheredRecord::Row> phase_table(const Communicator& comm, const PnpRecord& rec, int64_t window) {
  std::vector<std::string> names = pnp_phases();
  std::vector<const std::vector<double>*> series;
  for (const auto& ph : rec.phase) series.push_back(&ph);
  names.insert(names.end() - 1, {"(region) gradient", "(region) denoise"});
  series.insert(series.end() - 1, {&rec.region_gradient, &rec.region_denoise});
  std::vector<double> mine;
  for (const auto* v : series) mine.push_back(stable_mean_finite(*v, window));
  std::vector<double> mx(mine.size()), mn(mine.size()), sm(mine.size());
  const int n = static_cast<int>(mine.size());
  MPI_Reduce(mine.data(), mx.data(), n, MPI_DOUBLE, MPI_MAX, 0, comm.mpi_comm());
  MPI_Reduce(mine.data(), mn.data(), n, MPI_DOUBLE, MPI_MIN, 0, comm.mpi_comm());
  MPI_Reduce(mine.data(), sm.data(), n, MPI_DOUBLE, MPI_SUM, 0, comm.mpi_comm());
  std::vector<GatheredRecord::Row> rows;
  if (comm.rank() != 0) return rows;
  for (size_t i = 0; i < mine.size(); ++i) rows.push_back({names[i], mx[i], mn[i], sm[i] / comm.size()});
  return rows;
}

}  // namespace

at::Device choose_device(const std::string& want, int local_rank) {
  const int count = cuda_device_count();
  if (want == "cpu" || (want == "auto" && count == 0)) return at::kCPU;
  if (count == 0) throw InputError("distributed.device = \"cuda\" but no CUDA device is available");
  at::Device dev(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
  c10::impl::getDeviceGuardImpl(at::kCUDA)->setDevice(dev);
  return dev;
}

namespace {
// What every rank must share before any size-dependent step: the effective configuration, the
// identity of its input files (name and size: copies of a file on other nodes agree) and the
// build. The data itself is compared after it is read (setup).
std::string identity_text(const Config& cfg) {
  std::string t = cfg.to_toml() + "[inputs]\n";
  for (const std::string& path : {cfg.problem.sinogram, cfg.denoiser.weights}) {
    if (path.empty()) continue;
    std::string resolved = path;
    try {
      resolved = resolve_weights(path);
    } catch (const InputError&) {
    }
    struct stat st{};
    if (::stat(resolved.c_str(), &st) == 0)
      t += std::filesystem::path(resolved).filename().string() + " " + std::to_string(st.st_size) + " bytes\n";
    else
      t += resolved + " (not found)\n";
  }
  const Provenance p = basic_provenance("pnp_recon");
  return t + "[build]\n" + p.version + " " + p.git_commit + "\n";
}
}  // namespace

ReconstructionPlan Reconstruction::plan(const Config& cfg, MPI_Comm world, int local_rank, int local_size) {
  ReconstructionPlan p;
  p.cfg = cfg;
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  // Ranks started with different configurations (MPMD launch lines, a file edited between the
  // ranks' reads) stop here, together, before any step whose size depends on the configuration.
  agree(world, identity_text(cfg), "configuration");
  Watchdog::beat("set-up: the plan");
  collectively(world, [&] {
    resolve_problem_sizes(p.cfg);
    p.device = choose_device(cfg.distributed.device, local_rank);
    if (cfg.solver.precision == "fp64" && !p.device.is_cpu())
      throw InputError("solver.precision = \"fp64\" is the CPU reference in float64, and distributed.device = \"auto\" "
                       "chose " + p.device.str() + ": set distributed.device = \"cpu\"");
    // On the CPU the run's tensor memory is counted from here on, as CUDA's allocator counts it.
    if (p.device.is_cpu()) count_host_allocations();
    // compile.tf32 = true keeps PyTorch's defaults (TF32 in cuDNN convolutions); false makes
    // every convolution and matrix product strict fp32 (the inductor packages call ATen's).
    if (!cfg.compile.tf32) {
      at::globalContext().setAllowTF32CuDNN(false);
      at::globalContext().setAllowTF32CuBLAS(false);
    }
    const Config& c = p.cfg;
    p.graph = denoiser_graph(c.denoiser);
    p.exec = plan_execution(c, size, p.graph, p.device);
    const Box& ext = p.exec.decomp.tile_of(rank).ext;
    if (p.graph.dim == 3) {  // a volume's 3D denoiser: on the z-extended slab
      const auto [e0, e1] = p.exec.decomp.z.ext(rank);
      nn::infer_output_shape(p.graph, {1, c.denoiser.channels, e1 - e0, ext.rows(), ext.cols()});
    } else {
      nn::infer_output_shape(p.graph, {1, c.denoiser.channels, ext.rows(), ext.cols()});
    }
    p.memory = memory_plans(c, p.exec, p.graph, p.device, local_size);  // InputError on every rank when a memory limit cannot be met
    p.work = denoiser_work(c, p.exec.decomp, p.graph, p.memory);
    // A problem the machine cannot hold is refused now, with the estimate --dry-run prints.
    const MemoryPlan& m = p.memory[static_cast<size_t>(rank)];
    const double avail = p.device.is_cuda() ? static_cast<double>(device_total_bytes(p.device))
                                            : host_memory_bytes() / std::max(1, local_size);
    // A volume is gathered on rank 0 for the output and each checkpoint (with its truth): refused
    // now when that host cannot hold it.
    const SlabSplit& z = p.exec.decomp.z;
    if (z.volume() && rank == 0) {
      const double volume = 4.0 * double(z.slices) * double(c.problem.size) * double(c.problem.size);
      const double host = host_memory_bytes() / std::max(1, local_size);
      if (host > 0 && 2 * volume > host)
        throw InputError("the output gathers the " + std::to_string(z.slices) + " x " + std::to_string(c.problem.size) +
                         "² volume and its truth on rank 0: " + human_bytes(2 * volume) + ", more than its " +
                         human_bytes(host) + " of host memory; run fewer ranks on rank 0's node, or split the volume "
                         "into several runs of fewer slices");
    }
    if (m.stream > 0) {
      // A streamed slab: its data, truth and iterate in this rank's host memory; and its groups
      // run uncaptured (a captured graph holds one group's tensors).
      const Box& own = p.exec.decomp.tile_of(rank).own;
      const auto [k, det] = sinogram_dims(c);
      const double store = 4.0 * double(z.count(rank)) * (2.0 * double(own.size()) + double(k * det));
      const double host = host_memory_bytes() / std::max(1, local_size);
      if (host > 0 && store > host)
        throw InputError("rank " + std::to_string(rank) + " streams its slab of " + std::to_string(z.count(rank)) +
                         " slices through the device from host memory: " + human_bytes(store) + ", more than its " +
                         human_bytes(host) + " of host memory; use more ranks (or nodes)");
      if (solver_captures(c.compile.mode, c.compile.cuda_graphs, p.device)) {
        std::string msg = "the slab of rank " + std::to_string(rank) + " is streamed through the device (";
        msg += m.describe();
        msg += "), a group at a time, which a captured CUDA graph cannot follow: compile.mode = ";
        msg += to_string(c.compile.mode);
        msg += " captures; set compile.cuda_graphs = false, compile.mode = \"pre\", or a memory limit that holds the slab";
        throw InputError(msg);
      }
    }
    if (avail > 0 && m.total() > avail)
      throw InputError("rank " + std::to_string(rank) + " needs " + m.describe() + ", more than the " + human_bytes(avail) +
                       (p.device.is_cuda() ? " of " + device_name(p.device) : std::string(" of host memory per rank")) +
                       ": use more ranks, set denoiser.memory_limit_gb (patches) or denoiser.precision = \"bf16\"");
  });
  return p;
}

Reconstruction Reconstruction::setup(ReconstructionPlan plan, MPI_Comm world, int local_size, StartMarks marks) {
  Reconstruction r;
  const auto t0 = marks.program;
  r.t0_ = t0;
  auto mark = std::chrono::steady_clock::now();
  auto seconds = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  auto part = [&](const char* name) {  // the wall time since the last part ended
    const auto now = std::chrono::steady_clock::now();
    r.setup_.emplace_back(name, seconds(mark, now));
    mark = now;
  };
  r.setup_.emplace_back("mpi", seconds(t0, marks.mpi));
  r.setup_.emplace_back("configuration", seconds(marks.mpi, marks.configuration));
  r.setup_.emplace_back("plan", seconds(marks.configuration, mark));
  r.cfg_ = std::move(plan.cfg);
  r.device_ = plan.device;
  r.decomp_ = std::move(plan.exec.decomp);
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  r.memory_ = plan.memory.at(static_cast<size_t>(rank));
  // whether this rank captures a CUDA graph (its pools are the allocator's too)
  const bool captures = (plan.exec.executor_graph || plan.exec.region_graphs) && captures_allowed(r.memory_);
  const bool volume = r.decomp_.z.volume();
  Watchdog::beat("set-up: the communicator");
  collectively(world, [&] {
    const double t = r.cfg_.distributed.timeout_s > 0 ? r.cfg_.distributed.timeout_s : 600;
    if (!volume) {
      r.comm_ = make_communicator(r.cfg_.distributed.comm, world, r.device_, local_size, cuda_device_count(), t);
      return;
    }
    // A volume: the ranks of each slab's plane get the configured communicator (its sinograms'
    // allreduce, its halos); every rank's is MPI (the metrics' sums, the gathers).
    r.comm_ = make_communicator("mpi", world, r.device_, local_size, cuda_device_count(), t);
    MPI_Comm plane = MPI_COMM_NULL;
    if (MPI_Comm_split(world, r.decomp_.z.slab(rank), r.decomp_.z.plane_rank(rank), &plane) != MPI_SUCCESS)
      throw Error("MPI_Comm_split (the volume's planes) failed");
    r.plane_ = make_communicator(r.cfg_.distributed.comm, plane, r.device_, local_size, cuda_device_count(), t);
  });
  part("communicator");
  // The budget as a bound: the allocator may not go past denoiser.memory_limit_gb on this device;
  // and in float32 without TF32 (holds_to_plan), until the first iteration has run every shape
  // (the loop releases it), not past the plan, so that LibTorch's cuDNN convolutions choose
  // algorithms whose workspaces the plan holds.
  const double budget = r.cfg_.denoiser.memory_limit_gb * 1e9;
  if (holds_to_plan(r.cfg_, r.device_.is_cuda()))
    hold_memory_to_plan(r.device_, r.memory_.total(), budget, !captures);
  else
    limit_device_memory(r.device_, budget, !captures);
  // Each live block named after the plan's term that allocated it, for an out-of-memory report.
  record_memory_stages(r.device_);
  Watchdog::beat("set-up: the data and the denoiser");
  collectively(world, [&] {
    const MemoryStage data("data");
    r.prob_ = setup_problem(r.cfg_, r.decomp_, rank, r.device_, &r.plane(), r.comm_.get(), r.memory_.stream > 0);
    part("data");
    const MemoryStage weights("weights");
    Config dc = r.cfg_;  // a denoiser in patches without a graph of its own (captures_allowed)
    if (!captures_allowed(r.memory_)) dc.compile.cuda_graphs = false;
    r.den_ = make_denoiser(dc, r.device_, &r.plane(), &r.decomp_, r.comm_.get());
    part("denoiser");
  });
  // output.resume: the checkpoint, when there is one, read by every rank (it must come from
  // this configuration and rank count).
  if (r.cfg_.output.resume) {
    collectively(world, [&] {
      const std::string path = r.cfg_.output.checkpoint_path();
      if (!std::filesystem::exists(path)) return;  // nothing to resume: start from the beginning
      int ranks = 1;
      MPI_Comm_size(world, &ranks);
      r.resume_ = std::make_shared<Checkpoint>(read_checkpoint(path, checkpoint_identity(r.cfg_, ranks), ranks,
                                                               r.cfg_.problem.size, r.cfg_.solver.iterations,
                                                               r.decomp_.z.slices));
    });
  }
  part("resume");
  // The data every rank read (or simulated) must be the same: a file replaced between the
  // ranks' reads is caught here (a volume's: within each plane, whose ranks share their slab's).
  {
    const at::Tensor y = r.prob_.y.to(at::kCPU).contiguous();
    const std::string_view bytes(static_cast<const char*>(y.data_ptr()), static_cast<size_t>(y.nbytes()));
    agree(r.plane().mpi_comm(), "sinogram " + fnv1a_hex(bytes) + " " + nn::shape_string(y.sizes().vec()) + "\n", "data");
  }
  part("data_check");
  r.setup_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

PnpRecord Reconstruction::run() {
  const double setup = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  PnpRecord rec = run_pnp(cfg_, decomp_, *comm_, prob_, den_, device_, setup, resume_.get(), &plane(), &memory_);
  rec.setup.insert(rec.setup.begin(), setup_.begin(), setup_.end());
  return rec;
}

GatheredRecord Reconstruction::gather(const PnpRecord& rec) {
  GatheredRecord g;
  Communicator& comm = *comm_;
  g.image = comm.gather_tiles(rec.x_own, decomp_);
  if (g.image.defined() && g.image.scalar_type() == at::kDouble) {  // solver.precision = "fp64"
    g.image64 = g.image;
    g.image = g.image64.to(at::kFloat);
  }
  if (prob_.has_truth()) g.truth = comm.gather_tiles(prob_.truth_own, decomp_);
  char buf[128] = {};
  std::snprintf(buf, sizeof buf, "%s", device_name(device_).c_str());
  std::vector<char> names(comm.rank() == 0 ? 128 * size_t(comm.size()) : 0);
  MPI_Gather(buf, 128, MPI_CHAR, names.data(), 128, MPI_CHAR, 0, comm.mpi_comm());
  for (int q = 0; comm.rank() == 0 && q < comm.size(); ++q)
    g.gpu_names += (q ? "," : "") + std::string(&names[size_t(q) * 128]);
  for (const auto& ph : rec.phase) g.phase.push_back(gather_columns(comm, ph));
  g.wall = gather_columns(comm, rec.wall);
  g.peak = gather_columns(comm, {double(rec.peak_bytes)});
  g.sent = gather_columns(comm, {double(rec.bytes_sent)});
  g.bytes = gather_columns(comm, rec.bytes_per_iteration);
  g.setup_peak = gather_columns(comm, {double(rec.setup_peak_bytes)});
  g.metrics_peak = gather_columns(comm, {double(rec.metrics_peak_bytes)});
  g.reserved_peak = gather_columns(comm, {double(rec.reserved_peak_bytes)});
  g.allocator_retries = gather_columns(comm, {double(rec.allocator_retries)});
  {
    const MemoryPlan& m = rec.memory;
    const auto cols = gather_columns(comm, {double(m.patch_rows), double(m.patch_cols), double(m.overlap),
                                            double(m.patches), double(m.patch_shapes), m.redundancy, double(m.batch),
                                            double(m.batches), double(m.stream), double(m.stream_groups)});
    const size_t ranks = cols.size() / 10;  // [10 x ranks] on rank 0
    for (size_t q = 0; q < ranks; ++q) {
      auto at = [&](size_t i) { return cols[i * ranks + q]; };
      MemoryPlan p;
      p.patch_rows = int64_t(at(0)), p.patch_cols = int64_t(at(1)), p.overlap = int64_t(at(2));
      p.patches = int64_t(at(3)), p.patch_shapes = int(at(4)), p.redundancy = at(5);
      p.batch = int64_t(at(6)), p.batches = int64_t(at(7)), p.stream = int64_t(at(8)), p.stream_groups = int64_t(at(9));
      g.memory.push_back(p);
    }
  }
  g.estimate = gather_columns(comm, {rec.memory.total()});
  for (int64_t b : rec.phase_peak_bytes) g.phase_peak.push_back(gather_columns(comm, {double(b)}));
  g.first = comm.max(rec.first_iteration);
  g.stable = comm.max(stable_mean(rec.total, cfg_.solver.stable_window));
  g.region_gradient = gather_columns(comm, rec.region_gradient);
  g.region_denoise = gather_columns(comm, rec.region_denoise);
  g.compile = comm.max(rec.compile_seconds);
  g.table = phase_table(comm, rec, cfg_.solver.stable_window);
  for (const auto& [name, seconds] : rec.setup) g.setup.emplace_back(name, gather_columns(comm, {seconds}));
  return g;
}

}  // namespace pnp
