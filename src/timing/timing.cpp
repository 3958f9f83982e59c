#include "pnp/timing.hpp"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>


namespace pnp {

PhaseTimer::PhaseTimer(c10::Device device, std::vector<std::string> phases, int64_t iterations, int64_t lag)
    : device_(concrete_device(device)), phases_(std::move(phases)), iterations_(iterations), lag_(std::max<int64_t>(0, lag)) {
  const size_t n = static_cast<size_t>(iterations);
  phase_peak_.assign(phases_.size(), 0);
  secs_.assign(n, std::vector<double>(phases_.size(), 0.0));
  totals_.assign(n, 0.0);
  walls_.assign(n, 0.0);
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

int64_t PhaseTimer::sample_peak() {
  int64_t allocated = 0;
  if (device_.is_cuda()) {
    const AllocatorActivity a = device_allocator_stats(device_);
    allocated = a.allocated_peak_bytes;
    reserved_peak_ = std::max(reserved_peak_, a.reserved_peak_bytes);
  } else {
    allocated = device_peak_bytes(device_);
  }
  peak_ = std::max(peak_, allocated);
  return allocated;
}

void PhaseTimer::begin_iteration(int64_t it) {
  Marks m;
  m.it = it;
  m.starts.resize(phases_.size());
  m.stops.resize(phases_.size());
  m.begin = mark();
  marks_.push_back(std::move(m));
}
// The allocator's peak is reset at each phase start (host bookkeeping only, no device sync),
// so the peak read at the phase's stop is the phase's own; the overall peak is their max.
void PhaseTimer::start(int phase) {
  sample_peak();
  reset_device_peak(device_);
  marks_.back().starts[static_cast<size_t>(phase)].push_back(mark());
}
void PhaseTimer::stop(int phase) {
  marks_.back().stops[static_cast<size_t>(phase)].push_back(mark());
  auto& slot = phase_peak_[static_cast<size_t>(phase)];
  slot = std::max(slot, sample_peak());
}
void PhaseTimer::end_iteration() {
  marks_.back().end = mark();
  const int64_t it = marks_.back().it;
  resolve_through(it - lag_);
}

void PhaseTimer::resolve(Marks& m) {
  if (m.end.ev) m.end.ev->synchronize();  // usually complete already: the loop is lag iterations on
  const size_t i = static_cast<size_t>(m.it);
  for (size_t p = 0; p < phases_.size(); ++p) {  // a phase timed several times: the sum
    double sum = 0;
    for (size_t k = 0; k < std::min(m.starts[p].size(), m.stops[p].size()); ++k) sum += between(m.starts[p][k], m.stops[p][k]);
    if (!m.stops[p].empty()) secs_[i][p] = sum;
  }
  totals_[i] = between(m.begin, m.end);
  walls_[i] = std::chrono::duration<double>(m.end.host - m.begin.host).count();
}

void PhaseTimer::resolve_through(int64_t it) {
  size_t k = 0;
  while (k < marks_.size() && marks_[k].it <= it && marks_[k].end.host != Clock::time_point{}) resolve(marks_[k++]);
  marks_.erase(marks_.begin(), marks_.begin() + static_cast<long>(k));
}

void PhaseTimer::finish() {
  if (device_.is_cuda()) c10::impl::getDeviceGuardImpl(device_.type())->synchronizeDevice(device_.index());
  resolve_through(iterations_);
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

