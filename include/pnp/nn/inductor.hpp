// The inductor backend: AOTInductor packages compiled from the IR by the Python exporter
// (python/pnp_inductor), cached on disk and loaded in C++ (docs/design.md, "Compile placement
// and backend").
//
// make_inductor(g, w, device, dtype, shape, opt):
//  - Computes the cache key: IR hash, input shape, dtype, device (CPU, or CUDA compute
//    capability), torch and CUDA versions of the LibTorch linked here, inductor mode and the
//    exporter's version. The package is <cache_dir>/inductor/<readable key>-<key hash>.pt2, with
//    a .json sidecar holding the full key and the compile log next to it.
//  - On a miss, one process compiles: it takes <package>.lock (O_CREAT|O_EXCL, so it works across
//    ranks and nodes sharing the directory), runs `python -m pnp_inductor` as a subprocess (its
//    wall time is the compile cost) which writes the package to a temporary file and renames it
//    into place (atomic). Every other process waits for the package (or for a <package>.failed
//    note, whose message it rethrows), then loads it. A lock older than lock_stale_seconds, or
//    written by a process of this host that no longer runs, is taken over.
//  - On a hit it only loads: torch::inductor::AOTIModelPackageLoader with run_single_threaded, so
//    a run can be captured in a CUDA graph (the solver captures post/fused regions around it).
//  - The weights are not in the package: they are fed from `w` with load_constants (the
//    constants' names are the deepinv keys), so one package serves any weights of the same IR.
//  - forward() copies x into a static input buffer, writes sigma into a 0-d device buffer (graphs
//    with a sigma map), runs on the current stream, and returns the package's output.
//
// Python: opt.python, else $PNP_PYTHON, else "python3"; the exporter package is found in
// opt.python_path, else $PNP_PYTHON_PATH, else the source tree's python/. A missing interpreter,
// torch, exporter or a torch version other than LibTorch's gives an Error saying which and how
// to fix it.
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "pnp/nn/executor.hpp"
#include "pnp/nn/models.hpp"

namespace pnp::nn {

struct InductorOptions {
  std::string cache_dir = ".pnp_cache";
  std::string mode = "max-autotune";  // "max-autotune" (+coordinate descent; ATen convs) | "default"
  std::string python;                 // interpreter; empty: $PNP_PYTHON, else "python3"
  std::string python_path;            // dir holding pnp_inductor/; empty: $PNP_PYTHON_PATH, else source tree
  double wait_timeout_seconds = 7200;  // how long a process waits for another one's compile
  double lock_stale_seconds = 7200;    // a lock file older than this is taken over
};

class InductorExecutor : public Executor {
 public:
  // Wall seconds of make_inductor: exporter subprocess (a miss) or waiting for another process's
  // compile, plus loading, feeding the weights and one warm-up run (device synchronised).
  virtual double compile_seconds() const = 0;
  virtual double exporter_seconds() const = 0;  // the subprocess alone; 0 on a hit
  virtual double load_seconds() const = 0;      // loader + weights + warm-up run
  virtual bool cache_hit() const = 0;           // the package existed (or another process made it)
  virtual bool compiled_here() const = 0;       // this process ran the exporter
  virtual const std::string& package_path() const = 0;
  virtual const std::string& cache_key() const = 0;
  virtual const std::vector<int64_t>& input_shape() const = 0;
  virtual std::vector<std::string> notes() const = 0;
};

// A package in the cache, as prepare_inductor_package left it.
struct InductorPackage {
  std::string path, key;
  bool compiled_here = false;     // this call ran the exporter (a miss)
  double exporter_seconds = 0;    // that subprocess's wall time; 0 otherwise
  std::vector<std::string> notes;  // waited for another process, took over a stale lock
};
// The first half of make_inductor: makes sure the package for (g, shape, dtype, device, mode)
// exists in the cache (hit, another process's compile, or the exporter run here) and loads
// nothing. It touches no device memory and may run in several threads at once, so a caller can
// compile many packages in parallel (pnp_bench does, inductor.compile_jobs) before loading any.
InductorPackage prepare_inductor_package(const Graph& g, const Weights& w, at::Device device, at::ScalarType dtype,
                                         const std::vector<int64_t>& input_shape, const InductorOptions& opt = {});

// Throws InputError for an impossible shape or dtype and for weights not matching g; Error when
// the exporter cannot run or fails (with the tail of its log).
std::unique_ptr<InductorExecutor> make_inductor(const Graph& g, const Weights& w, at::Device device,
                                                at::ScalarType dtype, std::vector<int64_t> input_shape,
                                                InductorOptions opt = {});

// The cache key text (see above) and the package path it maps to.
std::string inductor_cache_key(const Graph& g, const std::vector<int64_t>& input_shape, at::ScalarType dtype,
                               at::Device device, const std::string& mode);
std::string inductor_package_path(const Graph& g, const std::vector<int64_t>& input_shape, at::ScalarType dtype,
                                  at::Device device, const InductorOptions& opt);

// Runs `python -m pnp_inductor --probe`: the interpreter, torch and CUDA versions as one line, e.g.
// "python3 (3.11.7): torch 2.11.0+cu130, CUDA 13.0". Throws Error as make_inductor does.
std::string probe_inductor(const InductorOptions& opt = {});

// The interpreter and exporter directory that make_inductor would use.
std::string inductor_python(const InductorOptions& opt);
std::string inductor_python_path(const InductorOptions& opt);

// pnp's Python helpers (python/: pnp_inductor, and pnp_peer, the torch.compile arm of
// pnp_bench) as a subprocess: `python -m module args...` with the interpreter and directory
// above (PYTHONPATH prefixed), stdout and stderr to `log`. With timeout_s > 0 the child runs in
// its own process group, which is killed (SIGKILL) when the time is up (torch.compile's
// compile workers with it). Throws Error when the interpreter cannot be started at all.
struct PythonRun {
  int status = 0;          // exit status; 128 + signal when killed
  bool timed_out = false;  // killed at timeout_s
  double seconds = 0;      // wall time
};
PythonRun run_python_module(const InductorOptions& opt, const std::string& module, const std::vector<std::string>& args,
                            const std::filesystem::path& log, double timeout_s = 0);

// The study's peer: deepinv 0.5's own module for `spec` (deepinv.models.DRUNet / DnCNN / UNet)
// with the weights `w`, under torch.compile(mode), timed by `python -m pnp_peer` with
// pnp_bench's protocol (python/pnp_peer/__main__.py) on `device` in `dtype`. A run that exceeds
// timeout_s is killed and reported (ok = false, timed_out = true); every other failure is a
// reason too (deepinv not installed, weights that do not fit, a wrong result), never an exception.
struct PeerOptions {
  std::string mode = "default";  // torch.compile mode: "default", "max-autotune", "reduce-overhead"
  int warmup = 5, timed = 10, stable = 5;
  double sigma = 0.1;
  int64_t seed = 0;
  double timeout_s = 600;
  std::string work_dir;  // where the weights file and the log go (empty: the temporary directory)
};
struct PeerResult {
  bool ok = false, timed_out = false;
  std::string reason;  // why not ok
  std::string module;  // e.g. "deepinv.models.DRUNet (deepinv 0.5.0, torch 2.11.0+cu130)"
  double first_call_s = 0, compile_s = 0, stable_s = 0, error_vs_eager = 0, seconds = 0;
  int64_t peak_memory_bytes = 0;
  bool cuda_graphs = false;  // the compiled module replays CUDA graphs (max-autotune, reduce-overhead on CUDA)
};
PeerResult run_torch_compile_peer(const DenoiserSpec& spec, const Graph& g, const Weights& w, at::Device device,
                                  at::ScalarType dtype, const std::vector<int64_t>& shape, const PeerOptions& peer,
                                  const InductorOptions& python = {});

}  // namespace pnp::nn
