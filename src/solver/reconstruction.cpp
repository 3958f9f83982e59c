// Reconstruction: the collective set-up of one reconstruction (device, decomposition, memory
// plans, communicator, data, denoiser), its run, and the record of every rank gathered for output.
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "pnp/solver.hpp"
#include "pnp/timing.hpp"

namespace pnp {

namespace {

// Gathers [iterations] doubles of every rank into [iterations x ranks] on rank 0.
std::vector<double> gather_columns(const Communicator& comm, const std::vector<double>& mine) {
  const int r = comm.rank(), s = comm.size();
  std::vector<double> all(r == 0 ? mine.size() * size_t(s) : 0);
  MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), static_cast<int>(mine.size()),
             MPI_DOUBLE, 0, comm.mpi_comm());
  if (r != 0) return {};
  std::vector<double> out(all.size());
  const size_t it = mine.size();
  for (size_t q = 0; q < size_t(s); ++q)
    for (size_t i = 0; i < it; ++i) out[i * size_t(s) + q] = all[q * it + i];
  return out;
}

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

ReconstructionPlan Reconstruction::plan(const Config& cfg, MPI_Comm world, int local_rank) {
  ReconstructionPlan p;
  p.cfg = cfg;
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  collectively(world, [&] {
    p.device = choose_device(cfg.distributed.device, local_rank);
    // compile.tf32 = true keeps PyTorch's defaults (TF32 in cuDNN convolutions); false makes
    // every convolution and matrix product strict fp32 (the inductor packages call ATen's).
    if (!cfg.compile.tf32) {
      at::globalContext().setAllowTF32CuDNN(false);
      at::globalContext().setAllowTF32CuBLAS(false);
    }
    p.graph = denoiser_graph(cfg.denoiser);
    const int64_t halo = cfg.distributed.halo > 0 ? cfg.distributed.halo : nn::receptive_radius(p.graph);
    p.decomp = plan_decomposition(cfg.problem.size, size, cfg.distributed.decomposition, cfg.distributed.grid, halo,
                                  p.graph.alignment());
    nn::infer_output_shape(p.graph, {1, cfg.denoiser.channels, p.decomp.tile(rank).ext.rows(), p.decomp.tile(rank).ext.cols()});
    p.memory = memory_plans(cfg, p.decomp, p.graph);  // InputError on every rank when a memory limit cannot be met
  });
  return p;
}

Reconstruction Reconstruction::setup(ReconstructionPlan plan, MPI_Comm world, int local_size,
                                     std::chrono::steady_clock::time_point t0) {
  Reconstruction r;
  r.t0_ = t0;
  r.cfg_ = std::move(plan.cfg);
  r.device_ = plan.device;
  r.decomp_ = std::move(plan.decomp);
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  collectively(world, [&] {
    r.comm_ = make_communicator(r.cfg_.distributed.comm, world, r.device_, local_size, cuda_device_count());
  });
  collectively(world, [&] {
    r.prob_ = setup_problem(r.cfg_, r.decomp_, rank, r.device_);
    r.den_ = make_denoiser(r.cfg_, r.device_);
  });
  r.setup_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

PnpRecord Reconstruction::run() {
  const double setup = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  return run_pnp(cfg_, decomp_, *comm_, prob_, den_, device_, setup);
}

GatheredRecord Reconstruction::gather(const PnpRecord& rec) {
  GatheredRecord g;
  Communicator& comm = *comm_;
  g.image = comm.gather_tiles(rec.x_own, decomp_);
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
  g.patch = gather_columns(comm, {double(rec.memory.patch)});
  g.estimate = gather_columns(comm, {rec.memory.total()});
  for (int64_t b : rec.phase_peak_bytes) g.phase_peak.push_back(gather_columns(comm, {double(b)}));
  g.first = comm.max(rec.first_iteration);
  g.stable = comm.max(stable_mean(rec.total, cfg_.solver.stable_window));
  g.region_gradient = gather_columns(comm, rec.region_gradient);
  g.region_denoise = gather_columns(comm, rec.region_denoise);
  g.compile = comm.max(rec.compile_seconds);
  g.table = phase_table(comm, rec, cfg_.solver.stable_window);
  return g;
}

}  // namespace pnp
