#include "pnp/timing.hpp"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>


namespace pnp {

PhaseTimer::PhaseTimer(c10::Device device, std::vector<std::string> phases, int64_t iterations)
    : device_(concrete_device(device)), phases_(std::move(phases)), iterations_(iterations) {
  size_t n = static_cast<size_t>(iterations);
  phase_peak_.assign(phases_.size(), 0);
  starts_.resize(n);
  stops_.resize(n);
  it_begin_.resize(n);
  it_end_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    starts_[i].resize(phases_.size());
    stops_[i].resize(phases_.size());
  }
}

int PhaseTimer::phase_index(const std::string& name) const {
  for (size_t i = 0; i < phases_.size(); ++i)
    if (phases_[i] == name) return static_cast<int>(i);
  throw std::out_of_range("no timing phase named " + name);
}

PhaseTimer::Mark PhaseTimer::mark() {
  Mark m;
  if (device_.is_cuda()) {
    auto* impl = c10::impl::getDeviceGuardImpl(device_.type());
    m.ev = std::make_unique<c10::Event>(device_.type(), c10::EventFlag::BACKEND_DEFAULT);
    m.ev->record(impl->getStream(device_));
  }
  m.host = Clock::now();
  return m;
}

double PhaseTimer::between(const Mark& a, const Mark& b) const {
  if (a.ev && b.ev) return a.ev->elapsedTime(*b.ev) * 1e-3;  // ms -> s
  return std::chrono::duration<double>(b.host - a.host).count();
}

void PhaseTimer::sample_peak() { peak_ = std::max(peak_, device_peak_bytes(device_)); }

void PhaseTimer::begin_iteration(int64_t it) {
  it_ = it;
  it_begin_[static_cast<size_t>(it)] = mark();
}
// The allocator's peak is reset at each phase start (host bookkeeping only, no device sync),
// so the peak read at the phase's stop is the phase's own; the overall peak is their max.
void PhaseTimer::start(int phase) {
  sample_peak();
  reset_device_peak(device_);
  starts_[static_cast<size_t>(it_)][static_cast<size_t>(phase)] = mark();
}
void PhaseTimer::stop(int phase) {
  stops_[static_cast<size_t>(it_)][static_cast<size_t>(phase)] = mark();
  int64_t p = device_peak_bytes(device_);
  auto& slot = phase_peak_[static_cast<size_t>(phase)];
  slot = std::max(slot, p);
  peak_ = std::max(peak_, p);
}
void PhaseTimer::end_iteration() { it_end_[static_cast<size_t>(it_)] = mark(); }

void PhaseTimer::finish() {
  if (device_.is_cuda()) c10::impl::getDeviceGuardImpl(device_.type())->synchronizeDevice(device_.index());
  secs_.assign(static_cast<size_t>(iterations_), std::vector<double>(phases_.size(), 0.0));
  totals_.assign(static_cast<size_t>(iterations_), 0.0);
  walls_.assign(static_cast<size_t>(iterations_), 0.0);
  for (size_t i = 0; i < static_cast<size_t>(iterations_); ++i) {
    for (size_t p = 0; p < phases_.size(); ++p) {
      const Mark &a = starts_[i][p], &b = stops_[i][p];
      if (a.host != Clock::time_point{} && b.host != Clock::time_point{}) secs_[i][p] = between(a, b);
    }
    totals_[i] = between(it_begin_[i], it_end_[i]);
    walls_[i] = std::chrono::duration<double>(it_end_[i].host - it_begin_[i].host).count();
  }
  sample_peak();
}

CallTimer::CallTimer(c10::Device device) : device_(concrete_device(device)) {}

void CallTimer::sync() const {
  if (device_.is_cuda()) c10::impl::getDeviceGuardImpl(device_.type())->synchronizeDevice(device_.index());
}

CallTimer::Mark CallTimer::mark() const {
  Mark m;
  if (device_.is_cuda()) {
    m.ev = std::make_unique<c10::Event>(device_.type(), c10::EventFlag::BACKEND_DEFAULT);
    m.ev->record(c10::impl::getDeviceGuardImpl(device_.type())->getStream(device_));
  }
  m.host = std::chrono::steady_clock::now();
  return m;
}

double CallTimer::since(const Mark& a) const {
  if (a.ev) {
    c10::Event b(device_.type(), c10::EventFlag::BACKEND_DEFAULT);
    b.record(c10::impl::getDeviceGuardImpl(device_.type())->getStream(device_));
    b.synchronize();
    return a.ev->elapsedTime(b) * 1e-3;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a.host).count();
}

KernelProfile profile_kernels(c10::Device device, const std::function<void()>& fn, int calls) {
  KernelProfile p;
  p.calls = calls;
  device = concrete_device(device);
  if (!device.is_cuda() || calls <= 0) return p;
  namespace prof = torch::profiler::impl;
  const CallTimer timer(device);
  timer.sync();
  const prof::ProfilerConfig cfg(prof::ProfilerState::KINETO);
  const std::set<prof::ActivityType> acts{prof::ActivityType::CPU, prof::ActivityType::CUDA};
  torch::autograd::profiler::prepareProfiler(cfg, acts);
  torch::autograd::profiler::enableProfiler(cfg, acts);
  for (int i = 0; i < calls; ++i) fn();
  timer.sync();
  const auto result = torch::autograd::profiler::disableProfiler();
  std::map<std::string, KernelProfile::Kernel> by_name;
  for (const auto& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CUDA) continue;
    const std::string n = e.name();
    if (n.rfind("cuda", 0) == 0) continue;  // runtime API calls, not device work
    auto& k = by_name[n];
    k.name = n;
    k.count += 1;
    k.seconds += static_cast<double>(e.durationNs()) * 1e-9;
  }
  for (auto& [n, k] : by_name) {
    p.busy_seconds += k.seconds;
    p.kernels.push_back(std::move(k));
  }
  std::sort(p.kernels.begin(), p.kernels.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  return p;
}

}  // namespace pnp

