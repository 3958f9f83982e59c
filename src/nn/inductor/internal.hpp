// Shared by the inductor backend's three parts (not a public header): the exporter process
// (exporter.cpp), the package cache (cache.cpp) and the loader (inductor.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "pnp/nn/inductor.hpp"

namespace pnp::nn::inductor_detail {

constexpr const char* kExporterVersion = "1";  // python/pnp_inductor EXPORTER_VERSION

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string join(const std::vector<int64_t>& v, const char* sep);
// "cpu", or the CUDA compute capability ("sm90").
std::string device_tag(at::Device d);
// The last n characters of a text file.
std::string read_tail(const std::filesystem::path& p, size_t n = 3000);

// Runs `python -m pnp_inductor args...` with PYTHONPATH prefixed, stdout+stderr to `log`;
// returns the exit status (throws when the interpreter cannot be started at all).
int run_python(const std::string& python, const std::string& pypath, std::vector<std::string> args,
               const std::filesystem::path& log);
// The last line of `text` that starts with '{' (the one-line JSON a helper prints), and one
// top-level field of such a line as text ("?" when absent; strings without their quotes).
std::string last_json_line(const std::string& text);
std::string json_field(const std::string& json, const std::string& key);
// Throws Error with a clear reason for an exporter exit status.
[[noreturn]] void exporter_failed(int rc, const std::string& python, const std::string& pypath,
                                  const std::filesystem::path& log, const std::string& what);
// Writes the IR and the weights next to `package`, runs the exporter, which installs the
// package atomically (temporary file, then rename), and records the key, the exporter's
// seconds and the package's size in <package stem>.json. Returns the exporter's seconds; on
// failure writes `failed` (the message other processes waiting for this key rethrow).
double run_exporter(const Graph& g, const Weights& w, at::Device device, at::ScalarType dtype,
                    const std::vector<int64_t>& shape, const InductorOptions& opt, const std::string& package,
                    const std::filesystem::path& failed);

// Removes a package and its sidecars from the cache (it could not be loaded).
void discard_package(const std::string& package);

}  // namespace pnp::nn::inductor_detail
