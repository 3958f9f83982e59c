// The study's peer arm: deepinv's own module under torch.compile, timed by `python -m pnp_peer`
// (python/pnp_peer) in a subprocess with a time cap; its one-line JSON becomes a PeerResult.
#include <torch/version.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "internal.hpp"
#include "pnp/core.hpp"
#include "pnp/nn/weights.hpp"

namespace pnp::nn {
namespace fs = std::filesystem;
using namespace inductor_detail;

PeerResult run_torch_compile_peer(const DenoiserSpec& spec, const Graph& g, const Weights& w, at::Device device,
                                  at::ScalarType dtype, const std::vector<int64_t>& shape, const PeerOptions& o,
                                  const InductorOptions& python) {
  PeerResult r;
  const fs::path dir = o.work_dir.empty() ? fs::temp_directory_path() : fs::path(o.work_dir);
  fs::create_directories(dir);
  const std::string stem = "pnp_peer." + std::to_string(getpid()) + "." + g.hash().substr(0, 12) + "." + o.mode;
  const fs::path wts = dir / (stem + ".weights.h5"), log = dir / (stem + ".log");
  {
    static std::mutex h5;  // serial HDF5 is not thread-safe
    std::lock_guard<std::mutex> hold(h5);
    save_weights(wts.string(), g, w);
  }
  const std::string feat = join(spec.features, ",");
  const std::string dev = device.is_cpu() ? "cpu" : "cuda:" + std::to_string(device.has_index() ? device.index() : 0);
  std::vector<std::string> args{"--arch", spec.architecture, "--dim", std::to_string(spec.dim), "--channels",
                                std::to_string(spec.in_channels), "--shape", join(shape, ","), "--weights", wts.string(),
                                "--device", dev, "--dtype", dtype_name(dtype), "--mode", o.mode, "--warmup",
                                std::to_string(o.warmup), "--timed", std::to_string(o.timed), "--stable",
                                std::to_string(o.stable), "--sigma", std::to_string(o.sigma), "--seed",
                                std::to_string(o.seed), "--blocks", std::to_string(spec.blocks), "--expect-torch",
                                TORCH_VERSION};
  if (!feat.empty()) args.insert(args.end(), {"--features", feat});
  PythonRun run;
  try {
    run = run_python_module(python, "pnp_peer", args, log, o.timeout_s);
  } catch (const Error& e) {
    fs::remove(wts);
    r.reason = e.what();
    return r;
  }
  fs::remove(wts);
  r.seconds = run.seconds;
  const std::string text = read_tail(log, 200000);
  const std::string json = last_json_line(text);
  auto num = [&](const char* k) {
    const std::string v = json_field(json, k);
    try {
      return std::stod(v);
    } catch (const std::exception&) {
      return std::nan("");
    }
  };
  if (run.timed_out) {
    r.timed_out = true;
    r.reason = "time cap: torch.compile (" + o.mode + ") did not finish within " + human_seconds(o.timeout_s) +
               " (killed; log " + log.string() + ")";
    return r;
  }
  if (!json.empty()) {
    r.module = json_field(json, "module") + " (deepinv " + json_field(json, "deepinv") + ", torch " +
               json_field(json, "torch") + ")";
    r.first_call_s = num("first_call_s");
    r.compile_s = num("compile_s");
    r.stable_s = num("stable_s");
    r.error_vs_eager = num("error_vs_eager");
    r.peak_memory_bytes = static_cast<int64_t>(num("peak_memory_bytes"));
    r.cuda_graphs = json_field(json, "cuda_graphs") == "true";
  }
  const std::string tail = text.size() > 600 ? text.substr(text.size() - 600) : text;
  switch (run.status) {
    case 0:
      r.ok = !json.empty();
      if (!r.ok) r.reason = "pnp_peer printed no result (log " + log.string() + ")";
      break;
    case 3:
    case 4:
      r.reason = "Python '" + inductor_python(python) + "' has no torch==" + TORCH_VERSION + " (set PNP_PYTHON)";
      break;
    case 5:
      r.reason = "deepinv is not installed for '" + inductor_python(python) +
                 "': python3 -m pip install deepinv==0.5.0 (scripts/bootstrap.sh --with-deepinv)";
      break;
    case 6:
      r.reason = "torch.compile's output differs from deepinv's eager output by " + std::to_string(r.error_vs_eager) +
                 " (relative L2)";
      break;
    default:
      r.reason = "pnp_peer failed (exit " + std::to_string(run.status) + "): " + tail;
  }
  if (r.ok) fs::remove(log);
  return r;
}

}  // namespace pnp::nn
