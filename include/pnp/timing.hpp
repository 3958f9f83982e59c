// Per-phase timing of the PnP loop with device events (CUDA) or the host clock (CPU),
// without host synchronisation inside the loop: CUDA events are resolved in finish().
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Event.h>

#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pnp/device.hpp"

namespace pnp {

// Per-phase timing of the PnP loop with device events (CUDA) or the host clock (CPU), without
// host synchronisation inside the loop. Events are resolved as the loop goes: an iteration's
// events are turned into seconds (and released) once the loop is `lag` iterations past it,
// waiting for them only if the device is that far behind; so the events alive never exceed
// lag + 1 iterations' worth, however long the run.
class PhaseTimer {
 public:
  PhaseTimer(c10::Device device, std::vector<std::string> phases, int64_t iterations, int64_t lag = 16);
  const std::vector<std::string>& phases() const { return phases_; }
  int phase_index(const std::string& name) const;

  void begin_iteration(int64_t it);
  // A phase may run several times in one iteration (a streamed volume's groups): its seconds
  // are the sum of its runs.
  void start(int phase);
  void stop(int phase);
  void end_iteration();
  // Resolves every iteration up to and including `it` (waits for its events).
  void resolve_through(int64_t it);
  // Resolves the rest. Call once, after the loop.
  void finish();

  // [iterations][phase] seconds of resolved iterations (0 for phases not timed in it). The
  // "total" of an iteration is the time from its begin to its end event (device time,
  // including gaps between kernels).
  double seconds(int64_t it, int phase) const { return secs_[static_cast<size_t>(it)][static_cast<size_t>(phase)]; }
  double total(int64_t it) const { return totals_[static_cast<size_t>(it)]; }
  double wall(int64_t it) const { return walls_[static_cast<size_t>(it)]; }  // host clock
  int64_t iterations() const { return iterations_; }
  // Iterations whose events are still held (for tests of the bound).
  size_t pending() const { return marks_.size(); }
  // Peak device memory (bytes) since construction, and the peak during each phase over all
  // iterations; 0 on CPU.
  int64_t peak_bytes() const { return peak_; }
  int64_t phase_peak_bytes(int phase) const { return phase_peak_[static_cast<size_t>(phase)]; }
  // The CUDA allocator's reserved peak over the same stretches (its peaks are reset with the
  // allocated one at each phase start); 0 elsewhere.
  int64_t reserved_peak_bytes() const { return reserved_peak_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Mark {
    std::unique_ptr<c10::Event> ev;
    Clock::time_point host;
  };
  struct Marks {
    int64_t it = 0;
    std::vector<std::vector<Mark>> starts, stops;  // [phase][each time it ran in the iteration]
    Mark begin, end;
  };
  Mark mark();
  double between(const Mark& a, const Mark& b) const;
  int64_t sample_peak();  // one read of the allocator: its allocated peak, noted with the reserved one
  void resolve(Marks& m);

  c10::Device device_;
  std::vector<std::string> phases_;
  int64_t iterations_, lag_;
  std::vector<Marks> marks_;  // the unresolved iterations, oldest first
  std::vector<std::vector<double>> secs_;
  std::vector<double> totals_, walls_;
  int64_t peak_ = 0, reserved_peak_ = 0;
  std::vector<int64_t> phase_peak_;
};

// Times single synchronised calls: device events on CUDA, the host clock on CPU. For
// benchmarks (pnp_bench); the solver's loop uses PhaseTimer, which never synchronises.
class CallTimer {
 public:
  explicit CallTimer(c10::Device device);
  void sync() const;  // waits for the device (no-op on CPU)
  // Seconds of one call of f, synchronised before and after.
  template <class F>
  double time(F&& f) const {
    sync();
    auto a = mark();
    f();
    return since(a);
  }

 private:
  struct Mark {
    std::unique_ptr<c10::Event> ev;
    std::chrono::steady_clock::time_point host;
  };
  Mark mark() const;
  double since(const Mark& a) const;  // records the end, synchronises, returns seconds
  c10::Device device_;
};

// Device kernels (and copies) of `calls` calls of fn, recorded by the Kineto profiler (CUPTI) and
// summed by kernel name, longest total first; `busy_seconds` is their sum (kernel time, without
// the gaps between kernels). Empty on CPU. For measuring programs (nn_time --profile).
struct KernelProfile {
  struct Kernel {
    std::string name;
    int64_t count = 0;
    double seconds = 0;
  };
  std::vector<Kernel> kernels;
  double busy_seconds = 0;
  int calls = 0;
};
KernelProfile profile_kernels(c10::Device device, const std::function<void()>& fn, int calls);

}  // namespace pnp
