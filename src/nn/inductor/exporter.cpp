// The inductor backend's exporter process: `python -m pnp_inductor` as a subprocess, how its
// interpreter and package are found, and clear errors for each way it can fail.
#include "internal.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/DeviceGuard.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <torch/version.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <mutex>

#include "pnp/nn/weights.hpp"

extern char** environ;

namespace pnp::nn {
namespace fs = std::filesystem;

namespace inductor_detail {

std::string join(const std::vector<int64_t>& v, const char* sep) {
  std::string o;
  for (size_t i = 0; i < v.size(); ++i) o += (i ? sep : "") + std::to_string(v[i]);
  return o;
}

std::string read_tail(const fs::path& p, size_t n) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  return s.size() > n ? "..." + s.substr(s.size() - n) : s;
}

// Runs `python -m module args...` with PYTHONPATH prefixed, stdout+stderr to `log` (see
// run_python_module).
PythonRun spawn_python(const std::string& python, const std::string& pypath, const std::string& module,
                       std::vector<std::string> args, const fs::path& log, double timeout_s) {
  std::vector<std::string> env_s;
  std::string pp = "PYTHONPATH=" + pypath;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "PYTHONPATH=", 11) == 0) {
      if ((*e)[11]) pp += std::string(":") + (*e + 11);
    } else {
      env_s.emplace_back(*e);
    }
  }
  env_s.push_back(pp);
  std::vector<char*> envp;
  for (auto& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  args.insert(args.begin(), {python, "-m", module});
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addclose(&fa, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (timeout_s > 0) {  // its own process group, so that the whole group can be killed
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
  }
  pid_t pid = 0;
  const auto t0 = Clock::now();
  const int rc = posix_spawnp(&pid, python.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    throw Error("cannot start the Python interpreter '" + python + "' (" + std::strerror(rc) +
                "). pnp's Python helpers need Python 3 with torch==" + TORCH_VERSION +
                " (python3 -m pip install torch==" + TORCH_VERSION + "); set PNP_PYTHON to its interpreter.");
  PythonRun r;
  int status = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &status, timeout_s > 0 ? WNOHANG : 0);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (timeout_s > 0 && since(t0) > timeout_s) {
      killpg(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      r.timed_out = true;
      break;
    }
    if (timeout_s > 0) usleep(50000);
  }
  r.seconds = since(t0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return r;
}

std::string last_json_line(const std::string& text) {
  std::istringstream ss(text);
  std::string line, json;
  while (std::getline(ss, line))
    if (!line.empty() && line[0] == '{') json = line;
  return json;
}

std::string json_field(const std::string& json, const std::string& k) {
  auto p = json.find("\"" + k + "\": ");
  if (p == std::string::npos) return "?";
  p += k.size() + 4;
  if (json[p] == '"') return json.substr(p + 1, json.find('"', p + 1) - p - 1);
  return json.substr(p, json.find_first_of(",}", p) - p);
}

int run_python(const std::string& python, const std::string& pypath, std::vector<std::string> args,
               const fs::path& log) {
  try {
    return spawn_python(python, pypath, "pnp_inductor", std::move(args), log, 0).status;
  } catch (const Error& e) {
    throw Error(std::string("inductor backend: ") + e.what() + " Or use compile.backend = \"native\".");
  }
}

// A clear message for an exporter exit status.
[[noreturn]] void exporter_failed(int rc, const std::string& python, const std::string& pypath, const fs::path& log,
                                  const std::string& what) {
  const std::string tail = read_tail(log);
  std::string why;
  if (rc == 3)
    why = "Python '" + python + "' has no usable torch. Install torch==" + std::string(TORCH_VERSION) +
          " for it, set PNP_PYTHON to an interpreter that has it, or use compile.backend = \"native\"";
  else if (rc == 4)
    why = "the torch of Python '" + python + "' is not the LibTorch pnp links (" + TORCH_VERSION +
          "); set PNP_PYTHON to an interpreter with torch==" + TORCH_VERSION;
  else if (tail.find("No module named pnp_inductor") != std::string::npos)
    why = "the exporter package pnp_inductor is not in '" + pypath + "'; set PNP_PYTHON_PATH to pnp's python/ directory";
  else if (rc == 127 || (tail.find("not found") != std::string::npos && tail.size() < 200))
    why = "Python '" + python + "' could not run";
  else
    why = "the exporter failed (exit " + std::to_string(rc) + ")";
  throw Error("inductor backend: " + what + ": " + why + ". Log " + log.string() + ":\n" + tail);
}

double run_exporter(const Graph& g_, const Weights& w_, at::Device device_, at::ScalarType dtype_,
                  const std::vector<int64_t>& shape_, const InductorOptions& opt_, const std::string& package,
                  const std::filesystem::path& failed) {
  const std::string python = inductor_python(opt_), pypath = inductor_python_path(opt_);
  const std::string stem = package.substr(0, package.size() - 4);
  const fs::path ir = stem + ".ir.json", wts = stem + ".weights." + std::to_string(getpid()) + ".h5",
                 log = stem + ".log";
  {
    std::ofstream f(ir);
    f << g_.to_json();
  }
  {
    // Serial HDF5 is not thread-safe; packages may be prepared from several threads at once.
    static std::mutex h5;
    std::lock_guard<std::mutex> hold(h5);
    save_weights(wts.string(), g_, w_);
  }
  std::string dev = device_.is_cpu() ? "cpu" : "cuda:" + std::to_string(device_.index());
  const auto t0 = Clock::now();
  int rc = 0;
  try {
    rc = run_python(python, pypath,
                    {"--ir", ir.string(), "--weights", wts.string(), "--shape", join(shape_, ","), "--dtype",
                     dtype_name(dtype_), "--device", dev, "--mode", opt_.mode, "--out", package, "--expect-torch",
                     TORCH_VERSION},
                    log);
  } catch (const Error& e) {
    std::ofstream(failed) << e.what();
    fs::remove(wts);
    throw;
  }
  const double seconds = since(t0);
  fs::remove(wts);
  if (rc != 0 || !fs::exists(package)) {
    try {
      exporter_failed(rc, python, pypath, log, "compiling " + g_.architecture + " for " + shape_string(shape_));
    } catch (const Error& e) {
      std::ofstream(failed) << e.what();
      throw;
    }
  }
  // The sidecar records the package's size: a later hit whose file is shorter (a copy or a
  // disk that ran out) is detected and rebuilt (cache.cpp).
  std::ofstream(stem + ".json") << "{\"key\": \"" << inductor_cache_key(g_, shape_, dtype_, device_, opt_.mode)
                                << "\", \"exporter_seconds\": " << seconds << ", \"python\": \"" << python
                                << "\", \"size\": " << fs::file_size(package) << "}\n";
  return seconds;
}


}  // namespace inductor_detail

using namespace inductor_detail;

namespace {
bool has_exporter(const fs::path& d) { return fs::is_regular_file(d / "pnp_inductor" / "__main__.py"); }
}  // namespace

std::string inductor_python(const InductorOptions& opt) {
  if (!opt.python.empty()) return opt.python;
  if (const char* e = std::getenv("PNP_PYTHON"); e && *e) return e;
  return "python3";
}

std::string inductor_python_path(const InductorOptions& opt) {
  if (!opt.python_path.empty()) return opt.python_path;
  if (const char* e = std::getenv("PNP_PYTHON_PATH"); e && *e) return e;
  // An installed pnp first (cmake --install puts the exporter in share/pnp/python), then the
  // source tree this build came from.
  if (has_exporter(PNP_INSTALLED_PYTHON_DIR)) return PNP_INSTALLED_PYTHON_DIR;
  if (has_exporter(PNP_SOURCE_PYTHON_DIR)) return PNP_SOURCE_PYTHON_DIR;
  return "python";
}

PythonRun run_python_module(const InductorOptions& opt, const std::string& module, const std::vector<std::string>& args,
                            const fs::path& log, double timeout_s) {
  return spawn_python(inductor_python(opt), inductor_python_path(opt), module, args, log, timeout_s);
}

std::string probe_inductor(const InductorOptions& opt) {
  const std::string python = inductor_python(opt), pypath = inductor_python_path(opt);
  const fs::path log = fs::temp_directory_path() / ("pnp_inductor_probe." + std::to_string(getpid()) + ".log");
  const int rc = run_python(python, pypath, {"--probe", "--expect-torch", TORCH_VERSION}, log);
  if (rc != 0) exporter_failed(rc, python, pypath, log, "probing Python");
  const std::string out = read_tail(log, 100000);
  std::error_code ec;
  fs::remove(log, ec);
  const std::string json = last_json_line(out);
  auto field = [&](const std::string& k) { return json_field(json, k); };
  return python + " (" + field("python") + "): torch " + field("torch") + ", CUDA " + field("cuda") +
         ", exporter in " + pypath;
}

}  // namespace pnp::nn
