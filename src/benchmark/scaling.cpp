// pnp_bench --scaling: the scaling model of include/pnp/benchmark.hpp (ScalingOptions). Compute
// is measured on this device by one rank standing in for the busiest rank of R; communication
// comes from the exact plans through an alpha-beta model.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <tuple>

#include "pnp/benchmark.hpp"
#include "pnp/core.hpp"
#include "pnp/device.hpp"
#include "pnp/io.hpp"
#include "pnp/physics.hpp"
#include "pnp/roofline.hpp"
#include "pnp/solver.hpp"
#include "pnp/timing.hpp"

namespace pnp::benchmark {

namespace {

// The layer halo's stand-in exchange: the neighbour sides are filled with zeros where the real
// one receives the neighbours' strips (no messages; exchange_strips: zero strips made once,
// where the real one also packs the few rows it sends).
class LocalFill final : public nn::HaloExchanger {
 public:
  // Zero strips of the shapes a neighbour would send, made once per node and tile shape.
  nn::HaloStrips exchange_strips(const nn::Node& h, const at::Tensor& tile) override {
    const auto& a = h.attrs;
    const int dim = static_cast<int>(tile.dim()) - 2;
    auto [it, fresh] = strips_.try_emplace(std::make_pair(h.id, tile.sizes().vec()));
    if (fresh) {
      it->second.resize(static_cast<size_t>(dim));
      const std::vector<int64_t> extent(tile.sizes().begin() + 2, tile.sizes().end());
      for (int d = 0; d < dim; ++d)
        for (int side = 0; side < 2; ++side) {
          if (!(side == 0 ? a.halo_peer_lo[d] : a.halo_peer_hi[d]) || (side == 0 ? a.halo_lo[d] : a.halo_hi[d]) == 0)
            continue;
          std::vector<int64_t> shape{tile.size(0), tile.size(1)};
          for (int64_t s : nn::halo_strip_region(a, extent, d, side).size) shape.push_back(s);
          it->second[static_cast<size_t>(d)][static_cast<size_t>(side)] = at::zeros(shape, tile.options());
        }
    }
    return it->second;
  }

 private:
  std::map<std::pair<int, std::vector<int64_t>>, nn::HaloStrips> strips_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? std::nan("") : v[v.size() / 2];
}

template <class F>
double time_median(const CallTimer& t, int warmup, int timed, F&& f) {
  for (int i = 0; i < warmup; ++i) t.time(f);
  std::vector<double> s;
  for (int i = 0; i < std::max(1, timed); ++i) s.push_back(t.time(f));
  return median(s);
}

struct Link {
  double alpha, beta;  // s, B/s
};
Link link_for(const LinkModel& m, int ranks) {
  return ranks <= m.gpus_per_node ? Link{m.intra_latency_us * 1e-6, m.intra_gb_per_s * 1e9}
                                  : Link{m.inter_latency_us * 1e-6, m.inter_gb_per_s * 1e9};
}

}  // namespace

std::vector<ScalingRow> run_scaling(const Config& cfg_in, const ScalingOptions& o, std::ostream& log) {
  Config cfg = cfg_in;
  resolve_problem_sizes(cfg);
  const at::Device device = choose_device(cfg.distributed.device, 0);
  const CallTimer timer(device);
  at::NoGradGuard no_grad;
  const nn::Graph whole = denoiser_graph(cfg.denoiser);
  const auto [k, det] = sinogram_dims(cfg);
  const physics::Geometry geom = physics::Geometry::standard(cfg.problem.size, k, det);
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  const at::Tensor sino = at::rand({k, det}, opts);
  std::map<std::pair<int64_t, int64_t>, double> grad_cache;  // owned tile -> s
  std::map<std::string, std::pair<double, int64_t>> den_cache;  // graph + tile -> s, device bytes
  std::map<HaloMode, double> t1;                              // mode -> T(1)
  std::vector<ScalingRow> rows;
  for (const HaloMode mode : o.modes)
    for (int R : o.ranks)
      for (const std::string& layout : o.layouts) {
        if (R == 1 && layout != o.layouts.front()) continue;  // one rank has one layout
        ScalingRow row;
        row.ranks = R, row.layout = layout, row.mode = mode;
        Config c = cfg;
        c.distributed.halo_mode = mode;
        c.distributed.decomposition = layout;
        c.distributed.grid = {0, 0};
        try {
          const ExecutionPlan plan = plan_execution(c, R, whole, device);
          const Decomposition& d = plan.decomp;
          const bool layer = plan.halo_mode == HaloMode::layer, exchanges = plan.layer_exchange;
          if (layout == "grid" && R > 1 && (d.grid_rows == 1 || d.grid_cols == 1)) {
            row.status = "skipped", row.reason = "no 2-d factorisation of " + std::to_string(R) + " ranks";
            rows.push_back(row);
            continue;
          }
          const auto work = denoiser_work(c, d, whole);
          int me = 0;  // the busiest rank: the most FLOPs, then the most messages
          for (int r = 1; r < R; ++r)
            if (std::make_pair(work[r].flops, work[r].messages) > std::make_pair(work[me].flops, work[me].messages))
              me = r;
          row.stand_in = me;
          row.redundancy = work[me].redundancy();
          row.halo_bytes = static_cast<double>(work[me].exchange_bytes);
          row.halo_messages = static_cast<double>(work[me].messages);
          const TilePlan& t = d.tile(me);
          // The gradient region on the owned tile.
          auto gk = std::make_pair(t.own.rows(), t.own.cols());
          if (!grad_cache.count(gk)) {
            at::Tensor x = at::rand({t.own.rows(), t.own.cols()}, opts), g = at::empty_like(x), p = at::empty({k, det}, opts);
            grad_cache[gk] = time_median(timer, o.warmup, o.timed, [&] {
              physics::forward_out(x, geom, t.own, p);
              p.sub_(sino);
              physics::adjoint_out(p, geom, t.own, g);
              x.add_(g, -1e-6);
            });
          }
          row.gradient_s = grad_cache[gk];
          // One denoiser call: the extended tile (input) or the owned tile with halo nodes (layer).
          const Box& in = layer ? t.own : t.ext;
          const auto axes = layer_neighbours(d, me);
          // The same graph on the same shape is measured once (a 1-rank layer run is the input one).
          const std::string key = (exchanges ? nn::with_layer_halos(whole, axes) : whole).hash() + " " +
                                  std::to_string(in.rows()) + "x" + std::to_string(in.cols());
          row.tile = nn::shape_string({1, c.denoiser.channels, in.rows(), in.cols()});
          if (!den_cache.count(key)) {
            // The device memory this rank's denoiser takes: weights, compiled arena, input and
            // output, over what was allocated before it was built (0 on the CPU).
            reset_device_peak(device);
            const int64_t before = device_peak_bytes(device);
            Denoiser den = exchanges ? make_distributed_denoiser(c, device, std::make_unique<LocalFill>(), axes)
                                          : make_denoiser(c, device);
            at::Tensor z = at::rand({1, c.denoiser.channels, in.rows(), in.cols()}, opts);
            const double s = time_median(timer, o.warmup, o.timed, [&] { (void)den.executor->forward(z, c.denoiser.sigma); });
            den_cache[key] = {s, device_peak_bytes(device) - before};
          }
          std::tie(row.denoise_s, row.denoiser_bytes) = den_cache[key];
          // Communication, from the plans.
          const Link L = link_for(o.link, R);
          const double sino_bytes = 4.0 * static_cast<double>(k * det);
          row.allreduce_s = R > 1 ? 2.0 * (R - 1) / R * sino_bytes / L.beta + 2.0 * (R - 1) * L.alpha : 0.0;
          if (exchanges) {
            const nn::Graph g = nn::with_layer_halos(whole, axes);
            const std::vector<int64_t> shape{1, c.denoiser.channels, in.rows(), in.cols()};
            const int64_t eb = static_cast<int64_t>(at::elementSize(denoiser_dtype(c.denoiser)));
            const nn::HaloTraffic h = nn::layer_halo_traffic(g, nn::infer_shapes(g, shape), eb);
            row.halo_s = static_cast<double>(h.phases) * L.alpha + static_cast<double>(h.phase_bytes) / L.beta;
          } else if (!t.recvs.empty()) {  // one phase: every box at once, the largest sets the pace
            int64_t largest = 0;
            for (const auto& r : t.recvs) largest = std::max(largest, r.box.size());
            for (const auto& s : t.sends) largest = std::max(largest, s.box.size());
            row.halo_s = L.alpha + 4.0 * static_cast<double>(largest) / L.beta;
          }
          row.iteration_s = row.gradient_s + row.allreduce_s + row.denoise_s + row.halo_s;
          if (R == 1) t1[mode] = row.iteration_s;
          row.efficiency = t1.count(mode) ? t1[mode] / (R * row.iteration_s) : std::nan("");
        } catch (const InputError& e) {
          row.status = "skipped", row.reason = e.what();
        }
        log << "scaling " << to_string(mode) << " " << layout << " R=" << R << ": "
            << (row.status == "ok" ? "T " + std::to_string(row.iteration_s * 1e3) + " ms (gradient " +
                                         std::to_string(row.gradient_s * 1e3) + ", denoise " +
                                         std::to_string(row.denoise_s * 1e3) + ", allreduce " +
                                         std::to_string(row.allreduce_s * 1e3) + ", halo " +
                                         std::to_string(row.halo_s * 1e3) + "), efficiency " +
                                         std::to_string(row.efficiency) + ", redundancy " +
                                         std::to_string(row.redundancy) + ", denoiser memory " +
                                         human_bytes(static_cast<double>(row.denoiser_bytes))
                                   : row.status + ": " + row.reason)
            << std::endl;
        rows.push_back(row);
      }
  return rows;
}

void write_scaling(const std::string& path, const Config& cfg, const ScalingOptions& o,
                   const std::vector<ScalingRow>& rows, bool overwrite) {
  io::AtomicOutput out(path, overwrite);
  io::H5File& f = out.file();
  io::write_provenance(f, bench_provenance());
  io::write_attr(f, "/", "ranks", int64_t{1});
  io::write_attr(f, "/", "gpu_names", device_name(choose_device(cfg.distributed.device, 0)));
  io::write_attr(f, "/", "config", cfg.to_toml());
  io::write_attr(f, "/", "device", cfg.distributed.device);
  io::write_attr(f, "/", "compile_mode", to_string(cfg.compile.mode));
  io::write_attr(f, "/", "compile_backend", to_string(cfg.compile.backend));
  io::write_attr(f, "/", "architecture", cfg.denoiser.architecture);
  auto col = [&](const char* name, auto get, const char* units, const char* desc) {
    io::write_column(f, std::string("/scaling/") + name, rows, get, units, desc);
  };
  col("ranks", [](const ScalingRow& r) { return int64_t{r.ranks}; }, "1", "ranks (GPUs) R");
  col("layout", [](const ScalingRow& r) { return r.layout; }, "", "slabs or grid");
  col("halo_mode", [](const ScalingRow& r) { return to_string(r.mode); }, "", "input or layer");
  col("status", [](const ScalingRow& r) { return r.status; }, "", "ok or skipped");
  col("reason", [](const ScalingRow& r) { return r.reason; }, "", "why a row was skipped");
  col("stand_in", [](const ScalingRow& r) { return int64_t{r.stand_in}; }, "1", "the rank whose workload was measured");
  col("tile", [](const ScalingRow& r) { return r.tile; }, "", "its denoiser input shape");
  col("gradient_s", [](const ScalingRow& r) { return r.gradient_s; }, "s", "FP + BP + step on its tile, measured");
  col("denoise_s", [](const ScalingRow& r) { return r.denoise_s; }, "s",
      "one denoiser call on its tile, measured (layer halo: halos filled locally)");
  col("allreduce_s", [](const ScalingRow& r) { return r.allreduce_s; }, "s", "the sinogram's ring allreduce, modelled");
  col("denoiser_bytes", [](const ScalingRow& r) { return r.denoiser_bytes; }, "B",
      "peak device memory of the stand-in's denoiser (weights, activations, input), measured; 0 on CPU");
  col("halo_s", [](const ScalingRow& r) { return r.halo_s; }, "s", "the denoiser's halo exchanges, modelled");
  col("iteration_s", [](const ScalingRow& r) { return r.iteration_s; }, "s", "predicted iteration: the sum");
  col("efficiency", [](const ScalingRow& r) { return r.efficiency; }, "1", "T(1) / (R T(R)) within the halo mode");
  col("redundancy", [](const ScalingRow& r) { return r.redundancy; }, "1", "counted denoiser FLOPs / ideal share");
  col("halo_bytes", [](const ScalingRow& r) { return r.halo_bytes; }, "B", "sent per denoiser call");
  col("halo_messages", [](const ScalingRow& r) { return r.halo_messages; }, "1", "messages per denoiser call");
  io::write_attr(f, "/scaling", "gpus_per_node", int64_t{o.link.gpus_per_node});
  io::write_attr(f, "/scaling", "intra_gb_per_s", o.link.intra_gb_per_s);
  io::write_attr(f, "/scaling", "intra_latency_us", o.link.intra_latency_us);
  io::write_attr(f, "/scaling", "inter_gb_per_s", o.link.inter_gb_per_s);
  io::write_attr(f, "/scaling", "inter_latency_us", o.link.inter_latency_us);
  out.commit();
}

}  // namespace pnp::benchmark
