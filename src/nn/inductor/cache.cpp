// The inductor backend's package cache: keys (IR hash, shape, dtype, device, versions, mode),
// the package path, cross-process locks (O_CREAT|O_EXCL, stale-lock takeover), waiting for
// another process's compile, and its failure notes.
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
#include <thread>

#ifdef PNP_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include "pnp/timing.hpp"

namespace pnp::nn {
namespace fs = std::filesystem;

namespace inductor_detail {

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

void discard_package(const std::string& package) {
  std::error_code ec;
  const std::string stem = package.substr(0, package.size() - 4);
  for (const std::string& p : {package, stem + ".json", stem + ".ir.json"}) fs::remove(p, ec);
}

}  // namespace inductor_detail

using namespace inductor_detail;

namespace {

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
    if (fs::exists(pkg) && !intact(pkg)) {
      pkg_.notes.push_back("removed a damaged package (its size is not the recorded one): " + pkg.string());
      std::fprintf(stderr, "warning: inductor cache: %s is damaged (size differs from its record); rebuilding it\n",
                   pkg.c_str());
      discard_package(pkg.string());
    }
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

  // The package has the size its sidecar records (older sidecars without a size: assumed so).
  static bool intact(const fs::path& pkg) {
    const std::string stem = pkg.string().substr(0, pkg.string().size() - 4);
    std::ifstream f(stem + ".json");
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string j = ss.str();
    const auto at = j.find("\"size\": ");
    if (at == std::string::npos) return true;
    std::error_code ec;
    const auto size = fs::file_size(pkg, ec);
    return !ec && std::to_string(size) == j.substr(at + 8, j.find_first_of(",}", at + 8) - at - 8);
  }

  void compile(const fs::path& failed) {
    pkg_.exporter_seconds = run_exporter(g_, w_, device_, dtype_, shape_, opt_, pkg_.path, failed);
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

}  // namespace

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

}  // namespace pnp::nn
