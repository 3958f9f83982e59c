// Devices: the one parser of device names ("cpu", "cuda", "cuda:N", "auto"), the concrete device
// behind "cuda", its name and memory statistics, and the one source of the CUDA version that
// provenance and cache keys record.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace pnp {

// "cpu", "cuda", "cuda:N", or "auto" (CUDA when a device is present, else the CPU). Throws
// InputError naming `what` (the option or key) for anything else, and for CUDA on a machine or
// build without it.
c10::Device parse_device(const std::string& name, const std::string& what);

// The device with its index made explicit: "cuda" (no index) becomes the current CUDA device,
// e.g. cuda:0; any other device is returned as is. The functions below take either.
c10::Device concrete_device(c10::Device d);
// Peak bytes allocated on a device: on CUDA by the caching allocator, on the CPU by LibTorch's
// CPU allocator once count_host_allocations has run (0 before, and without CUDA for a CUDA
// device); and a reset of that peak to the bytes live now.
int64_t device_peak_bytes(c10::Device d);
void reset_device_peak(c10::Device d);
// From the first call on, LibTorch's CPU tensor allocations go through a counting wrapper of the
// default allocator (bytes live and their peak; tensors made before are not counted), so that
// the memory plan can be checked on a machine without a GPU. Allocations made outside LibTorch's
// allocator (oneDNN's primitive caches, the C++ heap) are not seen.
void count_host_allocations();
// Holds the CUDA caching allocator of device d to `bytes` (its memory fraction of the device's
// total): it frees its cached blocks and retries before it goes past them, and a request beyond
// them is an out-of-memory error rather than a quiet overrun. So denoiser.memory_limit_gb is a
// bound on the device, and an 80 GB card runs as a 40 GB one would. With grow_in_place (a run
// that captures no CUDA graph) its segments then grow in place (expandable_segments, unless
// PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF is set), so that freed memory is not stranded in
// fragments. No effect on the CPU or when bytes <= 0 or >= the device's memory.
void limit_device_memory(c10::Device d, double bytes, bool grow_in_place = false);
// While LibTorch's cuDNN convolutions choose their algorithms (the first call of each shape),
// the allocator held to the memory plan's estimate: a choice whose workspace the plan has no
// room for fails its allocation, and LibTorch takes the next one (it catches the out-of-memory
// error), so the plan bounds the workspaces as well as the rest (where: holds_to_plan). Without
// it, float32 without TF32 chose workspaces of tens of GB where the plan had 2 (a 6 x 512² slab
// on an H100). The choices stay cached per shape; release_memory_hold puts
// denoiser.memory_limit_gb (or no bound) back once every shape has run (nothing when nothing is
// held). `estimate` and `budget` in bytes (budget <= 0: none).
// The hold of a run that captures CUDA graphs is the estimate plus kHoldSlack of it (never past
// the budget): the estimate bounds what is allocated, the hold what the allocator reserves, and a
// graph's private pool keeps reserved blocks that no live tensor holds. Held at the estimate
// itself, a 32 x 1024² slab streamed under 3 GB (16 slices a group, its denoiser captured) ran
// out of memory with 2.30 GiB reserved (1.4 GiB of it in the graph's pool, 36 MiB live there)
// against a 2.26 GiB estimate (H200, 2026-12-06); held at 5 % more, its pool kept 1.47 GiB and it
// ran out again, so a streamed slab now runs uncaptured (captures_allowed). A run that does not
// capture (grow_in_place: its segments grow in place, no graph pool) is held at the estimate
// itself: the cuDNN searches fill whatever the hold leaves, and with the slack that slab's
// allocated peak reached 1.014 x its estimate (H100, 2026-12-07).
inline constexpr double kHoldSlack = 0.05;
// The bytes a hold allows the allocator: (1 + kHoldSlack) x estimate for a run that captures,
// the estimate for one that does not (grow_in_place), at most the budget (> 0).
double hold_bytes(double estimate, double budget, bool grow_in_place = false);
void hold_memory_to_plan(c10::Device d, double estimate, double budget, bool grow_in_place);
void release_memory_hold(c10::Device d, double budget);
// Whether a hold_memory_to_plan is in force (not yet released): an out-of-memory error then came
// under the plan's estimate rather than the device's memory or the budget.
bool memory_hold_active();
// One line on the CUDA caching allocator of device d now: per pool (the general one, each CUDA
// graph's) its reserved and allocated bytes, its live blocks and its largest free one; the largest
// live blocks; with record_memory_stages, the live bytes per MemoryStage. "" elsewhere. For an
// out-of-memory error's report.
std::string device_memory_summary(c10::Device d);
// What the CUDA caching allocator of device d did so far: its reserved peak (allocated bytes and
// the free pieces between them), its cudaMalloc and cudaFree calls, its retries (each one frees
// every cached block and synchronises the device to make room: a run close to
// denoiser.memory_limit_gb pays for them in time) and the out-of-memory errors it raised (some
// caught, as cuDNN's algorithm search does). All 0 elsewhere. The peaks are reset with
// reset_device_peak (PhaseTimer keeps their max).
struct AllocatorActivity {
  int64_t allocated_peak_bytes = 0, reserved_peak_bytes = 0, device_allocs = 0, device_frees = 0, retries = 0, ooms = 0;
};
AllocatorActivity device_allocator_stats(c10::Device d);
// The same as one line, for pnp_recon's summary.
std::string to_string(const AllocatorActivity& a);
// Has the CUDA allocator of device d name each live block after the MemoryStage it was allocated
// in (device_memory_summary then sums them per stage), and keep a summary made as it runs out of
// memory, before the failure unwinds what held it (device_memory_at_failure: "" until then). No
// effect on the CPU.
void record_memory_stages(c10::Device d);
std::string device_memory_at_failure();
// A float32 tensor of `shape` in host memory, outside the device's: for a CUDA device pinned (its
// copies to and from the device can run asynchronously, on a stream of their own); for the CPU
// allocated apart from LibTorch's allocator, so that a streamed volume's slab held here is not
// counted as the device's memory (device_peak_bytes) on a machine without a GPU either. Not
// initialised.
at::Tensor host_store(const std::vector<int64_t>& shape, c10::Device d);
int64_t host_peak_bytes();
void reset_host_peak();
// A CUDA device's UUID as hex digits (stable whatever CUDA_VISIBLE_DEVICES numbers it); "cpu".
std::string device_uuid(c10::Device d);
// Total memory of a CUDA device in bytes (0 on CPU).
int64_t device_total_bytes(c10::Device d);
// Device name ("NVIDIA H200", or "cpu").
std::string device_name(c10::Device d);
// Number of CUDA devices this process sees (0 without CUDA).
int cuda_device_count();

// Whether the process was started without a launcher: none of the variables mpirun, srun or
// a PMI launcher set (OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK, PMI_SIZE, PMI_RANK,
// PMI_LOCAL_RANK, MPI_LOCALRANKID, SLURM_NTASKS, SLURM_LOCALID).
bool started_without_launcher();
// The rank's index among the ranks of its node as the launcher's environment gives it before
// MPI starts (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID, PMI_LOCAL_RANK), 0
// for a process started without a launcher, else -1 (unknown).
int launcher_local_rank();

// The CUDA context of the device a rank will use, made on a background thread while the main
// thread starts MPI: creating it (and loading cuDNN, which the first convolution does) costs
// a few tenths of a second that would otherwise sit on the first iteration's path. The device
// is the one the plan picks (local rank modulo the device count); nothing is done without a
// CUDA device, when `wanted` is false (the configuration says "cpu") or when the local rank
// is unknown (a wrong guess would put a context on another rank's GPU). join() waits for it;
// the destructor joins too. Errors are swallowed: the set-up repeats the work and reports them.
// All of it runs on the thread, the device count included (the driver's initialisation).
class DeviceWarmup {
 public:
  explicit DeviceWarmup(bool wanted);
  ~DeviceWarmup();
  DeviceWarmup(const DeviceWarmup&) = delete;
  DeviceWarmup& operator=(const DeviceWarmup&) = delete;
  void join();
  int device() const { return device_; }  // the device warmed, -1 when none (after join)
  double seconds() const { return seconds_; }  // the warm-up's own wall time (after join)

 private:
  std::thread thread_;
  int device_ = -1;
  double seconds_ = 0;
};

// The CUDA runtime version LibTorch runs with, "13.0", or "none" in a build or on a machine
// without CUDA. Output provenance and the inductor cache key both use it.
std::string cuda_version();

}  // namespace pnp
