#include "pnp/device.hpp"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "pnp/core.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#ifdef PNP_HAVE_CUDA
#include <c10/core/AllocatorConfig.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace pnp {

int cuda_device_count() { return at::detail::getCUDAHooks().hasCUDA() ? at::detail::getCUDAHooks().deviceCount() : 0; }

c10::Device parse_device(const std::string& s, const std::string& what) {
  if (s == "cpu") return c10::kCPU;
  if (s == "auto") return cuda_device_count() > 0 ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  if (s.rfind("cuda", 0) == 0) {
    int idx = 0;
    if (s.size() > 4) {
      if (s[4] != ':' || s.size() == 5 || s.find_first_not_of("0123456789", 5) != std::string::npos)
        throw InputError(what + ": expected cpu, cuda, cuda:N or auto, got '" + s + "'");
      idx = std::stoi(s.substr(5));
    }
    const int n = cuda_device_count();
    if (n == 0) throw InputError(what + " = " + s + ": this build or machine has no CUDA device");
    if (idx >= n) throw InputError(what + " = " + s + ": only " + std::to_string(n) + " CUDA device(s)");
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(idx));
  }
  throw InputError(what + ": expected cpu, cuda, cuda:N or auto, got '" + s + "'");
}

c10::Device concrete_device(c10::Device d) {
  if (d.is_cuda() && !d.has_index()) return c10::impl::getDeviceGuardImpl(d.type())->getDevice();
  return d;
}

int64_t device_peak_bytes(c10::Device d) {
  if (d.is_cuda()) return device_allocator_stats(d).allocated_peak_bytes;
  if (d.is_cpu()) return host_peak_bytes();
  return 0;
}

at::Tensor host_store(const std::vector<int64_t>& shape, c10::Device d) {
  if (d.is_cuda()) return at::empty(shape, at::TensorOptions().dtype(at::kFloat).pinned_memory(true));
  int64_t n = 1;
  for (int64_t v : shape) n *= v;
  float* p = static_cast<float*>(std::malloc(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float)));
  if (!p) throw Error("host memory: " + human_bytes(4.0 * static_cast<double>(n)) + " for a streamed slab could not be allocated");
  return at::from_blob(p, shape, [](void* q) { std::free(q); }, at::TensorOptions().dtype(at::kFloat));
}

void limit_device_memory(c10::Device d, double bytes, bool grow_in_place) {
#ifdef PNP_HAVE_CUDA
  d = concrete_device(d);
  if (d.is_cuda()) {
    const double total = static_cast<double>(device_total_bytes(d));
    if (total <= 0 || bytes <= 0 || bytes >= total) return;
    c10::cuda::CUDACachingAllocator::setMemoryFraction(bytes / total, d.index());
    // Under a bound, segments that grow in place (unless the user configured the allocator):
    // a freed block that a smaller request split stays too small for the next large one, and
    // its segment cannot go back while the split piece lives. A 512 x 512² volume under 40 GB
    // (in patches, no graphs) ran out that way with 8.4 GiB free in one block and 8.6 GiB
    // asked; with them it ran, at 0.93 of its estimate. Not for a run that captures: a 32 x
    // 1024² slab streamed under 2 GB, whose executor's graph pool then reserved 1.4 GiB for
    // 36 MiB allocated, ran out of memory with them and ran without (H100, 2026-12-06).
    // (set either way: the setting is the process's, and a process may set up more than one run)
    if (!std::getenv("PYTORCH_CUDA_ALLOC_CONF") && !std::getenv("PYTORCH_ALLOC_CONF"))
      c10::CachingAllocator::setAllocatorSettings(grow_in_place ? "expandable_segments:True"
                                                                : "expandable_segments:False");
  }
#endif
  (void)d, (void)bytes, (void)grow_in_place;
}

namespace {
std::atomic<bool> g_held{false};  // a hold_memory_to_plan not yet released (one device per rank)
}  // namespace

double hold_bytes(double estimate, double budget, bool grow_in_place) {
  const double hold = (grow_in_place ? 1.0 : 1 + kHoldSlack) * estimate;
  return budget > 0 ? std::min(budget, hold) : hold;
}

void hold_memory_to_plan(c10::Device d, double estimate, double budget, bool grow_in_place) {
  if (!d.is_cuda() || estimate <= 0) return;
  limit_device_memory(d, hold_bytes(estimate, budget, grow_in_place), grow_in_place);
  g_held = true;
}

void release_memory_hold(c10::Device d, double budget) {
  if (!g_held.exchange(false)) return;  // nothing held: the allocator stays as it is
#ifdef PNP_HAVE_CUDA
  d = concrete_device(d);
  if (!d.is_cuda()) return;
  const double total = static_cast<double>(device_total_bytes(d));
  if (total > 0)  // the budget back, or no bound
    c10::cuda::CUDACachingAllocator::setMemoryFraction(budget > 0 && budget < total ? budget / total : 1.0, d.index());
#endif
  (void)d, (void)budget;
}

bool memory_hold_active() { return g_held; }

AllocatorActivity device_allocator_stats(c10::Device d) {
  AllocatorActivity a;
#ifdef PNP_HAVE_CUDA
  d = concrete_device(d);
  if (d.is_cuda()) {
    const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(d.index());
    const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    a.allocated_peak_bytes = s.allocated_bytes[all].peak;
    a.reserved_peak_bytes = s.reserved_bytes[all].peak;
    a.device_allocs = s.num_device_alloc, a.device_frees = s.num_device_free;
    a.retries = s.num_alloc_retries, a.ooms = s.num_ooms;
  }
#endif
  (void)d;
  return a;
}

std::string to_string(const AllocatorActivity& a) {
  return "reserved peak " + human_bytes(static_cast<double>(a.reserved_peak_bytes)) + ", " +
         std::to_string(a.device_allocs) + " cudaMalloc, " + std::to_string(a.device_frees) + " cudaFree, " +
         std::to_string(a.retries) + " retries (the cache freed to make room), " + std::to_string(a.ooms) +
         " out of memory";
}

#ifdef PNP_HAVE_CUDA
namespace {
// The stage an allocation was made in (MemoryStage), as the allocator's context of a live block.
struct StageContext final : c10::GatheredContext {
  explicit StageContext(const char* s) : stage(s) {}
  const char* stage;
};
std::shared_ptr<c10::GatheredContext> stage_context() { return std::make_shared<StageContext>(MemoryStage::current()); }
bool g_stages = false;
std::mutex g_oom_mutex;
std::string g_oom_summary;  // the pools when the allocator last ran out, before anything was freed
}  // namespace
#endif

void record_memory_stages(c10::Device d) {
#ifdef PNP_HAVE_CUDA
  d = concrete_device(d);
  if (!d.is_cuda() || g_stages) return;
  namespace cca = c10::cuda::CUDACachingAllocator;
  cca::recordHistory(true, stage_context, 1, cca::RecordContext::STATE, false, {});
  // Called by the allocator as it fails, before the exception unwinds what held the memory.
  cca::attachOutOfMemoryObserver([d](int64_t device, size_t, size_t, size_t) {
    if (device != d.index()) return;
    std::string s = device_memory_summary(d);
    const std::lock_guard<std::mutex> lock(g_oom_mutex);
    g_oom_summary = std::move(s);
  });
  g_stages = true;
#endif
  (void)d;
}

std::string device_memory_at_failure() {
#ifdef PNP_HAVE_CUDA
  const std::lock_guard<std::mutex> lock(g_oom_mutex);
  return g_oom_summary;
#else
  return "";
#endif
}

std::string device_memory_summary(c10::Device d) {
#ifdef PNP_HAVE_CUDA
  d = concrete_device(d);
  if (!d.is_cuda()) return "";
  // per pool (the general one, each CUDA graph's): reserved and allocated bytes, its live blocks
  // and its largest free one (what a request larger than that needs anew); the largest live blocks
  struct Pool {
    double reserved = 0, allocated = 0, largest_free = 0;
    int live = 0;
  };
  std::map<std::pair<unsigned long long, unsigned long long>, Pool> pools;
  std::vector<double> live;
  std::map<std::string, double> by_stage;  // live bytes per MemoryStage (record_memory_stages)
  const auto snap = c10::cuda::CUDACachingAllocator::snapshot({0, 0}, false);
  for (const auto& seg : snap.segments) {
    if (seg.device != d.index()) continue;
    auto& p = pools[{seg.owner_private_pool_id.first, seg.owner_private_pool_id.second}];
    p.reserved += static_cast<double>(seg.total_size), p.allocated += static_cast<double>(seg.allocated_size);
    for (const auto& b : seg.blocks)
      if (b.allocated) {
        live.push_back(static_cast<double>(b.size)), ++p.live;
        const auto* c = dynamic_cast<const StageContext*>(b.context_when_allocated.get());
        by_stage[c && *c->stage ? c->stage : "unnamed"] += static_cast<double>(b.size);
      } else {
        p.largest_free = std::max(p.largest_free, static_cast<double>(b.size));
      }
  }
  std::sort(live.rbegin(), live.rend());
  std::string out;
  for (const auto& [id, p] : pools)
    out += std::string(out.empty() ? "" : "; ") + (id.first == 0 && id.second == 0 ? "general pool" : "graph pool") +
           " reserved " + human_bytes(p.reserved) + ", allocated " + human_bytes(p.allocated) + " in " +
           std::to_string(p.live) + " blocks, largest free block " + human_bytes(p.largest_free);
  out += "; largest live blocks:";
  for (size_t i = 0; i < std::min<size_t>(live.size(), 8); ++i) out += (i ? ", " : " ") + human_bytes(live[i]);
  if (g_stages) {
    out += "; live by stage:";
    bool first = true;
    for (const auto& [stage, bytes] : by_stage) out += (first ? " " : ", ") + stage + " " + human_bytes(bytes), first = false;
  }
  return out;
#else
  (void)d;
  return "";
#endif
}

void reset_device_peak(c10::Device d) {
#ifdef PNP_HAVE_CUDA
  d = concrete_device(d);
  if (d.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(d.index());
#endif
  if (d.is_cpu()) reset_host_peak();
}

std::string device_uuid(c10::Device d) {
#ifdef PNP_HAVE_CUDA
  d = concrete_device(d);
  if (d.is_cuda()) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d.index()) == cudaSuccess) {
      std::string hex;
      char b[3];
      for (unsigned char c : prop.uuid.bytes) {
        std::snprintf(b, sizeof b, "%02x", c);
        hex += b;
      }
      return hex;
    }
  }
#endif
  return d.is_cuda() ? "cuda:" + std::to_string(d.index()) : "cpu";
}

int64_t device_total_bytes(c10::Device d) {
#ifdef PNP_HAVE_CUDA
  d = concrete_device(d);
  if (d.is_cuda()) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d.index()) == cudaSuccess) return static_cast<int64_t>(prop.totalGlobalMem);
  }
#endif
  (void)d;
  return 0;
}

std::string device_name(c10::Device d) {
#ifdef PNP_HAVE_CUDA
  d = concrete_device(d);
  if (d.is_cuda()) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d.index()) == cudaSuccess) return prop.name;
  }
#endif
  return d.is_cuda() ? "cuda" : "cpu";
}

bool started_without_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_SIZE", "PMI_RANK",
                           "PMI_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_NTASKS", "SLURM_LOCALID"})
    if (std::getenv(name)) return false;
  return true;
}

int launcher_local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"}) {
    const char* v = std::getenv(name);
    if (v && *v) {
      char* end = nullptr;
      const long r = std::strtol(v, &end, 10);
      if (*end == '\0' && r >= 0) return static_cast<int>(r);
    }
  }
  return started_without_launcher() ? 0 : -1;
}

DeviceWarmup::DeviceWarmup(bool wanted) {
  if (!wanted) return;
  const int local = launcher_local_rank();
  if (local < 0) return;
  // Everything CUDA on the thread, the device count too: it initialises the driver, which
  // would otherwise hold up MPI_Init on the main thread.
  thread_ = std::thread([this, local] {
    const auto t0 = std::chrono::steady_clock::now();
    const int count = cuda_device_count();
    if (count == 0) return;
    device_ = local % count;
    try {
      const c10::Device dev(c10::kCUDA, static_cast<c10::DeviceIndex>(device_));
      c10::impl::getDeviceGuardImpl(c10::kCUDA)->setDevice(dev);
      // the context and the allocator, then cuDNN's libraries and handle (a small convolution)
      const at::Tensor x = at::ones({1, 1, 8, 8}, at::TensorOptions().device(dev));
      (void)at::conv2d(x, at::ones({1, 1, 3, 3}, x.options())).sum().item<float>();
    } catch (...) {
    }
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
}

void DeviceWarmup::join() {
  if (thread_.joinable()) thread_.join();
}

DeviceWarmup::~DeviceWarmup() { join(); }

std::string cuda_version() {
  if (!at::detail::getCUDAHooks().hasCUDA()) return "none";
  const long v = at::detail::getCUDAHooks().versionCUDART();
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace pnp
