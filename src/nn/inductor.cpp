// The inductor backend (include/pnp/nn/inductor.hpp): cache, exporter subprocess, AOTI loader.
#include "pnp/nn/inductor.hpp"
#include "pnp/timing.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/DeviceGuard.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
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
#include <thread>
#include <unordered_map>

#ifdef PNP_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

extern char** environ;

namespace pnp::nn {
namespace fs = std::filesystem;

namespace {
constexpr const char* kExporterVersion = "1";  // python/pnp_inductor EXPORTER_VERSION

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string join(const std::vector<int64_t>& v, const char* sep) {
  std::string o;
  for (size_t i = 0; i < v.size(); ++i) o += (i ? sep : "") + std::to_string(v[i]);
  return o;
}

std::string device_tag(at::Device d) {
  if (d.is_cpu()) return "cpu";
#ifdef PNP_HAVE_CUDA
  if (d.is_cuda()) {
    const auto* p = at::cuda::getDeviceProperties(d.has_index() ? d.index() : at::cuda::current_device());
    return "sm" + std::to_string(p->major * 10 + p->minor);
  }
#endif
  throw InputError("inductor backend: unsupported device " + d.str() + " in this build");
}

std::string read_tail(const fs::path& p, size_t n = 3000) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  return s.size() > n ? "..." + s.substr(s.size() - n) : s;
}

// Runs argv with PYTHONPATH prefixed, stdout+stderr to `log`; returns the exit status (or throws
// when the interpreter cannot be started at all).
int run_python(const std::string& python, const std::string& pypath, std::vector<std::string> args,
               const fs::path& log) {
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
  args.insert(args.begin(), {python, "-m", "pnp_inductor"});
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addclose(&fa, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, python.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    throw Error("inductor backend: cannot start the Python interpreter '" + python + "' (" + std::strerror(rc) +
                "). The inductor backend needs Python 3 with torch==" + TORCH_VERSION +
                " (python3 -m pip install torch==" + TORCH_VERSION +
                "); set PNP_PYTHON to its interpreter, or use compile.backend = \"native\".");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
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

bool has_exporter(const fs::path& d) { return fs::is_regular_file(d / "pnp_inductor" / "__main__.py"); }

class Lock {
 public:
  Lock() = default;
  ~Lock() { release(); }
  bool try_take(const fs::path& p) {
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return false;
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    std::string s = std::string(host) + " " + std::to_string(getpid()) + "\n";
    (void)!::write(fd, s.data(), s.size());
    ::close(fd);
    path_ = p;
    return true;
  }
  void release() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove(path_, ec);
      path_.clear();
    }
  }

 private:
  fs::path path_;
};

// A lock written by a process of this host that no longer exists (a crashed compile).
bool lock_owner_dead(const fs::path& lock) {
  std::ifstream f(lock);
  std::string host;
  long pid = 0;
  if (!(f >> host >> pid) || pid <= 0) return false;
  char me[256] = {0};
  gethostname(me, sizeof me - 1);
  return host == me && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// Makes `pkg.path` exist: a hit, another process's compile (waited for), or the exporter run here.
class PackageMaker {
 public:
  PackageMaker(const Graph& g, const Weights& w, at::Device device, at::ScalarType dtype,
               const std::vector<int64_t>& shape, const InductorOptions& opt)
      : g_(g), w_(w), device_(device), dtype_(dtype), shape_(shape), opt_(opt) {}

  InductorPackage run() {
    pkg_.key = inductor_cache_key(g_, shape_, dtype_, device_, opt_.mode);
    pkg_.path = inductor_package_path(g_, shape_, dtype_, device_, opt_);
    obtain();
    return std::move(pkg_);
  }

 private:
  void obtain() {
    const fs::path pkg(pkg_.path), lock(pkg_.path + ".lock"), failed(pkg_.path + ".failed");
    std::error_code ec;
    fs::create_directories(pkg.parent_path(), ec);
    if (ec) throw Error("inductor backend: cannot create the cache directory " + pkg.parent_path().string() + ": " + ec.message());
    const auto t0 = Clock::now();
    bool waited = false;
    while (!fs::exists(pkg)) {
      // We waited for another process's lock and it left a failure note during this call: its
      // compile failed on this key, so ours would too.
      if (waited && fs::exists(failed) && fs::last_write_time(failed, ec) >= start_file_time_)
        throw Error(read_tail(failed, 6000));
      Lock l;
      if (l.try_take(lock)) {
        if (fs::exists(pkg)) break;  // finished between our check and the lock
        fs::remove(failed, ec);
        compile(failed);
        return;
      }
      waited = true;
      auto age = fs::file_time_type::clock::now() - fs::last_write_time(lock, ec);
      if (!ec && (std::chrono::duration<double>(age).count() > opt_.lock_stale_seconds || lock_owner_dead(lock))) {
        pkg_.notes.push_back("took over a stale lock " + lock.string());
        fs::remove(lock, ec);
        continue;
      }
      if (since(t0) > opt_.wait_timeout_seconds)
        throw Error("inductor backend: waited " + std::to_string(static_cast<int>(since(t0))) + " s for " +
                    lock.string() + " (another process compiling); remove it if no compile is running");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (waited) pkg_.notes.push_back("waited " + std::to_string(since(t0)) + " s for another process's compile");
  }

  void compile(const fs::path& failed) {
    const std::string python = inductor_python(opt_), pypath = inductor_python_path(opt_);
    const std::string& package = pkg_.path;
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
    pkg_.exporter_seconds = since(t0);
    fs::remove(wts);
    if (rc != 0 || !fs::exists(package)) {
      try {
        exporter_failed(rc, python, pypath, log, "compiling " + g_.architecture + " for " + shape_string(shape_));
      } catch (const Error& e) {
        std::ofstream(failed) << e.what();
        throw;
      }
    }
    std::ofstream(stem + ".json") << "{\"key\": \"" << pkg_.key << "\", \"exporter_seconds\": " << pkg_.exporter_seconds
                                  << ", \"python\": \"" << python << "\"}\n";
    pkg_.compiled_here = true;
  }

  const Graph& g_;
  const Weights& w_;
  at::Device device_;
  at::ScalarType dtype_;
  const std::vector<int64_t>& shape_;
  const InductorOptions& opt_;
  InductorPackage pkg_;
  fs::file_time_type start_file_time_ = fs::file_time_type::clock::now() - std::chrono::seconds(2);
};

class InductorImpl final : public InductorExecutor {
 public:
  InductorImpl(const Graph& g, const Weights& w, at::Device device, at::ScalarType dtype, std::vector<int64_t> shape,
               const InductorOptions& opt)
      : g_(g), device_(concrete_device(device)), dtype_(dtype), shape_(std::move(shape)) {
    const auto t0 = Clock::now();
    InductorPackage pkg = prepare_inductor_package(g, w, device_, dtype, shape_, opt);
    key_ = std::move(pkg.key);
    package_ = std::move(pkg.path);
    exporter_seconds_ = pkg.exporter_seconds;
    compiled_here_ = pkg.compiled_here;
    notes_ = std::move(pkg.notes);
    const auto t1 = Clock::now();
    load(w);
    load_seconds_ = since(t1);
    compile_seconds_ = since(t0);
  }

  std::string name() const override { return "inductor"; }
  int64_t alignment() const override { return g_.alignment(); }
  int64_t receptive_radius() const override { return nn::receptive_radius(g_); }
  double compile_seconds() const override { return compile_seconds_; }
  double exporter_seconds() const override { return exporter_seconds_; }
  double load_seconds() const override { return load_seconds_; }
  bool cache_hit() const override { return !compiled_here_; }
  bool compiled_here() const override { return compiled_here_; }
  const std::string& package_path() const override { return package_; }
  const std::string& cache_key() const override { return key_; }
  const std::vector<int64_t>& input_shape() const override { return shape_; }
  std::vector<std::string> notes() const override { return notes_; }

  at::Tensor forward(const at::Tensor& x, double sigma) override {
    if (x.sizes().vec() != shape_)
      throw InputError("inductor executor compiled for " + shape_string(shape_) + " called with " +
                       shape_string(x.sizes().vec()));
    at::NoGradGuard no_grad;
    c10::OptionalDeviceGuard guard(device_);
    static_in_.copy_(x);
    if (sigma_buf_.defined()) sigma_buf_.fill_(sigma);
    return run();
  }

 private:
  at::Tensor run() {
    std::vector<at::Tensor> in{static_in_};
    if (sigma_buf_.defined()) in.push_back(sigma_buf_);
    void* stream = nullptr;
#ifdef PNP_HAVE_CUDA
    if (device_.is_cuda()) stream = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
#endif
    auto out = loader_->run(in, stream);
    if (out.size() != 1) throw Error("inductor package " + package_ + " returned " + std::to_string(out.size()) + " outputs");
    return out[0];
  }

  void load(const Weights& w) {
    at::NoGradGuard no_grad;
    c10::OptionalDeviceGuard guard(device_);
    try {
      loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
          package_, "model", /*run_single_threaded=*/true, /*num_runners=*/1,
          device_.is_cuda() ? device_.index() : c10::DeviceIndex(-1));
    } catch (const std::exception& e) {
      throw Error("inductor backend: cannot load " + package_ + " (remove it to recompile): " + e.what());
    }
    auto meta = loader_->get_metadata();
    if (meta["pnp.ir_hash"] != g_.hash())
      throw Error("inductor backend: " + package_ + " was compiled from IR " + meta["pnp.ir_hash"] + ", not " + g_.hash());
    // Weights: every constant of the package is an IR parameter (named by its deepinv key) and
    // every parameter must be a constant -- otherwise the package would not serve other weights.
    std::unordered_map<std::string, at::Tensor> constants;
    std::vector<std::string> fqns = loader_->get_constant_fqns();
    for (const auto& k : fqns) {
      auto it = w.find(k);
      if (it == w.end()) throw Error("inductor backend: " + package_ + " has a constant '" + k + "' that is no IR parameter");
      constants[k] = it->second.detach().to(device_, dtype_).contiguous();
    }
    for (const auto* p : g_.params())
      if (!constants.count(p->key))
        throw Error("inductor backend: parameter '" + p->key + "' was compiled into " + package_ +
                    " (not a loadable constant); recompile with the current exporter");
    loader_->load_constants(constants, /*use_inactive=*/false, /*check_full_update=*/true, /*user_managed=*/false);
    auto opts = at::TensorOptions().device(device_).dtype(dtype_);
    static_in_ = at::zeros(shape_, opts);
    if (meta["pnp.inputs"] == "x,sigma") sigma_buf_ = at::full({}, 0.1, opts);
    run();  // warm-up: lazy kernel loading and workspace allocation happen before any capture
#ifdef PNP_HAVE_CUDA
    if (device_.is_cuda()) at::cuda::getCurrentCUDAStream(device_.index()).synchronize();
#endif
  }

  Graph g_;
  at::Device device_;
  at::ScalarType dtype_;
  std::vector<int64_t> shape_;
  std::string key_, package_;
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
  at::Tensor static_in_, sigma_buf_;
  double compile_seconds_ = 0, exporter_seconds_ = 0, load_seconds_ = 0;
  bool compiled_here_ = false;
  std::vector<std::string> notes_;
};

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

std::string inductor_cache_key(const Graph& g, const std::vector<int64_t>& shape, at::ScalarType dtype,
                               at::Device device, const std::string& mode) {
  return "ir=" + g.hash() + ";arch=" + g.architecture + ";shape=" + join(shape, "x") + ";dtype=" + dtype_name(dtype) +
         ";device=" + device_tag(device) + ";torch=" + TORCH_VERSION + ";cuda=" + cuda_version() + ";mode=" + mode +
         ";exporter=" + kExporterVersion;
}

std::string inductor_package_path(const Graph& g, const std::vector<int64_t>& shape, at::ScalarType dtype,
                                  at::Device device, const InductorOptions& opt) {
  const std::string key = inductor_cache_key(g, shape, dtype, device, opt.mode);
  const std::string name = g.architecture + std::to_string(g.dim) + "d-" + g.hash() + "-" + join(shape, "x") + "-" +
                           dtype_name(dtype) + "-" + device_tag(device) + "-" + opt.mode + "-" + fnv1a_hex(key) + ".pt2";
  return (fs::path(opt.cache_dir) / "inductor" / name).string();
}

InductorPackage prepare_inductor_package(const Graph& g, const Weights& w, at::Device device, at::ScalarType dtype,
                                         const std::vector<int64_t>& input_shape, const InductorOptions& opt) {
  dtype_name(dtype);
  if (opt.mode != "max-autotune" && opt.mode != "default")
    throw InputError("inductor backend: mode must be \"max-autotune\" or \"default\", got \"" + opt.mode + "\"");
  infer_shapes(g, input_shape);  // InputError for impossible shapes
  check_weights(g, w, "weights");
  return PackageMaker(g, w, concrete_device(device), dtype, input_shape, opt).run();
}

std::unique_ptr<InductorExecutor> make_inductor(const Graph& g, const Weights& w, at::Device device,
                                                at::ScalarType dtype, std::vector<int64_t> input_shape,
                                                InductorOptions opt) {
  return std::make_unique<InductorImpl>(g, w, device, dtype, std::move(input_shape), opt);
}

std::string probe_inductor(const InductorOptions& opt) {
  const std::string python = inductor_python(opt), pypath = inductor_python_path(opt);
  const fs::path log = fs::temp_directory_path() / ("pnp_inductor_probe." + std::to_string(getpid()) + ".log");
  const int rc = run_python(python, pypath, {"--probe", "--expect-torch", TORCH_VERSION}, log);
  if (rc != 0) exporter_failed(rc, python, pypath, log, "probing Python");
  std::string out = read_tail(log, 100000), line;
  std::error_code ec;
  fs::remove(log, ec);
  std::istringstream ss(out);
  std::string json;
  while (std::getline(ss, line))
    if (!line.empty() && line[0] == '{') json = line;
  auto field = [&](const std::string& k) {
    auto p = json.find("\"" + k + "\": ");
    if (p == std::string::npos) return std::string("?");
    p += k.size() + 4;
    if (json[p] == '"') return json.substr(p + 1, json.find('"', p + 1) - p - 1);
    return json.substr(p, json.find_first_of(",}", p) - p);
  };
  return python + " (" + field("python") + "): torch " + field("torch") + ", CUDA " + field("cuda") +
         ", exporter in " + pypath;
}

}  // namespace pnp::nn
