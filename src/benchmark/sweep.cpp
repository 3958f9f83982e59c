// The denoiser sweep: run every configuration, time it, write one HDF5 row per configuration.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <boost/program_options.hpp>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <sstream>
#include <thread>

#ifdef PNP_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "pnp/config/cli.hpp"
#include "pnp/benchmark.hpp"
#include "pnp/nn/inductor.hpp"
#include "pnp/io.hpp"
#include "pnp/nn/nn.hpp"
#include "pnp/roofline.hpp"
#include "pnp/timing.hpp"
#include "pnp/config/toml_schema.hpp"

namespace pnp::benchmark {

namespace {

using Clock = std::chrono::steady_clock;

std::string shape_key(const std::vector<int64_t>& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "x" : "") + std::to_string(s[i]);
  return r;
}

void free_device_cache(at::Device d) {
#ifdef PNP_HAVE_CUDA
  if (d.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
  (void)d;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

nn::DenoiserSpec sweep_spec(const SweepConfig& c, const std::string& arch, const std::vector<int64_t>& spatial) {
  nn::DenoiserSpec spec;
  spec.architecture = arch;
  spec.dim = static_cast<int>(spatial.size());
  spec.in_channels = spec.out_channels = static_cast<int>(c.channels);
  if (auto it = c.models.find(arch); it != c.models.end()) {
    spec.features = it->second.features;
    spec.blocks = it->second.blocks;
  }
  return spec;
}

nn::Graph sweep_graph(const SweepConfig& c, const std::string& arch, const std::vector<int64_t>& spatial) {
  return nn::build(sweep_spec(c, arch, spatial));
}

std::vector<int64_t> sweep_shape(const SweepConfig& c, const std::vector<int64_t>& spatial) {
  std::vector<int64_t> shape{c.batch, c.channels};
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  return shape;
}

nn::InductorOptions inductor_options(const SweepConfig& c) {
  nn::InductorOptions o = c.inductor;
  if (const char* e = std::getenv("PNP_CACHE_DIR"); e && *e) o.cache_dir = e;
  if (const char* e = std::getenv("PNP_INDUCTOR_MODE"); e && *e) o.mode = e;
  return o;
}

// One inductor package per architecture x shape, compiled before any timing: c.compile_jobs
// exporter subprocesses at a time (host work: tracing, code generation, the C++ and Triton
// compiles), so a sweep's cold compiles take a fraction of their serial sum.
struct Prepared {
  nn::InductorPackage package;
  std::string error;  // the compile failed: the row reports it rather than compiling again
};
std::map<std::pair<std::string, std::string>, Prepared> prepare_inductor(const SweepConfig& c, at::Device device,
                                                                          at::ScalarType dtype, std::ostream& progress) {
  struct Job {
    std::string arch, shape;
    nn::Graph g;
    nn::Weights w;
    std::vector<int64_t> input;
    Prepared result;
  };
  std::vector<Job> jobs;
  for (const auto& arch : c.architectures)
    for (const auto& spatial : c.shapes) {
      Job j{arch, "", sweep_graph(c, arch, spatial), {}, sweep_shape(c, spatial), {}};
      j.shape = shape_key(j.input);
      try {
        nn::infer_shapes(j.g, j.input);
      } catch (const std::exception&) {
        continue;  // the row reports the impossible shape
      }
      j.w = nn::init_weights(j.g, static_cast<uint64_t>(c.seed));
      jobs.push_back(std::move(j));
    }
  const nn::InductorOptions opt = inductor_options(c);
  const size_t workers = std::min(jobs.size(), static_cast<size_t>(std::max<int64_t>(1, c.compile_jobs)));
  progress << "pnp_bench: inductor (" << opt.mode << ", cache " << opt.cache_dir << "): preparing " << jobs.size()
           << " packages, " << workers << " at a time" << std::endl;
  std::atomic<size_t> next{0}, done{0};
  std::mutex out_mutex;
  const auto t0 = Clock::now();
  auto work = [&] {
    for (size_t i; (i = next++) < jobs.size();) {
      Job& j = jobs[i];
      try {
        j.result.package = nn::prepare_inductor_package(j.g, j.w, device, dtype, j.input, opt);
      } catch (const std::exception& e) {
        j.result.error = e.what();
      }
      std::lock_guard<std::mutex> hold(out_mutex);
      progress << "  [" << ++done << "/" << jobs.size() << "] inductor " << j.arch << " " << j.shape << ": "
               << (!j.result.error.empty()               ? "failed: " + first_line(j.result.error)
                   : j.result.package.compiled_here ? "compiled in " + human_seconds(j.result.package.exporter_seconds)
                                                    : std::string("cache hit"))
               << " (" << human_seconds(std::chrono::duration<double>(Clock::now() - t0).count()) << " elapsed)"
               << std::endl;
    }
  };
  std::vector<std::thread> pool;
  for (size_t k = 0; k < workers; ++k) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  std::map<std::pair<std::string, std::string>, Prepared> out;
  for (auto& j : jobs) out[{j.arch, j.shape}] = std::move(j.result);
  return out;
}

}  // namespace

namespace {

// What every row of one sweep shares.
struct SweepRun {
  const SweepConfig& c;
  at::Device device;
  at::ScalarType dtype;
  CallTimer timer;
  bool inductor_here;  // the inductor arm runs here (CUDA, or PNP_BENCH_INDUCTOR_CPU=1)
  std::map<std::pair<std::string, std::string>, Prepared> prepared;  // its packages, compiled before timing
};

// Why `backend` cannot run here (empty when it can).
std::string unavailable(const SweepRun& s, const std::string& backend) {
  const std::string inductor = to_string(CompileBackend::inductor);
  if (backend == "eager" || backend == to_string(CompileBackend::native) || backend == "torch_compile" ||
      backend == "torch_compile_max_autotune" || (backend == inductor && s.inductor_here))
    return "";
  return backend == inductor ? "backend 'inductor' runs on CUDA in pnp_bench (on the CPU set PNP_BENCH_INDUCTOR_CPU=1)"
                             : "unknown backend '" + backend +
                                   "' (available: eager, native, inductor, torch_compile, torch_compile_max_autotune)";
}

// The peer arms: deepinv's module under torch.compile, in a python -m pnp_peer subprocess.
void run_peer(const SweepRun& s, Row& r, const std::string& arch, const std::vector<int64_t>& spatial,
              const nn::Graph& g, const std::vector<int64_t>& shape, const nn::Weights& weights) {
  const SweepConfig& c = s.c;
  free_device_cache(s.device);
  nn::PeerOptions po;
  po.mode = r.backend == "torch_compile" ? "default" : "max-autotune";
  po.warmup = static_cast<int>(c.warmup), po.timed = static_cast<int>(c.timed), po.stable = static_cast<int>(c.stable);
  po.sigma = c.sigma, po.seed = c.seed, po.timeout_s = c.torch_compile_timeout_s;
  const nn::PeerResult p = nn::run_torch_compile_peer(sweep_spec(c, arch, spatial), g, weights, s.device, s.dtype,
                                                      shape, po, inductor_options(c));
  r.module = p.module;
  if (p.ok) {
    r.first_call_s = p.first_call_s, r.compile_s = p.compile_s, r.stable_s = p.stable_s;
    r.peak_memory_bytes = p.peak_memory_bytes, r.cuda_graph = p.cuda_graphs;
  } else {
    r.status = "skipped";
    r.reason = p.reason;
    r.failed = !p.timed_out && p.reason.find("not installed") == std::string::npos;
  }
}

// pnp's own arms: the executor of r.backend, its compile cost in r, and what it chose (notes).
std::unique_ptr<nn::Executor> make_executor(const SweepRun& s, Row& r, const nn::Graph& g, const nn::Weights& weights,
                                            const std::vector<int64_t>& shape,
                                            std::function<std::vector<std::string>()>& notes) {
  const SweepConfig& c = s.c;
  if (r.backend == "eager") {
    r.compile_s = 0.0;
    return nn::make_eager(g, weights, s.device, s.dtype);
  }
  if (r.backend == to_string(CompileBackend::inductor)) {
    // Compile cost: the exporter subprocess (run by prepare_inductor, in parallel with others)
    // on a cache miss, plus the package load.
    r.export_s = 0.0;
    if (auto it = s.prepared.find({r.architecture, r.shape}); it != s.prepared.end()) {
      if (!it->second.error.empty()) throw Error(it->second.error);
      if (it->second.package.compiled_here) r.export_s = it->second.package.exporter_seconds;
    }
    auto n = nn::make_inductor(g, weights, s.device, s.dtype, shape, inductor_options(c));
    r.export_s += n->exporter_seconds();
    r.compile_s = r.export_s + n->load_seconds();
    notes = [e = n.get()] { return e->notes(); };
    return n;
  }
  nn::NativeOptions no = c.native;
  if (c.native_plan_cache) no.plan_cache_dir = inductor_options(c).cache_dir + "/native";
  auto n = nn::make_native(g, weights, s.device, s.dtype, shape, no);
  r.compile_s = n->compile_seconds();
  r.cuda_graph = n->graph_captured();
  notes = [e = n.get()] {
    std::vector<std::string> o{std::to_string(e->fusions().size()) + " fusions"};
    for (auto& line : e->notes()) o.push_back(std::move(line));
    return o;
  };
  return n;
}

// Builds and times one of pnp's own arms on x_cpu; a failure or out-of-memory skips the row.
void time_own(const SweepRun& s, Row& r, const nn::Graph& g, const nn::Weights& weights,
              const std::vector<int64_t>& shape, const at::Tensor& x_cpu) {
  const SweepConfig& c = s.c;
  try {
    std::function<std::vector<std::string>()> notes;  // native and inductor: what the backend chose
    free_device_cache(s.device);
    s.timer.sync();
    reset_device_peak(s.device);
    const auto t0 = Clock::now();
    at::Tensor x = x_cpu.to(s.device, s.dtype);
    std::unique_ptr<nn::Executor> ex = make_executor(s, r, g, weights, shape, notes);
    at::Tensor y = ex->forward(x, c.sigma);
    s.timer.sync();
    r.first_call_s = std::chrono::duration<double>(Clock::now() - t0).count();
    for (int64_t i = 1; i < c.warmup; ++i) y = ex->forward(x, c.sigma);
    std::vector<double> t;
    for (int64_t i = 0; i < c.timed; ++i) t.push_back(s.timer.time([&] { y = ex->forward(x, c.sigma); }));
    r.stable_s = std::accumulate(t.end() - c.stable, t.end(), 0.0) / static_cast<double>(c.stable);
    r.peak_memory_bytes = device_peak_bytes(s.device);
    if (notes) r.notes = toml_schema::join(notes(), "\n");
    if (!std::isfinite(y.abs().max().item<double>())) throw Error("non-finite output");
  } catch (const c10::OutOfMemoryError& e) {
    r.status = "skipped";
    r.reason = "out of memory: " + first_line(e.what_without_backtrace());
  } catch (const std::exception& e) {
    r.status = "skipped";
    r.reason = "failed: " + first_line(e.what());
    r.failed = true;
  }
  if (r.status != "ok") {
    r.first_call_s = r.compile_s = r.export_s = r.stable_s = std::numeric_limits<double>::quiet_NaN();
    r.peak_memory_bytes = 0;
    r.notes.clear();
    free_device_cache(s.device);
  }
}

void print_row(std::ostream& progress, size_t done, size_t total, const Row& r) {
  progress << "[" << done << "/" << total << "] " << r.architecture << " " << r.shape << " " << r.backend << ": ";
  if (r.status == "ok")
    progress << "first " << human_seconds(r.first_call_s) << " (compile " << human_seconds(r.compile_s) << "), stable "
             << human_seconds(r.stable_s) << ", peak " << human_bytes(static_cast<double>(r.peak_memory_bytes)) << ", "
             << r.flops / r.stable_s / 1e12 << " TFLOP/s (study FLOPs)\n";
  else
    progress << "skipped: " << r.reason << "\n";
  progress.flush();
}

}  // namespace

std::vector<Row> run_sweep(const SweepConfig& c, std::ostream& progress,
                           const std::function<void(const std::vector<Row>&)>& on_row) {
  const at::Device device = parse_device(c.device, "sweep.device");
  if (device.is_cuda()) at::empty({1}, at::TensorOptions().device(device));  // initialises the allocator
  const at::ScalarType dtype = nn::parse_dtype(c.dtype, "sweep dtype");
  const std::string gpu = device_name(device);
  const size_t total = c.architectures.size() * c.shapes.size() * c.backends.size();
  progress << "pnp_bench: " << total << " configurations on " << gpu << " (" << c.dtype << "), " << c.warmup
           << " warm-up + " << c.timed << " timed calls, stable = mean of the last " << c.stable << "\n";
  // The inductor arm runs on CUDA. On the CPU, Inductor's C++ compile takes ~30 s per row even
  // for tiny networks, so it runs only when PNP_BENCH_INDUCTOR_CPU=1.
  const char* ind_cpu = std::getenv("PNP_BENCH_INDUCTOR_CPU");
  SweepRun s{c, device, dtype, CallTimer(device), device.is_cuda() || (ind_cpu && std::string(ind_cpu) == "1"), {}};
  const std::string inductor = to_string(CompileBackend::inductor);
  if (s.inductor_here && std::find(c.backends.begin(), c.backends.end(), inductor) != c.backends.end())
    s.prepared = prepare_inductor(c, device, dtype, progress);
  std::vector<Row> rows;
  for (const auto& arch : c.architectures) {
    for (const auto& spatial : c.shapes) {
      const nn::Graph g = sweep_graph(c, arch, spatial);
      const std::vector<int64_t> shape = sweep_shape(c, spatial);
      const auto counts = roofline::count(g, shape, at::elementSize(dtype));  // InputError for an impossible shape
      std::optional<nn::Weights> weights;              // drawn once per architecture and shape
      at::Tensor x_cpu;
      for (const auto& backend : c.backends) {
        Row r;
        r.architecture = arch;
        r.dim = g.dim;
        r.shape = shape_key(shape);
        r.backend = backend;
        r.mode = to_string(backend == "eager" ? CompileMode::none : CompileMode::pre);
        r.gpu = gpu;
        r.flops = counts.flops_study;
        r.bytes = counts.bytes_study;
        r.intensity = counts.intensity_study();
        const bool peer = backend == "torch_compile" || backend == "torch_compile_max_autotune";
        if (const std::string why = unavailable(s, backend); !why.empty()) {
          r.status = "skipped";
          r.reason = why;
        } else if (peer) {
          if (!weights) weights = nn::init_weights(g, static_cast<uint64_t>(c.seed));
          run_peer(s, r, arch, spatial, g, shape, *weights);
        } else {
          if (!weights) {
            weights = nn::init_weights(g, static_cast<uint64_t>(c.seed));
            auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(c.seed) + 1);
            x_cpu = at::empty(shape, at::kFloat).uniform_(0.0, 1.0, gen);  // random, never zeros
          }
          time_own(s, r, g, *weights, shape, x_cpu);
        }
        rows.push_back(r);
        print_row(progress, rows.size(), total, r);
        if (on_row) on_row(rows);
      }
    }
  }
  return rows;
}

Provenance bench_provenance() {
  Provenance p = basic_provenance("pnp_bench");
  p.torch_version = TORCH_VERSION;
  p.cuda_version = cuda_version();
  return p;
}

void write_results(const SweepConfig& c, const std::vector<Row>& rows, bool overwrite) {
  io::AtomicOutput out(c.output, overwrite || c.force);
  io::H5File& f = out.file();
  io::write_provenance(f, bench_provenance());
  io::write_attr(f, "/", "ranks", int64_t{1});
  io::write_attr(f, "/", "gpu_names", rows.empty() ? device_name(parse_device(c.device, "sweep.device")) : rows.front().gpu);
  io::write_attr(f, "/", "config", c.to_toml());
  io::write_attr(f, "/", "device", c.device);
  // The filtering copies pnp_recon files carry (docs/output_schema.md): every compiled row is one
  // denoiser compiled for one shape (compile.mode = pre); the backends and architectures of the grid.
  io::write_attr(f, "/", "compile_mode", to_string(CompileMode::pre));
  io::write_attr(f, "/", "compile_backend", toml_schema::join(c.backends, ","));
  io::write_attr(f, "/", "architecture", toml_schema::join(c.architectures, ","));
  auto col = [&](const char* name, auto get, const char* units, const char* desc) {
    io::write_column(f, std::string("/results/") + name, rows, get, units, desc);
  };
  col("architecture", [](const Row& r) { return r.architecture; }, "", "denoiser architecture");
  col("dim", [](const Row& r) { return r.dim; }, "1", "spatial dimensions (2 or 3)");
  col("shape", [](const Row& r) { return r.shape; }, "", "input shape B x C x spatial");
  col("backend", [](const Row& r) { return r.backend; }, "", "eager, native or inductor");
  col("mode", [](const Row& r) { return r.mode; }, "", "none for eager, else the compile mode (pre)");
  col("gpu", [](const Row& r) { return r.gpu; }, "", "device name");
  col("status", [](const Row& r) { return r.status; }, "", "ok or skipped");
  col("reason", [](const Row& r) { return r.reason; }, "", "why the row was skipped (empty when ok)");
  col("first_call_s", [](const Row& r) { return r.first_call_s; }, "s",
          "first call including weight upload and compile (host clock, synchronised; inductor: the package load, "
          "its exporter time is export_s); NaN when skipped");
  col("compile_s", [](const Row& r) { return r.compile_s; }, "s", "compile alone (0 for eager; NaN when skipped)");
  col("export_s", [](const Row& r) { return r.export_s; }, "s",
      "inductor: exporter wall time when this run compiled the package (inductor.compile_jobs in parallel), "
      "0 on a cache hit; NaN for other backends and when skipped");
  col("stable_s", [](const Row& r) { return r.stable_s; }, "s",
          "mean of the last timed calls, each timed with device events (host clock on CPU); NaN when skipped");
  col("peak_memory_bytes", [](const Row& r) { return r.peak_memory_bytes; }, "B",
       "peak device memory allocated during the configuration (0 on CPU or when skipped)");
  col("cuda_graph", [](const Row& r) { return int64_t{r.cuda_graph}; }, "1",
      "1 when the arm replays a CUDA graph (native with cuda_graph; torch.compile max-autotune on CUDA), else 0");
  col("notes", [](const Row& r) { return r.notes; }, "",
      "native and inductor arms: what the backend chose and ran, one a line (native: the number of fusions, "
      "then its notes: each layout's kernel or plan and its timing, the plan cache); empty for the others and "
      "when skipped");
  col("module", [](const Row& r) { return r.module; }, "",
      "torch_compile arms: the peer's module and versions (deepinv.models.*); empty for pnp's arms");
  col("flops", [](const Row& r) { return r.flops; }, "FLOP", "roofline FLOPs per call, study conventions");
  col("bytes", [](const Row& r) { return r.bytes; }, "B", "roofline bytes per call, study conventions");
  col("intensity", [](const Row& r) { return r.intensity; }, "FLOP/B", "flops / bytes");
  out.commit();
}

}  // namespace pnp::benchmark
